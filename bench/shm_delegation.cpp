// delegationrpc throughput with 1, 2 and 4 producers vs a raw fetch_add loop on one
// cache line with the same number of threads, side by side.
//
// raw:  P threads fetch_add(1) on one shared counter (the contended operation every
//       delegationrpc call performs on `head`); total increments per second.
// dlg:  one server thread (poll, recv, reply, advance_tail) and P producer threads,
//       each keeping resp_depth calls in flight (call until kNoFreeSlot, then poll);
//       ring_depth 1024 as in the original; completed calls per second.
// Usage: bench_shm_delegation [operations per trial] [resp_depth = window per producer]
// Threads are pinned: thread k -> core k % 2 (server is thread 0, producers 1..P).
// With 2 cores, P >= 2 oversubscribes; the numbers then include scheduling effects.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/shm_bench_util.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/segment.hpp"

using namespace bkv::shm;

namespace {

using shmbench::Line;
using shmbench::Req;
using shmbench::Resp;

double raw_fetch_add_mops(uint32_t threads, uint64_t total) {
  Line counter;
  shmbench::StartLine start(static_cast<int>(threads) + 1);
  std::vector<std::thread> ts;
  const uint64_t per = total / threads;
  for (uint32_t k = 0; k < threads; ++k)
    ts.emplace_back([&, k] {
      shmbench::pin_self(shmbench::core_for(static_cast<int>(k)));
      start.arrive_and_wait();
      for (uint64_t i = 0; i < per; ++i) counter.v.fetch_add(1, std::memory_order_relaxed);
    });
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : ts) t.join();
  const double s = shmbench::seconds_since(t0);
  if (counter.v.load() != per * threads) std::abort();
  return static_cast<double>(per * threads) / s / 1e6;
}

double delegation_mops(uint32_t producers, uint32_t window, uint64_t total, uint64_t& errors) {
  const DelegationConfig cfg{producers, 1024, window};
  Segment seg = Segment::create_process(DelegationLayout<Req, Resp>::segment_size(cfg));
  DelegationServer<Req, Resp> server(seg.bytes(), cfg);
  const uint64_t per = total / producers;
  Line done;  // producers finished (own cache line: the server reads it every loop)
  shmbench::StartLine start(static_cast<int>(producers) + 2);
  std::thread srv([&] {
    shmbench::pin_self(shmbench::core_for(0));
    start.arrive_and_wait();
    SpinWait spin;
    while (done.v.load(std::memory_order_relaxed) < producers) {
      if (server.poll() == 0) {
        server.advance_tail();
        spin.wait();
        continue;
      }
      spin = {};
      while (auto e = server.recv())
        if (server.reply(e->client_id, e->resp_slot_idx, Resp{e->payload.seq, e->payload.value + 1}) !=
            DelegationReplyStatus::kOk)
          ++errors;
      server.advance_tail();
    }
  });
  std::vector<uint64_t> bad(producers, 0);
  std::vector<std::thread> ps;
  for (uint32_t k = 0; k < producers; ++k)
    ps.emplace_back([&, k] {
      shmbench::pin_self(shmbench::core_for(static_cast<int>(k) + 1));
      auto c = DelegationClient<Req, Resp>::connect(seg.bytes());
      start.arrive_and_wait();
      uint64_t sent = 0, got = 0;
      SpinWait spin;
      while (got < per) {
        while (sent < per) {
          const auto st = c.call(Req{c.client_id(), 0, sent, sent}, sent);
          if (st.status != DelegationCallStatus::kOk) break;
          ++sent;
        }
        const uint32_t n = c.poll([&](uint64_t t, const Resp& r) { bad[k] += (r.seq != t || r.value != t + 1) ? 1 : 0; });
        got += n;
        if (n != 0) spin = {}; else spin.wait();
      }
      done.v.fetch_add(1, std::memory_order_relaxed);
    });
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : ps) t.join();
  const double s = shmbench::seconds_since(t0);
  srv.join();
  for (auto b : bad) errors += b;
  return static_cast<double>(per * producers) / s / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t total = 2000000;
  uint32_t window = 32;
  int trials = 5;
  if (argc > 1) {
    char* end = nullptr;
    total = std::strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || total < 4) {
      std::fprintf(stderr, "bench_shm_delegation: operations per trial must be an integer >= 4 (got '%s')\n", argv[1]);
      return 2;
    }
  }
  if (argc > 2) {
    char* end = nullptr;
    const unsigned long w = std::strtoul(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || !is_pow2(w) || w > 1024) {
      std::fprintf(stderr, "bench_shm_delegation: resp_depth must be a power of two <= 1024 (got '%s')\n", argv[2]);
      return 2;
    }
    window = static_cast<uint32_t>(w);
  }
  shmbench::print_machine();
  std::printf("setup: %llu operations per trial, %d interleaved trials; ring_depth 1024, resp_depth %u (window per "
              "producer), payload %zu B; server thread on core 0, producer k on core (k+1)%%2\n",
              static_cast<unsigned long long>(total), trials, window, sizeof(Req));
  uint64_t errors = 0;
  for (uint32_t p : {1u, 2u, 4u}) {
    std::vector<double> raw, dlg;
    for (int t = 0; t < trials; ++t) {
      raw.push_back(raw_fetch_add_mops(p, total));
      dlg.push_back(delegation_mops(p, window, total, errors));
    }
    const double r = shmbench::median(raw), d = shmbench::median(dlg);
    std::printf("producers %u: raw fetch_add %8.2f Mops/s   delegationrpc %7.2f Mcalls/s   ratio dlg/raw %.3f\n", p, r,
                d, d / r);
  }
  if (errors != 0) {
    std::fprintf(stderr, "bench_shm_delegation: %llu wrong or failed calls\n", static_cast<unsigned long long>(errors));
    return 1;
  }
  return 0;
}
