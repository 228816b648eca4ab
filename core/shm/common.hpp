// Small pieces shared by the shared-memory channels (segment, delegationrpc, ipc, flux):
// cache-line constants, power-of-two helpers, the error type of the control path,
// atomic access to fields of shared-memory structs, and the spin-wait hint.
//
// Shared-memory structs are plain standard-layout structs (so offsetof is well defined
// and the layout can be pinned with static_asserts); the fields that are synchronised
// are accessed through std::atomic_ref, which is lock-free for 1-, 4- and 8-byte
// integers on every platform we build for (asserted below).
#pragma once

#include <sched.h>

#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bkv::shm {

// Control-path errors (create, attach, connect): the message names the problem.
// Data-path operations never throw; they return status enums.
class ShmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// x86-64 and AArch64 both have 64-byte cache lines (the unit of coherence traffic).
inline constexpr size_t kCacheLine = 64;

constexpr bool is_pow2(uint64_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }

// Rounds v up to a multiple of a; a must be a power of two.
constexpr size_t align_up(size_t v, size_t a) noexcept { return (v + a - 1) & ~(a - 1); }

// floor(log2(v)) (the exponent of a power of two), 0 for v <= 1.
constexpr uint32_t log2_pow2(uint64_t v) noexcept { return v <= 1 ? 0 : static_cast<uint32_t>(std::bit_width(v)) - 1; }

static_assert(is_pow2(kCacheLine) && align_up(17, 64) == 64 && align_up(64, 64) == 64);
static_assert(!is_pow2(0) && !is_pow2(12) && log2_pow2(1024) == 10);
static_assert(log2_pow2(0) == 0 && log2_pow2(1) == 0 && log2_pow2(12) == 3 && log2_pow2(uint64_t{1} << 63) == 63);

// ---- checked size arithmetic ------------------------------------------------------
// Sizes derived from header fields (shared memory: any value at all) or from caller
// configs are computed with these instead of the bare operators: each returns nullopt
// where the exact result does not fit in 64 bits, instead of wrapping around.

// Rule: a product of sizes is usable only if it fits in 64 bits.
constexpr std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) noexcept {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  assert(a == 0 || r / a == b);  // invariant: no wrap-around
  return r;
}

// Rule: a sum of sizes is usable only if it fits in 64 bits.
constexpr std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) noexcept {
  uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  assert(r >= a && r - a == b);  // invariant: no wrap-around
  return r;
}

static_assert(checked_mul(uint64_t{1} << 31, uint64_t{1} << 32) == uint64_t{1} << 63);
static_assert(!checked_mul(uint64_t{1} << 31, uint64_t{1} << 33) && !checked_mul(~uint64_t{0}, 2));
static_assert(checked_mul(0, ~uint64_t{0}) == 0);
static_assert(checked_add(~uint64_t{0} - 1, 1) == ~uint64_t{0} && !checked_add(~uint64_t{0}, 1));

// Largest segment any channel may declare or create (1 TiB). A header may not declare
// more, whatever the real segment size: with it every offset stays far below 2^64, so
// base + offset cannot wrap, and a client never sizes local state from a larger claim.
inline constexpr uint64_t kMaxChannelSegmentBytes = uint64_t{1} << 40;

// Rule: a count declared by a header or a config is usable only up to its cap.
// Throws ShmError "<where>: <field>=<value> exceeds the limit of <cap>".
inline void require_at_most(uint64_t value, uint64_t cap, const std::string& where, const char* field) {
  if (value > cap)
    throw ShmError(where + ": " + field + "=" + std::to_string(value) + " exceeds the limit of " + std::to_string(cap));
}

static_assert(std::atomic_ref<uint8_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

// Atomic view of a field that lives in shared memory. Lock-free atomics on a
// MAP_SHARED mapping are address-free, so they synchronise across processes too.
template <class T>
inline std::atomic_ref<T> atomic_field(T& field) noexcept {
  return std::atomic_ref<T>(field);
}

// Spin-wait hint (x86 PAUSE / AArch64 YIELD): lets the sibling hyperthread run and
// avoids the memory-order machine clear when the awaited line changes.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spin iterations before a waiting thread also yields its core. The channels are
// built for one thread per core, but test and laptop runs oversubscribe (2 cores,
// 5+ threads): yielding then lets the thread we wait for run.
inline constexpr uint32_t kSpinsBeforeYield = 256;

// One wait step of a spin loop: PAUSE, and every kSpinsBeforeYield steps sched_yield().
struct SpinWait {
  uint32_t spins = 0;
  void wait() noexcept {
    if (++spins < kSpinsBeforeYield) {
      cpu_relax();
    } else {
      spins = 0;
      sched_yield();
    }
  }
};

// Allocator that gives every block whole cache lines of its own. The channel objects
// keep their hot local state in such vectors and are themselves alignas(kCacheLine):
// a server and a client created by the same thread (tests, simulator, benchmarks) must
// not share a line through adjacent heap blocks or adjacent stack objects, or every
// local update would bounce the line between the two cores (false sharing).
template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() noexcept = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(align_up(n * sizeof(T), kCacheLine), std::align_val_t{kCacheLine}));
  }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const noexcept {
    return true;
  }
};
template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

// Hex rendering for error messages (no iostream/format in this widely included header).
inline std::string hex_u64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string s = "0x";
  for (int shift = 60; shift >= 0; shift -= 4) s.push_back(kDigits[(v >> shift) & 0xF]);
  return s;
}

}  // namespace bkv::shm
