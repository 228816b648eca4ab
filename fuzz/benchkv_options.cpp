// Fuzzes benchkv's JSON configuration reader (apps/benchkv/cli/config_file.cpp) on arbitrary
// text, read as a config file is: strict JSON, then options_from_json with its checks.
// Every input is either validated options or a std::exception with a message; accepted
// options must survive a round trip through to_json.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "apps/benchkv/cli/options.hpp"
#include "core/strict_json.hpp"
#include "fuzz/fuzz_input.hpp"

using bkv::fuzz::violated;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  nlohmann::json j;
  try {
    j = bkv::parse_json_without_duplicate_keys(in, "fuzz config");
  } catch (const std::exception&) {
    return 0;
  }
  bkv::app::Options o;
  try {
    o = bkv::app::options_from_json(j, "/nonexistent-fuzz-dir");
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) violated("a config error without a message");
    return 0;
  }
  const nlohmann::json back = bkv::app::to_json(o);
  try {
    const bkv::app::Options again = bkv::app::options_from_json(back, "/nonexistent-fuzz-dir");
    if (bkv::app::to_json(again) != back) violated("accepted options do not round-trip");
  } catch (const std::exception&) {
    violated("accepted options' own JSON is refused");
  }
  return 0;
}
