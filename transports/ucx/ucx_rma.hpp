// RDMA READ and WRITE of the UCX transport as UCX RMA (ucp_get_nbx / ucp_put_nbx) on
// memory mapped with ucp_mem_map, instead of the active-message emulation
// (ucx_transport.hpp; docs/data.md, "UCX RMA" section).
//
// Regions. Every region registered with remote access (kAccessRemoteRead or
// kAccessRemoteWrite) is mapped with ucp_mem_map and its remote key packed
// (ucp_rkey_pack). Each connected queue pair announces it to its peer with one control
// active message (id kRegionAmId): a RegionAnnouncementHeader naming the 32-bit rkey the
// protocol carries, the region's address range and remote access, and the packed key as
// payload. A region registered before connect is announced by connect().
//
//   RegionAnnouncementHeader (64 bytes, little-endian, native layout)
//   +0   magic            u64   kRegionMagic
//   +8   dst_qp, src_qp   u32   queue-pair numbers (receiver, sender)
//   +16  dst_token        u64   the receiving queue pair's token
//   +24  src_token        u64   the sending queue pair's token
//   +32  base             u64   region start address at the sender
//   +40  length           u64   region bytes, >= 1, base + length does not overflow
//   +48  rkey             u32   the 32-bit rkey the sender's register_memory returned
//   +52  access           u32   kAccessRemoteRead and/or kAccessRemoteWrite, nothing else
//   +56  packed_length    u32   payload bytes (the packed UCX key), 1..kMaxPackedRkey
//   +60  reserved         u32   0
//
// The receiver validates every field (size, magic, its own queue pair and token, the
// sender's queue pair and token, lengths, overflow, access bits, reserved zero, an rkey
// announced once per queue pair) and then unpacks the key on the queue pair's endpoint
// (ucp_ep_rkey_unpack). A failure drops the announcement, counts it
// (announcements_rejected()) and prints one line for the first few. An announcement that
// arrives before its queue pair is connected is kept (at most kMaxEarlyAnnouncements per
// queue pair) and checked at connect().
//
// Requests (the requester's decision, per WRITE or READ, in post order): UCX RMA when
//   - the peer announced the request's rkey on this queue pair,
//   - the remote range lies inside the announced region, which grants the access
//     (remote write for a WRITE, remote read for a READ), and the length is not zero,
//   - no earlier active-message request of this queue pair to the same rkey is still
//     outstanding (the AM path keeps order among its own requests only).
// Otherwise the request takes the active-message path: the peer's software responder
// checks it against its registered regions, so a range outside the announced region or a
// foreign rkey is refused there with a NAK exactly as before (kRemoteAccessError, both
// queue pairs in error, nothing written). Each such decision is counted by reason
// (RmaCounters), never silent. WRITE+IMM always takes the AM path (it consumes a receive).
//
// Completion: a READ completes when ucp_get_nbx has completed (the data is in the local
// buffer); a WRITE when a ucp_ep_flush_nbx issued after it has completed ("all RMA
// operations issued on the ep prior to this call are completed both at the origin and at
// the target", ucp.h), one flush per doorbell for the WRITEs it handed to UCX. A UCX
// error completes the request with kRetryExceeded and flushes the queue pair.
//
// UCX 1.13 over shared memory (UCX_TLS=sm,self) executes ucp_put/ucp_get on such user
// memory as its own software emulation over active messages (UCX_PROTO_INFO reports
// "software emulation"): the target's worker must progress for them to complete, as
// for the AM path. docs/data.md ("UCX RMA") has the details.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <vector>

#include "core/transport.hpp"

struct ucp_context;
struct ucp_worker;
struct ucp_ep;
struct ucp_mem;
struct ucp_rkey;

namespace bkv::ucx {

class UcxTransport;
class QueuePair;

inline constexpr uint32_t kRegionAmId = 0x2C;                          // region announcements
inline constexpr uint64_t kRegionMagic = 0x3159'454B'5243'5642ull;     // "BVCRKEY1"
inline constexpr uint32_t kMaxPackedRkey = 4096;                       // bytes of a packed UCX key
inline constexpr uint32_t kMaxEarlyAnnouncements = 4096;               // kept per unconnected queue pair
inline constexpr uint32_t kRemoteAccessBits = kAccessRemoteRead | kAccessRemoteWrite;

struct RegionAnnouncementHeader {
  uint64_t magic;
  uint32_t dst_qp;
  uint32_t src_qp;
  uint64_t dst_token;
  uint64_t src_token;
  uint64_t base;
  uint64_t length;
  uint32_t rkey;
  uint32_t access;
  uint32_t packed_length;
  uint32_t reserved;
};
static_assert(std::is_trivially_copyable_v<RegionAnnouncementHeader> && sizeof(RegionAnnouncementHeader) == 64);
static_assert(offsetof(RegionAnnouncementHeader, dst_qp) == 8 && offsetof(RegionAnnouncementHeader, dst_token) == 16 &&
              offsetof(RegionAnnouncementHeader, src_token) == 24 && offsetof(RegionAnnouncementHeader, base) == 32 &&
              offsetof(RegionAnnouncementHeader, length) == 40 && offsetof(RegionAnnouncementHeader, rkey) == 48 &&
              offsetof(RegionAnnouncementHeader, access) == 52 &&
              offsetof(RegionAnnouncementHeader, packed_length) == 56);

// The checks of an arriving announcement that need no state, as pure functions of the
// peer's bytes (RmaEngine::receive and accept run them, with the queue-pair, stranger
// and twice-announced checks between them; fuzz/ucx_headers.cpp runs them on arbitrary
// bytes). Each returns the rule broken (the message the transport reports), or nullptr.
// The header: its size and magic; `out` receives it when it has the right size.
inline const char* announcement_header_error(const void* header, size_t header_length,
                                             RegionAnnouncementHeader& out) noexcept {
  if (header_length != sizeof(RegionAnnouncementHeader)) return "header has the wrong size";
  std::memcpy(&out, header, sizeof out);
  if (out.magic != kRegionMagic) return "bad magic";
  return nullptr;
}
// The payload (the packed UCX key): eager, of packed_length bytes, 1..kMaxPackedRkey.
inline const char* announcement_payload_error(const RegionAnnouncementHeader& h, size_t length, bool rndv) noexcept {
  if (rndv) return "the payload came by rendezvous (announcements are eager)";
  if (length != h.packed_length) return "payload length differs from packed_length";
  if (length == 0 || length > kMaxPackedRkey) return "packed key length outside 1..kMaxPackedRkey";
  return nullptr;
}
// The region: not empty, base + length within 64 bits, remote read and/or write only,
// the reserved word zero, a nonzero rkey.
inline const char* announcement_region_error(const RegionAnnouncementHeader& h) noexcept {
  if (h.length == 0 || h.base > std::numeric_limits<uint64_t>::max() - h.length)
    return "empty region or base + length overflows";
  if (h.access == 0 || (h.access & ~kRemoteAccessBits) != 0) return "access is not remote read and/or remote write";
  if (h.reserved != 0) return "reserved field not zero";
  if (h.rkey == 0) return "rkey 0";
  return nullptr;
}

// What the transport's RMA machinery did; tests assert on these.
struct RmaCounters {
  uint64_t gets = 0;                    // READs issued as ucp_get_nbx
  uint64_t puts = 0;                    // WRITEs issued as ucp_put_nbx
  uint64_t flushes = 0;                 // ucp_ep_flush_nbx issued to complete WRITEs
  uint64_t am_not_announced = 0;        // READ/WRITE on the AM path: rkey not announced (yet) by the peer
  uint64_t am_outside_region = 0;       // ... range or access outside the announced region (peer NAKs it)
  uint64_t am_behind_am = 0;            // ... an earlier AM request to the same rkey is outstanding
  uint64_t am_zero_length = 0;          // ... zero bytes
  uint64_t held = 0;                    // times a request waited for earlier RMA operations
  uint64_t announcements_sent = 0;
  uint64_t announcements_accepted = 0;
  uint64_t announcements_rejected = 0;  // failed validation or could not be unpacked
};

// The region announcement logic and the UCX RMA calls of one UcxTransport. The queue
// pair bookkeeping (order, completions) stays in the transport (ucx_transport.cpp).
class RmaEngine {
 public:
  RmaEngine(UcxTransport& owner, ucp_context* context, ucp_worker* worker);
  ~RmaEngine();
  RmaEngine(const RmaEngine&) = delete;
  RmaEngine& operator=(const RmaEngine&) = delete;

  // register_memory: maps a region with remote access and announces it on every
  // connected queue pair.
  void on_register(const MemoryRegion& mr, uint32_t access);
  // connect(): announces every mapped region to the new peer and checks the
  // announcements that arrived before.
  void on_connect(QueuePair& qp);
  // The transport is going away: remote keys are destroyed before the endpoints close.
  void release_remote_keys();

  enum class Route : uint8_t { kActiveMessage, kRma, kHold };
  // The path of the request at send-queue position `seq` (a READ or WRITE without
  // immediate); counts the reason when it is not RMA.
  Route route(QueuePair& qp, uint64_t seq);
  // Issues it as ucp_get_nbx / ucp_put_nbx (after route() returned kRma).
  void issue(QueuePair& qp, uint64_t seq);
  // Issues one flush for the WRITEs handed to UCX on this queue pair since the last one.
  void flush_writes(QueuePair& qp);

  const RmaCounters& counters() const noexcept { return counters_; }
  // An AM request waited for earlier RMA operations of its queue pair.
  void count_hold() noexcept { ++counters_.held; }
  // Test hook: processes a forged announcement as if it arrived from the peer.
  void inject_announcement(const void* header, size_t header_length, const void* payload, size_t length);

 private:
  struct LocalRegion {
    uint64_t base = 0;
    uint64_t length = 0;
    uint32_t rkey = 0;
    uint32_t access = 0;
    ucp_mem* memh = nullptr;
    std::vector<std::byte> packed;
  };
  struct PeerRegion {
    uint64_t base = 0;
    uint64_t length = 0;
    uint32_t access = 0;
    ucp_rkey* key = nullptr;
  };
  struct Early {  // an announcement for a queue pair not yet connected
    RegionAnnouncementHeader header;
    std::vector<std::byte> packed;
  };
  struct PeerState {
    std::map<uint32_t, PeerRegion> regions;  // by the peer's 32-bit rkey
    std::vector<Early> early;
    std::vector<uint64_t> unflushed;  // WRITEs handed to UCX, not yet covered by a flush
  };
  struct Impl;  // the UCX callbacks (ucx_rma.cpp)
  friend struct Impl;

  void receive(const void* header, size_t header_length, const void* data, size_t length, bool rndv);
  bool accept(QueuePair& qp, const RegionAnnouncementHeader& h, const void* packed);
  void reject(const char* what);
  void announce(QueuePair& qp, const LocalRegion& r);
  PeerState& peer(const QueuePair& qp);

  UcxTransport& owner_;
  ucp_context* context_;
  ucp_worker* worker_;
  std::vector<LocalRegion> local_;
  std::vector<PeerState> peers_;  // by queue-pair index
  RmaCounters counters_;
};

}  // namespace bkv::ucx
