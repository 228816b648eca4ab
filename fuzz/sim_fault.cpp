// Fuzzes the --fault reader (sim/faults.cpp, Fault::parse) on arbitrary text: every
// input is a fault or a std::exception with a message; an accepted fault has an ordered
// window and survives a round trip through its own JSON (the model's "faults" form).
#include <cstdint>
#include <exception>
#include <string>

#include "fuzz/fuzz_input.hpp"
#include "sim/faults.hpp"

using bkv::fuzz::violated;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  bkv::sim::Fault f;
  try {
    f = bkv::sim::Fault::parse(text);
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) violated("a --fault error without a message");
    return 0;
  }
  if (f.start_ns() > f.end_ns()) violated("an accepted fault's window ends before it starts");
  const nlohmann::json j = f.to_json();
  try {
    const bkv::sim::Fault again = bkv::sim::Fault::from_json(j, "round trip");
    if (again.to_json() != j) violated("an accepted fault does not round-trip");
  } catch (const std::exception&) {
    violated("an accepted fault's own JSON is refused");
  }
  return 0;
}
