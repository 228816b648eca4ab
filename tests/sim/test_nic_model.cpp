// The simulated NIC/network through the discrete-event transport: pipeline latency,
// RC order under jitter, errors, READ, RNR, send-queue accounting, load-dependent
// latency, determinism, inline payloads taken at post. The transport conformance suite for the discrete-event transport
// is tests/transport/test_conformance_des.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.hpp"
#include "sim/distributions.hpp"
#include "sim/faults.hpp"
#include "tests/sim/sim_cluster.hpp"
#include "tests/sim/wqe_recorder.hpp"

using namespace bkv;
using namespace bkv::test;
using sim::WqeEvent;

TEST_CASE("a WRITE+IMM crosses the pipeline: latency is the sum of its stations", "[nic]") {
  const NicConfig nic = quiet_nic();
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  WritePair w(c, 64, 64, std::byte{0x3C});
  c.t[1]->post_receives(4);

  c.engine.run_until(1000);  // post at t = 1000
  REQUIRE(w.qa.post_write_imm(w.src.data(), 32, w.smr.lkey, w.target(8), 0xAB, 7, true) == PostResult::kOk);
  w.qa.ring_doorbell();
  c.engine.run();

  const WqeEvent& land = rec.get(WqeEvent::kLanded, w.qa.index(), 0);
  const WqeEvent& done = rec.get(WqeEvent::kCompleted, w.qa.index(), 0);
  // Fixed parts: doorbell + send engine + wire + receive engine + PCIe write; the rest is
  // serialization of ~100 bytes on the port twice and on PCIe (a few ns each).
  const double fixed = nic.doorbell_ns + nic.send.per_wqe_ns + nic.latency.base_ns + nic.recv.per_packet_ns +
                       nic.pcie.write_latency_ns;
  const double one_way = static_cast<double>(land.time - 1000);
  CHECK(one_way >= fixed);
  CHECK(one_way <= fixed + 25);
  // The signaled completion waits for the ACK: turnaround + wire back + ACK processing + CQE write.
  const double ack_path = nic.ack_turnaround_ns + nic.latency.base_ns + nic.recv.ack_ns + nic.pcie.write_latency_ns;
  CHECK(static_cast<double>(done.time - land.time) >= ack_path);
  CHECK(static_cast<double>(done.time - land.time) <= ack_path + 10);

  CHECK(std::memcmp(w.dst.data() + 8, w.src.data(), 32) == 0);
  CHECK(w.dst[7] == std::byte{0});
  CHECK(w.dst[40] == std::byte{0});
  // The target thread was woken by the completion, at the landing time.
  CHECK(c.threads[1].steps() == 1);
  CHECK(c.threads[1].step_start() == land.time);
  std::vector<RecvCompletion> rc;
  c.t[1]->poll_recv([&](const RecvCompletion& r) { rc.push_back(r); }, 8);
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].qp_num == w.qb.qp_num());
  CHECK(rc[0].imm == 0xAB);
  CHECK(rc[0].byte_len == 32);
  CHECK(c.t[1]->srq_posted() == 3);
  std::vector<SendCompletion> sc;
  c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 7);
  CHECK(sc[0].opcode == WcOpcode::kRdmaWriteImm);
  CHECK(sc[0].qp_num == w.qa.qp_num());
  CHECK(c.threads[0].step_start() == done.time);
}

TEST_CASE("a READ returns the remote bytes after a full round trip", "[nic]") {
  const NicConfig nic = quiet_nic();
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> remote(8192), local(8192, std::byte{0});
  for (size_t i = 0; i < remote.size(); ++i) remote[i] = std::byte{static_cast<uint8_t>(i * 7 + 3)};
  const MemoryRegion lmr = c.t[0]->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = c.t[1]->register_memory(remote.data(), remote.size(), kAccessRemoteRead);
  REQUIRE(qa.post_read(local.data(), 6000, lmr.lkey, SimCluster::remote(rmr, 100), 9, true) == PostResult::kOk);
  qa.ring_doorbell();
  c.engine.run();
  const WqeEvent& done = rec.get(WqeEvent::kCompleted, qa.index(), 0);
  CHECK(done.status == WcStatus::kSuccess);
  CHECK(std::memcmp(local.data(), remote.data() + 100, 6000) == 0);
  CHECK(local[6000] == std::byte{0});
  // Request there, DMA read at the responder, 6000 bytes back (> 1 MTU) at 100 Gbit/s.
  const double min_rtt = nic.doorbell_ns + 2 * nic.latency.base_ns + nic.pcie.read_latency_ns +
                         nic.pcie.write_latency_ns + 6000 * 8 / nic.link.bandwidth_gbps;
  CHECK(static_cast<double>(done.time) >= min_rtt);
  CHECK(c.net().nic(1).n.reads_served == 1);
}

TEST_CASE("heavy jitter never reorders one QP: data of later writes never lands first", "[nic]") {
  NicConfig nic;
  nic.latency.jitter = sim::Distribution::exponential(3000);  // 10x the base latency
  SimCluster c(2, nic, 5, sim::DeviceContextConfig{256, 8192, 0});
  constexpr uint32_t kQps = 2;
  constexpr uint32_t kPerQp = 1500;
  std::vector<sim::DesTransport::QueuePair*> qa, qb;
  for (uint32_t i = 0; i < kQps; ++i) {
    qa.push_back(&c.t[0]->create_queue_pair());
    qb.push_back(&c.t[1]->create_queue_pair());
    sim::DesFabric::connect(*qa.back(), *qb.back());
  }
  std::vector<uint64_t> src(kQps * kPerQp), dst(kQps * kPerQp, 0);
  for (uint32_t i = 0; i < src.size(); ++i) src[i] = i + 1;
  const MemoryRegion smr = c.t[0]->register_memory(src.data(), src.size() * 8, kAccessLocalWrite);
  const MemoryRegion dmr = c.t[1]->register_memory(dst.data(), dst.size() * 8, kAccessRemoteWrite);
  c.t[1]->post_receives(8192);

  struct Check {
    std::vector<uint64_t>* dst;
    std::vector<uint32_t> qp_slot;  // global QP index -> 0..kQps-1
    std::vector<int64_t> last_seq = std::vector<int64_t>(kQps, -1);
    std::vector<std::pair<uint32_t, Time>> order;  // (qp slot, post time) in landing order
    uint64_t failures = 0;
    static void on(void* ctx, const WqeEvent& ev) {
      auto* k = static_cast<Check*>(ctx);
      if (ev.kind != WqeEvent::kLanded) return;
      const uint32_t q = k->qp_slot[ev.qp];
      if (static_cast<int64_t>(ev.seq) != k->last_seq[q] + 1) ++k->failures;
      k->last_seq[q] = static_cast<int64_t>(ev.seq);
      const uint64_t idx = q * kPerQp + ev.seq;
      if ((*k->dst)[idx] != idx + 1) ++k->failures;                               // own data is there
      if (ev.seq + 1 < kPerQp && (*k->dst)[idx + 1] != 0) ++k->failures;          // the next one is not
      k->order.emplace_back(q, ev.wqe->posted_at);
    }
  } check{&dst, std::vector<uint32_t>(c.net().qp_count(), 0)};
  for (uint32_t i = 0; i < kQps; ++i) check.qp_slot[qa[i]->index()] = i;
  c.net().set_observer(&Check::on, &check);

  // A poster thread: each step posts 1-3 writes on alternating QPs, then rings; one in
  // 16 signaled; polls its send CQ to free slots.
  struct Poster {
    std::vector<sim::DesTransport::QueuePair*> qps;
    sim::DesTransport* t;
    const uint64_t* src;
    uint32_t lkey;
    MemoryRegion dmr;
    std::vector<uint32_t> next = std::vector<uint32_t>(kQps, 0);
    Rng rng{99};
    StepResult step(SimThread& th) {
      t->poll_send([](const SendCompletion& s) { REQUIRE(s.status == WcStatus::kSuccess); }, 64);
      th.charge(Op::kCqPoll);
      bool more = false;
      for (uint32_t q = 0; q < kQps; ++q) {
        const uint32_t n = 1 + static_cast<uint32_t>(rng.below(3));
        for (uint32_t k = 0; k < n && next[q] < kPerQp && qps[q]->send_queue_free() > 0; ++k) {
          const uint32_t s = next[q]++;
          const uint64_t idx = q * kPerQp + s;
          REQUIRE(qps[q]->post_write_imm(src + idx, 8, lkey, SimCluster::remote(dmr, idx * 8), (q << 16) | s, s,
                                         s % 16 == 15) == PostResult::kOk);
          th.charge(Op::kFlush);
        }
        qps[q]->ring_doorbell();
        th.charge(Op::kDoorbell);
        th.advance(rng.below(400));
        more |= next[q] < kPerQp;
      }
      return more ? StepResult::kContinue : StepResult::kExit;
    }
  } poster{qa, c.t[0], src.data(), smr.lkey, dmr};
  c.threads[0].bind<Poster, &Poster::step>(&poster);
  c.threads[0].start(0);
  c.engine.run();

  CHECK(check.failures == 0);
  for (uint32_t q = 0; q < kQps; ++q) CHECK(check.last_seq[q] == kPerQp - 1);
  CHECK(dst == src);
  // Per QP the receive completions come in post order...
  std::vector<int64_t> last(kQps, -1);
  uint32_t n = 0;
  c.t[1]->poll_recv([&](const RecvCompletion& r) {
    const uint32_t q = r.imm >> 16;
    const int64_t s = r.imm & 0xFFFF;
    REQUIRE(s == last[q] + 1);
    last[q] = s;
    ++n;
  }, 1u << 20);
  CHECK(n == kQps * kPerQp);
  // ...while across QPs the jitter does reorder: a later post of one QP lands before an
  // earlier post of the other (so the per-QP order above is not an accident).
  uint64_t inversions = 0;
  for (size_t i = 1; i < check.order.size(); ++i)
    if (check.order[i].first != check.order[i - 1].first && check.order[i].second < check.order[i - 1].second)
      ++inversions;
  CHECK(inversions > 10);
  // And the jitter spread latencies widely.
  const auto& ctr = c.net().nic(0).n;
  CHECK(static_cast<double>(ctr.land_latency_max_ns) > 5.0 * static_cast<double>(ctr.land_latency_ns) / ctr.land_count / 2);
}

TEST_CASE("an rkey or bounds violation: remote access error, QP to error, later data never lands", "[nic]") {
  for (int variant = 0; variant < 2; ++variant) {
    INFO((variant == 0 ? "bad rkey" : "past the end"));
    SimCluster c(2, NicConfig{});
    WqeRecorder rec(c);
    WritePair w(c, 512, 512, std::byte{0x11});
    c.t[1]->post_receives(16);
    RemoteBuffer bad = w.target(0);
    if (variant == 0) bad.rkey += 1000;
    else bad.addr += 500;  // 500 + 64 > 512
    REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(0), 1, false) == PostResult::kOk);
    REQUIRE(w.qa.post_write_imm(w.src.data(), 64, w.smr.lkey, bad, 2, 2, false) == PostResult::kOk);
    for (uint32_t i = 0; i < 5; ++i)
      REQUIRE(w.qa.post_write_imm(w.src.data(), 64, w.smr.lkey, w.target(128 + 64 * (i % 4)), 3, 3 + i,
                                i == 4) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    std::vector<SendCompletion> sc;
    c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 64);
    for (const auto& s : sc) UNSCOPED_INFO("wr " << s.wr_id << " status " << to_string(s.status));
    REQUIRE(sc.size() == 6);  // the error (unsignaled, still reported) + 5 flushed
    CHECK(sc[0].wr_id == 2);
    CHECK(sc[0].status == WcStatus::kRemoteAccessError);
    for (size_t i = 1; i < sc.size(); ++i) {
      CHECK(sc[i].wr_id == 2 + i);
      CHECK(sc[i].status == WcStatus::kWrFlushError);
    }
    CHECK(w.qa.in_error());
    CHECK(w.qb.in_error());
    // The first write landed; nothing after the violation did.
    for (size_t i = 0; i < 64; ++i) REQUIRE(w.dst[i] == std::byte{0x11});
    for (size_t i = 64; i < w.dst.size(); ++i) REQUIRE(w.dst[i] == std::byte{0});
    CHECK(c.t[1]->srq_posted() == 16);
    // The error completion appears only after the NAK travelled back.
    const WqeEvent& err = rec.get(WqeEvent::kRemoteError, w.qa.index(), 1);
    const WqeEvent& done = rec.get(WqeEvent::kCompleted, w.qa.index(), 1);
    CHECK(done.time >= err.time + 300);
    CHECK(c.net().nic(1).n.remote_errors == 1);
    // New posts are flushed.
    REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(0), 50, false) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    sc.clear();
    c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 64);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kWrFlushError);
  }
}

TEST_CASE("receiver not ready: WRITE+IMM waits whole RNR periods until a receive is posted", "[nic]") {
  NicConfig nic = quiet_nic();
  nic.rnr.delay_ns = 10'000;
  // One period: the NAK back to the requester (turnaround + one way), the RNR timer there,
  // the resend out (one way).
  const Time period = 10'000 + 50 + 2 * 300;
  REQUIRE(nic.ack_turnaround_ns == 50);
  REQUIRE(nic.latency.base_ns == 300);
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  WritePair w(c, 64, 64, std::byte{5});
  for (uint32_t i = 0; i < 3; ++i)
    REQUIRE(w.qa.post_write_imm(w.src.data(), 8, w.smr.lkey, w.target(8 * i), 10 + i, i, i == 2) ==
            PostResult::kOk);
  w.qa.ring_doorbell();
  c.engine.run_until(55'000);
  CHECK(rec.find(WqeEvent::kLanded, w.qa.index(), 0) == nullptr);
  CHECK(c.net().nic(1).n.rnr_naks >= 5);
  for (std::byte b : w.dst) REQUIRE(b == std::byte{0});
  c.t[1]->post_receives(8);  // at t = 55 us
  c.engine.run();
  const WqeEvent& l0 = rec.get(WqeEvent::kLanded, w.qa.index(), 0);
  const WqeEvent& l2 = rec.get(WqeEvent::kLanded, w.qa.index(), 2);
  CHECK(l0.time >= 55'000);
  CHECK(l0.time < 55'000 + period);  // the next retry after the receive was posted
  CHECK(l2.time >= l0.time);
  std::vector<uint32_t> imms;
  c.t[1]->poll_recv([&](const RecvCompletion& r) { imms.push_back(r.imm); }, 8);
  CHECK(imms == std::vector<uint32_t>{10, 11, 12});
  CHECK(c.t[1]->srq_posted() == 5);
  // The first attempt hit RNR after one way; retries are whole periods apart.
  std::vector<Time> naks;
  for (const WqeEvent& e : rec.events)
    if (e.kind == WqeEvent::kRnrNak && e.seq == 0) naks.push_back(e.time);
  REQUIRE(naks.size() >= 5);
  for (size_t i = 1; i < naks.size(); ++i) CHECK(naks[i] - naks[i - 1] == period);
  CHECK((l0.time - naks.front()) % period == 0);
}

TEST_CASE("send queue depth: unsignaled slots free only when a later signaled completion is polled", "[nic]") {
  SimCluster c(2, NicConfig{}, 1, sim::DeviceContextConfig{16, 64, 0});
  WritePair w(c, 64, 64);
  for (uint32_t i = 0; i < 10; ++i)
    REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), i, false) == PostResult::kOk);
  REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), 10, true) == PostResult::kOk);
  for (uint32_t i = 11; i < 16; ++i)
    REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), i, false) == PostResult::kOk);
  CHECK(w.qa.send_queue_free() == 0);
  CHECK(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), 99, true) == PostResult::kSendQueueFull);
  w.qa.ring_doorbell();
  c.engine.run();
  CHECK(w.qa.send_queue_free() == 0);  // completed on the NIC, but nothing polled yet
  uint32_t n = c.t[0]->poll_send([](const SendCompletion& s) { CHECK(s.wr_id == 10); }, 8);
  CHECK(n == 1);
  CHECK(w.qa.send_queue_free() == 11);  // slots 0..10 freed; 11..15 wait for a later signal
}

namespace {

// Open-loop Poisson traffic on one QP at a given offered load of a single-server send
// engine; returns the mean post-to-landing latency and the engine utilization.
std::pair<double, double> latency_at_load(double rho, nlohmann::json* report = nullptr) {
  NicConfig nic = quiet_nic();
  nic.send.engines = 1;
  nic.send.per_wqe_ns = 1000;
  nic.send.qp_serial = false;
  nic.send.qp_window = 4096;
  SimCluster c(2, nic, 3, sim::DeviceContextConfig{4096, 64, 0});
  WritePair w(c, 64, 64);
  struct Source {
    WritePair::Poster p;
    double mean_gap;
    uint32_t left = 4000;
    Rng rng{17};
    StepResult step(SimThread& th) {
      p.t->poll_send([](const SendCompletion&) {}, 64);
      REQUIRE(p.write8(left, left % 32 == 0) == PostResult::kOk);
      p.qp->ring_doorbell();
      if (--left == 0) return StepResult::kExit;
      th.wake(th.now() + static_cast<Time>(sim::sample_exponential(rng, mean_gap)));
      return StepResult::kIdle;
    }
  } source{w.poster(c), 1000.0 / rho};
  c.threads[0].bind<Source, &Source::step>(&source);
  c.threads[0].start(0);
  c.engine.run();
  const auto& n = c.net().nic(0);
  REQUIRE(n.n.land_count == 4000);
  if (report != nullptr) *report = c.net().report_json(0, c.engine.now());
  return {static_cast<double>(n.n.land_latency_ns) / n.n.land_count,
          n.send_engines.stats().utilization(c.engine.now(), 1)};
}

}  // namespace

TEST_CASE("queueing: mean latency grows monotonically with offered load on a saturated station", "[nic]") {
  std::vector<double> lat;
  for (double rho : {0.2, 0.5, 0.7, 0.85, 0.95}) {
    const auto [mean, util] = latency_at_load(rho);
    INFO("rho " << rho << " mean latency " << mean << " utilization " << util);
    CHECK(util == Approx(rho).epsilon(0.1));  // the offered load is what reaches the engine
    lat.push_back(mean);
  }
  for (size_t i = 1; i < lat.size(); ++i) CHECK(lat[i] > lat[i - 1]);
  CHECK(lat.back() > lat.front() + 3000);  // several service times of waiting near saturation
}

TEST_CASE("NIC metrics: station depth, utilization and counters follow the load", "[nic]") {
  nlohmann::json low, high;
  latency_at_load(0.2, &low);
  latency_at_load(0.95, &high);
  const auto& sl = low["whole_simulation"]["stations"]["send_engines"];
  const auto& sh = high["whole_simulation"]["stations"]["send_engines"];
  CHECK(sl["jobs"] == 4000);
  CHECK(sh["jobs"] == 4000);
  CHECK(high["counters"]["wqes_sent"] == 4000);
  CHECK(high["counters"]["writes_landed"] == 0);  // landings count at the responder (node 1)
  CHECK(sh["utilization"].get<double>() > 3 * sl["utilization"].get<double>());
  CHECK(sh["mean_depth"].get<double>() > sh["utilization"].get<double>());  // waiting jobs add to depth
  CHECK(sl["mean_depth"].get<double>() < 0.4);
  CHECK(sh["max_depth"].get<uint32_t>() > 5 * sl["max_depth"].get<uint32_t>());
  CHECK(sh["mean_wait_ns"].get<double>() > 10 * sl["mean_wait_ns"].get<double>());
  CHECK(high["latency"]["land_mean_ns"].get<double>() > low["latency"]["land_mean_ns"].get<double>());
}

TEST_CASE("a receive CQ that is never polled overruns with a clear error", "[nic]") {
  SimCluster c(2, NicConfig{}, 1, sim::DeviceContextConfig{256, 64, 8});
  WritePair w(c, 64, 64);
  c.t[1]->post_receives(64);
  for (uint32_t i = 0; i < 9; ++i)
    REQUIRE(w.qa.post_write_imm(w.src.data(), 8, w.smr.lkey, w.target(), i, i, false) == PostResult::kOk);
  w.qa.ring_doorbell();
  CHECK_THROWS_WITH(c.engine.run(), Catch::Contains("receive CQ overrun on node 1"));
}

TEST_CASE("per-QP window: latency grows with outstanding requests while the SQ is far from full", "[nic]") {
  // Closed loop with K requests outstanding on ONE QP (as copyrpc's single endpoint
  // between two nodes); doorbells without BlueFlame, so every WQE is fetched over PCIe.
  auto mean_latency = [](uint32_t k) {
    NicConfig nic = quiet_nic();
    nic.blueflame_max_wqes = 0;
    SimCluster c(2, nic, 1, sim::DeviceContextConfig{256, 64, 0});
    WritePair w(c, 64, 64);
    struct Loop {
      WritePair::Poster p;
      uint32_t k;
      uint32_t posted = 0;
      uint32_t done = 0;
      uint32_t max_outstanding = 0;
      StepResult step(SimThread& th) {
        done += p.t->poll_send([](const SendCompletion& s) { REQUIRE(s.status == WcStatus::kSuccess); }, 64);
        bool any = false;
        while (posted - done < k && posted < 3000) {
          REQUIRE(p.write8(posted, true) == PostResult::kOk);
          ++posted;
          any = true;
        }
        if (any) p.qp->ring_doorbell();
        max_outstanding = std::max(max_outstanding, posted - done);
        th.charge(Op::kCqPoll);
        return done == 3000 ? StepResult::kExit : StepResult::kIdle;
      }
    } loop{w.poster(c), k};
    c.threads[0].bind<Loop, &Loop::step>(&loop);
    c.threads[0].start(0);
    c.engine.run();
    REQUIRE(loop.done == 3000);
    REQUIRE(loop.max_outstanding <= k);
    REQUIRE(w.qa.send_queue_free() > 200);  // the SQ never came near full
    const auto& n = c.net().nic(0).n;
    return static_cast<double>(n.complete_latency_ns) / n.complete_count;
  };
  std::vector<double> lat;
  for (uint32_t k : {1u, 4u, 16u, 32u}) lat.push_back(mean_latency(k));
  INFO("latencies " << lat[0] << " " << lat[1] << " " << lat[2] << " " << lat[3]);
  for (size_t i = 1; i < lat.size(); ++i) CHECK(lat[i] > lat[i - 1]);
  CHECK(lat.back() > 2 * lat.front());
}

namespace {

// Random all-to-all traffic on 4 nodes with wire and CPU jitter; returns the engine's
// trace hash and a checksum of all destination memory.
std::pair<uint64_t, uint64_t> random_traffic(uint64_t fabric_seed) {
  NicConfig nic;
  nic.latency.jitter = sim::Distribution::lognormal(200, 300);
  SimCluster c(4, nic, fabric_seed);
  constexpr uint32_t kN = 4;
  std::vector<std::vector<sim::DesTransport::QueuePair*>> qp(kN, std::vector<sim::DesTransport::QueuePair*>(kN));
  for (uint32_t a = 0; a < kN; ++a)
    for (uint32_t b = a + 1; b < kN; ++b) {
      qp[a][b] = &c.t[a]->create_queue_pair();
      qp[b][a] = &c.t[b]->create_queue_pair();
      sim::DesFabric::connect(*qp[a][b], *qp[b][a]);
    }
  std::vector<std::vector<std::byte>> mem(kN, std::vector<std::byte>(1 << 14));
  std::vector<MemoryRegion> mr(kN);
  for (uint32_t i = 0; i < kN; ++i) {
    mr[i] = c.t[i]->register_memory(mem[i].data(), mem[i].size(), kAccessLocalWrite | kAccessRemoteWrite);
    c.t[i]->post_receives(4096);
  }
  struct Node {
    uint32_t id;
    sim::DesTransport* t;
    std::vector<sim::DesTransport::QueuePair*>* qps;
    std::vector<MemoryRegion>* mr;
    Rng rng;
    uint32_t steps = 0;
    StepResult step(SimThread& th) {
      t->poll_recv([](const RecvCompletion&) {}, 64);
      t->poll_send([](const SendCompletion&) {}, 64);
      th.charge(Op::kCqPoll, 2);
      const uint32_t to = (id + 1 + static_cast<uint32_t>(rng.below(kN - 1))) % kN;
      auto* q = (*qps)[to];
      const uint32_t len = static_cast<uint32_t>(rng.below(600));
      const uint64_t off = rng.below((1 << 14) - 600);
      const MemoryRegion& local = (*mr)[id];
      if (q->send_queue_free() > 0) {
        REQUIRE(q->post_write_imm(local.addr + rng.below(1000), len, local.lkey, SimCluster::remote((*mr)[to], off),
                                  id, steps, steps % 8 == 0) == PostResult::kOk);
        q->ring_doorbell();
        th.charge(Op::kDoorbell);
      }
      th.advance(rng.below(300));
      return ++steps < 400 ? StepResult::kContinue : StepResult::kExit;
    }
  };
  std::deque<Node> nodes;
  for (uint32_t i = 0; i < kN; ++i) {
    // Poison the local memory per node so WRITEs carry distinguishable bytes.
    for (size_t k = 0; k < mem[i].size(); ++k) mem[i][k] = std::byte{static_cast<uint8_t>(k * (i + 3))};
    nodes.push_back(Node{i, c.t[i], &qp[i], &mr, Rng(1000 + i)});
    c.threads[i].bind<Node, &Node::step>(&nodes.back());
    c.threads[i].start(i * 37);
  }
  c.engine.run();
  uint64_t sum = 0;
  for (auto& m : mem)
    for (std::byte b : m) sum = sum * 1099511628211ull + static_cast<uint8_t>(b);
  return {c.engine.trace_hash(), sum};
}

}  // namespace

TEST_CASE("determinism: same seed, same event trace and bytes - another seed, another trace", "[nic]") {
  const auto a = random_traffic(1);
  const auto b = random_traffic(1);
  const auto d = random_traffic(2);
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  CHECK(a.first != d.first);  // the wire jitter differs
}

TEST_CASE("PCIe read tags: with few tags, WQE fetches queue and latency grows", "[nic]") {
  // Many QPs posting non-BlueFlame WQEs at once: every WQE needs a fetch (a DMA read).
  auto mean_land = [](uint32_t tags) {
    NicConfig nic = quiet_nic();
    nic.blueflame_max_wqes = 0;
    nic.fetch_max_wqes = 1;
    nic.pcie.read_tags = tags;
    SimCluster c(2, nic);
    std::vector<std::byte> src(64), dst(64);
    const MemoryRegion smr = c.t[0]->register_memory(src.data(), src.size(), kAccessLocalWrite);
    const MemoryRegion dmr = c.t[1]->register_memory(dst.data(), dst.size(), kAccessRemoteWrite);
    for (uint32_t q = 0; q < 32; ++q) {
      auto& a = c.t[0]->create_queue_pair();
      auto& b = c.t[1]->create_queue_pair();
      sim::DesFabric::connect(a, b);
      for (uint32_t i = 0; i < 4; ++i)
        REQUIRE(a.post_write(src.data(), 8, smr.lkey, SimCluster::remote(dmr), i, false) == PostResult::kOk);
      a.ring_doorbell();
    }
    c.engine.run();
    const auto& n = c.net().nic(0);
    REQUIRE(n.n.land_count == 128);
    return std::pair<double, uint64_t>{static_cast<double>(n.n.land_latency_ns) / 128, n.read_tags.stats().wait_ps};
  };
  const auto many = mean_land(0);
  const auto few = mean_land(4);
  CHECK(many.second == 0);
  CHECK(few.second > 0);
  CHECK(few.first > many.first + 1000);  // 128 reads through 4 tags of ~0.5 us each
}

TEST_CASE("mixed READ/WRITE on one QP: a READ waits for an earlier blocked WRITE, then all complete in order", "[nic]") {
  // WRITE+IMM (hits RNR: no receive yet), READ, signaled WRITE, READ on one QP. The READ
  // may not overtake the WRITE at the responder (RC order: it must see the written
  // data), and the completions come in post order once a receive is posted.
  NicConfig nic = quiet_nic();
  nic.rnr.delay_ns = 5'000;
  SimCluster c(2, nic);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> local(256, std::byte{0x77}), back(256, std::byte{0}), remote(256, std::byte{0});
  const MemoryRegion lmr = c.t[0]->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion bmr = c.t[0]->register_memory(back.data(), back.size(), kAccessLocalWrite);
  const MemoryRegion rmr =
      c.t[1]->register_memory(remote.data(), remote.size(), kAccessRemoteWrite | kAccessRemoteRead);
  REQUIRE(qa.post_write_imm(local.data(), 16, lmr.lkey, SimCluster::remote(rmr, 0), 1, 1, false) == PostResult::kOk);
  REQUIRE(qa.post_read(back.data(), 16, bmr.lkey, SimCluster::remote(rmr, 0), 2, true) == PostResult::kOk);
  REQUIRE(qa.post_write(local.data(), 16, lmr.lkey, SimCluster::remote(rmr, 64), 3, true) == PostResult::kOk);
  REQUIRE(qa.post_read(back.data() + 64, 16, bmr.lkey, SimCluster::remote(rmr, 64), 4, true) == PostResult::kOk);
  qa.ring_doorbell();
  c.engine.run_until(20'000);
  std::vector<SendCompletion> sc;
  c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 16);
  CHECK(sc.empty());  // everything waits behind the RNR-blocked WRITE+IMM
  c.t[1]->post_receives(1);
  c.engine.run_until(200'000);
  c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 16);
  REQUIRE(sc.size() == 3);
  CHECK(sc[0].wr_id == 2);
  CHECK(sc[1].wr_id == 3);
  CHECK(sc[2].wr_id == 4);
  for (const auto& s : sc) CHECK(s.status == WcStatus::kSuccess);
  // Each READ saw the WRITE posted before it.
  CHECK(std::memcmp(back.data(), local.data(), 16) == 0);
  CHECK(std::memcmp(back.data() + 64, local.data(), 16) == 0);
}

TEST_CASE("RNR retry count is the requester's: its limit ends the retries, not the responder's", "[nic]") {
  // rnr_retry is an attribute of the sending QP (the responder contributes only its
  // min_rnr_timer, rnr.delay_ns). A requester with retry_limit 0 fails its WRITE+IMM on the
  // first RNR NAK even when the responder's NIC says 7 (retry forever), and a requester
  // with 7 retries forever whatever the responder says.
  auto first_status = [](uint32_t requester_limit, uint32_t responder_limit) {
    NicConfig req = quiet_nic(), resp = quiet_nic();
    req.rnr.retry_limit = requester_limit;
    resp.rnr.retry_limit = responder_limit;
    resp.rnr.delay_ns = 1'000;
    SimCluster c({req, resp});
    WritePair w(c, 64, 64, std::byte{1});
    REQUIRE(w.qa.post_write_imm(w.src.data(), 8, w.smr.lkey, w.target(), 5, 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run_until(100'000);  // no receive is ever posted: 100 RNR periods
    std::vector<SendCompletion> sc;
    c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
    return sc.empty() ? std::string("none") : std::string(to_string(sc[0].status));
  };
  CHECK(first_status(0, 7) == to_string(WcStatus::kRetryExceeded));
  CHECK(first_status(7, 0) == "none");  // still retrying
  CHECK(first_status(0, 0) == to_string(WcStatus::kRetryExceeded));
  CHECK(first_status(7, 7) == "none");
}

TEST_CASE("a wire jitter sample beyond an hour stops the run with an error naming the key", "[nic]") {
  // A heavy tail can draw delays no 64-bit nanosecond count holds (pareto with shape 0.01:
  // about one packet in four waits longer than an hour, some "forever"). Converting such
  // a sample was undefined (llround): the packet arrived near the end of the time range
  // and the run went on as if the model made sense. It is an error instead.
  NicConfig nic = quiet_nic();
  nic.latency.jitter = sim::Distribution::pareto(1, 0.01);
  SimCluster c(2, nic);
  WritePair w(c, 64, 64);
  for (uint32_t i = 0; i < 64; ++i)
    REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), i, true) == PostResult::kOk);
  w.qa.ring_doorbell();
  CHECK_THROWS_WITH(c.engine.run(), Catch::Contains("nic.latency.jitter"));
}

TEST_CASE("flushed counts every WQE completed with a flush error, also those dropped at a failed responder", "[nic]") {
  // The responder's connection fails at time t while the requester's WRITEs are on their
  // way: those reaching it before the requester learns of the failure are dropped there
  // and flushed, the rest are flushed by the requester's error state. Both kinds count.
  for (Time t = 0; t <= 4000; t += 100) {
    CAPTURE(t);
    SimCluster c(2, quiet_nic());
    c.net().enable_connection_faults(nullptr, nullptr);
    WritePair w(c, 64, 64);
    c.t[1]->post_receives(64);
    for (uint32_t i = 0; i < 16; ++i)
      REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), i, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run_until(t);
    c.net().fail_connection(w.qb.index());
    c.engine.run();
    uint64_t flush_cqes = 0;
    c.t[0]->poll_send([&](const SendCompletion& s) { flush_cqes += s.status == WcStatus::kWrFlushError; }, 64);
    CHECK(c.net().nic(0).n.flushed == flush_cqes);
  }
}

TEST_CASE("an inline WRITE delivers the bytes of its post even when the source is overwritten right after", "[nic]") {
  // A real NIC copies an inline payload into the WQE at post: the caller may reuse the
  // buffer as soon as post returns.
  const NicConfig nic = quiet_nic();
  REQUIRE(nic.inline_max_bytes >= 64);
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  WritePair w(c, 64, 128, std::byte{0x11});
  c.t[1]->post_receives(4);
  REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(), 1, false) == PostResult::kOk);
  std::fill(w.src.begin(), w.src.end(), std::byte{0x22});
  REQUIRE(w.qa.post_write_imm(w.src.data(), 48, w.smr.lkey, w.target(64), 5, 2, true) == PostResult::kOk);
  std::fill(w.src.begin(), w.src.end(), std::byte{0x33});
  w.qa.ring_doorbell();
  c.engine.run();

  for (uint64_t seq : {0u, 1u}) {
    const WqeEvent& land = rec.get(WqeEvent::kLanded, w.qa.index(), seq);
    CHECK((land.wqe->flags & sim::kWqeInline) != 0);
  }
  CHECK(std::all_of(w.dst.begin(), w.dst.begin() + 64, [](std::byte b) { return b == std::byte{0x11}; }));
  CHECK(std::all_of(w.dst.begin() + 64, w.dst.begin() + 112, [](std::byte b) { return b == std::byte{0x22}; }));
  CHECK(std::all_of(w.dst.begin() + 112, w.dst.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("inline payloads stay intact while the QP's inline store grows under them", "[nic]") {
  // 40 WRITEs under one doorbell: the QP's inline store grows from 1 slot to 64 and its
  // slots from 64 to 256 bytes (and the WQE ring from 8 to 64 entries) while earlier
  // snapshots are waiting in it.
  const NicConfig nic = quiet_nic();
  REQUIRE(nic.inline_max_bytes == 220);
  SimCluster c(2, nic);
  constexpr uint32_t kWrites = 40, kSlot = 256;
  WritePair w(c, kSlot, kWrites * kSlot);
  auto len_of = [](uint32_t i) { return 1 + (i * 37) % 220; };  // 1..220, sizes rising and falling
  auto byte_of = [](uint32_t i, uint32_t k) { return std::byte{static_cast<uint8_t>(i * 31 + k + 1)}; };
  for (uint32_t i = 0; i < kWrites; ++i) {
    for (uint32_t k = 0; k < kSlot; ++k) w.src[k] = byte_of(i, k);
    REQUIRE(w.qa.post_write(w.src.data(), len_of(i), w.smr.lkey, w.target(uint64_t{i} * kSlot), i,
                            i + 1 == kWrites) == PostResult::kOk);
  }
  std::fill(w.src.begin(), w.src.end(), std::byte{0xEE});
  w.qa.ring_doorbell();
  c.engine.run();
  REQUIRE(c.net().nic(1).n.writes_landed == kWrites);
  for (uint32_t i = 0; i < kWrites; ++i) {
    INFO("write " << i << " of " << len_of(i) << " bytes");
    bool posted_bytes = true;
    for (uint32_t k = 0; k < len_of(i); ++k) posted_bytes = posted_bytes && w.dst[i * kSlot + k] == byte_of(i, k);
    CHECK(posted_bytes);
    CHECK(w.dst[i * kSlot + len_of(i)] == std::byte{0});
  }
}

TEST_CASE("inline_max_bytes boundary: a WRITE of exactly the maximum is snapshotted at post and one byte more is gathered", "[nic]") {
  NicConfig nic = quiet_nic();
  nic.inline_max_bytes = 100;
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> a(101, std::byte{0x11}), b(101, std::byte{0x22}), dst(256, std::byte{0});
  const MemoryRegion amr = c.t[0]->register_memory(a.data(), a.size(), kAccessLocalWrite);
  const MemoryRegion bmr = c.t[0]->register_memory(b.data(), b.size(), kAccessLocalWrite);
  const MemoryRegion dmr = c.t[1]->register_memory(dst.data(), dst.size(), kAccessRemoteWrite);
  REQUIRE(qa.post_write(a.data(), 100, amr.lkey, SimCluster::remote(dmr), 1, false) == PostResult::kOk);
  REQUIRE(qa.post_write(b.data(), 101, bmr.lkey, SimCluster::remote(dmr, 128), 2, true) == PostResult::kOk);
  std::fill(a.begin(), a.end(), std::byte{0x33});
  std::fill(b.begin(), b.end(), std::byte{0x44});
  qa.ring_doorbell();
  c.engine.run();
  const WqeEvent& at_max = rec.get(WqeEvent::kLanded, qa.index(), 0);
  const WqeEvent& above = rec.get(WqeEvent::kLanded, qa.index(), 1);
  CHECK((at_max.wqe->flags & sim::kWqeInline) != 0);
  CHECK((above.wqe->flags & sim::kWqeInline) == 0);
  // The inline WRITE carries the bytes of its post.
  CHECK(std::all_of(dst.begin(), dst.begin() + 100, [](std::byte x) { return x == std::byte{0x11}; }));
  CHECK(dst[100] == std::byte{0});
  // The gathered WRITE reads its source when it lands, in this model (on hardware,
  // changing a gathered source before the completion is a race with the NIC's DMA read).
  CHECK(std::all_of(dst.begin() + 128, dst.begin() + 229, [](std::byte x) { return x == std::byte{0x44}; }));
  CHECK(dst[229] == std::byte{0});
}

TEST_CASE("an inline WRITE needs no translation of its source: only gathered WRITEs look up the MTT cache", "[nic]") {
  // The inline payload travels in the WQE, so the requester's NIC translates no source
  // address for it; the responder still translates the target address (rkey).
  NicConfig nic = quiet_nic();
  nic.mtt_cache.entries = 64;
  nic.mtt_cache.ways = 8;
  SimCluster c(2, nic);
  WritePair w(c, 512, 512, std::byte{1});
  REQUIRE(nic.inline_max_bytes < 300);
  REQUIRE(w.qa.post_write(w.src.data(), 100, w.smr.lkey, w.target(), 1, true) == PostResult::kOk);
  w.qa.ring_doorbell();
  c.engine.run();
  CHECK(c.net().nic(0).mtt_cache.hits() + c.net().nic(0).mtt_cache.misses() == 0);
  CHECK(c.net().nic(1).mtt_cache.misses() > 0);  // the target address: translated
  REQUIRE(w.qa.post_write(w.src.data(), 300, w.smr.lkey, w.target(), 2, true) == PostResult::kOk);
  w.qa.ring_doorbell();
  c.engine.run();
  CHECK(c.net().nic(0).mtt_cache.misses() > 0);  // a gathered source: translated
}

namespace {

// Gathered WRITEs of 221..1400 bytes at scattered offsets, from a 64 KiB source region
// on node 0 to a 64 KiB target region on node 1, through a small MTT cache (8 entries,
// 2 ways: it evicts); each region placed `shift` bytes past a page boundary of its
// allocation. Returns every WQE event's (kind, time) and both NICs' MTT hits and misses.
std::vector<uint64_t> mtt_run(size_t shift) {
  constexpr size_t kPage = 4096, kRegion = 16 * kPage;
  NicConfig nic = quiet_nic();
  nic.mtt_cache.entries = 8;
  nic.mtt_cache.ways = 2;
  nic.mtt_cache.page_bytes = kPage;
  SimCluster c(2, nic);
  WqeRecorder rec(c);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> src_mem(kRegion + 2 * kPage + shift), dst_mem(kRegion + 2 * kPage + shift);
  auto place = [&](std::vector<std::byte>& mem) {
    const uintptr_t at = reinterpret_cast<uintptr_t>(mem.data());
    return mem.data() + ((kPage - at % kPage) % kPage + shift);
  };
  std::byte* src = place(src_mem);
  std::byte* dst = place(dst_mem);
  const MemoryRegion smr = c.t[0]->register_memory(src, kRegion, kAccessLocalWrite);
  const MemoryRegion dmr = c.t[1]->register_memory(dst, kRegion, kAccessRemoteWrite);
  Rng rng(7);
  for (uint32_t round = 0; round < 40; ++round) {
    for (uint32_t k = 0; k < 8; ++k) {
      const uint32_t len = 221 + static_cast<uint32_t>(rng.below(1180));
      REQUIRE(qa.post_write(src + rng.below(kRegion - len), len, smr.lkey,
                            SimCluster::remote(dmr, rng.below(kRegion - len)), k, true) == PostResult::kOk);
    }
    qa.ring_doorbell();
    c.engine.run();
    while (c.t[0]->poll_send([](const SendCompletion& s) { REQUIRE(s.status == WcStatus::kSuccess); }, 64) > 0) {
    }
  }
  std::vector<uint64_t> out;
  for (const WqeEvent& e : rec.events) {
    out.push_back(e.kind);
    out.push_back(e.time);
  }
  for (uint32_t n = 0; n < 2; ++n) {
    out.push_back(c.net().nic(n).mtt_cache.hits());
    out.push_back(c.net().nic(n).mtt_cache.misses());
  }
  return out;
}

}  // namespace

TEST_CASE("MTT cache: hits, misses and times do not depend on where the registered buffers sit in host memory", "[nic]") {
  // Translations are tagged by the page within the key's region: the same program with
  // its buffers at other host addresses (here the region's offset from a page boundary;
  // between runs, ASLR) gives the same trace. Tagged by host page, both the set a
  // translation maps to and the number of pages a WRITE spans followed the layout.
  const std::vector<uint64_t> aligned = mtt_run(0);
  REQUIRE(aligned.size() == 2 * 2 * 320 + 4);  // landed and completed, per WRITE
  const uint64_t hits = aligned[aligned.size() - 4], misses = aligned[aligned.size() - 3];
  CHECK(hits > 0);
  CHECK(misses > 0);  // the cache evicts: the layout could matter
  CHECK(mtt_run(1000) == aligned);
  CHECK(mtt_run(3 * 4096 + 2040) == aligned);
}

TEST_CASE("MTT cache: a page index beyond the tag's field stops the run with an error naming the key", "[nic]") {
  // One-byte pages and a region of 2^41 bytes (registered, never touched): a source at
  // 2^40 bytes into it spans pages 2^40 to 2^40 + 299, which the tag cannot hold apart from the
  // key's bits. The target's key is wrong, so nothing would be read there.
  NicConfig nic = quiet_nic();
  nic.mtt_cache.entries = 8;
  nic.mtt_cache.ways = 2;
  nic.mtt_cache.page_bytes = 1;
  SimCluster c(2, nic);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> buf(64);
  const MemoryRegion huge = c.t[0]->register_memory(buf.data(), uint64_t{1} << 41, kAccessLocalWrite);
  const auto* far = reinterpret_cast<const std::byte*>(reinterpret_cast<uintptr_t>(buf.data()) + (uint64_t{1} << 40));
  REQUIRE(qa.post_write(far, 300, huge.lkey, RemoteBuffer{0x1000, huge.rkey + 100, 0, 300}, 1, true) ==
          PostResult::kOk);
  qa.ring_doorbell();
  CHECK_THROWS_WITH(c.engine.run(), Catch::Contains("nic.mtt_cache: key") && Catch::Contains("page 1099511628075"));
}

TEST_CASE("inline payloads stay intact when the inline store grows after the completion cursor has moved on", "[nic]") {
  // Rounds of WRITEs, each run to completion: the completion cursor is past 0 and not a
  // multiple of the store's slots when a later round grows the store (more WRITEs in
  // flight, longer payloads), so the live copies move from wrapped slots.
  const NicConfig nic = quiet_nic();
  REQUIRE(nic.inline_max_bytes == 220);
  SimCluster c(2, nic);
  auto [qa, qb] = c.connected_pair();
  constexpr uint32_t kSlot = 256;
  const uint32_t rounds[] = {3, 5, 2, 11, 7, 30};  // WRITEs per doorbell
  uint32_t total = 0;
  for (uint32_t n : rounds) total += n;
  std::vector<std::byte> src(kSlot), dst(total * kSlot, std::byte{0});
  const MemoryRegion smr = c.t[0]->register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion dmr = c.t[1]->register_memory(dst.data(), dst.size(), kAccessRemoteWrite);
  auto len_of = [](uint32_t i) { return i < 10 ? 8 + i : 1 + (i * 53) % 220; };  // short first, then up to 220
  auto byte_of = [](uint32_t i, uint32_t k) { return std::byte{static_cast<uint8_t>(i * 29 + k + 7)}; };
  uint32_t i = 0;
  for (uint32_t n : rounds) {
    for (uint32_t k = 0; k < n; ++k, ++i) {
      for (uint32_t b = 0; b < kSlot; ++b) src[b] = byte_of(i, b);
      REQUIRE(qa.post_write(src.data(), len_of(i), smr.lkey, SimCluster::remote(dmr, uint64_t{i} * kSlot), i,
                            k + 1 == n) == PostResult::kOk);
    }
    std::fill(src.begin(), src.end(), std::byte{0xEE});
    qa.ring_doorbell();
    c.engine.run();
    while (c.t[0]->poll_send([](const SendCompletion& s) { REQUIRE(s.status == WcStatus::kSuccess); }, 64) > 0) {
    }
  }
  REQUIRE(c.net().nic(1).n.writes_landed == total);
  for (uint32_t w = 0; w < total; ++w) {
    INFO("write " << w << " of " << len_of(w) << " bytes");
    bool posted_bytes = true;
    for (uint32_t k = 0; k < len_of(w); ++k) posted_bytes = posted_bytes && dst[w * kSlot + k] == byte_of(w, k);
    CHECK(posted_bytes);
    CHECK(dst[w * kSlot + len_of(w)] == std::byte{0});
  }
}

// ---- packet loss, retransmission and duplicate detection (sim/nic_model.hpp, "Faults")

namespace {

// Loses packets node `from` sends to node `to` (requests, or ACKs and READ responses):
// the first `lose` of them (~0u: every one), with the given RC retransmission parameters.
struct LossPlan {
  uint32_t from = 0, to = 1;
  uint32_t lose = ~0u;
  sim::Retransmission rt{sim::ack_timeout_ns(1), 7};
  uint32_t seen = 0;  // packets on the link so far
  static bool hook(void* ctx, uint32_t from, uint32_t to, Time, sim::Retransmission& rt) {
    auto& p = *static_cast<LossPlan*>(ctx);
    if (from != p.from || to != p.to) return false;
    rt = p.rt;
    return p.seen++ < p.lose;
  }
};

std::vector<WqeEvent> events_of(const WqeRecorder& rec, WqeEvent::Kind k) {
  std::vector<WqeEvent> out;
  for (const auto& e : rec.events)
    if (e.kind == k) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE("a request lost every time is resent exactly retry_cnt times, one ACK timeout apart, then fails", "[nic][faults]") {
  const Time timeout = sim::ack_timeout_ns(1);  // 8192 ns
  for (const uint32_t retry_cnt : {0u, 1u, 3u, 7u}) {
    CAPTURE(retry_cnt);
    SimCluster c(2, quiet_nic());
    WqeRecorder rec(c);
    LossPlan loss;
    loss.rt.retry_cnt = retry_cnt;
    c.net().enable_connection_faults(&LossPlan::hook, &loss);
    WritePair w(c, 64, 64, std::byte{7});
    REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(), 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    const auto& n = c.net().nic(0).n;
    CHECK(n.packets_lost == retry_cnt + 1);  // the first transmission and every resend
    CHECK(n.retransmissions == retry_cnt);
    CHECK(n.retry_exceeded == 1);
    CHECK(c.net().nic(1).n.writes_landed == 0);
    const std::vector<WqeEvent> lost = events_of(rec, WqeEvent::kLost);
    REQUIRE(lost.size() == retry_cnt + 1);
    for (size_t i = 1; i < lost.size(); ++i) CHECK(lost[i].time - lost[i - 1].time == lost[1].time - lost[0].time);
    if (lost.size() > 1) {
      CHECK(lost[1].time - lost[0].time >= timeout);  // resent when the timer expires, on the port at once
      CHECK(lost[1].time - lost[0].time <= timeout + 20);
    }
    // The last timer expires without an ACK: RETRY_EXC_ERR then, and the connection fails.
    const WqeEvent& done = rec.get(WqeEvent::kCompleted, w.qa.index(), 0);
    CHECK(done.status == WcStatus::kRetryExceeded);
    CHECK(done.time == lost.back().time + timeout);
    CHECK(n.connection_failures == 1);
  }
}

TEST_CASE("a request lost fewer times than retry_cnt lands once after that many timeouts", "[nic][faults]") {
  const Time timeout = sim::ack_timeout_ns(2);
  for (const uint32_t lose : {1u, 3u}) {
    CAPTURE(lose);
    SimCluster c(2, quiet_nic());
    WqeRecorder rec(c);
    LossPlan loss;
    loss.lose = lose;
    loss.rt = sim::Retransmission{timeout, 3};
    c.net().enable_connection_faults(&LossPlan::hook, &loss);
    WritePair w(c, 64, 64, std::byte{7});
    REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(), 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    CHECK(c.net().nic(0).n.retransmissions == lose);
    CHECK(c.net().nic(0).n.retry_exceeded == 0);
    CHECK(c.net().nic(1).n.writes_landed == 1);
    const std::vector<WqeEvent> lost = events_of(rec, WqeEvent::kLost);
    REQUIRE(lost.size() == lose);
    const WqeEvent& land = rec.get(WqeEvent::kLanded, w.qa.index(), 0);
    // The last resend leaves one timeout after the last loss and flies the clean path.
    CHECK(land.time > lost.back().time + timeout);
    CHECK(rec.get(WqeEvent::kCompleted, w.qa.index(), 0).status == WcStatus::kSuccess);
  }
}

TEST_CASE("a lost ACK: the requester resends an executed WRITE+IMM, the responder detects the duplicate", "[nic][faults]") {
  const Time timeout = sim::ack_timeout_ns(1);
  for (const bool detection : {true, false}) {
    CAPTURE(detection);
    SimCluster c(2, quiet_nic());
    WqeRecorder rec(c);
    LossPlan loss;  // the first packet node 1 sends back to node 0: the ACK
    loss.from = 1;
    loss.to = 0;
    loss.lose = 1;
    c.net().enable_connection_faults(&LossPlan::hook, &loss);
    c.net().set_duplicate_detection(detection);
    WritePair w(c, 64, 64, std::byte{7});
    c.t[1]->post_receives(4);
    REQUIRE(w.qa.post_write_imm(w.src.data(), 32, w.smr.lkey, w.target(), 0xAB, 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    const auto& req = c.net().nic(0).n;
    const auto& resp = c.net().nic(1).n;
    CHECK(resp.acks_lost == 1);
    CHECK(req.packets_lost == 0);
    CHECK(req.retransmissions == 1);
    CHECK(resp.duplicates == 1);
    const std::vector<WqeEvent> landed = events_of(rec, WqeEvent::kLanded);
    std::vector<RecvCompletion> rc;
    c.t[1]->poll_recv([&](const RecvCompletion& r) { rc.push_back(r); }, 8);
    if (detection) {
      // Executed once: one landing, one receive completion; the duplicate is only ACKed.
      CHECK(resp.duplicates_executed == 0);
      CHECK(resp.writes_landed == 1);
      CHECK(landed.size() == 1);
      CHECK(rc.size() == 1);
      CHECK(c.t[1]->srq_posted() == 3);
    } else {
      // The planted bug: executed twice, the receiver sees the message twice.
      CHECK(resp.duplicates_executed == 1);
      CHECK(resp.writes_landed == 2);
      CHECK(landed.size() == 2);
      REQUIRE(rc.size() == 2);
      CHECK(rc[1].imm == 0xAB);
      CHECK(c.t[1]->srq_posted() == 2);
    }
    rec.get(WqeEvent::kAckLost, w.qa.index(), 0);  // the ACK was lost
    const WqeEvent& dup = rec.get(WqeEvent::kDuplicate, w.qa.index(), 0);
    const WqeEvent& done = rec.get(WqeEvent::kCompleted, w.qa.index(), 0);
    CHECK(done.status == WcStatus::kSuccess);
    // The timer started when the request left: the duplicate arrives one timeout plus
    // one wire latency after it (the first landing was one wire latency and the
    // responder's processing after it).
    CHECK(dup.time > landed[0].time + timeout - 2000);
    CHECK(done.time > dup.time);
    std::vector<SendCompletion> sc;
    c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kSuccess);
  }
}

TEST_CASE("ACKs lost every time: resent retry_cnt times, each a detected duplicate, then RETRY_EXC_ERR", "[nic][faults]") {
  for (const uint32_t retry_cnt : {0u, 2u, 7u}) {
    CAPTURE(retry_cnt);
    SimCluster c(2, quiet_nic());
    WqeRecorder rec(c);
    LossPlan loss;
    loss.from = 1;
    loss.to = 0;
    loss.rt.retry_cnt = retry_cnt;
    c.net().enable_connection_faults(&LossPlan::hook, &loss);
    WritePair w(c, 64, 64);
    REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(), 1, false) == PostResult::kOk);  // unsignaled
    w.qa.ring_doorbell();
    c.engine.run();
    CHECK(c.net().nic(1).n.writes_landed == 1);
    CHECK(c.net().nic(1).n.acks_lost == retry_cnt + 1);
    CHECK(c.net().nic(1).n.duplicates == retry_cnt);
    CHECK(c.net().nic(0).n.retransmissions == retry_cnt);
    CHECK(c.net().nic(0).n.retry_exceeded == 1);
    const WqeEvent& done = rec.get(WqeEvent::kCompleted, w.qa.index(), 0);
    CHECK(done.status == WcStatus::kRetryExceeded);
  }
}

TEST_CASE("a lost ACK holds the QP's later completions: they come in order after the resend", "[nic][faults]") {
  SimCluster c(2, quiet_nic());
  WqeRecorder rec(c);
  LossPlan loss;
  loss.from = 1;
  loss.to = 0;
  loss.lose = 1;  // the first WRITE's ACK
  c.net().enable_connection_faults(&LossPlan::hook, &loss);
  WritePair w(c, 64, 64);
  REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(), 1, false) == PostResult::kOk);
  REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(8), 2, true) == PostResult::kOk);
  w.qa.ring_doorbell();
  c.engine.run();
  const WqeEvent& first = rec.get(WqeEvent::kCompleted, w.qa.index(), 0);
  const WqeEvent& second = rec.get(WqeEvent::kCompleted, w.qa.index(), 1);
  CHECK(first.time <= second.time);
  CHECK(second.time > sim::ack_timeout_ns(1));  // waited for the first one's resend
  std::vector<SendCompletion> sc;
  c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 2);
  CHECK(sc[0].status == WcStatus::kSuccess);
}

TEST_CASE("a lost READ response: the READ is resent and read again, the data as of the second read", "[nic][faults]") {
  SimCluster c(2, quiet_nic());
  LossPlan loss;
  loss.from = 1;
  loss.to = 0;
  loss.lose = 1;
  c.net().enable_connection_faults(&LossPlan::hook, &loss);
  auto [qa, qb] = c.connected_pair();
  std::vector<std::byte> remote(256, std::byte{1}), local(256, std::byte{0});
  const MemoryRegion lmr = c.t[0]->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = c.t[1]->register_memory(remote.data(), remote.size(), kAccessRemoteRead);
  REQUIRE(qa.post_read(local.data(), 128, lmr.lkey, SimCluster::remote(rmr), 9, true) == PostResult::kOk);
  qa.ring_doorbell();
  c.engine.run_until(5000);  // the first response is lost by now
  CHECK(c.net().nic(1).n.acks_lost == 1);
  std::fill(remote.begin(), remote.end(), std::byte{2});  // changed before the second read
  c.engine.run();
  CHECK(c.net().nic(1).n.reads_served == 2);
  CHECK(c.net().nic(1).n.duplicates == 1);
  CHECK(c.net().nic(0).n.retransmissions == 1);
  CHECK(local[0] == std::byte{2});
  CHECK(local[127] == std::byte{2});
  CHECK(local[128] == std::byte{0});
  std::vector<SendCompletion> sc;
  c.t[0]->poll_send([&](const SendCompletion& s) { sc.push_back(s); }, 8);
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(c.engine.now() > sim::ack_timeout_ns(1));
}

TEST_CASE("a gathered WRITE waits for its payload's DMA read, an inline one does not", "[nic]") {
  // One 64-byte WRITE posted alone (BlueFlame: no WQE fetch), inline and gathered: the
  // gathered one lands a PCIe read (latency + 64 bytes and one TLP header at PCIe
  // bandwidth) later.
  auto land_time = [](uint32_t inline_max) {
    NicConfig nic = quiet_nic();
    nic.inline_max_bytes = inline_max;
    SimCluster c(2, nic);
    WqeRecorder rec(c);
    WritePair w(c, 64, 64);
    REQUIRE(w.qa.post_write(w.src.data(), 64, w.smr.lkey, w.target(), 1, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    const WqeEvent& land = rec.get(WqeEvent::kLanded, w.qa.index(), 0);
    CHECK(c.net().nic(0).n.fetches == 0);
    return land.time;
  };
  const NicConfig nic = quiet_nic();
  const Time inline_land = land_time(64);
  const Time gathered_land = land_time(63);
  const double read = nic.pcie.read_latency_ns + (64.0 + nic.pcie.tlp_overhead_bytes) * 8 / nic.pcie.bandwidth_gbps;
  CHECK(static_cast<double>(gathered_land - inline_land) >= read - 1);
  CHECK(static_cast<double>(gathered_land - inline_land) <= read + 1);
}

TEST_CASE("a READ waits for one DMA read at the responder and one DMA write of its data and CQE at the requester", "[nic]") {
  // One 64-byte READ posted alone (BlueFlame: no WQE fetch). The responder reads the data
  // from its host memory by DMA before the response leaves, and the requester writes
  // the data and the CQE to its host in one DMA write: so the completion moves by exactly
  // what either PCIe latency moves (a read skipped or done twice, or the write, would not).
  auto done_time = [](double read_latency_ns, double write_latency_ns) {
    NicConfig nic = quiet_nic();
    nic.pcie.read_latency_ns = read_latency_ns;
    nic.pcie.write_latency_ns = write_latency_ns;
    SimCluster c(2, nic);
    WqeRecorder rec(c);
    auto [qa, qb] = c.connected_pair();
    std::vector<std::byte> remote(64, std::byte{5}), local(64, std::byte{0});
    const MemoryRegion lmr = c.t[0]->register_memory(local.data(), local.size(), kAccessLocalWrite);
    const MemoryRegion rmr = c.t[1]->register_memory(remote.data(), remote.size(), kAccessRemoteRead);
    REQUIRE(qa.post_read(local.data(), 64, lmr.lkey, SimCluster::remote(rmr), 9, true) == PostResult::kOk);
    qa.ring_doorbell();
    c.engine.run();
    CHECK(c.net().nic(0).n.fetches == 0);
    CHECK(local[63] == std::byte{5});
    const WqeEvent& done = rec.get(WqeEvent::kCompleted, qa.index(), 0);
    CHECK(done.status == WcStatus::kSuccess);
    return static_cast<double>(done.time);
  };
  const double base = done_time(500, 250);
  CHECK(done_time(1500, 250) - base >= 1000 - 1);
  CHECK(done_time(1500, 250) - base <= 1000 + 1);
  CHECK(done_time(500, 1250) - base >= 1000 - 1);
  CHECK(done_time(500, 1250) - base <= 1000 + 1);
}

TEST_CASE("WQEs published by one doorbell beyond BlueFlame wait for their fetch DMA read", "[nic]") {
  // Two WRITEs in one doorbell: no BlueFlame (blueflame_max_wqes 1), both fetched in one
  // DMA read of 2 x 64 bytes before the send engine.
  auto land_time = [](uint32_t posts) {
    SimCluster c(2, quiet_nic());
    WqeRecorder rec(c);
    WritePair w(c, 64, 64);
    for (uint32_t i = 0; i < posts; ++i)
      REQUIRE(w.qa.post_write(w.src.data(), 8, w.smr.lkey, w.target(8 * i), i, true) == PostResult::kOk);
    w.qa.ring_doorbell();
    c.engine.run();
    CHECK(c.net().nic(0).n.fetches == (posts > 1 ? 1u : 0u));
    return rec.get(WqeEvent::kLanded, w.qa.index(), 0).time;
  };
  const NicConfig nic = quiet_nic();
  const double fetch = nic.pcie.read_latency_ns + (128.0 + nic.pcie.tlp_overhead_bytes) * 8 / nic.pcie.bandwidth_gbps;
  const Time one = land_time(1), two = land_time(2);
  CHECK(static_cast<double>(two - one) >= fetch - 1);
  CHECK(static_cast<double>(two - one) <= fetch + 1);
}
