// flux vs a plain SPSC ring of the same capacity, side by side.
//
// Both run the same request/response pattern between two threads (core 0 caller,
// core 1 responder), with a window of max_inflight outstanding requests:
// plain: two classic FastForward rings (consumer clears the slot flag), capacity 1024,
//        one for requests and one for responses; the caller counts its window itself.
// flux:  FluxNetwork of 2 nodes, capacity 1024, max_inflight 256: node 0 calls node 1
//        (call until kFull, then poll), node 1 try_recv + reply.
// Completed request/response pairs per second; median of interleaved trials.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/shm_bench_util.hpp"
#include "core/shm/flux.hpp"

using namespace bkv::shm;

namespace {

struct Msg {  // the size of the original's DelegatePayload (tag + request)
  uint32_t kind;
  uint32_t rank;
  uint64_t key;
  uint64_t value;
};

constexpr uint32_t kCapacity = 1024;
constexpr uint32_t kWindow = 256;

// Classic FastForward SPSC ring: a full flag per slot, cleared by the consumer.
class PlainSpsc {
 public:
  explicit PlainSpsc(uint32_t cap) : slots_(cap), mask_(cap - 1) {}
  bool push(const Msg& m) {
    Slot& s = slots_[prod_.pos & mask_];
    if (s.full.load(std::memory_order_acquire) != 0) return false;
    s.msg = m;
    s.full.store(1, std::memory_order_release);
    ++prod_.pos;
    return true;
  }
  bool pop(Msg& m) {
    Slot& s = slots_[cons_.pos & mask_];
    if (s.full.load(std::memory_order_acquire) == 0) return false;
    m = s.msg;
    s.full.store(0, std::memory_order_release);
    ++cons_.pos;
    return true;
  }

 private:
  struct alignas(kCacheLine) Slot {
    std::atomic<uint32_t> full{0};
    Msg msg{};
  };
  struct alignas(kCacheLine) Pos {
    uint64_t pos = 0;
  };
  std::vector<Slot> slots_;
  uint64_t mask_;
  Pos prod_, cons_;
};

double plain_mops(uint64_t total, uint64_t& errors) {
  PlainSpsc req(kCapacity), resp(kCapacity);
  shmbench::StartLine start(2);
  std::thread responder([&] {
    shmbench::pin_self(shmbench::core_for(1));
    start.arrive_and_wait();
    Msg m;
    SpinWait spin;
    for (uint64_t served = 0; served < total;) {
      if (!req.pop(m)) {
        spin.wait();
        continue;
      }
      spin = {};
      m.value += 1;
      for (SpinWait w; !resp.push(m);) w.wait();
      ++served;
    }
  });
  shmbench::pin_self(shmbench::core_for(0));
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sent = 0, done = 0;
  Msg m;
  SpinWait spin;
  while (done < total) {
    while (sent < total && sent - done < kWindow && req.push(Msg{0, 1, sent, sent})) ++sent;
    bool any = false;
    while (resp.pop(m)) {
      errors += (m.value != m.key + 1) ? 1 : 0;
      ++done;
      any = true;
    }
    if (any) spin = {}; else spin.wait();
  }
  const double s = shmbench::seconds_since(t0);
  responder.join();
  return static_cast<double>(total) / s / 1e6;
}

double flux_mops(uint64_t total, uint64_t& errors) {
  FluxNetwork<Msg> net(2, FluxConfig{kCapacity, kWindow});
  auto caller = net.node(0);
  auto callee = net.node(1);
  shmbench::StartLine start(2);
  std::thread responder([&] {
    shmbench::pin_self(shmbench::core_for(1));
    start.arrive_and_wait();
    SpinWait spin;
    for (uint64_t served = 0; served < total;) {
      auto r = callee.try_recv();
      if (!r) {
        spin.wait();
        continue;
      }
      spin = {};
      Msg m = r->payload;
      m.value += 1;
      if (callee.reply(r->token, m) != FluxReplyStatus::kOk) ++errors;
      ++served;
    }
  });
  shmbench::pin_self(shmbench::core_for(0));
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sent = 0, done = 0;
  SpinWait spin;
  while (done < total) {
    while (sent < total && caller.call(1, Msg{0, 1, sent, sent}, sent) == FluxCallStatus::kOk) ++sent;
    const uint32_t n = caller.poll([&](uint64_t t, const Msg& m) { errors += (m.key != t || m.value != t + 1) ? 1 : 0; });
    done += n;
    if (n != 0) spin = {}; else spin.wait();
  }
  const double s = shmbench::seconds_since(t0);
  responder.join();
  return static_cast<double>(total) / s / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t total = 4000000;
  int trials = 5;
  if (argc > 1) {
    char* end = nullptr;
    total = std::strtoull(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || total == 0) {
      std::fprintf(stderr, "bench_shm_flux: calls per trial must be a positive integer (got '%s')\n", argv[1]);
      return 2;
    }
  }
  shmbench::print_machine();
  std::printf("setup: %llu request/response pairs per trial, %d interleaved trials, capacity %u, window %u, payload "
              "%zu B\n",
              static_cast<unsigned long long>(total), trials, kCapacity, kWindow, sizeof(Msg));
  uint64_t errors = 0;
  std::vector<double> plain, flux;
  for (int t = 0; t < trials; ++t) {
    plain.push_back(plain_mops(total, errors));
    flux.push_back(flux_mops(total, errors));
  }
  if (errors != 0) {
    std::fprintf(stderr, "bench_shm_flux: %llu wrong or failed calls\n", static_cast<unsigned long long>(errors));
    return 1;
  }
  const double p = shmbench::median(plain), f = shmbench::median(flux);
  std::printf("plain FastForward SPSC pair  %8.2f M req/resp pairs/s\n", p);
  std::printf("flux                         %8.2f M req/resp pairs/s\n", f);
  std::printf("ratio flux/plain %.2f\n", f / p);
  return 0;
}
