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

// A line that no program data lies in, named by the unused entries of a LineList so that
// its prefetch needs no count: read by every such prefetch, it stays cached.
struct alignas(64) IdleLine {
  unsigned char bytes[64];
};
inline const IdleLine kIdleLine{};

// Addresses of lines to prefetch later, recorded where they are at hand for a prefetcher
// that runs where they are not (the simulator records, at the end of a client's step, the
// lines its next step will read, and prefetches them one event before that step). Two
// lines, two parts: the per-step entries, rewritten after every step (set_step), are the
// last `step` of at[], from the end down (the second line, with the counts: a step
// writes one line of the list); the set-up's (add) fill at[] from the start. prefetch()
// asks for all kMax entries, unrolled and without a count: an entry not in use names
// kIdleLine. The per-step part is reserved first, so a client with many lines to name
// loses set-up lines, never the per-step ones (a hint may be incomplete, never written
// beyond the list).
struct alignas(64) LineList {
  static constexpr uint32_t kMax = 15;
  const void* at[kMax];
  uint32_t step = 0;    // per-step entries: at[kMax - step, kMax)
  uint32_t stable = 0;  // set-up entries: at[0, stable)

  LineList() noexcept {
    for (const void*& a : at) a = idle();
  }
  static const void* idle() noexcept { return &kIdleLine; }

  // Set-up, before add(): min(n, kMax) per-step entries (each names kIdleLine until
  // set_step writes it). Returns how many were reserved.
  uint32_t reserve_step(uint32_t n) noexcept {
    step = n < kMax ? n : kMax;
    return step;
  }
  // Set-up: an address that stays; dropped once the list is full.
  void add(const void* p) noexcept {
    if (stable + step < kMax) at[stable++] = p;
  }
  // add(p) unless p lies in the line added last (set-up: neighbouring fields of one object).
  void add_line_once(const void* p) noexcept {
    if (stable == 0 || line_of(p) != line_of(at[stable - 1])) add(p);
  }
  static uintptr_t line_of(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p) / 64; }
  // After a step: per-step entry i (< step; idle() when the step names nothing there).
  [[gnu::always_inline]] void set_step(uint32_t i, const void* p) noexcept { at[kMax - 1 - i] = p; }
  const void* step_at(uint32_t i) const noexcept { return at[kMax - 1 - i]; }
  [[gnu::always_inline]] void prefetch() const noexcept {
#pragma GCC unroll 16
    for (uint32_t i = 0; i < kMax; ++i) prefetch_line(at[i]);
  }
};
static_assert(sizeof(LineList) == 128, "two lines");

}  // namespace bkv
