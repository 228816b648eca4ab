// copyrpc end to end over the real direct mlx5 data path (DirectTransport) and the
// software NIC emulator, driven by the copyrpc property driver (tests/copyrpc): every
// call answered exactly once, the credit invariant after every operation, ring wraps;
// over several NIC configurations (BlueFlame or doorbell only, inline or gather,
// compressed CQEs, 128-byte CQEs with scatter-to-CQE, completions delivered at once or
// piled up across many doorbells).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "core/random.hpp"
#include "tests/copyrpc/property_driver.hpp"
#include "tests/mlx5/emulated_pair.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;

namespace {

// Each transport: EmulatedTransport(fabric, NodeOptions, DirectOptions, DeliveryMode).
using Mlx5Cluster = test::ContextCluster<emu::Fabric, emu::EmulatedTransport>;

uint64_t seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("BKV_SEED");
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

struct Variant {
  const char* name;
  emu::NodeOptions nic;
  DirectOptions dp;
  emu::DeliveryMode mode;
  uint32_t pump_one_in;  // manual mode: the NIC runs at one pump call in this many
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  DirectOptions base;
  base.sq_depth = 128;  // copyrpc signals one WQE in 64: two intervals
  base.srq_size = 64;
  base.send_cq_entries = 2048;  // one CQE per block: 128 WQEs of 4 blocks per QP
  {
    Variant x{"eager, BlueFlame, inline up to 220", {}, base, emu::DeliveryMode::kEager, 1};
    v.push_back(x);
  }
  {
    Variant x{"lazy NIC, compressed CQEs on both CQs", {}, base, emu::DeliveryMode::kLazy, 1};
    x.nic.compress_recv = x.nic.compress_send = true;
    x.nic.max_session = 16;
    v.push_back(x);
  }
  {
    Variant x{"NIC runs one pump in 3, 128-byte CQEs, scatter-to-CQE, compressed", {}, base,
              emu::DeliveryMode::kManual, 3};
    x.nic.cqe_size = 128;
    x.nic.scatter_to_cqe = true;
    x.nic.compress_recv = x.nic.compress_send = true;
    x.nic.max_session = 64;
    v.push_back(x);
  }
  {
    Variant x{"doorbell only, no inline (gather entries only), no BlueFlame on the NIC", {}, base,
              emu::DeliveryMode::kManual, 2};
    test::doorbell_only_no_inline(x.nic, x.dp);
    v.push_back(x);
  }
  return v;
}

}  // namespace

static_assert(Transport<emu::EmulatedTransport>);

TEST_CASE("copyrpc over the direct mlx5 data path and the NIC emulator: exactly-once, credits, wraps",
          "[copyrpc][mlx5][property]") {
  const uint64_t seed = seed_from_env(GENERATE(1u, 2u));
  for (const Variant& var : variants()) {
    INFO("variant: " << var.name << "; seed=" << seed << " (rerun with BKV_SEED=" << seed << ")");
    copyrpc::ContextConfig cfg;
    cfg.ring_size = 4096;  // small rings: wraps every few dozen messages
    cfg.srq_size = 64;
    Mlx5Cluster cluster(3, cfg, var.nic, var.dp, var.mode);
    Rng pump_rng(seed ^ 0xABCD);
    auto pump = [&] {
      if (var.mode == emu::DeliveryMode::kManual && pump_rng.below(var.pump_one_in) == 0) cluster.fabric.deliver();
    };
    test::PropertyDriver<emu::EmulatedTransport> driver(cluster.ctx_ptrs(), cluster.links, seed, pump);
    const test::PropertyStats st = driver.run(20000);
    CHECK(st.calls > 2000);
    CHECK(st.responses == st.calls);
    CHECK(st.replies == st.calls);
    CHECK(st.wraps > 50);
    const emu::Stats& nic = cluster.fabric.stats();
    CHECK(nic.cq_passes > 10);  // receive CQs of 64 entries wrapped many times
    CHECK(nic.error_cqes == 0);
    if (var.nic.compress_recv) CHECK(nic.sessions > 0);
    if (var.dp.doorbell == DoorbellMode::kDoorbellOnly) CHECK(nic.bf_copies == 0);
    else CHECK(nic.bf_copies > 0);
    if (var.dp.max_inline == 0) CHECK(nic.inline_bytes == 0);
    WARN(var.name << ": calls " << st.calls << ", wraps " << st.wraps << ", reads " << st.reads_posted
                           << ", NIC: doorbells " << nic.doorbells << " (BlueFlame copies " << nic.bf_copies
                           << "), WQEs " << nic.wqes << ", NOPs " << nic.nops << ", CQEs " << nic.cqes
                           << ", sessions " << nic.sessions << ", scattered " << nic.scattered << ", RNR waits "
                           << nic.rnr_waits);
  }
}

TEST_CASE("copyrpc's SRQ refill takes what the transport accepts: a compressed session split by the drain budget",
          "[copyrpc][mlx5]") {
  // SRQ 16 (copyrpc's srq_size = the transport's capacity, receive CQ 16), 16 batches of
  // one call each with one immediate: one compressed session of 16 on B's receive CQ.
  // A drain of 8 leaves copyrpc's own count at 8 (< 2/3 of 16), but the transport keeps
  // the session's CQ entries until it is read to its end, so it accepts no receive yet:
  // a refill by copyrpc's count alone would be refused (or, counted as the NIC cannot
  // absorb it, overrun the CQ with the next 8 WRITE_IMMs).
  emu::NodeOptions nic;
  nic.compress_recv = true;
  nic.max_session = 16;
  DirectOptions dp;
  dp.sq_depth = 128;
  dp.srq_size = 16;
  dp.send_cq_entries = 2048;
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 8192;  // response credit for 32 calls of an empty reply
  cfg.srq_size = 16;
  Mlx5Cluster cluster(2, cfg, nic, dp, emu::DeliveryMode::kManual);
  auto& a = *cluster.ctxs[0];
  auto& b = *cluster.ctxs[1];
  emu::EmulatedTransport& tb = *cluster.transports[1];
  const uint32_t ea = cluster.links[0][0].ep;
  const std::vector<std::byte> payload(8, std::byte{1});
  uint64_t token = 0;
  auto calls = [&](uint32_t k) {
    for (uint32_t i = 0; i < k; ++i) {
      REQUIRE(a.call(ea, payload, 0, token++).status == copyrpc::CallStatus::kOk);
      a.flush();  // one WRITE_IMM each
    }
  };
  auto no_response = [](uint64_t, std::span<const std::byte>) { FAIL("no response expected"); };
  auto no_failed_call = [](uint64_t, copyrpc::EndpointError) { FAIL("no call may fail"); };
  calls(16);
  cluster.fabric.deliver();
  REQUIRE(cluster.fabric.stats().sessions == 1);
  REQUIRE_NOTHROW(b.drain(no_response, no_failed_call, 8));  // half the session
  CHECK(tb.srq_posted() == 16);  // nothing reposted: the session holds its entries
  calls(8);
  REQUIRE_NOTHROW(cluster.fabric.deliver());  // the 8 wait for receives (RNR)
  CHECK(b.drain(no_response, no_failed_call) == 8);  // the session's end; the refill follows it
  CHECK(tb.srq_posted() == 16);
  REQUIRE_NOTHROW(cluster.fabric.deliver());
  CHECK(b.drain(no_response, no_failed_call) == 8);
  copyrpc::RecvHandle h;
  uint32_t requests = 0;
  while (b.recv(h)) {
    ++requests;
    REQUIRE(b.reply(std::move(h), {}) == copyrpc::CallStatus::kOk);
  }
  CHECK(requests == 24);
  b.flush();
  cluster.fabric.deliver();
  uint32_t responses = 0;
  a.drain([&](uint64_t, std::span<const std::byte>) { ++responses; }, no_failed_call);
  CHECK(responses == 24);
}
