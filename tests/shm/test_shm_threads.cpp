// Concurrency tests on real threads (also built and run under ThreadSanitizer):
// delegationrpc with 4 producers, ipc with several clients, flux all-to-all.
// Checks: no loss, no duplication, per-producer order where the protocol promises it.
// Sizes are small so that the whole file runs in a few seconds under TSan on 2 cores.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/shm/delegationrpc.hpp"
#include "core/shm/flux.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using shmtest::answer;
using shmtest::Req;
using shmtest::Resp;

TEST_CASE("delegationrpc: 4 producers, tiny ring, no loss, no duplication, per-producer order",
          "[shm][delegationrpc][threads]") {
  constexpr uint32_t kProducers = 4;
  constexpr uint64_t kPerProducer = 10000;
  const DelegationConfig cfg{kProducers, 8, 4};  // ring smaller than the clients' total window
  using Layout = DelegationLayout<Req, Resp>;
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  DelegationServer<Req, Resp> server(seg.bytes(), cfg);

  std::atomic<uint32_t> producers_done{0};
  std::vector<uint64_t> received(kProducers, 0);  // server side: next expected seq per client
  uint64_t bad = 0;
  std::thread srv([&] {
    SpinWait spin;
    uint64_t total = 0;
    while (total < kProducers * kPerProducer) {
      if (server.poll() == 0) spin.wait();
      while (auto e = server.recv()) {
        const uint32_t c = e->payload.client;
        if (c >= kProducers || e->client_id != c || e->payload.seq != received[c]) ++bad;
        if (c < kProducers) received[c] = e->payload.seq + 1;
        if (server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, answer(e->payload.value)}) !=
            DelegationReplyStatus::kOk)
          ++bad;
        ++total;
      }
      server.advance_tail();
    }
    // Keep releasing ring space until every producer has seen its last response.
    while (producers_done.load(std::memory_order_acquire) < kProducers) {
      server.advance_tail();
      spin.wait();
    }
  });

  struct Result {
    uint64_t responses = 0, errors = 0;
    std::vector<uint8_t> seen;
  };
  std::vector<Result> results(kProducers);
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      auto client = DelegationClient<Req, Resp>::connect(seg.bytes());
      const uint32_t id = client.client_id();
      Result& res = results[id];
      res.seen.assign(kPerProducer, 0);
      auto on_resp = [&](uint64_t token, const Resp& r) {
        if (r.seq != token || r.value != answer(token * 2 + id) || res.seen[token] != 0) ++res.errors;
        res.seen[token] = 1;
        ++res.responses;
      };
      SpinWait spin;
      uint64_t next = 0;
      while (res.responses < kPerProducer) {
        if (next < kPerProducer) {
          const Req r{id, 0, next, next * 2 + id};
          // Half of the producers use the non-blocking variant.
          const auto st = (id % 2 == 0) ? client.call(r, next) : client.try_call(r, next);
          if (st.status == DelegationCallStatus::kOk) {
            ++next;
            continue;
          }
          if (st.status == DelegationCallStatus::kServerDisconnected) ++res.errors;
        }
        if (client.poll(on_resp) == 0) spin.wait();
      }
      producers_done.fetch_add(1, std::memory_order_release);
    });
  }
  for (auto& t : producers) t.join();
  srv.join();
  CHECK(bad == 0);
  for (uint32_t p = 0; p < kProducers; ++p) {
    CHECK(received[p] == kPerProducer);
    CHECK(results[p].responses == kPerProducer);
    CHECK(results[p].errors == 0);
  }
  CHECK(server.cursor() == kProducers * kPerProducer);
}

TEST_CASE("delegationrpc: ServerDisconnected reaches a producer spinning on a full ring",
          "[shm][delegationrpc][threads]") {
  const DelegationConfig cfg{1, 2, 4};
  Segment seg = Segment::create_process(DelegationLayout<Req, Resp>::segment_size(cfg));
  DelegationServer<Req, Resp> server(seg.bytes(), cfg);
  auto client = DelegationClient<Req, Resp>::connect(seg.bytes());
  REQUIRE(client.call(Req{}).status == DelegationCallStatus::kOk);
  REQUIRE(client.call(Req{}).status == DelegationCallStatus::kOk);
  std::atomic<bool> started{false};
  DelegationCallStatus st = DelegationCallStatus::kOk;
  std::thread t([&] {
    started.store(true, std::memory_order_release);
    st = client.call(Req{}).status;  // ring full: spins until shutdown
  });
  while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
  server.shutdown();
  t.join();
  CHECK(st == DelegationCallStatus::kServerDisconnected);
}

TEST_CASE("delegationrpc: a call that gave up in its thread is skipped by a running server and the others complete",
          "[shm][delegationrpc][threads]") {
  const DelegationConfig cfg{2, 2, 4};
  using Layout = DelegationLayout<Req, Resp>;
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  DelegationServer<Req, Resp> server(seg.bytes(), cfg);
  server.set_hole_limit(std::chrono::nanoseconds(0));
  auto a = DelegationClient<Req, Resp>::connect(seg.bytes(), 1);
  auto b = DelegationClient<Req, Resp>::connect(seg.bytes(), 2);
  std::atomic<bool> serving{false}, stop{false};
  uint64_t bad_replies = 0;  // server thread only, read after join
  std::thread srv([&] {
    while (!stop.load(std::memory_order_acquire)) {
      if (!serving.load(std::memory_order_acquire)) {
        std::this_thread::yield();
        continue;
      }
      server.snapshot_head();
      while (auto e = server.recv())
        if (server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, answer(e->payload.value)}) !=
            DelegationReplyStatus::kOk)
          ++bad_replies;
      server.advance_tail();
    }
  });
  struct StopServer {  // a failed REQUIRE must not leave the server thread joinable
    std::atomic<bool>& stop;
    std::thread& srv;
    ~StopServer() {
      stop.store(true, std::memory_order_release);
      if (srv.joinable()) srv.join();
    }
  } stop_server{stop, srv};
  REQUIRE(a.call(Req{0, 0, 0, 0}, 0).status == DelegationCallStatus::kOk);  // positions 0 and 1 fill the ring
  REQUIRE(a.call(Req{0, 0, 1, 1}, 1).status == DelegationCallStatus::kOk);
  DelegationCallStatus st = DelegationCallStatus::kOk;
  std::thread tb([&] {
    b.set_wait_limit(std::chrono::milliseconds(20));
    st = b.call(Req{1, 0, 2, 2}, 2).status;  // position 2: no ring space while the server pauses
  });
  tb.join();
  CHECK(st == DelegationCallStatus::kServerUnresponsive);
  serving.store(true, std::memory_order_release);
  std::vector<uint64_t> answered;
  auto got = [&](uint64_t tok, const Resp& r) {
    CHECK(r.value == answer(tok));
    answered.push_back(tok);
  };
  bool called = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard only
  while (answered.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    a.poll(got);
    if (!called && answered.size() == 2) {
      REQUIRE(a.call(Req{0, 0, 3, 3}, 3).status == DelegationCallStatus::kOk);  // position 3, behind the hole
      called = true;
    }
  }
  // Positions 0 and 1 are answered in either order: a poll visits the slots in index
  // order while the server thread writes them, so it may find slot 1's response first.
  REQUIRE(answered.size() == 3);
  std::sort(answered.begin(), answered.begin() + 2);
  REQUIRE(answered == std::vector<uint64_t>{0, 1, 3});
  b.set_wait_limit(std::chrono::seconds(20));
  REQUIRE(b.call(Req{1, 0, 4, 4}, 4).status == DelegationCallStatus::kOk);  // after the server passed position 2
  while (answered.size() < 4 && std::chrono::steady_clock::now() < deadline) b.poll(got);
  stop.store(true, std::memory_order_release);
  srv.join();
  CHECK(answered == std::vector<uint64_t>{0, 1, 3, 4});
  CHECK(bad_replies == 0);
  CHECK(server.skipped(DelegationSkip::kReserverGaveUp) == 1);
  CHECK(server.skipped_total() == 1);
  CHECK(server.cursor() == 5);
}

TEST_CASE("ipc: several clients, out-of-order replies, no loss, FIFO per client", "[shm][ipc][threads]") {
  constexpr uint32_t kClients = 4;
  constexpr uint64_t kPerClient = 10000;
  const IpcConfig cfg{kClients, 4};
  using Layout = IpcLayout<Req, Resp>;
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  IpcServer<Req, Resp> server(seg.bytes(), cfg, IpcSkipConfig{4, 4});

  uint64_t bad = 0;
  std::vector<uint64_t> received(kClients, 0);
  std::thread srv([&] {
    SpinWait spin;
    uint64_t total = 0;
    std::vector<IpcRequest<Req>> batch;
    while (total < kClients * kPerClient) {
      if (server.poll_with_skip() == 0) {
        spin.wait();
        continue;
      }
      batch.clear();
      while (auto r = server.recv()) {
        const uint32_t c = r->handle.client;
        if (r->payload.client != c || r->payload.seq != received[c]) ++bad;
        received[c] = r->payload.seq + 1;
        batch.push_back(*r);
      }
      // Reply in reverse order of arrival.
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
        if (server.reply(it->handle, Resp{it->payload.seq, answer(it->payload.value)}) != IpcReplyStatus::kOk) ++bad;
        ++total;
      }
    }
  });
  std::vector<uint64_t> errors(kClients, 0), responses(kClients, 0);
  std::vector<std::thread> clients;
  for (uint32_t i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto c = IpcClient<Req, Resp>::connect(seg.bytes(), i);
      std::vector<uint8_t> seen(kPerClient, 0);
      SpinWait spin;
      uint64_t next = 0;
      while (responses[i] < kPerClient) {
        while (next < kPerClient && c.call(Req{i, 0, next, next + i}, next) == IpcCallStatus::kOk) ++next;
        const uint32_t n = c.poll([&](uint64_t t, const Resp& r) {
          if (t >= kPerClient || r.seq != t || r.value != answer(t + i) || seen[t] != 0) ++errors[i];
          if (t < kPerClient) seen[t] = 1;
          ++responses[i];
        });
        if (n == 0) spin.wait();
      }
      if (c.protocol_errors() != 0) ++errors[i];
    });
  }
  for (auto& t : clients) t.join();
  srv.join();
  CHECK(bad == 0);
  CHECK(server.bad_requests() == 0);
  for (uint32_t i = 0; i < kClients; ++i) {
    CHECK(received[i] == kPerClient);
    CHECK(responses[i] == kPerClient);
    CHECK(errors[i] == 0);
  }
}

TEST_CASE("flux: 4 threads all-to-all, no loss, no duplication, FIFO per pair", "[shm][flux][threads]") {
  constexpr uint32_t kN = 4;
  constexpr uint64_t kPerPair = 2000;  // calls from each node to each node (self included)
  struct Msg {
    uint32_t from, to;
    uint64_t seq, value;
  };
  FluxNetwork<Msg> net(kN, FluxConfig{16, 8});
  std::atomic<uint64_t> total_responses{0};
  constexpr uint64_t kTotal = kN * kN * kPerPair;
  std::vector<uint64_t> errors(kN, 0);
  std::vector<std::vector<uint64_t>> answered(kN, std::vector<uint64_t>(kN, 0));
  std::vector<std::vector<uint64_t>> seen(kN, std::vector<uint64_t>(kN, 0));
  std::vector<std::thread> threads;
  for (uint32_t me = 0; me < kN; ++me) {
    threads.emplace_back([&, me, node = net.node(me)]() mutable {
      std::vector<uint64_t> next(kN, 0);
      std::vector<std::vector<uint8_t>> got(kN, std::vector<uint8_t>(kPerPair, 0));
      SpinWait spin;
      uint32_t target = me;
      while (total_responses.load(std::memory_order_acquire) < kTotal) {
        bool progress = false;
        for (uint32_t k = 0; k < kN; ++k, target = (target + 1) % kN) {
          if (next[target] >= kPerPair) continue;
          const uint64_t s = next[target];
          if (node.call(target, Msg{me, target, s, s * 3 + me}, (uint64_t{target} << 32) | s) == FluxCallStatus::kOk) {
            ++next[target];
            progress = true;
          }
        }
        const uint32_t n = node.poll([&](uint64_t t, const Msg& m) {
          const uint32_t to = static_cast<uint32_t>(t >> 32);
          const uint64_t s = t & 0xFFFFFFFFu;
          if (to >= kN || s >= kPerPair || m.from != me || m.to != to || m.seq != s || m.value != s * 3 + me + 1 ||
              got[to][s] != 0)
            ++errors[me];
          else
            got[to][s] = 1;
          ++answered[me][to < kN ? to : 0];
        });
        if (n != 0) {
          total_responses.fetch_add(n, std::memory_order_acq_rel);
          progress = true;
        }
        while (auto r = node.try_recv()) {
          if (r->payload.to != me || r->payload.from != r->source || r->payload.seq != seen[me][r->source]) ++errors[me];
          seen[me][r->source] = r->payload.seq + 1;
          Msg m = r->payload;
          m.value += 1;
          if (node.reply(r->token, m) != FluxReplyStatus::kOk) ++errors[me];
          progress = true;
        }
        if (!progress) spin.wait();
      }
      if (node.protocol_errors() != 0) ++errors[me];
    });
  }
  for (auto& t : threads) t.join();
  CHECK(total_responses.load() == kTotal);
  for (uint32_t i = 0; i < kN; ++i) {
    CHECK(errors[i] == 0);
    for (uint32_t j = 0; j < kN; ++j) {
      CHECK(answered[i][j] == kPerPair);
      CHECK(seen[j][i] == kPerPair);
    }
  }
}
