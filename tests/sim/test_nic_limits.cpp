// The simulated NIC's per-QP limits at their exact value: the READs a QP may have
// outstanding (send.max_outstanding_reads) and the RNR retries of a requester
// (rnr.retry_limit). Each case runs the limit and the limit's neighbour so a bound moved
// by one either way fails it (docs/log/2026-11-29-planted-bugs-round3.md).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "tests/sim/sim_cluster.hpp"
#include "tests/sim/wqe_recorder.hpp"

using namespace bkv;
using namespace bkv::test;
using sim::WqeEvent;

namespace {

// Completion times of `reads` 64-byte READs posted at once on one QP whose NIC admits at
// most `limit` outstanding READs.
std::vector<sim::Time> read_completions(uint32_t limit, uint32_t reads) {
  NicConfig nic = quiet_nic();
  nic.send.max_outstanding_reads = limit;
  SimCluster c(2, nic);
  WqeRecorder ev(c);
  auto [qa, qb] = c.connected_pair();
  (void)qb;
  std::vector<std::byte> remote(4096, std::byte{9}), local(4096);
  const MemoryRegion lmr = c.t[0]->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = c.t[1]->register_memory(remote.data(), remote.size(), kAccessRemoteRead);
  for (uint32_t i = 0; i < reads; ++i)
    REQUIRE(qa.post_read(local.data() + 64 * i, 64, lmr.lkey, SimCluster::remote(rmr, 64 * i), i, true) ==
            PostResult::kOk);
  qa.ring_doorbell();
  c.engine.run();
  std::vector<sim::Time> done = ev.times(WqeEvent::kCompleted, qa.index());
  REQUIRE(done.size() == reads);
  return done;
}

}  // namespace

TEST_CASE("NIC limits: a QP has at most max_outstanding_reads READs in flight, the next waits for a completion",
          "[nic]") {
  // One READ alone takes a round trip T. With the limit at 2, three READs posted at once:
  // the first two travel together (completions a few ns apart), the third is admitted
  // only when the first completes (about a round trip after the second).
  const sim::Time t = read_completions(2, 1)[0];
  REQUIRE(t > 1000);
  const std::vector<sim::Time> done = read_completions(2, 3);
  INFO("single READ " << t << " ns; completions " << done[0] << ", " << done[1] << ", " << done[2]);
  CHECK(done[1] - done[0] < t / 4);
  CHECK(done[2] - done[1] > t / 2);
  // At the limit 3 the three travel together.
  const std::vector<sim::Time> three = read_completions(3, 3);
  CHECK(three[2] - three[0] < t / 4);
}

TEST_CASE("NIC limits: a requester's RNR retry limit N allows exactly N retries after the first RNR NAK", "[nic]") {
  // No receive is ever posted: each try of the WRITE+IMM is NAKed. retry_limit N (not 7,
  // which retries forever): N + 1 tries, then RETRY_EXC_ERR.
  for (const uint32_t limit : {1u, 3u}) {
    NicConfig nic = quiet_nic();
    nic.rnr.retry_limit = limit;
    nic.rnr.delay_ns = 1'000;
    SimCluster c(2, nic);
    WqeRecorder ev(c);
    WritePair w(c, 64, 64, std::byte{1});
    REQUIRE(w.qa.post_write_imm(w.src.data(), 8, w.smr.lkey, w.target(), 5, 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run_until(100'000);
    INFO("retry_limit " << limit);
    CHECK(ev.times(WqeEvent::kRnrNak, w.qa.index()).size() == limit + 1);
    std::vector<SendCompletion> sc;
    c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kRetryExceeded);
  }
}
