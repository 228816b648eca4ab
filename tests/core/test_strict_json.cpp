// core/strict_json.hpp: the nesting limit while parsing, and the bounded excerpt that
// error messages quote.
#include <catch2/catch.hpp>

#include <sstream>
#include <stdexcept>
#include <string>

#include "core/strict_json.hpp"

using namespace bkv;
using nlohmann::json;

namespace {

std::string nested(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

json strict(const std::string& text) {
  std::istringstream in(text);
  return parse_json_without_duplicate_keys(in, "t.json");
}

json bounded(const std::string& text) {
  std::istringstream in(text);
  return parse_json_bounded(in, "t.json");
}

}  // namespace

TEST_CASE("strict json: nesting up to the limit is read, one level more is refused", "[json]") {
  STATIC_REQUIRE(kMaxJsonDepth == 64);
  const json ok = strict(nested(kMaxJsonDepth));
  int depth = 0;
  for (const json* p = &ok; p->is_array(); p = p->empty() ? nullptr : &(*p)[0]) {
    ++depth;
    if (p->empty()) break;
  }
  CHECK(depth == kMaxJsonDepth);
  CHECK_NOTHROW(bounded(nested(kMaxJsonDepth)));
  // Objects count as arrays do, mixed too.
  std::string mixed;
  for (int i = 0; i < kMaxJsonDepth; ++i) mixed += (i % 2) ? "[" : "{\"k\":";
  for (int i = kMaxJsonDepth - 1; i >= 0; --i) mixed += (i % 2) ? "]" : "}";
  CHECK_NOTHROW(strict(mixed));
  CHECK_THROWS_WITH(strict("{\"np\":" + nested(kMaxJsonDepth) + "}"),
                    Catch::Contains("t.json") && Catch::Contains("nested deeper than 64"));
  CHECK_THROWS_WITH(strict(nested(kMaxJsonDepth + 1)), Catch::Contains("nested deeper than 64"));
  CHECK_THROWS_WITH(bounded(nested(kMaxJsonDepth + 1)), Catch::Contains("nested deeper than 64"));
  CHECK_THROWS_WITH(strict("{\"a\":" + mixed + "}"), Catch::Contains("nested deeper than 64"));
}

TEST_CASE("strict json: a 100 000-level document is refused with a message, not a crash", "[json]") {
  const std::string deep = "{\"np\":" + nested(100'000) + "}";
  CHECK_THROWS_AS(strict(deep), std::runtime_error);
  CHECK_THROWS_WITH(bounded(deep), Catch::Contains("nested deeper than 64"));
  // Unclosed: refused at the limit too, before the end of the text is seen.
  CHECK_THROWS_WITH(strict(std::string(100'000, '[')), Catch::Contains("nested deeper than 64"));
}

TEST_CASE("json excerpt: a short value is its dump, a long or deep one is cut within bounds", "[json]") {
  for (const char* text : {"1", "-2.5", "true", "null", "\"abc\"", "[1,2,3]", "{\"a\":[1,{\"b\":null}]}", "[]", "{}"}) {
    const json v = json::parse(text);
    CHECK(json_excerpt(v) == v.dump());
  }
  // A long string: its first max_chars characters (after the quote), then "...".
  const json s = std::string(10'000, 'x');
  const std::string e = json_excerpt(s, 20);
  CHECK(e == "\"" + std::string(19, 'x') + "...");
  // A long array.
  json a = json::array();
  for (int i = 0; i < 10'000; ++i) a.push_back(i);
  const std::string ea = json_excerpt(a);
  CHECK(ea.size() == 80 + 3);
  CHECK(ea.rfind("[0,1,2,3,", 0) == 0);
  CHECK(ea.substr(ea.size() - 3) == "...");
  // Deep nesting (built here, past what a file may hold): shown to 4 levels.
  json deep = json::array();
  json* inner = &deep;
  for (int i = 0; i < 10'000; ++i) inner = &inner->emplace_back(json::array());
  CHECK(json_excerpt(deep) == "[[[[[...]]]]]");
  json obj = {{"a", {{"b", {{"c", {{"d", {{"e", 1}}}}}}}}}};
  CHECK(json_excerpt(obj) == "{\"a\":{\"b\":{\"c\":{\"d\":{...}}}}}");
  CHECK(json_excerpt(json::parse("[[[[[]]]]]")) == "[[[[[]]]]]");
  // Invalid UTF-8 in a string is shown replaced, not thrown at.
  CHECK_NOTHROW(json_excerpt(json(std::string("a\xff" "b"))));
}
