// copyrpc end to end on real threads, over any Transport whose nodes may be driven by
// different threads (wall-clock loopback, UCX): K contexts, fully connected, each owned
// by one thread of a runtime::ThreadGroup. Every context calls every peer `calls` times
// (at most `window` calls in flight per peer) and answers every request it receives.
// Request k from a to b carries bytes that are a function of (a, b, k); the response is
// a function of the request bytes, so the caller checks each answer independently of the
// responder. Checks: every call answered exactly once with the right bytes, no endpoint
// error, the counts add up. Catch is not thread-safe, so threads record failures as
// strings and the test asserts afterwards.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "apps/benchkv/real/thread_group.hpp"

namespace bkv::test {

struct ThreadedCopyrpcResult {
  std::vector<std::string> failures;    // per node, empty = fine
  std::vector<uint64_t> answered;       // responses received per node
  std::vector<uint64_t> served;         // requests answered per node
  std::vector<uint64_t> batches;        // WRITE+IMM batches received per node
};

inline uint32_t tc_len(uint32_t a, uint32_t b, uint64_t k, uint64_t max) {
  return static_cast<uint32_t>((a * 977 + b * 131 + k * 37) % (max + 1));
}
inline std::byte tc_byte(uint32_t a, uint32_t b, uint64_t k, uint64_t i) {
  return std::byte{static_cast<uint8_t>(a * 29 + b * 71 + k * 5 + i * 3 + 1)};
}
// The answer to a request: its bytes reversed and flipped, cut to the allowance.
inline std::vector<std::byte> tc_answer(std::span<const std::byte> req, uint64_t cap) {
  std::vector<std::byte> out(std::min<uint64_t>(req.size(), cap));
  for (size_t i = 0; i < out.size(); ++i) out[i] = req[req.size() - 1 - i] ^ std::byte{0xA5};
  return out;
}

template <class T>
ThreadedCopyrpcResult run_copyrpc_threads(std::vector<T*> transports, copyrpc::ContextConfig cfg, uint64_t calls,
                                          uint32_t window, uint32_t allowance = 256, double timeout_s = 120) {
  using Ctx = copyrpc::Context<T, uint64_t>;
  const uint32_t n = static_cast<uint32_t>(transports.size());
  std::vector<std::unique_ptr<Ctx>> ctx;
  std::vector<std::vector<uint32_t>> ep(n, std::vector<uint32_t>(n, ~0u));  // ep[a][b]: a's endpoint to b
  for (uint32_t a = 0; a < n; ++a) ctx.push_back(std::make_unique<Ctx>(*transports[a], cfg));
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = a + 1; b < n; ++b) {
      ep[a][b] = ctx[a]->create_endpoint();
      ep[b][a] = ctx[b]->create_endpoint();
      ctx[a]->connect(ep[a][b], ctx[b]->local_info(ep[b][a]));
      ctx[b]->connect(ep[b][a], ctx[a]->local_info(ep[a][b]));
    }
  ThreadedCopyrpcResult res;
  res.failures.assign(n, "");
  res.answered.assign(n, 0);
  res.served.assign(n, 0);
  res.batches.assign(n, 0);
  std::atomic<uint32_t> finished{0};
  runtime::ThreadGroup group;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);

  struct State {  // one per node, touched only by its thread
    std::vector<uint64_t> issued, answered_from;
    std::vector<std::vector<bool>> seen;  // [peer][k] answered already
    bool done = false;
  };
  std::vector<State> st(n);
  for (uint32_t a = 0; a < n; ++a) {
    st[a].issued.assign(n, 0);
    st[a].answered_from.assign(n, 0);
    st[a].seen.assign(n, std::vector<bool>(calls, false));
  }
  for (uint32_t me = 0; me < n; ++me) {
    group.spawn("copyrpc" + std::to_string(me), -1, [&, me] {
      Ctx& c = *ctx[me];
      State& s = st[me];
      std::string& fail = res.failures[me];
      if (!fail.empty()) return;
      std::vector<std::byte> req;
      uint64_t work = 0;
      for (uint32_t peer = 0; peer < n; ++peer) {
        while (peer != me && s.issued[peer] < calls && s.issued[peer] - s.answered_from[peer] < window) {
          const uint64_t k = s.issued[peer];
          req.resize(tc_len(me, peer, k, c.max_payload()));
          for (size_t i = 0; i < req.size(); ++i) req[i] = tc_byte(me, peer, k, i);
          const copyrpc::CallResult r = c.call(ep[me][peer], req, allowance, (uint64_t{peer} << 32) | k);
          if (copyrpc::retry_after_poll(r.status)) break;
          if (!r.ok()) {
            fail = std::string("call: ") + copyrpc::to_string(r.status);
            break;
          }
          ++s.issued[peer];
          ++work;
        }
      }
      work += c.poll([&](uint64_t token, std::span<const std::byte> payload) {
        const uint32_t peer = static_cast<uint32_t>(token >> 32);
        const uint64_t k = token & 0xFFFFFFFFu;
        if (peer >= n || k >= calls || s.seen[peer][k]) {
          fail = "response for an unknown or already answered call";
          return;
        }
        s.seen[peer][k] = true;
        std::vector<std::byte> sent(tc_len(me, peer, k, c.max_payload()));
        for (size_t i = 0; i < sent.size(); ++i) sent[i] = tc_byte(me, peer, k, i);
        const std::vector<std::byte> want = tc_answer(sent, copyrpc::max_reply_payload(copyrpc::internal_allowance(allowance)));
        if (payload.size() != want.size() || !std::equal(payload.begin(), payload.end(), want.begin()))
          fail = "wrong response bytes";
        ++s.answered_from[peer];
        ++res.answered[me];
      }, [&](uint64_t, copyrpc::EndpointError e) { fail = std::string("call failed back: ") + copyrpc::to_string(e); });
      copyrpc::RecvHandle h;
      while (c.recv(h)) {
        const std::vector<std::byte> ans = tc_answer(h.payload(), copyrpc::max_reply_payload(h.allowance()));
        const copyrpc::CallStatus rs = c.reply(std::move(h), ans);
        if (rs != copyrpc::CallStatus::kOk) fail = std::string("reply: ") + copyrpc::to_string(rs);
        ++res.served[me];
        ++work;
      }
      c.flush();
      if (work == 0) std::this_thread::yield();  // more threads than cores in CI
      for (uint32_t peer = 0; peer < n; ++peer)
        if (peer != me && c.error(ep[me][peer]) != copyrpc::EndpointError::kNone) fail = "endpoint error";
      if (!s.done) {
        bool all = true;
        for (uint32_t peer = 0; peer < n; ++peer)
          if (peer != me && s.answered_from[peer] < calls) all = false;
        if (all) {
          s.done = true;
          finished.fetch_add(1, std::memory_order_acq_rel);
        }
      }
      // Keep serving until everyone is done; stop early on a failure or the deadline.
      if (finished.load(std::memory_order_acquire) == n || !fail.empty() ||
          std::chrono::steady_clock::now() > deadline) {
        if (fail.empty() && finished.load() != n) fail = "timed out";
        group.request_stop();
      }
    });
  }
  group.wait_ready();
  group.start();
  group.join();
  for (uint32_t a = 0; a < n; ++a) res.batches[a] = ctx[a]->stats().batches_received;
  return res;
}

// The checks of a run in which every context called every peer `calls` times: no
// thread failed, every node had all its calls answered and answered all its peers'
// calls, received batches, and its transport (`transports[i]->`) counted no protocol
// error.
template <class Transports>
void check_every_call_answered(const ThreadedCopyrpcResult& r, const Transports& transports, uint64_t calls) {
  const uint64_t peers = transports.size() - 1;
  for (size_t i = 0; i < transports.size(); ++i) {
    INFO("node " << i);
    CHECK(r.failures[i] == "");
    CHECK(r.answered[i] == calls * peers);
    CHECK(r.served[i] == calls * peers);
    CHECK(r.batches[i] > 0);
    CHECK(transports[i]->protocol_errors() == 0);
  }
}

}  // namespace bkv::test
