// Fuzzes benchkv's JSON configuration reader (apps/benchkv/cli/config_file.cpp) on arbitrary
// text, read as a config file is: strict JSON, then options_from_json with its checks.
// Every input is either validated options or a std::exception with a message; accepted
// options must survive a round trip through to_json.
#include <cstdint>

#include "apps/benchkv/cli/options.hpp"
#include "fuzz/config_reader_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bkv::fuzz::check_config_reader(
      data, size, "config", [](const nlohmann::json& j) { return bkv::app::options_from_json(j, "/nonexistent-fuzz-dir"); },
      [](const bkv::app::Options& o) { return bkv::app::to_json(o); });
  return 0;
}
