// Doorbell ordering and the BlueFlame copy.
//
// Rules (PRM "Doorbells and BlueFlame", rdma-core util/udma_barrier.h):
//  1. WQE stores reach memory before the doorbell record says they exist
//     (udma_to_device_barrier: a compiler barrier on x86's TSO; on AArch64 a store
//     barrier for outer-shareable observers, dmb oshst: the device is one, and the
//     inner-shareable barrier a C++ fence emits orders stores for other CPUs only);
//  2. the doorbell record is written before the MMIO doorbell (mmio_wc_start);
//  3. the BlueFlame register is write-combining memory: the copy goes out in whole
//     64-byte chunks and is pushed to the device with a store fence (mmio_flush_writes:
//     sfence on x86, dsb st on AArch64, where a dmb does not wait for write-combined
//     stores to leave the core);
//  4. consecutive doorbells alternate between the two halves of the BlueFlame buffer
//     (offset ^= size), so two writes never merge in one write-combining buffer.
//
// On hardware the register is MMIO; in emulation it is plain memory that the software
// NIC reads back, so the same code path runs in tests. Only x86 runs here: the AArch64
// barriers are rdma-core's for that architecture, compiled but never run on a device;
// any other architecture is refused at compile time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "transports/mlx5/prm.hpp"

namespace bkv::mlx5 {

// Rule 1.
[[gnu::always_inline]] inline void udma_to_device_barrier() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("" ::: "memory");
#elif defined(__aarch64__)
  asm volatile("dmb oshst" ::: "memory");
#else
#error "mlx5 direct data path: the doorbell barriers are defined for x86 and AArch64 only"
#endif
}

// Rules 2 and 3: order and flush write-combined stores (mmio_wc_start before the
// BlueFlame write, mmio_flush_writes after it; both are a store fence on x86).
[[gnu::always_inline]] inline void mmio_flush_writes() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#elif defined(__aarch64__)
  asm volatile("dsb st" ::: "memory");
#else
#error "mlx5 direct data path: the doorbell barriers are defined for x86 and AArch64 only"
#endif
}

// Rule 1: the doorbell record (a big-endian word) is written after the WQE stores.
[[gnu::always_inline]] inline void write_doorbell_record(uint32_t* dbrec_word, uint32_t host_value) noexcept {
  udma_to_device_barrier();
  __atomic_store_n(dbrec_word, htobe32(host_value), __ATOMIC_RELEASE);
}

// Rule 1 for the send queue's record, whose value is 16 bits (bits 31:16 are reserved
// and must be 0): only its low half, bytes 2..3 of the big-endian word, is written (one
// 16-bit store, which the NIC cannot see half done). The caller wrote the whole word 0
// once when the queue was created, so the reserved half stays 0. One instruction fewer
// than the 32-bit write (no zero extension before the swap).
// The half is stored through a may_alias type: it is part of a uint32_t word.
using DoorbellHalf = uint16_t __attribute__((may_alias));
[[gnu::always_inline]] inline void write_doorbell_record16(uint32_t* dbrec_word, uint16_t host_value) noexcept {
  udma_to_device_barrier();
  __atomic_store_n(reinterpret_cast<DoorbellHalf*>(dbrec_word) + 1, htobe16(host_value), __ATOMIC_RELEASE);
}

// The 8-byte doorbell: the first 8 bytes of a WQE's control segment (opmod_idx_opcode
// and qpn_ds), written as one 64-bit store.
[[gnu::always_inline]] inline void bf_write8(std::byte* reg, const std::byte* ctrl) noexcept {
  uint64_t v;
  std::memcpy(&v, ctrl, sizeof v);
  __atomic_store_n(reinterpret_cast<uint64_t*>(reg), v, __ATOMIC_RELAXED);
}

// Plain fallback of the BlueFlame copy: `chunks` 64-byte chunks as 64-bit stores.
inline void bf_copy_plain(std::byte* reg, const std::byte* src, uint32_t chunks) noexcept {
  auto* d = reinterpret_cast<uint64_t*>(reg);
  for (uint32_t i = 0; i < chunks * (kWqeBb / 8); ++i) {
    uint64_t v;
    std::memcpy(&v, src + 8 * i, sizeof v);
    __atomic_store_n(d + i, v, __ATOMIC_RELAXED);
  }
}

// Rule 3, one 64-byte chunk with the widest aligned vector stores the build targets
// (AVX-512: one store; AVX: two; SSE2: four). Both the send queue and the register are
// 64-byte aligned (checked when the queue pair is created).
[[gnu::always_inline]] inline void bf_copy64(std::byte* reg, const std::byte* src) noexcept {
#if defined(__AVX512F__)
  _mm512_store_si512(reinterpret_cast<__m512i*>(reg), _mm512_load_si512(reinterpret_cast<const __m512i*>(src)));
#elif defined(__AVX__)
  const auto* s = reinterpret_cast<const __m256i*>(src);
  auto* d = reinterpret_cast<__m256i*>(reg);
  const __m256i a = _mm256_load_si256(s), b = _mm256_load_si256(s + 1);
  _mm256_store_si256(d, a);
  _mm256_store_si256(d + 1, b);
#elif defined(__SSE2__)
  const auto* s = reinterpret_cast<const __m128i*>(src);
  auto* d = reinterpret_cast<__m128i*>(reg);
  const __m128i a = _mm_load_si128(s), b = _mm_load_si128(s + 1), c = _mm_load_si128(s + 2), e = _mm_load_si128(s + 3);
  _mm_store_si128(d, a);
  _mm_store_si128(d + 1, b);
  _mm_store_si128(d + 2, c);
  _mm_store_si128(d + 3, e);
#else
  bf_copy_plain(reg, src, 1);
#endif
}

// Rule 3: `chunks` >= 1 whole 64-byte chunks; one chunk (a WQE of one basic block) is
// the common case and costs no loop.
[[gnu::always_inline]] inline void bf_copy(std::byte* reg, const std::byte* src, uint32_t chunks) noexcept {
  bf_copy64(reg, src);
  for (uint32_t i = 1; i < chunks; ++i) bf_copy64(reg + 64 * i, src + 64 * i);
}

// Rule 3 for one WQE of 2..kMaxWqeBbs blocks: unrolled, no loop (a WQE of this
// transport is at most kMaxWqeBbs = 4 blocks, prm.hpp).
[[gnu::always_inline]] inline void bf_copy_wqe(std::byte* reg, const std::byte* src, uint32_t chunks) noexcept {
  static_assert(kMaxWqeBbs == 4, "unrolled for WQEs of up to 4 blocks");
  bf_copy64(reg, src);
  bf_copy64(reg + kWqeBb, src + kWqeBb);
  if (chunks > 2) bf_copy64(reg + 2 * kWqeBb, src + 2 * kWqeBb);
  if (chunks > 3) bf_copy64(reg + 3 * kWqeBb, src + 3 * kWqeBb);
}

// Rules 2 and 3 around one BlueFlame write, after the doorbell record: fence
// (mmio_wc_start), the write, fence (mmio_flush_writes) so the write-combining buffer
// goes out now. blueflame_copy: `chunks` >= 1 chunks of WQEs; blueflame_doorbell8:
// the 8-byte doorbell of the WQE whose control segment is at `ctrl`.
[[gnu::always_inline]] inline void blueflame_copy(std::byte* reg, const std::byte* src, uint32_t chunks) noexcept {
  mmio_flush_writes();
  bf_copy(reg, src, chunks);
  mmio_flush_writes();
}
// One BlueFlame write of one WQE of 2..kMaxWqeBbs blocks.
[[gnu::always_inline]] inline void blueflame_copy_wqe(std::byte* reg, const std::byte* src, uint32_t chunks) noexcept {
  mmio_flush_writes();
  bf_copy_wqe(reg, src, chunks);
  mmio_flush_writes();
}
[[gnu::always_inline]] inline void blueflame_doorbell8(std::byte* reg, const std::byte* ctrl) noexcept {
  mmio_flush_writes();
  bf_write8(reg, ctrl);
  mmio_flush_writes();
}

}  // namespace bkv::mlx5
