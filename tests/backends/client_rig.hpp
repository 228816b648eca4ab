// What the tests of backends/client.hpp share: a meter whose clock the test sets, a node
// whose every request is remote, and a small workload.
#pragma once

#include <cstdint>

#include "backends/client.hpp"

namespace bkv::test {

// A clock the test sets (`now`). With kChargesAdvance, every op unit charged moves it on
// by 1 ns as well, so that a step's writes can be timed.
template <bool kChargesAdvance>
struct TestClockMeter {
  [[maybe_unused]] static constexpr bool kEnabled = false;
  uint64_t now = 0;
  uint64_t charged = 0;
  void charge(Op, uint32_t n = 1) noexcept { charged += n; }
  void record(Phase, uint32_t) noexcept {}
  void answers_arrive(uint32_t, uint32_t) noexcept {}
  uint64_t now_ns() const noexcept { return kChargesAdvance ? now + charged : now; }
};

// Rank 2 of a 2-rank workload (so every request is remote), queue depth 4.
inline backend::NodeConfig remote_only_node() { return {.rank = 2, .np = 2, .queue_depth = 4}; }

// 2 ranks, 64 keys, a pattern of 64 requests, half of them GETs.
inline kv::WorkloadConfig small_workload() {
  return {.num_ranks = 2, .key_range = 64, .read_ratio = 0.5, .pattern_len = 64};
}

}  // namespace bkv::test
