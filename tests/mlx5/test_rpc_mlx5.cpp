// The rpc benchmark's driver (backends/rpc/rpc_bench.hpp) over the direct mlx5 data path
// and the software NIC emulator: every call answered exactly once, round trips recorded,
// the queue depth respected on every endpoint, and the stop handshake that ends a real
// run across processes.
#include <catch2/catch.hpp>

#include "backends/rpc/rpc_bench.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;

TEST_CASE("rpc driver over the mlx5 data path: calls, queue depth and the stop handshake", "[rpc][mlx5]") {
  const uint32_t qd = GENERATE(1u, 8u);
  const uint32_t endpoints = GENERATE(1u, 3u);
  CAPTURE(qd, endpoints);
  DirectOptions dp;
  dp.sq_depth = 128;
  dp.srq_size = 64;
  dp.send_cq_entries = 2048;  // one CQE per block: 128 WQEs of 4 blocks per QP
  emu::Fabric fabric;
  emu::EmulatedTransport ta(fabric, {}, dp, emu::DeliveryMode::kEager), tb(fabric, {}, dp, emu::DeliveryMode::kEager);
  copyrpc::ContextConfig cc;
  cc.ring_size = 1 << 14;
  cc.srq_size = 64;
  const rpc::RpcConfig rc{endpoints, qd, 48};
  rpc::RpcThread<emu::EmulatedTransport> caller(ta, cc, rc, true), server(tb, cc, rc, false);
  for (uint32_t e = 0; e < endpoints; ++e) {
    const uint32_t a = caller.create_endpoint(), b = server.create_endpoint();
    caller.context().connect(a, server.context().local_info(b));
    server.context().connect(b, caller.context().local_info(a));
  }
  const uint64_t target = 2000;
  for (int i = 0; i < 100000 && caller.counters().completed.load() < target; ++i) {
    caller.step();
    CHECK(caller.in_flight() <= uint64_t{endpoints} * qd);
    server.step();
  }
  caller.stop_issuing();
  for (int i = 0; i < 1000 && caller.in_flight() > 0; ++i) {
    server.step();
    caller.step();
  }
  REQUIRE(caller.in_flight() == 0);
  const uint64_t done = caller.counters().completed.load();
  CHECK(done >= target);
  CHECK(caller.counters().issued.load() == done);
  CHECK(server.counters().completed.load() == done);  // the server answered each call once
  CHECK(caller.counters().errors.load() == 0);
  CHECK(server.counters().errors.load() == 0);
  CHECK(caller.rtt().count() == done);

  CHECK_FALSE(server.stopped());
  caller.request_stop(0);
  for (int i = 0; i < 1000 && caller.stops_acked() == 0; ++i) {
    caller.step();
    server.step();
  }
  CHECK(server.stopped());
  CHECK(caller.stops_acked() == 1);
  CHECK(caller.counters().completed.load() == done);  // the stop is not a measured call
}

TEST_CASE("rpc driver: a message larger than the ring allows is refused at construction", "[rpc][mlx5]") {
  DirectOptions dp;
  dp.sq_depth = 128;
  dp.srq_size = 64;
  dp.send_cq_entries = 2048;  // one CQE per block: 128 WQEs of 4 blocks per QP
  emu::Fabric fabric;
  emu::EmulatedTransport t(fabric, {}, dp, emu::DeliveryMode::kEager);  // left untouched by a refusal
  copyrpc::ContextConfig cc;
  cc.ring_size = 1 << 12;
  cc.srq_size = 64;
  CHECK_THROWS_WITH((rpc::RpcThread<emu::EmulatedTransport>(t, cc, rpc::RpcConfig{1, 1, 4096}, true)),
                    Catch::Contains("exceeds the largest copyrpc payload"));
  CHECK_THROWS_WITH((rpc::RpcThread<emu::EmulatedTransport>(t, cc, rpc::RpcConfig{0, 1, 32}, true)),
                    Catch::Contains("endpoints and queue depth"));
}
