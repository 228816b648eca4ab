#include "sim/nic_config.hpp"

#include <limits>

#include "sim/json_fields.hpp"

namespace bkv::sim {

namespace {

using json_detail::ObjectReader;

// Reads the parameters a struct lists in fields(): absent keys keep their value, nested
// objects are read when present, and every object is closed with finish() (unknown keys
// are errors) and its relations checked.
class Reader {
 public:
  explicit Reader(ObjectReader& r) : r_(r) {}
  void number(const char* key, double& x, double lo, double hi) { x = r_.number(key, x, lo, hi); }
  void integer(const char* key, uint32_t& x, uint64_t lo, uint64_t hi) {
    x = static_cast<uint32_t>(r_.integer(key, x, lo, hi));
  }
  void boolean(const char* key, bool& b) { b = r_.boolean(key, b); }
  void distribution(const char* key, Distribution& d, double lo) {
    if (const nlohmann::json* j = r_.get(key); j != nullptr)
      d = j->is_null() ? Distribution::constant(0) : distribution_from_json(*j, r_.path_of(key), lo);
  }
  template <class S>
  void object(const char* key, S& s) {
    const nlohmann::json* v = r_.get(key);
    if (v == nullptr) return;
    ObjectReader sub(*v, r_.path_of(key));
    Reader rs(sub);
    s.fields(rs);
    sub.finish();
    if constexpr (requires { s.invalid(); }) {
      const auto [bad_key, rule] = s.invalid();
      if (!bad_key.empty()) json_detail::fail(sub.path_of(bad_key), rule);
    }
  }

 private:
  ObjectReader& r_;
};

// Writes the parameters a struct lists in fields(), with the same nesting.
class Writer {
 public:
  explicit Writer(nlohmann::json& j) : j_(j) {}
  void number(const char* key, double& x, double, double) { j_[key] = x; }
  void integer(const char* key, uint32_t& x, uint64_t, uint64_t) { j_[key] = x; }
  void boolean(const char* key, bool& b) { j_[key] = b; }
  void distribution(const char* key, Distribution& d, double) { j_[key] = distribution_to_json(d); }
  template <class S>
  void object(const char* key, S& s) {
    nlohmann::json sub = nlohmann::json::object();
    Writer w(sub);
    s.fields(w);
    j_[key] = std::move(sub);
  }

 private:
  nlohmann::json& j_;
};

}  // namespace

NicConfig NicConfig::from_json(const nlohmann::json& j, const std::string& path) {
  NicConfig c;
  ObjectReader r(j, path);
  Reader reader(r);
  c.fields(reader);
  r.finish();
  return c;
}

nlohmann::json NicConfig::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  NicConfig copy = *this;  // fields() hands out references; the writer only reads them
  Writer w(j);
  copy.fields(w);
  return j;
}

}  // namespace bkv::sim
