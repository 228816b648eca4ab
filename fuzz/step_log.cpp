// Fuzzes the step-log reader (apps/benchkv/simulator/step_log.hpp, StepLog::from_bytes,
// what StepLog::read checks a file with) on arbitrary bytes: every input is a log or a
// std::runtime_error with a message; an accepted log names only threads inside its
// shape and keeps every entry of the input.
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>

#include "apps/benchkv/simulator/step_log.hpp"
#include "fuzz/fuzz_input.hpp"

using bkv::fuzz::violated;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  bkv::app::StepLog log;
  try {
    log = bkv::app::StepLog::from_bytes(bytes, "fuzz step log");
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).empty()) violated("a step-log error without a message");
    return 0;
  }
  if (log.daemons == 0 || log.daemons >= log.threads_per_node) violated("an accepted log has no client or no daemon");
  const uint64_t threads = uint64_t{log.np} * log.threads_per_node;
  for (uint32_t s : log.steps)
    if (s >= threads) violated("an accepted log names a thread outside its shape");
  if (log.steps.size() != (size - bkv::app::StepLog::kHeaderBytes) / bkv::app::StepLog::kEntryBytes)
    violated("an accepted log lost or made up entries");
  return 0;
}
