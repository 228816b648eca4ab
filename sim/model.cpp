#include "sim/model.hpp"

#include "core/strict_json.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace bkv::sim {

namespace {

// A time in ns: a finite number in [0, kMaxModelNs] (larger ones would overflow the
// integer nanoseconds they become).
double time_ns(const nlohmann::json& v, const std::string& at, const char* note) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > kMaxModelNs) {
    const nlohmann::json hi = kMaxModelNs;
    throw std::runtime_error(at + ": must be a number in [0, " + hi.dump() + "]" + note +
                             (!v.is_number() ? "" : std::isfinite(v.get<double>()) ? " (got " + json_excerpt(v) + ")" : " (got a non-finite number)"));
  }
  return v.get<double>();
}

}  // namespace

Model Model::from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(where + ": the model must be a JSON object");
  Model m;
  bool unit_given = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "cpu") m.cpu = CostModel::from_json(it.value(), where + ".cpu");
    else if (k == "nic") m.nic = NicConfig::from_json(it.value(), where + ".nic");
    else if (k == "ring_head_contention") {
      if (!it.value().is_boolean()) throw std::runtime_error(where + ".ring_head_contention: must be true or false");
      m.ring_head_contention = it.value().get<bool>();
    } else if (k == "response_handoff_ns") {
      m.response_handoff_ns = time_ns(it.value(), where + "." + k, " (0 = off)");
    } else if (k == "response_handoff_unit") {
      const std::string u = it.value().is_string() ? it.value().get<std::string>() : std::string();
      if (u == "answer") m.response_handoff_unit = HandoffUnit::kAnswer;
      else if (u == "visit") m.response_handoff_unit = HandoffUnit::kVisit;
      else throw std::runtime_error(where + ".response_handoff_unit: must be \"answer\" or \"visit\"");
      unit_given = true;
    } else if (k == "client_wake_ns" || k == "client_retry_ns") {
      (k == "client_wake_ns" ? m.client_wake_ns : m.client_retry_ns) = time_ns(it.value(), where + "." + k, "");
    } else if (k == "psn_duplicate_detection") {
      if (!it.value().is_boolean()) throw std::runtime_error(where + ".psn_duplicate_detection: must be true or false");
      m.psn_duplicate_detection = it.value().get<bool>();
    } else if (k == "faults") {
      m.faults = faults_from_json(it.value(), where + ".faults");
    } else if (k == "description" || k == "basis") {
      // documentation only
    } else {
      throw std::runtime_error(where + ": unknown key \"" + k + "\" (expected cpu, nic, client_wake_ns, client_retry_ns, ring_head_contention, response_handoff_ns, response_handoff_unit, faults, psn_duplicate_detection, description, basis)");
    }
  }
  if (m.client_retry_ns < 1) throw std::runtime_error(where + ".client_retry_ns: must be >= 1");
  if (unit_given && m.response_handoff_ns == 0)
    throw std::runtime_error(where + ".response_handoff_unit: given, but response_handoff_ns is 0 (off): set both or neither");
  return m;
}

Model Model::load_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("model file (--model) " + path + ": not a readable regular file");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("model file (--model) " + path + ": cannot be opened");
  nlohmann::json j;
  try {
    j = parse_json_without_duplicate_keys(in, "model file (--model) " + path);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("model file (--model) " + path + ": malformed JSON: " + e.what());
  }
  try {
    return from_json(j, "model");  // key paths as "model.nic.send.qp_window"
  } catch (const std::exception& e) {
    throw std::runtime_error("model file (--model) " + path + ": " + e.what());
  }
}

nlohmann::json Model::to_json() const {
  nlohmann::json j = {{"cpu", cpu.to_json()}, {"nic", nic.to_json()}, {"client_wake_ns", client_wake_ns},
                      {"client_retry_ns", client_retry_ns}, {"ring_head_contention", ring_head_contention}};
  if (response_handoff_ns > 0) j["response_handoff_ns"] = response_handoff_ns;
  if (response_handoff_unit == HandoffUnit::kVisit) j["response_handoff_unit"] = "visit";
  if (!faults.empty()) j["faults"] = faults_to_json(faults);
  if (!psn_duplicate_detection) j["psn_duplicate_detection"] = false;
  return j;
}

}  // namespace bkv::sim
