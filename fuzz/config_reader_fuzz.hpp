// What the fuzzers of the JSON config readers (benchkv's options, the simulator's model)
// check: on arbitrary text read as strict JSON, the reader either accepts it or throws a
// std::exception with a message, and what it accepts survives a round trip through its
// own JSON (read again, the same JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <sstream>
#include <string>

#include "core/strict_json.hpp"
#include "fuzz/fuzz_input.hpp"

namespace bkv::fuzz {

// `read(json)` gives the config or throws; `write(config)` gives its JSON. `what` names
// the config in the messages of a violated property ("config", "model").
template <class Read, class Write>
void check_config_reader(const uint8_t* data, size_t size, const std::string& what, Read&& read, Write&& write) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  nlohmann::json j;
  try {
    j = parse_json_without_duplicate_keys(in, "fuzz " + what);
  } catch (const std::exception&) {
    return;
  }
  decltype(read(j)) config;
  try {
    config = read(j);
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) violated(("a " + what + " error without a message").c_str());
    return;
  }
  const nlohmann::json back = write(config);
  try {
    if (write(read(back)) != back) violated(("an accepted " + what + " does not round-trip").c_str());
  } catch (const std::exception&) {
    violated(("an accepted " + what + "'s own JSON is refused").c_str());
  }
}

}  // namespace bkv::fuzz
