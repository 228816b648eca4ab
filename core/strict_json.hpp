// Parsing JSON a user wrote (configuration and model files): a key given twice in one
// object is an error naming the key and where it is, not "the last one wins".
#pragma once

#include <istream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bkv {

// Throws nlohmann::json::parse_error for malformed JSON and std::runtime_error
// ("<what>: duplicate key \"k\" in <object path>") for a repeated key, and
// ("<what>: a number is out of range: ...") for a number no double holds (1e999, which
// the JSON reader reports with an exception of another kind).
inline nlohmann::json parse_json_without_duplicate_keys(std::istream& in, const std::string& what) {
  std::vector<std::set<std::string>> keys;  // the keys seen, per open object
  std::vector<std::string> path;            // key of each open object ("" for the root/array items)
  std::string last_key;
  auto cb = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (ev) {
      case E::object_start:
        keys.emplace_back();
        path.push_back(last_key);
        last_key.clear();
        break;
      case E::object_end:
        keys.pop_back();
        path.pop_back();
        break;
      case E::key: {
        last_key = parsed.get<std::string>();
        if (!keys.back().insert(last_key).second) {
          std::string where;
          for (const auto& p : path)
            if (!p.empty()) where += (where.empty() ? "" : ".") + p;
          throw std::runtime_error(what + ": duplicate key \"" + last_key + "\" in " +
                                   (where.empty() ? std::string("the top-level object") : "\"" + where + "\""));
        }
        break;
      }
      case E::array_start:
      case E::array_end:
      case E::value:
        if (ev != E::key) last_key.clear();
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(in, cb);
  } catch (const nlohmann::json::out_of_range& e) {
    throw std::runtime_error(what + ": a number is out of range: " + e.what());
  }
}

}  // namespace bkv
