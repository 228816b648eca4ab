// Where a benchkv result comes from: the "provenance" object of every summary JSON and
// the text of `benchkv --version`.
//
//   {"git_commit", "git_dirty" (JSON true|false: tracked files differ from the commit, at
//    build time; null when the build could not tell), "build_type", "compiler",
//    "sanitizer" ("none", "address" (ASan+UBSan), "thread"; "... (with libFuzzer coverage)"
//    in a BKV_FUZZ tree), "cxx_flags" (CMAKE_CXX_FLAGS and the build type's flags: the -O
//    level, -march, a profile-guided build's -fprofile-use), "ucx_version", "mpi_version",
//    "rdma_core_version" ("44.0 (libibverbs 1.14.44.0)": from pkg-config at configure
//    time; "" when the build has no UCX / MPI / libibverbs), "host", "date_utc" (ISO 8601, when the summary was
//    made), "cpu_model" (/proc/cpuinfo), "threads": the thread-to-CPU map of a real run,
//    [{rank, thread ("d0", "c3"), cpu (-1 = not pinned)}], or null in the simulator,
//    whose threads are simulated, "latency_clock": the clock request latencies were
//    timed with: "virtual time" in the simulator, else core/tsc_clock.hpp's describe()
//    ("TSC, 2596.1 MHz" or "steady clock")}
//
// The provenance differs from one run to the next (date, host, dirty flag) while the
// simulator's results do not: the determinism of the simulator holds for the summary
// without its "provenance" object (tests/e2e compare that way; see docs/design_simulator.md
// §Determinism).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bkv::app {

struct ThreadCpu {
  uint32_t rank = 0;
  std::string thread;  // "d<daemon>" or "c<client>"
  int cpu = -1;        // -1: not pinned
};

// The build's fields (commit, dirty, build type, compiler, sanitizer, C++ flags, UCX, MPI,
// rdma-core).
nlohmann::json build_provenance();
// Build fields plus host, date, CPU model, the thread map (null if `threads` is null) and
// the latency clock (virtual time when `simulated`).
nlohmann::json provenance_json(bool simulated, const nlohmann::json& threads = nullptr);
nlohmann::json threads_json(const std::vector<ThreadCpu>& threads);
// `benchkv --version`: one line per field of build_provenance().
std::string version_text();

}  // namespace bkv::app
