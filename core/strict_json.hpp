// Parsing JSON a user wrote (configuration, model, sweep and summary files): a key given
// twice in one object is an error naming the key and where it is, not "the last one
// wins"; nesting deeper than kMaxJsonDepth is refused while parsing; and a value quoted in
// an error message is a bounded excerpt (json_excerpt), never a whole dump.
#pragma once

#include <istream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bkv {

// Objects and arrays inside one another that a JSON file may nest (the top level is one).
// Deeper input is refused while it is read: the JSON library parses and destroys any
// depth, but its dump(), copies and comparisons recurse once per level, and a file of
// 100 000 levels overflowed the stack in the first of them that an error message ran.
// No file this program reads nests more than a few levels.
inline constexpr int kMaxJsonDepth = 64;

// For a parser callback: throws std::runtime_error ("<what>: nested deeper than 64
// levels ...") when an object or array starts at level kMaxJsonDepth + 1.
template <class Event>
void check_json_depth(int depth, Event ev, const std::string& what) {
  if ((ev == Event::object_start || ev == Event::array_start) && depth >= kMaxJsonDepth) [[unlikely]]
    throw std::runtime_error(what + ": objects and arrays nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels (refused: no input needs that many)");
}

// Parses `in` with the depth limit and no other check (files this program wrote, read
// back: summaries). Throws nlohmann's parse_error, or std::runtime_error for the depth.
template <class J = nlohmann::json>
J parse_json_bounded(std::istream& in, const std::string& what) {
  return J::parse(in, [&](int depth, typename J::parse_event_t ev, J&) {
    check_json_depth(depth, ev, what);
    return true;
  });
}

// A bounded excerpt of `v` for an error message: at most about max_chars characters of
// its JSON text, containers shown to 4 levels ("[...]" below), "..." where it is cut. Its
// work is bounded by max_chars and the nesting shown, whatever the value holds.
template <class J>
std::string json_excerpt(const J& v, size_t max_chars = 80) {
  std::string out;
  bool cut = false;
  // Invalid UTF-8 (a string cut inside a character, or bytes given on a command line) is
  // shown replaced, not thrown at.
  auto text = [](const J& x) { return x.dump(-1, ' ', false, J::error_handler_t::replace); };
  auto append = [&](const std::string& s) {
    if (out.size() + s.size() > max_chars) {
      out.append(s, 0, max_chars > out.size() ? max_chars - out.size() : 0);
      cut = true;
    } else {
      out += s;
    }
  };
  auto walk = [&](auto&& self, const J& x, int level) -> void {
    if (cut) return;
    if (x.is_string()) {
      const std::string& str = x.template get_ref<const typename J::string_t&>();
      // Only the part that can show is dumped (a long string costs no more than a short).
      append(text(J(str.substr(0, max_chars))));
      if (str.size() > max_chars) cut = true;
      return;
    }
    if (!x.is_structured()) {
      append(text(x));
      return;
    }
    const bool object = x.is_object();
    if (level >= 4) {
      append(x.empty() ? (object ? "{}" : "[]") : (object ? "{...}" : "[...]"));
      return;
    }
    append(object ? "{" : "[");
    bool first = true;
    for (auto it = x.begin(); it != x.end() && !cut; ++it) {
      if (!first) append(",");
      first = false;
      if (object) append(text(J(it.key())) + ":");
      self(self, *it, level + 1);
    }
    if (!cut) append(object ? "}" : "]");
  };
  walk(walk, v, 0);
  if (cut) out += "...";
  return out;
}

// Throws nlohmann::json::parse_error for malformed JSON and std::runtime_error
// ("<what>: duplicate key \"k\" in <object path>") for a repeated key, for nesting past
// kMaxJsonDepth, and
// ("<what>: a number is out of range: ...") for a number no double holds (1e999, which
// the JSON reader reports with an exception of another kind).
inline nlohmann::json parse_json_without_duplicate_keys(std::istream& in, const std::string& what) {
  std::vector<std::set<std::string>> keys;  // the keys seen, per open object
  std::vector<std::string> path;            // key of each open object ("" for the root/array items)
  std::string last_key;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    check_json_depth(depth, ev, what);
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
