// copyrpc over the instant loopback: message rate, and a fixed workload for callgrind.
//
//   bench_copyrpc_loopback rate  [endpoints] [depth] [seconds]
//   bench_copyrpc_loopback pairs N [depth] (N request/response pairs, for callgrind; depth 32)
//
// Setup: two contexts in one thread (client, server), `endpoints` endpoints, `depth`
// 32-byte requests in flight per endpoint, 16-byte responses. Each round: the client
// tops every endpoint up to `depth` calls and polls; the server polls, answers every
// request and flushes. A pair = one call + one reply + their share of polls/flushes.
// The instant loopback's memcpy of the batch is part of the process but not of copyrpc:
// scripts/callgrind_copyrpc.sh subtracts it (InstantTransport::execute, inclusive).
// Built a second time as bench_copyrpc_loopback_held (BKV_LOOPBACK_HELD=1): the server
// keeps each round's handles in a vector and answers them after the last recv(), as a
// server that parks requests does, so reply() reads its handle back from memory instead
// of seeing recv()'s stores. A second binary, so this build's code stays as it is.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "transports/loopback/instant.hpp"

using namespace bkv;
using T = loopback::InstantTransport;
using Ctx = copyrpc::Context<T, uint32_t>;

namespace {

struct Setup {
  loopback::InstantFabric fabric;
  T tc{fabric, 4096}, ts{fabric, 4096};
  Ctx client, server;
  std::vector<uint32_t> ceps, seps;
  std::vector<uint32_t> inflight;
  std::array<std::byte, 32> req{};
  std::array<std::byte, 16> resp{};
  uint64_t completed = 0;
#if BKV_LOOPBACK_HELD
  std::vector<copyrpc::RecvHandle> held;
#endif

  Setup(uint32_t endpoints, copyrpc::ContextConfig cfg) : client(tc, cfg), server(ts, cfg), inflight(endpoints, 0) {
    for (uint32_t i = 0; i < endpoints; ++i) {
      ceps.push_back(client.create_endpoint());
      seps.push_back(server.create_endpoint());
      client.connect(ceps[i], server.local_info(seps[i]));
      server.connect(seps[i], client.local_info(ceps[i]));
    }
  }

  __attribute__((noinline)) void round(uint32_t depth) {
    for (uint32_t i = 0; i < ceps.size(); ++i)
      while (inflight[i] < depth && client.call(ceps[i], req, 16, i).ok()) ++inflight[i];
    client.flush();
    server.drain([](uint32_t, std::span<const std::byte>) {}, [](auto&&, copyrpc::EndpointError e) { throw std::runtime_error(std::string("bench: a call failed back: ") + copyrpc::to_string(e)); });
    copyrpc::RecvHandle h;
#if BKV_LOOPBACK_HELD
    while (server.recv(h)) held.push_back(std::move(h));
    for (copyrpc::RecvHandle& x : held)
      if (server.reply(std::move(x), resp) != copyrpc::CallStatus::kOk) throw std::runtime_error("bench: reply failed");
    held.clear();
#else
    while (server.recv(h)) server.reply(std::move(h), resp);
#endif
    server.flush();
    client.drain([this](uint32_t ep, std::span<const std::byte>) {
      --inflight[ep];
      ++completed;
    }, [](auto&&, copyrpc::EndpointError e) { throw std::runtime_error(std::string("bench: a call failed back: ") + copyrpc::to_string(e)); });
  }
};

__attribute__((noinline)) uint64_t run_pairs(Setup& s, uint64_t pairs, uint32_t depth) {
  while (s.completed < pairs) s.round(depth);
  return s.completed;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "rate";
  copyrpc::ContextConfig cfg;
  cfg.ring_size = 1 << 20;
  if (std::strcmp(mode, "pairs") == 0) {
    const uint64_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100000;
    const uint32_t depth = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 32;
    if (n == 0 || depth == 0) {
      std::fprintf(stderr, "usage: %s pairs N>=1 [depth>=1]\n", argv[0]);
      return 2;
    }
    Setup s(1, cfg);
    const uint64_t done = run_pairs(s, n, depth);
    std::printf("pairs=%llu endpoints=1 depth=%u req=32B resp=16B\n", static_cast<unsigned long long>(done), depth);
    return 0;
  }
  const uint32_t eps = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 8;
  const uint32_t depth = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 32;
  const double secs = argc > 4 ? std::atof(argv[4]) : 1.0;
  if (eps == 0 || depth == 0 || secs <= 0) {
    std::fprintf(stderr, "usage: %s rate [endpoints>=1] [depth>=1] [seconds>0] | pairs N [depth]\n", argv[0]);
    return 2;
  }
  Setup s(eps, cfg);
  std::printf("setup: copyrpc over the instant loopback, one thread, 2 contexts, %u endpoint(s), depth %u, "
              "32 B requests, 16 B responses, ring 1 MiB\n", eps, depth);
  const auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  do {
    for (int i = 0; i < 64; ++i) s.round(depth);
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (el < secs);
  std::printf("request/response pairs: %llu in %.3f s = %.2f M pairs/s (%.1f ns per pair, both sides, one core)\n",
              static_cast<unsigned long long>(s.completed), el, s.completed / el / 1e6, el * 1e9 / s.completed);
  std::printf("WQEs posted (client+server): %llu, messages per WQE: %.1f\n",
              static_cast<unsigned long long>(s.client.stats().wqes_posted + s.server.stats().wqes_posted),
              2.0 * s.completed / double(s.client.stats().wqes_posted + s.server.stats().wqes_posted));
  return 0;
}
