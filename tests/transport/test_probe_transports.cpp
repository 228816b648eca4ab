// The probe (backends/probe/probe.hpp) over the real transports' code in one process: the
// mlx5 direct data path against the NIC emulator, and UCX over shared memory. Their
// numbers are not hardware numbers; what is checked is that every test of the plan runs
// to its end, every WRITE+IMM posted reaches the target exactly once, every ping is
// answered, and the measured quantities are there.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "backends/probe/probe.hpp"

#ifdef BKV_TEST_PROBE_EMULATOR
#include "transports/mlx5/emulator/emulated_transport.hpp"
#endif
#ifdef BKV_TEST_PROBE_UCX
#include "transports/ucx/ucx_transport.hpp"
#endif

using namespace bkv;

namespace {

// A short plan of every kind: rate over 1 and 8 QPs, a batched rate, the latencies.
std::vector<probe::TestSpec> short_plan() {
  using probe::TestKind;
  return {{TestKind::kRate, 1, 1, 64, 64, 512},        {TestKind::kRate, 8, 1, 64, 128, 1024},
          {TestKind::kRate, 8, 4, 64, 128, 1024},      {TestKind::kWriteLatency, 1, 1, 8, 5, 40},
          {TestKind::kWriteLatency, 1, 1, 4096, 5, 40}, {TestKind::kReadLatency, 1, 1, 64, 5, 40}};
}

template <Transport T>
void probe_and_check(T& a, T& b) {
  probe::Initiator<T> init(a, 8, 4096);
  probe::Target<T> target(b, 8, 4096);
  probe::connect(init, target);
  init.set_plan(short_plan());
  probe::run_in_one_thread(init, target, 5'000'000);
  REQUIRE(init.done());
  const auto& res = init.results();
  REQUIRE(res.size() == 6);
  uint64_t writes = 0, pings = 0;
  for (const probe::TestResult& r : res) {
    CAPTURE(probe::to_string(r.spec.kind), r.spec.qps, r.spec.batch, r.spec.size);
    if (r.spec.kind == probe::TestKind::kRate) {
      CHECK(r.wqes >= r.spec.iters);
      CHECK(r.window_ns > 0);
      CHECK(r.rate_wqe_per_s() > 0);
      CHECK(r.loops > 0);
      CHECK(r.busy_fraction() > 0);
      CHECK(r.busy_fraction() <= 1.0);
      CHECK(r.post.n > 0);
      CHECK(r.poll.n > 0);
      writes += uint64_t{r.spec.warmup} + r.spec.iters + probe::rate_tail(r.spec);
    } else {
      CHECK(r.latency_ns.size() == r.spec.iters);
      if (r.spec.kind == probe::TestKind::kWriteLatency) pings += uint64_t{r.spec.warmup} + r.spec.iters;
    }
  }
  // Every WRITE+IMM reached the target exactly once, and each ping got its pong.
  CHECK(target.received() == writes + pings);
  CHECK(target.pongs() == pings);
}

}  // namespace

#ifdef BKV_TEST_PROBE_EMULATOR
TEST_CASE("probe over the mlx5 data path and the NIC emulator", "[probe][mlx5]") {
  mlx5::DirectOptions dp;
  dp.sq_depth = 256;
  mlx5::emu::Fabric fabric;
  mlx5::emu::EmulatedTransport a(fabric, {}, dp), b(fabric, {}, dp);
  probe_and_check(a, b);
  // A plan the initiator cannot run is refused before anything is posted.
  mlx5::emu::EmulatedTransport c(fabric, {}, dp);
  probe::Initiator<mlx5::emu::EmulatedTransport> init(c, 2, 64);
  using probe::TestKind;
  CHECK_THROWS_WITH(init.set_plan({{TestKind::kRate, 3, 1, 64, 0, 64}}), Catch::Contains("more queue pairs"));
  CHECK_THROWS_WITH(init.set_plan({{TestKind::kRate, 1, 3, 64, 0, 64}}), Catch::Contains("batch must divide"));
  CHECK_THROWS_WITH(init.set_plan({{TestKind::kReadLatency, 1, 1, 128, 0, 4}}), Catch::Contains("size out of range"));
  // A test of several posting threads runs as one share per thread, never on one Initiator.
  CHECK_THROWS_WITH(init.set_plan({{TestKind::kRate, 2, 1, 64, 0, 64, 2}}), Catch::Contains("several posting threads"));
}
#endif

#ifdef BKV_TEST_PROBE_UCX
TEST_CASE("probe over UCX shared memory", "[probe][ucx]") {
  ucx::Config c;
  c.tls = "sm,self";
  c.send_queue_depth = 256;
  ucx::UcxTransport a(c), b(c);
  probe_and_check(a, b);
}
#endif

TEST_CASE("probe: the least-squares line of the CPU costs", "[probe]") {
  probe::Line l;
  l.add(1, 10);
  CHECK_FALSE(l.determined());
  l.add(3, 30);
  CHECK(l.determined());
  CHECK(l.slope() == Approx(10));
  CHECK(l.intercept() == Approx(0).margin(1e-9));
}
