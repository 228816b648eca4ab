// Cache prefetch hints: ask for a line to be brought into the caches ahead of its use.
// A hint changes no byte and no result (it may be dropped by the CPU); reading the line
// later is what the program relies on. Callers use them where the next addresses are
// known well before the loads that would otherwise miss one after another.
#pragma once

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

}  // namespace bkv
