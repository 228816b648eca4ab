// mlx5 Programmer's Reference Manual (PRM) rules used by the direct data path: the
// send-queue work-queue entry (WQE) segments and the completion-queue entry (CQE)
// fields, each as one small inline function that names the rule it follows.
//
// Layouts are rdma-core's (<infiniband/mlx5dv.h>): struct mlx5_wqe_ctrl_seg,
// mlx5_wqe_raddr_seg, mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg, mlx5_cqe64,
// mlx5_err_cqe. The mini CQE of a compressed CQE block is not in the public header;
// its 8-byte layout is defined here (MiniCqe offsets) from the PRM.
//
// Everything the NIC reads or writes is big-endian. WQE segments are stored as
// WqeSegment words (see store_segment: such a store cannot modify the queue pair's own
// state, so the compiler keeps that state in registers); everything else (inline data,
// CQEs, the reads back of a WQE) is accessed as bytes (memcpy).
#pragma once

#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/transport.hpp"

namespace bkv::mlx5 {

// ---------------------------------------------------------------------------------
// Send-queue geometry
// ---------------------------------------------------------------------------------

// PRM: the send queue is an array of 64-byte basic blocks (WQEBBs); a WQE is 1..n
// consecutive basic blocks; its size is given in 16-byte units (DS, "octowords").
inline constexpr uint32_t kWqeBb = MLX5_SEND_WQE_BB;
inline constexpr uint32_t kWqeBbShift = MLX5_SEND_WQE_SHIFT;
inline constexpr uint32_t kDsUnit = 16;
inline constexpr uint32_t kCtrlSegSize = sizeof(mlx5_wqe_ctrl_seg);
inline constexpr uint32_t kRaddrSegSize = sizeof(mlx5_wqe_raddr_seg);
inline constexpr uint32_t kDataSegSize = sizeof(mlx5_wqe_data_seg);
inline constexpr uint32_t kInlineHdrSize = sizeof(mlx5_wqe_inl_data_seg);
static_assert(kWqeBb == 64 && (1u << kWqeBbShift) == kWqeBb);
static_assert(kCtrlSegSize == 16 && kRaddrSegSize == 16 && kDataSegSize == 16 && kInlineHdrSize == 4);
static_assert(offsetof(mlx5_wqe_ctrl_seg, opmod_idx_opcode) == 0 && offsetof(mlx5_wqe_ctrl_seg, qpn_ds) == 4 &&
              offsetof(mlx5_wqe_ctrl_seg, signature) == 8 && offsetof(mlx5_wqe_ctrl_seg, fm_ce_se) == 11 &&
              offsetof(mlx5_wqe_ctrl_seg, imm) == 12);
static_assert(offsetof(mlx5_wqe_raddr_seg, raddr) == 0 && offsetof(mlx5_wqe_raddr_seg, rkey) == 8);
static_assert(offsetof(mlx5_wqe_data_seg, byte_count) == 0 && offsetof(mlx5_wqe_data_seg, lkey) == 4 &&
              offsetof(mlx5_wqe_data_seg, addr) == 8);

// The largest WQE this transport builds: 4 basic blocks (256 bytes), which is also the
// usual BlueFlame buffer size, so any single WQE can go out in one BlueFlame copy.
inline constexpr uint32_t kMaxWqeBbs = 4;
inline constexpr uint32_t kMaxWqeBytes = kMaxWqeBbs * kWqeBb;

constexpr uint32_t align16(uint32_t v) noexcept { return (v + kDsUnit - 1) & ~(kDsUnit - 1); }

// Fully inline WRITE: ctrl + raddr + inline header + data fills 256 bytes at 220.
inline constexpr uint32_t kMaxInline = kMaxWqeBytes - kCtrlSegSize - kRaddrSegSize - kInlineHdrSize;
// Inline head + gather entry: ctrl + raddr + inline(4 + 204) + data segment = 256 bytes.
inline constexpr uint32_t kMaxInlineHead = kMaxWqeBytes - kCtrlSegSize - kRaddrSegSize - kDataSegSize - kInlineHdrSize;
static_assert(kMaxInline == 220 && kMaxInlineHead == 204);
static_assert(kCtrlSegSize + kRaddrSegSize + align16(kInlineHdrSize + kMaxInline) == kMaxWqeBytes);
static_assert(kCtrlSegSize + kRaddrSegSize + align16(kInlineHdrSize + kMaxInlineHead) + kDataSegSize == kMaxWqeBytes);

// PRM: a data segment's byte_count of 0 means 2 GiB, so zero-length gather entries are
// left out of the WQE. Bit 31 of the first word of a segment after the remote address
// marks an inline segment (MLX5_INLINE_SEG), so a gather entry of 2^31 bytes would read
// as an empty inline segment: one entry carries at most 2^31 - 1 bytes.
inline constexpr uint64_t kMaxMessageSize = (1ull << 31) - 1;
static_assert((kMaxMessageSize & MLX5_INLINE_SEG) == 0 && ((kMaxMessageSize + 1) & MLX5_INLINE_SEG) != 0);

// DS of a WQE: its size in 16-byte units (6-bit field).
constexpr uint32_t ds_of(uint32_t bytes) noexcept { return align16(bytes) / kDsUnit; }
// Basic blocks a WQE of `ds` units occupies.
constexpr uint32_t bbs_of_ds(uint32_t ds) noexcept {
  constexpr uint32_t kDsPerBb = kWqeBb / kDsUnit;
  return (ds + kDsPerBb - 1) / kDsPerBb;  // = ceil(ds * 16 / 64)
}
static_assert(bbs_of_ds(3) == 1 && bbs_of_ds(4) == 1 && bbs_of_ds(5) == 2 && bbs_of_ds(16) == 4);
inline constexpr uint32_t kMaxDs = 63;  // qpn_ds bits 5:0

// Blocks to retire for a WQE, from the last byte of its qpn_ds as it sits in the queue
// (bits 5:0 = DS, bits 7:6 = low QP-number bits): one table load instead of mask,
// round-up and clamp. A DS of 0 (never written by this transport) still counts one
// block, so retiring always moves forward.
struct BbsOfDsByteTable {
  uint8_t bbs[256];
  constexpr BbsOfDsByteTable() : bbs{} {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t n = bbs_of_ds(b & kMaxDs);
      bbs[b] = static_cast<uint8_t>(n == 0 ? 1 : n);
    }
  }
};
inline constexpr BbsOfDsByteTable kBbsOfDsByte{};
static_assert(kBbsOfDsByte.bbs[0] == 1 && kBbsOfDsByte.bbs[3] == 1 && kBbsOfDsByte.bbs[5] == 2 &&
              kBbsOfDsByte.bbs[0x40 | 16] == 4 && kBbsOfDsByte.bbs[0xC0 | 63] == 16);

// WQE size classes of WRITE / WRITE_IMM / READ (DS units).
constexpr uint32_t ds_rdma_no_data() noexcept { return (kCtrlSegSize + kRaddrSegSize) / kDsUnit; }
constexpr uint32_t ds_rdma_gather() noexcept { return (kCtrlSegSize + kRaddrSegSize + kDataSegSize) / kDsUnit; }
constexpr uint32_t ds_rdma_inline(uint32_t len) noexcept {
  return (kCtrlSegSize + kRaddrSegSize) / kDsUnit + ds_of(kInlineHdrSize + len);
}
constexpr uint32_t ds_rdma_inline_gather(uint32_t head) noexcept { return ds_rdma_inline(head) + kDataSegSize / kDsUnit; }
static_assert(ds_rdma_gather() == 3 && ds_rdma_inline(kMaxInline) == 16 && ds_rdma_inline_gather(kMaxInlineHead) == 16);
static_assert(ds_rdma_inline(12) == 3 && ds_rdma_inline(13) == 4);

// ---------------------------------------------------------------------------------
// WQE segment writers
// ---------------------------------------------------------------------------------

// PRM control segment:
//  - opmod_idx_opcode = (opmod << 24) | (wqe_index << 8) | opcode, where wqe_index is
//    the 16-bit producer counter of the WQE's first basic block (wraps at 0xffff);
//  - qpn_ds = (qpn << 8) | ds, ds = WQE size in 16-byte units;
//  - fm_ce_se: CE = MLX5_WQE_CTRL_CQ_UPDATE asks for a CQE (a signalled WQE);
//  - imm: the immediate of RDMA_WRITE_IMM, in network order as it goes on the wire.
constexpr uint32_t ctrl_opmod_idx_opcode(uint16_t wqe_index, uint8_t opcode) noexcept {
  return (uint32_t{wqe_index} << 8) | opcode;
}
constexpr uint32_t ctrl_qpn_ds(uint32_t qpn, uint32_t ds) noexcept { return (qpn << 8) | ds; }
constexpr uint8_t ctrl_fm_ce_se(bool signaled) noexcept {
  return signaled ? static_cast<uint8_t>(MLX5_WQE_CTRL_CQ_UPDATE) : uint8_t{0};
}

// The QP-number part of qpn_ds in wire order: htobe32((qpn << 8) | ds) equals
// htobe32(qpn << 8) | (ds << 24) on a little-endian host, so it is computed once per QP.
constexpr uint32_t qpn_part_be(uint32_t qpn) noexcept { return __builtin_bswap32(qpn << 8); }
constexpr uint32_t qpn_ds_be(uint32_t qpn_part, uint32_t ds) noexcept { return qpn_part | (ds << 24); }
static_assert(std::endian::native == std::endian::little, "the wire-order shortcuts assume a little-endian host");
static_assert(qpn_ds_be(qpn_part_be(0xABCDEF), 5) == __builtin_bswap32(ctrl_qpn_ds(0xABCDEF, 5)));

// The control segment as two 8-byte little-endian words, as they are stored:
//  - word 0 = opmod_idx_opcode (wire order: opmod 0, index high, index low, opcode) in
//    bytes 0..3 and qpn_ds in bytes 4..7. Everything but the WQE index is fixed for a
//    given QP, opcode and size, so it is computed once per QP (ctrl_word0_fixed) and
//    the index is merged per WQE (ctrl_word0_index: its two bytes, swapped, at byte 1);
//  - word 1 = signature 0, fm_ce_se in byte 3, imm (wire order) in bytes 4..7.
constexpr uint64_t ctrl_word0_fixed(uint8_t opcode, uint32_t qpn_ds_wire) noexcept {
  return (uint64_t{qpn_ds_wire} << 32) | (uint64_t{opcode} << 24);
}
// Word 0 of opcode `to` from word 0 of opcode `from` (same QP, size and index): the
// opcode byte changed by one xor, none when the two are equal.
constexpr uint64_t ctrl_word0_reopcode(uint64_t word0, uint8_t from, uint8_t to) noexcept {
  return word0 ^ ctrl_word0_fixed(static_cast<uint8_t>(from ^ to), 0);
}
static_assert(ctrl_word0_reopcode(ctrl_word0_fixed(0x09, 0x11223344), 0x09, 0x08) == ctrl_word0_fixed(0x08, 0x11223344));
constexpr uint64_t ctrl_word0_index(uint16_t wqe_index) noexcept {
  return uint64_t{__builtin_bswap16(wqe_index)} << 8;
}
// (bswap64 of the zero-extended imm is bswap32(imm) << 32: one swap, no shift.)
constexpr uint64_t ctrl_word1(bool signaled, uint32_t imm) noexcept {
  return (uint64_t{signaled} << (24 + 3)) | __builtin_bswap64(uint64_t{imm});
}
static_assert(ctrl_word1(false, 0x11223344) == uint64_t{__builtin_bswap32(0x11223344)} << 32,
              "imm in wire order in bytes 4..7");
static_assert(MLX5_WQE_CTRL_CQ_UPDATE == 1u << 3 && ctrl_word1(true, 0) == uint64_t{ctrl_fm_ce_se(true)} << 24,
              "CE is bit 3 of fm_ce_se (byte 3 of word 1)");
static_assert((ctrl_word0_fixed(0x09, 0x11223344) | ctrl_word0_index(0xABCD)) ==
                  ((uint64_t{0x11223344} << 32) | __builtin_bswap32(ctrl_opmod_idx_opcode(0xABCD, 0x09))),
              "word 0: opmod_idx_opcode in wire order, then qpn_ds");
static_assert(offsetof(mlx5_wqe_ctrl_seg, fm_ce_se) == 8 + 3 && offsetof(mlx5_wqe_ctrl_seg, imm) == 8 + 4,
              "second word: fm_ce_se in byte 3, imm in bytes 4..7");

// WQE stores: every 16-byte segment (control, remote address, data) is stored as one
// WqeSegment, two little-endian words, not as bytes. A byte (memcpy) store may modify
// any object, so after one the compiler reloads the queue pair's state and its caller's
// arguments from memory; a WqeSegment store modifies only WqeSegment objects, which
// nothing else in the program holds, so queue state stays in registers across the WQE
// build. Segments are 16-byte aligned in the 64-byte aligned send queue (checked when
// the queue pair is created). Readers of the queue (retire, the BlueFlame copy, the NIC)
// read bytes, which may read any object.
struct WqeSegment {
  uint64_t lo;  // bytes 0..7
  uint64_t hi;  // bytes 8..15
};
static_assert(sizeof(WqeSegment) == kDsUnit);
[[gnu::always_inline]] inline void store_segment(std::byte* seg, uint64_t lo, uint64_t hi) noexcept {
  *reinterpret_cast<WqeSegment*>(seg) = WqeSegment{lo, hi};
}

[[gnu::always_inline]] inline void write_ctrl_words(std::byte* wqe, uint64_t w0, uint64_t w1) noexcept {
  store_segment(wqe, w0, w1);
}

// Control segment from its wire-order QP part.
inline void write_ctrl_seg_be(std::byte* wqe, uint16_t wqe_index, uint8_t opcode, uint32_t qpn_ds_wire, bool signaled,
                              uint32_t imm) noexcept {
  write_ctrl_words(wqe, ctrl_word0_fixed(opcode, qpn_ds_wire) | ctrl_word0_index(wqe_index), ctrl_word1(signaled, imm));
}

inline void write_ctrl_seg(std::byte* wqe, uint16_t wqe_index, uint8_t opcode, uint32_t qpn, uint32_t ds,
                           bool signaled, uint32_t imm) noexcept {
  write_ctrl_seg_be(wqe, wqe_index, opcode, qpn_ds_be(qpn_part_be(qpn), ds), signaled, imm);
}

// PRM remote address segment: 64-bit remote virtual address and rkey.
// Stored as words: raddr (wire order) in word 0, rkey (wire order) in the low half of
// word 1, the reserved word 0. Word 1 is the 64-bit swap of rkey shifted down, which on
// this little-endian host equals htobe32(rkey) widened: two instructions either way,
// but GCC hoists this form out of a loop that posts to one rkey, and not the other.
[[gnu::always_inline]] inline void write_raddr_seg(std::byte* seg, uint64_t raddr, uint32_t rkey) noexcept {
  store_segment(seg, htobe64(raddr), __builtin_bswap64(uint64_t{rkey}) >> 32);
}

// PRM data (gather/scatter pointer) segment: byte_count, lkey, local address.
// Stored as words: byte_count then lkey (both wire order) in word 0, which is one swap
// of (len << 32 | lkey); addr (wire order) in word 1.
constexpr uint64_t data_seg_word0(uint32_t len, uint32_t lkey) noexcept {
  return __builtin_bswap64((uint64_t{len} << 32) | lkey);
}
static_assert(data_seg_word0(0x11223344, 0xAABBCCDD) ==
                  (uint64_t{__builtin_bswap32(0x11223344)} | (uint64_t{__builtin_bswap32(0xAABBCCDD)} << 32)),
              "data segment word 0: byte_count (wire order) in bytes 0..3, lkey in bytes 4..7");
[[gnu::always_inline]] inline void write_data_seg(std::byte* seg, uint32_t len, uint32_t lkey, uint64_t addr) noexcept {
  store_segment(seg, data_seg_word0(len, lkey), htobe64(addr));
}

// PRM inline data segment: byte_count = len | MLX5_INLINE_SEG (bit 31), then the bytes,
// padded to a 16-byte boundary. Returns the padded size. The pad is zeroed so that the
// WQE bytes are a function of the request alone.
inline uint32_t write_inline_seg(std::byte* seg, const void* data, uint32_t len) noexcept {
  const uint32_t bytes = align16(kInlineHdrSize + len);
  std::memset(seg + bytes - kDsUnit, 0, kDsUnit);
  const uint32_t hdr = htobe32(len | MLX5_INLINE_SEG);
  std::memcpy(seg, &hdr, sizeof hdr);
  std::memcpy(seg + kInlineHdrSize, data, len);
  return bytes;
}

// PRM NOP WQE, used to fill the basic blocks left before the end of the send queue when
// the next WQE would not fit there (WQEs then never cross the queue end, so a WQE is
// always contiguous for the BlueFlame copy). Its DS covers all `bbs` blocks so the NIC
// steps over them; it is never signalled.
inline void write_nop_wqe(std::byte* wqe, uint16_t wqe_index, uint32_t qpn, uint32_t bbs) noexcept {
  write_ctrl_seg(wqe, wqe_index, MLX5_OPCODE_NOP, qpn, bbs * (kWqeBb / kDsUnit), false, 0);
}

// ---------------------------------------------------------------------------------
// Doorbell records
// ---------------------------------------------------------------------------------

// PRM: the QP doorbell record is two big-endian words, [MLX5_RCV_DBR] and
// [MLX5_SND_DBR]; the send word holds the 16-bit producer counter of the next WQE.
inline constexpr uint32_t kSendDbrIndex = MLX5_SND_DBR;
// PRM: the CQ doorbell record word 0 holds the 24-bit consumer counter (word 1 arms).
inline constexpr uint32_t kCqSetCiIndex = 0;
inline constexpr uint32_t kCqCiMask = 0xFFFFFF;
// PRM: the SRQ doorbell record word 0 holds the 16-bit count of receives posted.
inline constexpr uint32_t kSrqDbrIndex = 0;

// ---------------------------------------------------------------------------------
// Shared receive queue WQE (one next segment + one data segment)
// ---------------------------------------------------------------------------------

static_assert(sizeof(mlx5_wqe_srq_next_seg) == 16 && offsetof(mlx5_wqe_srq_next_seg, next_wqe_index) == 2);
inline constexpr uint32_t kSrqWqeSize = sizeof(mlx5_wqe_srq_next_seg) + kDataSegSize;

// PRM SRQ WQE: next_wqe_index links the free list the NIC walks; a receive with no
// buffer is a data segment of length 0 with the invalid lkey (MLX5_INVALID_LKEY).
inline void write_srq_wqe(std::byte* wqe, uint16_t next_index) noexcept {
  mlx5_wqe_srq_next_seg n{};
  n.next_wqe_index = htobe16(next_index);
  std::memcpy(wqe, &n, sizeof n);
  write_data_seg(wqe + sizeof n, 0, MLX5_INVALID_LKEY, 0);
}

// ---------------------------------------------------------------------------------
// CQE fields
// ---------------------------------------------------------------------------------

inline constexpr uint32_t kCqe64Size = sizeof(mlx5_cqe64);
static_assert(kCqe64Size == 64 && sizeof(mlx5_err_cqe) == 64);
static_assert(offsetof(mlx5_cqe64, srqn_uidx) == 32 && offsetof(mlx5_cqe64, imm_inval_pkey) == 36 &&
              offsetof(mlx5_cqe64, byte_cnt) == 44 && offsetof(mlx5_cqe64, sop_drop_qpn) == 56 &&
              offsetof(mlx5_cqe64, wqe_counter) == 60 && offsetof(mlx5_cqe64, op_own) == 63);
static_assert(offsetof(mlx5_err_cqe, vendor_err_synd) == 54 && offsetof(mlx5_err_cqe, syndrome) == 55 &&
              offsetof(mlx5_err_cqe, s_wqe_opcode_qpn) == 56 && offsetof(mlx5_err_cqe, wqe_counter) == 60 &&
              offsetof(mlx5_err_cqe, op_own) == 63);

// PRM op_own byte: opcode in bits 7:4, CQE format / inline-scatter flags in bits 3:2,
// solicited event in bit 1, owner in bit 0.
constexpr uint8_t cqe_opcode(uint8_t op_own) noexcept { return op_own >> 4; }
constexpr uint8_t cqe_format(uint8_t op_own) noexcept { return (op_own >> 2) & 3; }
constexpr uint8_t cqe_owner(uint8_t op_own) noexcept { return op_own & MLX5_CQE_OWNER_MASK; }
inline constexpr uint8_t kCqeSeBit = 1u << 1;
inline constexpr uint8_t kCqeFormatCompressed = 3;  // mini-CQE array session
inline constexpr uint8_t kCqeInvalidOpOwn = MLX5_CQE_INVALID << 4;
static_assert(cqe_format(MLX5_INLINE_SCATTER_32) == 1 && cqe_format(MLX5_INLINE_SCATTER_64) == 2);

// PRM ownership: entry `ci` of a CQ with cqe_cnt (power of two) entries belongs to
// software when its opcode is not INVALID and its owner bit equals bit log2(cqe_cnt) of
// ci (the NIC flips the bit it writes on every pass over the ring).
constexpr uint8_t sw_owner_bit(uint32_t ci, uint32_t log2_cqe_cnt) noexcept {
  return static_cast<uint8_t>((ci >> log2_cqe_cnt) & 1);
}
constexpr bool cqe_is_sw_owned(uint8_t op_own, uint8_t sw_bit) noexcept {
  return cqe_opcode(op_own) != MLX5_CQE_INVALID && cqe_owner(op_own) == sw_bit;
}

// The 64-byte CQE inside an entry: with 128-byte CQEs it is the second half (the first
// half carries inline-scattered data).
constexpr uint32_t cqe64_offset(uint32_t cqe_size) noexcept { return cqe_size - kCqe64Size; }

inline uint8_t load_op_own(const std::byte* cqe64) noexcept {
  // Acquire: the rest of the CQE is read only after its owner byte says it is ours.
  return __atomic_load_n(reinterpret_cast<const uint8_t*>(cqe64 + offsetof(mlx5_cqe64, op_own)), __ATOMIC_ACQUIRE);
}
inline void store_op_own(std::byte* cqe64, uint8_t v) noexcept {
  __atomic_store_n(reinterpret_cast<uint8_t*>(cqe64 + offsetof(mlx5_cqe64, op_own)), v, __ATOMIC_RELEASE);
}

inline uint32_t load_be32(const std::byte* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return be32toh(v);
}
inline uint16_t load_be16(const std::byte* p) noexcept {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return be16toh(v);
}
inline void store_be32(std::byte* p, uint32_t host) noexcept {
  const uint32_t v = htobe32(host);
  std::memcpy(p, &v, sizeof v);
}

// PRM CQE: sop_drop_qpn bits 23:0 = QP number; for requester CQEs bits 31:24 hold the
// opcode of the completed send WQE.
inline uint32_t cqe_qpn(const std::byte* c) noexcept { return load_be32(c + offsetof(mlx5_cqe64, sop_drop_qpn)) & 0xFFFFFF; }
inline uint8_t cqe_send_opcode(const std::byte* c) noexcept {
  return static_cast<uint8_t>(load_be32(c + offsetof(mlx5_cqe64, sop_drop_qpn)) >> 24);
}
inline uint32_t cqe_imm(const std::byte* c) noexcept { return load_be32(c + offsetof(mlx5_cqe64, imm_inval_pkey)); }
inline uint32_t cqe_byte_cnt(const std::byte* c) noexcept { return load_be32(c + offsetof(mlx5_cqe64, byte_cnt)); }
inline uint16_t cqe_wqe_counter(const std::byte* c) noexcept { return load_be16(c + offsetof(mlx5_cqe64, wqe_counter)); }
inline uint8_t err_cqe_syndrome(const std::byte* c) noexcept {
  return static_cast<uint8_t>(c[offsetof(mlx5_err_cqe, syndrome)]);
}
inline uint8_t err_cqe_vendor_syndrome(const std::byte* c) noexcept {
  return static_cast<uint8_t>(c[offsetof(mlx5_err_cqe, vendor_err_synd)]);
}
// PRM error CQE: s_wqe_opcode_qpn = (opcode of the failed WQE << 24) | qpn.
inline uint32_t err_cqe_qpn(const std::byte* c) noexcept {
  return load_be32(c + offsetof(mlx5_err_cqe, s_wqe_opcode_qpn)) & 0xFFFFFF;
}

// Inline-scattered data (scatter-to-CQE): with MLX5_INLINE_SCATTER_32 the data is in
// bytes 0..31 of the 64-byte CQE; with MLX5_INLINE_SCATTER_64 it is in the 64 bytes
// before it (the first half of a 128-byte CQE).
inline constexpr uint32_t kScatter32Max = 32;
inline constexpr uint32_t kScatter64Max = 64;

// Error syndromes (PRM / mlx5dv.h) to work-completion status, as libmlx5 maps them.
constexpr WcStatus status_of_syndrome(uint8_t syndrome) noexcept {
  switch (syndrome) {
    case MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: return WcStatus::kLocalLengthError;
    case MLX5_CQE_SYNDROME_LOCAL_PROT_ERR:
    case MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: return WcStatus::kLocalProtectionError;
    case MLX5_CQE_SYNDROME_WR_FLUSH_ERR: return WcStatus::kWrFlushError;
    case MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: return WcStatus::kRemoteAccessError;
    case MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR:
    case MLX5_CQE_SYNDROME_REMOTE_OP_ERR:
    case MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: return WcStatus::kRemoteOperationError;
    case MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR:
    case MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: return WcStatus::kRetryExceeded;
    default: return WcStatus::kGeneralError;
  }
}

// ---------------------------------------------------------------------------------
// Compressed CQEs (PRM "CQE compression")
// ---------------------------------------------------------------------------------
//
// A compression session of n >= 2 completions occupies n consecutive CQ entries
// h .. h+n-1. Entry h is the title CQE: a full CQE whose op_own carries format 3, whose
// fields (QP number, opcode, immediate, ...) are common to the whole session, and whose
// byte_cnt holds n. The per-completion fields are 8-byte mini CQEs in arrays of eight,
// each array filling a whole 64-byte CQE: array 0 sits in entry h+1, array k >= 1 in
// entry h+8k. Only the title's owner bit is valid; the consumer resets every entry of
// the session to INVALID after reading it, so stale mini-CQE bytes can never pass the
// owner test on a later pass.
//
// Mini CQE (8 bytes), responder format "hash": rx_hash_result be32 @0, byte_cnt be32 @4.
// Requester: wqe_counter be16 @0, s_wqe_opcode u8 @2, reserved u8 @3, byte_cnt be32 @4.
inline constexpr uint32_t kMiniCqeSize = 8;
inline constexpr uint32_t kMiniCqesPerArray = kCqe64Size / kMiniCqeSize;
inline constexpr uint32_t kMiniWqeCounterOffset = 0;
inline constexpr uint32_t kMiniSendOpcodeOffset = 2;
inline constexpr uint32_t kMiniByteCntOffset = 4;
static_assert(kMiniCqesPerArray == 8 && kMiniByteCntOffset + 4 == kMiniCqeSize);

// Entry offset (from the title) of the array holding mini CQE i.
constexpr uint32_t mini_array_entry(uint32_t i) noexcept {
  const uint32_t k = i / kMiniCqesPerArray;
  return k == 0 ? 1 : k * kMiniCqesPerArray;
}
static_assert(mini_array_entry(0) == 1 && mini_array_entry(7) == 1 && mini_array_entry(8) == 8 &&
              mini_array_entry(17) == 16);
// The array for mini CQE i must lie inside the session: true for every i < n when n >= 2.
static_assert(mini_array_entry(1) < 2 && mini_array_entry(8) < 9 && mini_array_entry(63) < 64);

}  // namespace bkv::mlx5
