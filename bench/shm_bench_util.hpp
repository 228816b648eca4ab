// Helpers for the core/shm micro-benchmarks: the request and response the ipc and
// delegationrpc benchmarks send, CPU pinning, timing, medians.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/shm/common.hpp"

namespace shmbench {

// The request and response of the ipc and delegationrpc benchmarks (24 and 16 bytes).
struct Req {
  uint32_t client;
  uint32_t pad;
  uint64_t seq;
  uint64_t value;
};
struct Resp {
  uint64_t seq;
  uint64_t value;
};

// A counter alone on its cache line.
struct alignas(bkv::shm::kCacheLine) Line {
  std::atomic<uint64_t> v{0};
};

// CPUs this process may run on, in order. Read once, at the first call (main calls
// print_machine() before pinning anything): a thread's affinity is inherited, so asking
// later from a thread created by a pinned thread would see only that thread's core.
inline const std::vector<int>& allowed_cpus() {
  static const std::vector<int> cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> v;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) v.push_back(c);
    return v;
  }();
  return cpus;
}

// Pins the calling thread to cpu if it is allowed; returns the cpu or -1 (unpinned).
inline int pin_self(int cpu) {
  const auto& cpus = allowed_cpus();
  if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? cpu : -1;
}

// Placement used by every benchmark: thread k on core k % 2 (cores 0 and 1).
inline int core_for(int k) { return k % 2; }

// Prints the CPU count and the load average: spin-wait benchmarks are only meaningful
// on an otherwise idle machine (waits yield after kSpinsBeforeYield spins, so a loaded
// machine slows them down instead of stalling them).
inline void print_machine() {
  const auto& cpus = allowed_cpus();
  double load[3] = {0, 0, 0};
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = load[1] = load[2] = -1;
    std::fclose(f);
  }
  std::printf("machine: %u hardware threads, %zu allowed CPUs, load average %.2f %.2f %.2f; threads pinned to "
              "cores 0/1 (thread k -> core k%%2)\n",
              std::thread::hardware_concurrency(), cpus.size(), load[0], load[1], load[2]);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Spin barrier for the start of a measured run (all threads begin together).
class StartLine {
 public:
  explicit StartLine(int parties) : parties_(parties) {}
  void arrive_and_wait() {
    arrived_.fetch_add(1, std::memory_order_acq_rel);
    while (arrived_.load(std::memory_order_acquire) < parties_) std::this_thread::yield();
  }

 private:
  alignas(64) int parties_;
  std::atomic<int> arrived_{0};
  char pad_[64 - sizeof(int) - sizeof(std::atomic<int>)];
};

}  // namespace shmbench
