// Workload generation cost: how long the simulator (or a real run) spends pre-generating
// every client's pattern, uniform vs zipfian side by side, and the per-sample cost of the
// Zipf sampler for small and huge item counts (it must stay O(1) as n grows).
//
//   bench_workload [np] [clients] [pattern_len]     (default 16 46 4096: calibration C1 NP=16)
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/kv/workload.hpp"

using namespace bkv::kv;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t parse_arg(const char* text, const char* name) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) {
    fmt::print(stderr, "bench_workload: {} must be a positive integer, got \"{}\"\n", name, text);
    std::exit(2);
  }
  return v;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Generates every client's pattern; returns seconds and a checksum (keeps the work alive).
double generate_all(const WorkloadConfig& cfg, uint32_t clients, uint64_t& checksum) {
  const auto t0 = Clock::now();
  for (uint32_t r = 0; r < cfg.num_ranks; ++r) {
    for (uint32_t c = 0; c < clients; ++c) {
      const Pattern p(cfg, r, c);
      checksum += p[p.size() / 2].key + p.value_seed();
    }
  }
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t np = argc > 1 ? static_cast<uint32_t>(parse_arg(argv[1], "np")) : 16;
  const uint32_t clients = argc > 2 ? static_cast<uint32_t>(parse_arg(argv[2], "clients")) : 46;
  const uint32_t len = argc > 3 ? static_cast<uint32_t>(parse_arg(argv[3], "pattern_len")) : 4096;

  WorkloadConfig cfg;
  cfg.num_ranks = np;
  cfg.key_range = 1024;
  cfg.pattern_len = len;
  validate(cfg);
  const uint64_t entries = uint64_t{np} * clients * len;
  fmt::print("setup: np={} clients/rank={} pattern_len={} key_range={} read_ratio={} ({} entries, {:.1f} MiB)\n",
             np, clients, len, cfg.key_range, cfg.read_ratio, entries,
             static_cast<double>(entries * sizeof(PatternEntry)) / (1 << 20));

  uint64_t checksum = 0;
  const double t_uniform = generate_all(cfg, clients, checksum);
  cfg.distribution = Distribution::kZipfian;
  const double t_zipf = generate_all(cfg, clients, checksum);
  fmt::print("pattern generation: uniform {:.3f} s ({:.1f} ns/entry), zipfian s=1 {:.3f} s ({:.1f} ns/entry), "
             "zipfian/uniform = {:.2f}\n",
             t_uniform, t_uniform * 1e9 / static_cast<double>(entries), t_zipf,
             t_zipf * 1e9 / static_cast<double>(entries), t_zipf / t_uniform);

  constexpr uint64_t kSamples = 20'000'000;
  bkv::Rng rng(1);
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < kSamples; ++i) checksum += rng.below(1u << 14);
  const double t_below = seconds_since(t0);
  fmt::print("per sample ({} samples): Rng::below {:.2f} ns", kSamples, t_below * 1e9 / kSamples);
  for (uint64_t n : {uint64_t{1} << 11, uint64_t{1} << 30, uint64_t{1} << 52}) {
    for (double s : {0.5, 1.0, 2.0}) {
      const ZipfSampler zipf(n, s);
      t0 = Clock::now();
      for (uint64_t i = 0; i < kSamples; ++i) checksum += zipf(rng);
      const double t = seconds_since(t0);
      fmt::print(" | zipf n=2^{} s={} {:.2f} ns ({:.1f}x below)", 63 - __builtin_clzll(n), s, t * 1e9 / kSamples,
                 t / t_below);
    }
  }
  fmt::print("\nchecksum {}\n", checksum);
  return 0;
}
