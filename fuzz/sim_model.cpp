// Fuzzes the simulator's model reader (sim/model.cpp: CPU cost model, NIC model and
// client constants) on arbitrary JSON text, read the way load_file reads a model file.
// Every input is either a model or a std::exception whose message names the problem;
// an accepted model must survive a round trip through its own JSON.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/strict_json.hpp"
#include "fuzz/fuzz_input.hpp"
#include "sim/model.hpp"

using bkv::fuzz::violated;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  nlohmann::json j;
  try {
    j = bkv::parse_json_without_duplicate_keys(in, "fuzz model");
  } catch (const std::exception&) {
    return 0;
  }
  bkv::sim::Model m;
  try {
    m = bkv::sim::Model::from_json(j, "fuzz model");
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) violated("a model error without a message");
    return 0;
  }
  const nlohmann::json back = m.to_json();
  try {
    const bkv::sim::Model again = bkv::sim::Model::from_json(back, "round trip");
    if (again.to_json() != back) violated("an accepted model does not round-trip");
  } catch (const std::exception& e) {
    violated("an accepted model's own JSON is refused");
  }
  return 0;
}
