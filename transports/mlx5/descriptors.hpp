// Plain-memory descriptors of the queues the direct data path drives, and the
// connection blob peers exchange.
//
// On hardware the descriptors are filled from mlx5dv_init_obj() on real ibverbs objects
// (hw_provider.cpp); in tests they describe memory owned by the software NIC emulator
// (emulator/). The data path sees nothing else, so the same code runs in both places.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/transport.hpp"
#include "transports/mlx5/prm.hpp"

namespace bkv::mlx5 {

// Send queue of one RC queue pair (mlx5dv_qp.sq, .dbrec, .bf).
struct SqDescriptor {
  std::byte* buf = nullptr;     // wqe_cnt * stride bytes, 64-byte aligned
  uint32_t wqe_cnt = 0;         // basic blocks, power of two
  uint32_t stride = 0;          // bytes per basic block (64)
  uint32_t* dbrec = nullptr;    // doorbell record, big-endian words [RCV, SND]
  std::byte* bf_reg = nullptr;  // BlueFlame register (2 * bf_size bytes, or 8 if bf_size == 0)
  uint32_t bf_size = 0;         // bytes per BlueFlame half; 0 = no BlueFlame (8-byte doorbells)
  uint32_t qpn = 0;
};

// Which completions a CQ carries (decides its mini-CQE layout when compressed).
enum class CqRole : uint8_t { kSend = 0, kRecv };

// Completion queue (mlx5dv_cq).
struct CqDescriptor {
  std::byte* buf = nullptr;   // cqe_cnt * cqe_size bytes
  uint32_t cqe_cnt = 0;       // power of two
  uint32_t cqe_size = 0;      // 64 or 128
  uint32_t* dbrec = nullptr;  // [SET_CI, ARM]
  uint32_t cqn = 0;
};

// Shared receive queue (mlx5dv_srq).
struct SrqDescriptor {
  std::byte* buf = nullptr;   // wqe_cnt * stride bytes
  uint32_t wqe_cnt = 0;       // power of two
  uint32_t stride = 0;        // >= 32 (next segment + one data segment), power of two
  uint32_t* dbrec = nullptr;  // word 0: receive counter
  uint32_t srqn = 0;
  uint32_t max_wr = 0;        // receives that may be outstanding (<= wqe_cnt)
};

// What the data path asks of a queue pair when it is created.
struct QpCaps {
  uint32_t max_send_wr = 256;         // WQEs of the largest size
  uint32_t max_inline = kMaxInline;   // bytes of inline data per WQE
};

// Connection blob exchanged out of band (MPI or in process): everything the peer needs
// for INIT -> RTR -> RTS, for InfiniBand (LID) and RoCE (GID).
struct ConnectInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t mtu = 0;         // enum ibv_mtu of the sender's port
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  uint8_t gid_index = 0;
  uint8_t reserved[2] = {};
  uint8_t gid[16] = {};
};
static_assert(std::is_trivially_copyable_v<ConnectInfo> && sizeof(ConnectInfo) == 32);
static_assert(offsetof(ConnectInfo, qpn) == 0 && offsetof(ConnectInfo, psn) == 4 && offsetof(ConnectInfo, lid) == 8 &&
              offsetof(ConnectInfo, port) == 10 && offsetof(ConnectInfo, mtu) == 11 &&
              offsetof(ConnectInfo, link_layer) == 12 && offsetof(ConnectInfo, gid) == 16);

// The control path the direct transport needs: ibverbs on hardware, the emulator in
// tests. It is called only from constructors and create/connect, never per request.
template <class P>
concept DirectProvider = requires(P& p, const P& cp, void* ptr, size_t len, uint32_t access, uint32_t n, CqRole role,
                                  const QpCaps& caps, const CqDescriptor& cq, const SrqDescriptor& srq, uint32_t qpn,
                                  const ConnectInfo& info) {
  { p.register_memory(ptr, len, access) } -> std::same_as<MemoryRegion>;
  { p.create_cq(n, role) } -> std::same_as<CqDescriptor>;
  { p.create_srq(n) } -> std::same_as<SrqDescriptor>;
  { p.create_qp(caps, cq, cq, srq) } -> std::same_as<SqDescriptor>;
  { cp.local_info(qpn) } -> std::same_as<ConnectInfo>;
  { p.connect(qpn, info) } -> std::same_as<void>;
};

namespace detail {
[[noreturn]] inline void bad_descriptor(const char* what, const std::string& why) {
  throw std::invalid_argument(std::string("mlx5: invalid ") + what + " descriptor: " + why);
}
inline bool aligned(const void* p, size_t a) noexcept { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }
}  // namespace detail

inline void validate(const SqDescriptor& d) {
  if (d.buf == nullptr || d.dbrec == nullptr || d.bf_reg == nullptr) detail::bad_descriptor("send queue", "null pointer");
  if (!std::has_single_bit(d.wqe_cnt) || d.wqe_cnt < kMaxWqeBbs || d.wqe_cnt > 0x8000)
    detail::bad_descriptor("send queue", "wqe_cnt " + std::to_string(d.wqe_cnt) +
                                             " is not a power of two in [4, 32768]");
  if (d.stride != kWqeBb) detail::bad_descriptor("send queue", "stride " + std::to_string(d.stride) + " != 64");
  if (!detail::aligned(d.buf, kWqeBb) || !detail::aligned(d.bf_reg, 8))
    detail::bad_descriptor("send queue", "buffer not 64-byte aligned or BlueFlame register not 8-byte aligned");
  if (d.bf_size != 0 && (d.bf_size % kWqeBb != 0 || !detail::aligned(d.bf_reg, kWqeBb)))
    detail::bad_descriptor("send queue", "BlueFlame size " + std::to_string(d.bf_size) +
                                             " not a multiple of 64 or register not 64-byte aligned");
  if (d.qpn == 0 || d.qpn > 0xFFFFFF) detail::bad_descriptor("send queue", "QP number out of 24-bit range");
}

inline void validate(const CqDescriptor& d) {
  if (d.buf == nullptr || d.dbrec == nullptr) detail::bad_descriptor("completion queue", "null pointer");
  if (!std::has_single_bit(d.cqe_cnt) || d.cqe_cnt < 2 || d.cqe_cnt > (1u << 23))
    detail::bad_descriptor("completion queue", "cqe_cnt " + std::to_string(d.cqe_cnt) + " is not a power of two in [2, 2^23]");
  if (d.cqe_size != 64 && d.cqe_size != 128)
    detail::bad_descriptor("completion queue", "cqe_size " + std::to_string(d.cqe_size) + " is not 64 or 128");
}

inline void validate(const SrqDescriptor& d) {
  if (d.buf == nullptr || d.dbrec == nullptr) detail::bad_descriptor("shared receive queue", "null pointer");
  if (!std::has_single_bit(d.wqe_cnt) || d.wqe_cnt < 2 || d.wqe_cnt > 0x8000)
    detail::bad_descriptor("shared receive queue", "wqe_cnt " + std::to_string(d.wqe_cnt) + " is not a power of two in [2, 32768]");
  if (!std::has_single_bit(d.stride) || d.stride < kSrqWqeSize)
    detail::bad_descriptor("shared receive queue", "stride " + std::to_string(d.stride) + " is not a power of two >= 32");
  if (d.max_wr == 0 || d.max_wr > d.wqe_cnt)
    detail::bad_descriptor("shared receive queue", "max_wr " + std::to_string(d.max_wr) + " not in [1, wqe_cnt]");
}

}  // namespace bkv::mlx5
