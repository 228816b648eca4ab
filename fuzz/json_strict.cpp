// Fuzzes the strict JSON reader (core/strict_json.hpp) on arbitrary bytes: it returns
// a document or throws nlohmann::json::exception (malformed) or std::runtime_error
// (a key given twice, naming the key, or nesting past the limit); anything else is a
// finding, and so is a document it accepts that the plain reader refuses, or an excerpt
// of an accepted document longer than its bound.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/strict_json.hpp"
#include "fuzz/fuzz_input.hpp"

using bkv::fuzz::violated;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  bool strict_ok = false;
  try {
    const nlohmann::json j = bkv::parse_json_without_duplicate_keys(in, "fuzz input");
    strict_ok = true;
    (void)j.dump();
    if (bkv::json_excerpt(j).size() > 80 + 3) violated("an excerpt longer than its bound");
  } catch (const nlohmann::json::exception&) {
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.find("duplicate key") == std::string::npos && what.find("a number is out of range") == std::string::npos &&
        what.find("nested deeper than") == std::string::npos)
      throw;
  }
  // The strict reader accepts nothing the plain reader refuses.
  if (strict_ok && !nlohmann::json::accept(text)) violated("strict reader accepted malformed JSON");
  return 0;
}
