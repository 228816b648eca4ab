// The Transport concept: an RDMA-like NIC with reliable connections (RC semantics:
// in-order, reliable, per connection), seen through the few operations copyrpc needs.
//
// One Transport object is one "device context" owned by one thread: it holds one
// receive completion queue and one send completion queue shared by all its queue pairs,
// and one shared receive queue (SRQ) of zero-length receives. A WRITE-with-immediate
// consumes one SRQ receive at the target and produces one receive completion there.
// post_receives(n) accepts n <= srq_capacity() - srq_posted(); srq_posted() counts a
// receive until the transport has room for it again. A software NIC stops counting it
// when a WRITE-with-immediate takes it; the direct mlx5 path when its completion's CQ
// entry is handed back to the NIC, which for a compressed session read in part is
// after the poll that reported the completion (transports/mlx5/direct_transport.hpp).
//
// Implementations: transports/loopback (instant and wall-clock), sim/des_transport.hpp
// (discrete-event), transports/mlx5 (direct mlx5 data path, portable verbs path),
// transports/ucx.
// Each one checks itself against this concept with a static_assert.
//
// Data-path calls never block: a full send queue is reported as PostResult::kSendQueueFull.
// Completion callbacks are template parameters so they inline (no std::function).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/meter.hpp"

namespace bkv {

// Access rights of a registered region (bit mask, as ibv_access_flags).
enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
};

struct MemoryRegion {
  std::byte* addr = nullptr;
  uint64_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// A window of a peer's registered memory, as learned out of band.
struct RemoteBuffer {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  uint64_t length = 0;
};
static_assert(sizeof(RemoteBuffer) == 24 && std::is_trivially_copyable_v<RemoteBuffer>);

// Work-completion status; the subset of ibv_wc_status a copyrpc user can meet.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocalLengthError,
  kLocalProtectionError,   // bad lkey or local bounds
  kRemoteAccessError,      // bad rkey, remote bounds or missing remote permission
  kRemoteOperationError,
  kWrFlushError,           // QP is in the error state; the WQE was flushed
  kRetryExceeded,
  kGeneralError,
};

enum class WcOpcode : uint8_t { kRdmaWrite = 0, kRdmaWriteImm, kRdmaRead };

struct RecvCompletion {
  uint32_t qp_num = 0;
  uint32_t imm = 0;
  uint32_t byte_len = 0;
  WcStatus status = WcStatus::kSuccess;
};

struct SendCompletion {
  uint32_t qp_num = 0;
  uint64_t wr_id = 0;
  WcOpcode opcode = WcOpcode::kRdmaWrite;
  WcStatus status = WcStatus::kSuccess;
};

enum class PostResult : uint8_t { kOk = 0, kSendQueueFull };

constexpr const char* to_string(WcStatus s) noexcept {
  switch (s) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocalLengthError: return "local length error";
    case WcStatus::kLocalProtectionError: return "local protection error";
    case WcStatus::kRemoteAccessError: return "remote access error";
    case WcStatus::kRemoteOperationError: return "remote operation error";
    case WcStatus::kWrFlushError: return "work request flushed";
    case WcStatus::kRetryExceeded: return "transport retry counter exceeded";
    case WcStatus::kGeneralError: return "general error";
  }
  return "unknown status";
}

namespace detail {
struct RecvSink {
  void operator()(const RecvCompletion&) const noexcept {}
};
struct SendSink {
  void operator()(const SendCompletion&) const noexcept {}
};
}  // namespace detail

template <class Q, class Info>
concept QueuePairOf = requires(Q& qp, const Q& cqp, const Info& info, const void* src, void* dst,
                               uint32_t len, uint32_t key, RemoteBuffer rb, uint32_t imm,
                               uint64_t wr_id, bool signaled) {
  { cqp.qp_num() } -> std::same_as<uint32_t>;
  { cqp.local_info() } -> std::same_as<Info>;
  { qp.connect(info) } -> std::same_as<void>;
  { qp.post_write_imm(src, len, key, rb, imm, wr_id, signaled) } -> std::same_as<PostResult>;
  { qp.post_write(src, len, key, rb, wr_id, signaled) } -> std::same_as<PostResult>;
  { qp.post_read(dst, len, key, rb, wr_id, signaled) } -> std::same_as<PostResult>;
  { qp.ring_doorbell() } -> std::same_as<void>;
  { cqp.send_queue_free() } -> std::same_as<uint32_t>;
};

// The concept. ConnectInfo is the trivially copyable blob a peer needs to connect to a
// queue pair (exchanged over MPI or in process). Meter is the cost sink: NullMeter on
// real transports, the simulated thread's clock under the simulator.
template <class T>
concept Transport =
    std::is_trivially_copyable_v<typename T::ConnectInfo> &&
    QueuePairOf<typename T::QueuePair, typename T::ConnectInfo> &&
    CostMeter<typename T::Meter> &&
    requires(T& t, const T& ct, void* ptr, size_t len, uint32_t access, uint32_t n,
             detail::RecvSink rsink, detail::SendSink ssink) {
      { t.register_memory(ptr, len, access) } -> std::same_as<MemoryRegion>;
      { t.create_queue_pair() } -> std::same_as<typename T::QueuePair&>;
      { t.poll_recv(rsink, n) } -> std::same_as<uint32_t>;
      { t.poll_send(ssink, n) } -> std::same_as<uint32_t>;
      { t.post_receives(n) } -> std::same_as<void>;
      { ct.srq_capacity() } -> std::same_as<uint32_t>;
      { ct.srq_posted() } -> std::same_as<uint32_t>;
      { ct.send_queue_depth() } -> std::same_as<uint32_t>;
      { t.meter() } -> std::same_as<typename T::Meter&>;
    };

// Optional, for transports whose memory is simulated (sim/des_transport.hpp): ring
// buffers that cost host memory only for the pages holding live bytes. A transport that
// has these members gets copyrpc's rings from them; copyrpc then tells it which whole
// pages of a ring hold no live byte any more, on both ends of a connection:
//   std::byte* allocate_ring(uint64_t size)      page-aligned, reads as zero
//   void free_ring(std::byte* p, uint64_t size)
//   void discard(std::byte* p, uint64_t len)      local memory: the whole pages inside
//                                                 may be given back (they read as zero)
//   qp.discard_remote(RemoteBuffer b)             the same for the connected peer's
//                                                 memory named by b's rkey
//   uint64_t give_back_batch()                    bytes (whole pages) that must have
//                                                 passed before pages are given back
//                                                 in one call; above one page, the
//                                                 caller also prefaults that much ahead
//   void prefault(std::byte* p, uint64_t len)     the whole pages inside are made
//                                                 resident; no byte changes
//   qp.prefault_remote(RemoteBuffer b)            the same for the peer's memory
// A real NIC's registered memory is pinned and must never be given back under it, so
// the hardware and real-run transports do not have them.
template <class T>
concept PagedRingMemory =
    Transport<T> && requires(T& t, typename T::QueuePair& qp, std::byte* p, uint64_t n, RemoteBuffer rb) {
      { t.allocate_ring(n) } -> std::same_as<std::byte*>;
      { t.free_ring(p, n) } -> std::same_as<void>;
      { t.discard(p, n) } -> std::same_as<void>;
      { qp.discard_remote(rb) } -> std::same_as<void>;
      { t.give_back_batch() } -> std::same_as<uint64_t>;
      { t.prefault(p, n) } -> std::same_as<void>;
      { qp.prefault_remote(rb) } -> std::same_as<void>;
    };

}  // namespace bkv
