// Cache prefetch hints: ask for a line to be brought into the caches ahead of its use.
// A hint changes no byte and no result (it may be dropped by the CPU); reading the line
// later is what the program relies on. Callers use them where the next addresses are
// known well before the loads that would otherwise miss one after another.
#pragma once

#include <cstdint>

namespace bkv {

// The line holding *p into every cache level (x86: prefetcht0). Written as asm: for an
// address whose bytes the compiler sees are never read after the hint, GCC 12 may emit no
// instruction for __builtin_prefetch.
inline void prefetch_line(const void* p) noexcept {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Addresses of lines to prefetch later, recorded where they are at hand for a prefetcher
// that runs where they are not (the simulator records, at the end of a client's step, the
// lines its next step will read, and prefetches them one event before that step). Two
// lines: the first `kept` addresses stay when the list is refilled (restart()); an
// address beyond the capacity is dropped (a hint may be incomplete, never wrong-sized).
struct alignas(64) LineList {
  static constexpr uint32_t kMax = 15;
  const void* at[kMax] = {};
  uint32_t count = 0;
  uint32_t kept = 0;

  [[gnu::always_inline]] void add(const void* p) noexcept {
    if (count < kMax) [[likely]]
      at[count++] = p;
  }
  // add(p) unless p lies in the line added last (set-up: neighbouring fields of one object).
  void add_line_once(const void* p) noexcept {
    if (count == 0 || line_of(p) != line_of(at[count - 1])) add(p);
  }
  static uintptr_t line_of(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p) / 64; }
  void keep() noexcept { kept = count; }        // what is in the list now stays
  void restart() noexcept { count = kept; }     // drops what came after keep()
  void prefetch() const noexcept {
    for (uint32_t i = 0; i < count; ++i) prefetch_line(at[i]);
  }
};
static_assert(sizeof(LineList) == 128, "two lines");

}  // namespace bkv
