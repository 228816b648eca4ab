// FNV-1a, 64 bits: the one hash benchkv uses to fingerprint texts it compares (a sweep
// run's effective configuration, what MPI ranks agree on before they run). Not a
// defence against a chosen collision: it tells apart texts that differ by mistake.
#pragma once

#include <cstdint>
#include <string_view>

namespace bkv::app {

inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

// The hash of `text` continued from `h` (the offset basis for a fresh hash).
constexpr uint64_t fnv1a(std::string_view text, uint64_t h = kFnv1aOffsetBasis) noexcept {
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1aPrime;
  }
  return h;
}

// The published test vectors of FNV-1a 64.
static_assert(fnv1a("") == kFnv1aOffsetBasis);
static_assert(fnv1a("a") == 0xaf63dc4c8601ec8cull);
static_assert(fnv1a("foobar") == 0x85944171f73967e8ull);

}  // namespace bkv::app
