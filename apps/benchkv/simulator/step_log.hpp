// The step log of a simulated run (benchkv --step-log FILE): which simulated thread each
// step ran, in the order the simulator ran them, over the measured runs (from virtual
// time 0 to the end of the last run; the drain after it is not recorded).
// bench/sim_limit.cpp replays it over the instant loopback, so that the backend code runs
// in the batch shapes of the simulated run without the engine, cost or NIC model.
//
// File layout (little-endian, as written on this machine):
//
//   offset 0   char[8]   magic "BKVSTEP1"
//   offset 8   u32       np: nodes
//   offset 12  u32       threads per node (daemons + clients)
//   offset 16  u32       daemons per node (threads 0 .. daemons-1; clients follow)
//   offset 20  u32       reserved, 0
//   offset 24  u32[n]    one entry per step: node * threads per node + thread
//
// A reader checks the magic, the shape against what it builds, the length (a whole
// number of entries) and every entry's range before using it.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bkv::app {

struct StepLog {
  static constexpr char kMagic[8] = {'B', 'K', 'V', 'S', 'T', 'E', 'P', '1'};
  static constexpr size_t kHeaderBytes = 24;
  static constexpr size_t kEntryBytes = sizeof(uint32_t);
  static_assert(kHeaderBytes == sizeof(kMagic) + 4 * sizeof(uint32_t));

  uint32_t np = 0;
  uint32_t threads_per_node = 0;
  uint32_t daemons = 0;
  std::vector<uint32_t> steps;  // node * threads_per_node + thread

  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot open the step log for writing");
    const uint32_t head[4] = {np, threads_per_node, daemons, 0};
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(head), sizeof(head));
    out.write(reinterpret_cast<const char*>(steps.data()), std::streamsize(steps.size() * kEntryBytes));
    if (!out.flush()) throw std::runtime_error(path + ": cannot write the step log");
  }

  static StepLog read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open the step log");
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return from_bytes(bytes, path);
  }

  // The checks of read() on a file's bytes; `path` names it in the messages.
  static StepLog from_bytes(std::span<const char> bytes, const std::string& path) {
    if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
      throw std::runtime_error(path + ": not a step log (no BKVSTEP1 header)");
    if ((bytes.size() - kHeaderBytes) % kEntryBytes != 0)
      throw std::runtime_error(path + ": step log cut inside an entry (" + std::to_string(bytes.size()) + " bytes)");
    StepLog log;
    uint32_t head[4];
    std::memcpy(head, bytes.data() + sizeof(kMagic), sizeof(head));
    log.np = head[0];
    log.threads_per_node = head[1];
    log.daemons = head[2];
    if (log.np == 0 || log.threads_per_node == 0 || log.daemons == 0 || log.daemons >= log.threads_per_node)
      throw std::runtime_error(path + ": step log header has an impossible shape");
    log.steps.resize((bytes.size() - kHeaderBytes) / kEntryBytes);
    // (An empty log has no data(): memcpy from or to a null pointer is undefined even for
    // 0 bytes; the step_log fuzz harness found it under UBSan.)
    if (!log.steps.empty()) std::memcpy(log.steps.data(), bytes.data() + kHeaderBytes, log.steps.size() * kEntryBytes);
    const uint64_t threads = uint64_t{log.np} * log.threads_per_node;
    for (size_t i = 0; i < log.steps.size(); ++i)
      if (log.steps[i] >= threads)
        throw std::runtime_error(path + ": step " + std::to_string(i) + " names thread " +
                                 std::to_string(log.steps[i]) + " of " + std::to_string(threads));
    return log;
  }
};

}  // namespace bkv::app
