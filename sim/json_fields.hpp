// Strict reading of JSON objects for the simulator's configs (include only from .cpp
// files: it pulls in the full nlohmann/json header).
//
// Rules: every key read is checked for type and range; finish() rejects keys nobody
// read ("unknown key"); every message names the full key path, e.g.
// "nic.send.engines: must be an integer >= 0 (got -1)".
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/strict_json.hpp"

namespace bkv::sim::json_detail {

[[noreturn]] inline void fail(const std::string& path, const std::string& what) {
  throw std::invalid_argument(path + ": " + what);
}

inline std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_.empty() ? "<root>" : path_, "must be a JSON object");
  }

  bool has(const std::string& key) const { return j_.contains(key); }
  std::string path_of(const std::string& key) const { return join(path_, key); }

  const nlohmann::json* get(const std::string& key) {
    auto it = j_.find(key);
    if (it == j_.end()) return nullptr;
    seen_.insert(key);
    return &*it;
  }

  // A finite number in [lo, hi]; `fallback` when the key is absent.
  double number(const std::string& key, double fallback, double lo = 0.0,
                double hi = std::numeric_limits<double>::infinity()) {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(path_of(key), "must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x)) fail(path_of(key), "must be finite");
    if (x < lo) fail(path_of(key), "must be >= " + fmt(lo) + " (got " + fmt(x) + ")");
    if (x > hi) fail(path_of(key), "must be <= " + fmt(hi) + " (got " + fmt(x) + ")");
    return x;
  }

  // A number that must be present.
  double required_number(const std::string& key, double lo = -std::numeric_limits<double>::infinity(),
                         double hi = std::numeric_limits<double>::infinity()) {
    if (!has(key)) fail(path_of(key), "missing");
    return number(key, 0.0, lo, hi);
  }

  uint64_t integer(const std::string& key, uint64_t fallback, uint64_t lo = 0,
                   uint64_t hi = std::numeric_limits<uint32_t>::max()) {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)  // unsigned: past INT64_MAX
      fail(path_of(key), "must be an integer >= " + std::to_string(lo) + " (got " + json_excerpt(*v) + ")");
    if (!v->is_number_unsigned() && !v->is_number_integer())
      fail(path_of(key), "must be an integer (got " + v->dump() + ")");
    const uint64_t x = v->get<uint64_t>();
    if (x < lo || x > hi)
      fail(path_of(key), "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "] (got " + std::to_string(x) + ")");
    return x;
  }

  bool boolean(const std::string& key, bool fallback) {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(path_of(key), "must be true or false");
    return v->get<bool>();
  }

  std::string string(const std::string& key, const std::string& fallback) {
    const nlohmann::json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(path_of(key), "must be a string");
    return v->get<std::string>();
  }

  // Rejects every key that was not read.
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (seen_.count(it.key()) == 0) fail(path_of(it.key()), "unknown key");
  }

 private:
  static std::string fmt(double x) {
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    nlohmann::json t = x;
    return t.dump();
  }

  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace bkv::sim::json_detail
