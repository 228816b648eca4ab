// ipc ping-pong between two threads vs a raw cache-line ping-pong, side by side.
//
// raw: thread A stores i into line X, thread B waits for it and stores i into line Y,
//      A waits for Y: one round trip = two cache-line transfers, the floor for any
//      shared-memory request/response.
// ipc: one client, one server thread; the client calls and spins on poll() until the
//      response arrives (one request in flight), the server polls/recv/replies.
//      Variants: queue depth 1 and 4 over process memory, and depth 4 over a /dev/shm
//      segment mapped twice (the server's and the client's mapping, as between
//      processes).
// Trials of all variants are interleaved; medians are reported. Target: ipc within
// 1.5x of raw.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>

#include "bench/shm_bench_util.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"

using namespace bkv::shm;

namespace {

using shmbench::Line;
using shmbench::Req;
using shmbench::Resp;

double raw_pingpong_ns(uint64_t iters) {
  Line ping, pong;
  shmbench::StartLine start(2);
  std::thread responder([&] {
    shmbench::pin_self(shmbench::core_for(1));
    start.arrive_and_wait();
    for (uint64_t i = 1; i <= iters; ++i) {
      for (SpinWait w; ping.v.load(std::memory_order_acquire) != i;) w.wait();
      pong.v.store(i, std::memory_order_release);
    }
  });
  shmbench::pin_self(shmbench::core_for(0));
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= iters; ++i) {
    ping.v.store(i, std::memory_order_release);
    for (SpinWait w; pong.v.load(std::memory_order_acquire) != i;) w.wait();
  }
  const double s = shmbench::seconds_since(t0);
  responder.join();
  return s * 1e9 / static_cast<double>(iters);
}

// server_mem and client_mem view the same segment (possibly through two mappings).
double ipc_pingpong_ns(uint64_t iters, std::span<std::byte> server_mem, std::span<std::byte> client_mem,
                       const IpcConfig& cfg, uint64_t& errors) {
  IpcServer<Req, Resp> server(server_mem, cfg);
  auto client = IpcClient<Req, Resp>::connect(client_mem);
  Line stop;  // own cache line: read by the server on every loop
  shmbench::StartLine start(2);
  std::thread srv([&] {
    shmbench::pin_self(shmbench::core_for(1));
    start.arrive_and_wait();
    SpinWait spin;
    while (stop.v.load(std::memory_order_relaxed) == 0) {
      if (server.poll() == 0) {
        spin.wait();
        continue;
      }
      spin = {};
      while (auto r = server.recv())
        if (server.reply(r->handle, Resp{r->payload.seq, r->payload.value + 1}) != IpcReplyStatus::kOk) ++errors;
    }
  });
  shmbench::pin_self(shmbench::core_for(0));
  start.arrive_and_wait();
  uint64_t bad = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    if (client.call(Req{0, 0, i, i * 3}, i) != IpcCallStatus::kOk) ++bad;
    for (SpinWait w; client.poll([&](uint64_t t, const Resp& r) { bad += (t != i || r.value != i * 3 + 1) ? 1 : 0; }) == 0;)
      w.wait();
  }
  const double s = shmbench::seconds_since(t0);
  stop.v.store(1, std::memory_order_relaxed);
  srv.join();
  errors += bad;
  return s * 1e9 / static_cast<double>(iters);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t iters = 200000;
  int trials = 7;
  if (argc > 1) {
    char* end = nullptr;
    iters = std::strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || iters == 0) {
      std::fprintf(stderr, "bench_shm_ipc: round trips per trial must be a positive integer (got '%s')\n", argv[1]);
      return 2;
    }
  }
  if (argc > 2) {
    trials = std::atoi(argv[2]);
    if (trials <= 0) {
      std::fprintf(stderr, "bench_shm_ipc: trials must be a positive integer (got '%s')\n", argv[2]);
      return 2;
    }
  }
  shmbench::print_machine();
  std::printf("setup: %llu round trips per trial, %d interleaved trials, one request in flight, payload %zu B\n",
              static_cast<unsigned long long>(iters), trials, sizeof(Req));

  using Layout = IpcLayout<Req, Resp>;
  const IpcConfig d1{1, 1}, d4{1, 4};
  const std::string name = "/bkv_bench_ipc_" + std::to_string(::getpid());
  std::vector<double> raw, ipc1, ipc4, ipcshm;
  uint64_t errors = 0;
  for (int t = 0; t < trials; ++t) {
    raw.push_back(raw_pingpong_ns(iters));
    {
      Segment seg = Segment::create_process(Layout::segment_size(d1));
      ipc1.push_back(ipc_pingpong_ns(iters, seg.bytes(), seg.bytes(), d1, errors));
    }
    {
      Segment seg = Segment::create_process(Layout::segment_size(d4));
      ipc4.push_back(ipc_pingpong_ns(iters, seg.bytes(), seg.bytes(), d4, errors));
    }
    {
      Segment owner = Segment::create_shm(name, Layout::segment_size(d4), true);
      Segment attached = Segment::attach_shm(name, Layout::segment_size(d4));
      ipcshm.push_back(ipc_pingpong_ns(iters, owner.bytes(), attached.bytes(), d4, errors));
    }
  }
  if (errors != 0) {
    std::fprintf(stderr, "bench_shm_ipc: %llu wrong or failed calls\n", static_cast<unsigned long long>(errors));
    return 1;
  }
  const double r = shmbench::median(raw);
  auto row = [&](const char* what, double ns) {
    std::printf("%-44s %8.1f ns/round trip  %6.2f M/s  ratio to raw %.2fx\n", what, ns, 1e3 / ns, ns / r);
  };
  row("raw cache-line ping-pong", r);
  row("ipc depth 1 (process memory)", shmbench::median(ipc1));
  row("ipc depth 4 (process memory)", shmbench::median(ipc4));
  row("ipc depth 4 (/dev/shm, two mappings)", shmbench::median(ipcshm));
  const double worst = std::max({shmbench::median(ipc1), shmbench::median(ipc4), shmbench::median(ipcshm)}) / r;
  std::printf("target: ipc within 1.5x of raw -> worst variant %.2fx: %s\n", worst, worst <= 1.5 ? "met" : "NOT met");
  return 0;
}
