// Fuzzes the simulator's model reader (sim/model.cpp: CPU cost model, NIC model and
// client constants) on arbitrary JSON text, read the way load_file reads a model file.
// Every input is either a model or a std::exception whose message names the problem;
// an accepted model must survive a round trip through its own JSON.
#include <cstdint>

#include "fuzz/config_reader_fuzz.hpp"
#include "sim/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bkv::fuzz::check_config_reader(
      data, size, "model", [](const nlohmann::json& j) { return bkv::sim::Model::from_json(j, "fuzz model"); },
      [](const bkv::sim::Model& m) { return m.to_json(); });
  return 0;
}
