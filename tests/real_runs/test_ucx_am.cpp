// backends/ucx_am in one process: two nodes measured by the real runtime on threads
// (every request answered, per-rank totals), and a stranger's malformed active messages
// dropped and counted (never an out-of-range slot, never a reply to a client that does
// not exist).
#include <catch2/catch.hpp>

#include <ucp/api/ucp.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/benchkv/real/driver.hpp"
#include "backends/ucx_am/ucx_am.hpp"
#include "tests/transport/raw_ucp_worker.hpp"

using namespace bkv;

namespace {

const ucx_am::Config kTls{"sm,self"};

backend::NodeConfig node_config(uint32_t rank, uint32_t np, uint32_t d, uint32_t c, uint32_t qd) {
  return backend::NodeConfig{rank, np, d, c, qd, 64, 1024};
}

kv::WorkloadConfig workload(uint32_t np) {
  kv::WorkloadConfig wl;
  wl.num_ranks = np;
  wl.key_range = 64;
  wl.pattern_len = 128;
  wl.seed = 3;
  return wl;
}

// A UCP worker that belongs to no node: it sends raw active messages.
class Stranger : public test::RawUcpWorker {
 public:
  Stranger() : RawUcpWorker("sm,self") {}
  ucp_ep_h connect(const ucx_am::WorkerAddress& a) { return RawUcpWorker::connect(a.bytes, UCP_ERR_HANDLING_MODE_NONE); }
  // Sends one AM and progresses (with `pump` driving the receiver) until it left, then
  // lets the receiver run its handler.
  template <class Pump>
  void send(ucp_ep_h ep, uint32_t id, const void* data, size_t len, Pump&& pump) {
    RawUcpWorker::send(ep, id, nullptr, 0, data, len, pump);
    settle(pump);
  }
};

}  // namespace

TEST_CASE("ucx-am: two nodes in one process on threads, every request answered", "[real-run][ucx-am]") {
  const uint32_t np = 2, D = 2, C = 2;
  std::vector<std::unique_ptr<ucx_am::UcxAmNode>> nodes;
  std::vector<ucx_am::WorkerAddress> all;
  for (uint32_t r = 0; r < np; ++r) {
    nodes.push_back(std::make_unique<ucx_am::UcxAmNode>(node_config(r, np, D, C, 4), workload(np), kTls));
    const auto a = nodes.back()->local_addresses();
    REQUIRE(a.size() == D + C);
    all.insert(all.end(), a.begin(), a.end());
  }
  for (auto& n : nodes) n->connect(all);
  std::vector<real::Driver<ucx_am::UcxAmNode>::Local> locals;
  for (uint32_t r = 0; r < np; ++r) {
    runtime::PinPlan pins;
    pins.daemon_cpus.assign(D, -1);
    pins.client_cpus.assign(C, -1);
    locals.push_back({nodes[r].get(), r, pins});
  }
  app::Options o;
  o.backend = app::BackendKind::kUcxAm;
  o.transport = app::TransportKind::kUcx;
  o.np = np;
  o.server_threads = D;
  o.client_threads = C;
  o.duration = 0.1;
  o.interval_ms = 20;
  o.trim = 1;
  o.runs = 1;
  o.progress = false;
  real::RealResult res;
  {
    real::Driver<ucx_am::UcxAmNode> drv(std::move(locals), D, C, true);
    drv.spawn();
    real::InProcessCoordinator coord{np};
    res = real::run_measurement(drv, o, coord, {});
  }
  CHECK(res.issued == res.completed);
  CHECK(res.errors == 0);
  REQUIRE(res.per_rank.size() == np);
  for (const auto& t : res.per_rank) {
    CHECK(t.issued == t.completed);
    CHECK(t.completed > 0);
  }
  for (auto& n : nodes) {
    CHECK(n->in_flight() == 0);
    CHECK(n->client_protocol_errors() == 0);
    for (uint32_t d = 0; d < D; ++d) {
      CHECK(n->daemon_metrics(d).protocol_errors == 0);
      CHECK(n->daemon_metrics(d).replies == n->daemon_metrics(d).cqe.cqes);  // one answer per request served
    }
  }
  // Every request was served by its key's owner: requests served add up to completions.
  uint64_t served = 0;
  for (auto& n : nodes)
    for (uint32_t d = 0; d < D; ++d) served += n->daemon_metrics(d).replies;
  CHECK(served == res.completed);
}

TEST_CASE("ucx-am: a stranger's malformed messages are dropped and counted", "[real-run][ucx-am]") {
  ucx_am::UcxAmNode node(node_config(0, 1, 1, 1, 2), workload(1), kTls);
  const auto addrs = node.local_addresses();
  node.connect(addrs);
  auto pump = [&] {
    node.step_daemon(0);
    node.step_client(0);
  };
  Stranger s;
  ucp_ep_h to_daemon = s.connect(addrs[0]);
  ucp_ep_h to_client = s.connect(addrs[1]);

  SECTION("requests to a daemon") {
    const char junk[5] = {1, 2, 3, 4, 5};
    s.send(to_daemon, ucx_am::kRequestAmId, junk, sizeof junk, pump);  // wrong size
    CHECK(node.daemon_metrics(0).protocol_errors == 1);
    ucx_am::RequestMsg m{99, 0, kv::Request::meta_get(0, 1)};  // no client 99
    s.send(to_daemon, ucx_am::kRequestAmId, &m, sizeof m, pump);
    CHECK(node.daemon_metrics(0).protocol_errors == 2);
    // A malformed request from a known client is answered with an error response; that
    // client never sent it (its tag is out of range), so the client drops the answer.
    ucx_am::RequestMsg bad{0, 1000, kv::Request{}};
    s.send(to_daemon, ucx_am::kRequestAmId, &bad, sizeof bad, pump);
    CHECK(node.daemon_metrics(0).protocol_errors == 3);
    CHECK(node.client_protocol_errors() == 1);
  }
  SECTION("responses to a client") {
    const char junk[3] = {9, 9, 9};
    s.send(to_client, ucx_am::kResponseAmId, junk, sizeof junk, pump);  // wrong size
    CHECK(node.client_protocol_errors() == 1);
    ucx_am::ResponseMsg m{0, 7, kv::Response::put_ok()};  // tag 7 >= queue depth 2
    s.send(to_client, ucx_am::kResponseAmId, &m, sizeof m, pump);
    CHECK(node.client_protocol_errors() == 2);
    ucx_am::ResponseMsg wrong_daemon{5, 0, kv::Response::put_ok()};  // tag 0 may be in flight, daemon 5 is not its target
    s.send(to_client, ucx_am::kResponseAmId, &wrong_daemon, sizeof wrong_daemon, pump);
    CHECK(node.client_protocol_errors() == 3);
  }
  // The node itself kept working: stop issuing and drain.
  node.stop_issuing();
  for (int i = 0; i < 100000 && node.in_flight() > 0; ++i) pump();
  CHECK(node.in_flight() == 0);
  CHECK(node.counters(0).completed.load() == node.counters(0).issued.load());
  CHECK(node.counters(0).issued.load() > 0);
  CHECK(node.counters(0).errors.load() == 0);
}

TEST_CASE("ucx-am: connect rejects address lists of the wrong shape", "[real-run][ucx-am]") {
  ucx_am::UcxAmNode node(node_config(0, 2, 1, 1, 2), workload(2), kTls);
  auto addrs = node.local_addresses();
  CHECK_THROWS_WITH(node.connect(addrs), Catch::Contains("expected 2 ranks x 2"));
  addrs.insert(addrs.end(), addrs.begin(), addrs.end());
  addrs[3].length = 0;
  CHECK_THROWS_WITH(node.connect(addrs), Catch::Contains("worker address 3 (rank 1) has length 0"));
}
