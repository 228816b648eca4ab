// The parts daemons share (backends/daemon_services.hpp): parked requests and the two
// flux backlog disciplines.
#include <catch2/catch.hpp>

#include <span>
#include <utility>
#include <vector>

#include "backends/daemon_services.hpp"
#include "tests/copyrpc/instant_cluster.hpp"

using namespace bkv;
using namespace bkv::backend;

namespace {

// n requests from node 0 of a two-node copyrpc cluster to node 1, received there: their
// handles, in call order.
std::vector<copyrpc::RecvHandle> received_requests(test::InstantCluster& c, uint32_t n) {
  const std::byte payload[8]{};
  for (uint32_t i = 0; i < n; ++i) REQUIRE(c.ctxs[0]->call(c.links[0][0].ep, payload, 16, i).ok());
  c.ctxs[0]->flush();
  c.ctxs[1]->drain([](uint64_t, std::span<const std::byte>) {}, [](uint64_t, copyrpc::EndpointError) {});
  std::vector<copyrpc::RecvHandle> out(n);
  for (auto& h : out) REQUIRE(c.ctxs[1]->recv(h));
  return out;
}

}  // namespace

TEST_CASE("ParkedRequests: a parked handle is taken once, its slot reused", "[backend]") {
  test::InstantCluster cluster(2, {});
  std::vector<copyrpc::RecvHandle> hs = received_requests(cluster, 2);
  const uint32_t call_id = hs[0].call_id();
  ParkedRequests p;
  const uint32_t i = p.park(std::move(hs[0]));
  CHECK(hs[0].spent());  // parking took the request
  copyrpc::RecvHandle out;
  CHECK_FALSE(p.take(i + 1, out));  // nothing parked there
  REQUIRE(p.take(i, out));
  CHECK(out.endpoint() == cluster.links[1][0].ep);
  CHECK(out.call_id() == call_id);
  CHECK(out.payload().data() == nullptr);  // the payload pointer does not outlive the flush
  CHECK_FALSE(p.take(i, out));  // already taken
  CHECK(p.park(std::move(hs[1])) == i);  // the freed slot is reused
  // The handle taken out answers its request once.
  CHECK(cluster.ctxs[1]->reply(std::move(out), {}) == copyrpc::CallStatus::kOk);
  CHECK(cluster.ctxs[1]->reply(std::move(out), {}) == copyrpc::CallStatus::kInvalidHandle);
}

namespace {

// Daemon 0 of three, one flux call in flight per target: calls to daemon 1 beyond the
// first are refused until daemon 1 answers.
struct ThreeDaemons {
  shm::FluxNetwork<FluxMsg, CallToken> net{3, shm::FluxConfig{4, 1}};
  FluxNodeT d0 = net.node(0), d1 = net.node(1), d2 = net.node(2);
  NullMeter meter;
  Request req(uint64_t key) const { return Request::meta_get(0, key); }
  // The keys of the calls daemon t received.
  std::vector<uint64_t> received(FluxNodeT& t) {
    std::vector<uint64_t> keys;
    while (auto r = t.try_recv()) keys.push_back(r->payload.req.key);
    return keys;
  }
};

}  // namespace

TEST_CASE("FluxForwarder in order: calls queue behind a backlog and leave in order", "[backend]") {
  ThreeDaemons n;
  FluxForwarder f(&n.d0, FluxForwarder::Order::kInOrder);
  CHECK_FALSE(f.forward(1, FluxMsg::kExecute, n.req(1), CallToken::parked(0), n.meter));
  CHECK(f.forward(1, FluxMsg::kExecute, n.req(2), CallToken::parked(1), n.meter));  // 1 is full
  CHECK(f.forward(2, FluxMsg::kExecute, n.req(3), CallToken::parked(2), n.meter));  // behind the backlog
  f.retry();  // the head (to 1) is still refused: nothing leaves
  CHECK(f.backlog() == 2);
  CHECK(n.received(n.d2).empty());
}

TEST_CASE("FluxForwarder first fit: a full target does not hold back the others", "[backend]") {
  ThreeDaemons n;
  FluxForwarder f(&n.d0, FluxForwarder::Order::kFirstFit);
  CHECK_FALSE(f.forward(1, FluxMsg::kExecute, n.req(1), CallToken::parked(0), n.meter));
  CHECK(f.forward(1, FluxMsg::kExecute, n.req(2), CallToken::parked(1), n.meter));   // 1 is full
  CHECK_FALSE(f.forward(2, FluxMsg::kExecute, n.req(3), CallToken::parked(2), n.meter));  // 2 is not
  CHECK(n.received(n.d2) == std::vector<uint64_t>{3});
  f.retry();
  CHECK(f.backlog() == 1);
  // Daemon 1 answers its first call: the retry sends the backlogged one.
  auto r = n.d1.try_recv();
  REQUIRE(r.has_value());
  CHECK(r->payload.req.key == 1);
  FluxMsg resp;
  resp.kind = FluxMsg::kResponse;
  REQUIRE(n.d1.reply(r->token, resp) == shm::FluxReplyStatus::kOk);
  std::vector<uint32_t> answered;
  n.d0.poll([&](const CallToken& tok, const FluxMsg&) { answered.push_back(tok.waiter); });
  CHECK(answered == std::vector<uint32_t>{0});
  f.retry();
  CHECK(f.backlog() == 0);
  CHECK(n.received(n.d1) == std::vector<uint64_t>{2});
}

#include "backends/node_backends.hpp"

TEST_CASE("connection_count of every backend is the size of its connection list", "[backend]") {
  for (uint32_t np : {1u, 2u, 3u, 8u, 17u})
    for (uint32_t d : {1u, 3u})
      for (uint32_t c : {1u, 5u}) {
        auto check = [&]<class B>() {
          INFO("np " << np << " daemons " << d << " clients " << c);
          CHECK(B::connection_count(np, d, c) == B::connections(np, d, c).size());
        };
        check.template operator()<bkv::backend::DelegationBackend>();
        check.template operator()<bkv::backend::MetaBackend>();
        check.template operator()<bkv::backend::DirectBackend>();
      }
}

TEST_CASE("a Delegation client whose server is gone fails with an error instead of retrying forever", "[backends]") {
  // try_call's false means "full: try again next step"; a cleared server_alive (or a
  // forged ring) would make that retry spin forever. It ends the client with an error.
  NodeConfig cfg;
  cfg.clients = 1;
  cfg.queue_depth = 4;
  cfg.deleg_ring_depth = 8;
  DelegationRing ring(cfg);
  ring.clients.push_back(std::make_unique<DelegClientT>(DelegClientT::connect(ring.seg.bytes())));
  DelegationRemotePath path{ring.clients.back().get()};
  Request r{};
  CHECK(path.try_call(r, 0));
  ring.server->shutdown();
  CHECK_THROWS_WITH(path.try_call(r, 1), Catch::Contains("server is gone"));
}

#include "apps/benchkv/node/instant_runtime.hpp"

TEST_CASE("Delegation daemon #0 answers a ring request for rank np or for its own rank kWrongRank",
          "[backends][bounds]") {
  // Node 0 of two; the request comes through the delegation ring, written by a client
  // (shared memory: never trusted). Rank np - 1 = 1 is a peer (its endpoint is not
  // connected here: the call is refused and answered kEndpointStopped); rank np = 2,
  // the first past the end, and the node's own rank 0 are refused before any endpoint
  // is looked up, answered kWrongRank and counted as protocol errors.
  using Runtime = app::InstantRuntime;
  using T = Runtime::Transport;
  loopback::InstantFabric fabric;
  Runtime rt(2, app::RealThreads{}, app::MakeInstantTransport{&fabric, {}});
  NodeConfig cfg;
  cfg.rank = 0;
  cfg.np = 2;
  cfg.clients = 1;
  cfg.queue_depth = 4;
  cfg.deleg_ring_depth = 8;
  copyrpc::Context<T, CallToken> ctx(rt.transport(0), copyrpc::ContextConfig{});
  std::vector<uint32_t> ep_of_rank(cfg.np, ~0u);
  ep_of_rank[1] = ctx.create_endpoint();
  const shm::IpcConfig icfg{cfg.clients, cfg.queue_depth};
  shm::Segment ipc_seg = shm::Segment::create_process(shm::IpcLayout<Request, Response>::segment_size(icfg));
  IpcServerT ipc(ipc_seg.bytes(), icfg);
  kv::Store store(cfg.rank, cfg.key_range);
  const LoopPolicySettings policy;
  DelegationRing ring(cfg);
  const DaemonWiring<T, Runtime::Waker> w{cfg, policy, 0, &ctx, ep_of_rank, ipc, nullptr, store, rt.meter(0), rt.waker()};
  DelegationDaemon0<T, Runtime::Waker> daemon(w, ring);
  DelegClientT client = DelegClientT::connect(ring.seg.bytes());

  for (const auto& [rank, code] : {std::pair<uint32_t, kv::ErrorCode>{2, kv::ErrorCode::kWrongRank},
                                   {0, kv::ErrorCode::kWrongRank},
                                   {1, kv::ErrorCode::kEndpointStopped}}) {
    INFO("request for rank " << rank);
    const uint64_t errors_before = daemon.metrics().protocol_errors;
    REQUIRE(client.try_call(Request::meta_get(rank, 5), 40 + rank).status == shm::DelegationCallStatus::kOk);
    for (int i = 0; i < 6; ++i) daemon.step();  // poll, ring and ipc stages
    std::vector<std::pair<uint64_t, Response>> got;
    client.poll([&](uint64_t tok, const Response& r) { got.emplace_back(tok, r); });
    REQUIRE(got.size() == 1);
    CHECK(got[0].first == 40 + rank);
    CHECK(got[0].second.is_error());
    CHECK(got[0].second.error == code);
    CHECK(daemon.metrics().protocol_errors == errors_before + (code == kv::ErrorCode::kWrongRank ? 1 : 0));
  }
  CHECK(daemon.metrics().calls == 0);
}
