// ipc: shared-memory RPC between the client threads (or processes) of a node and one
// daemon (docs/design_shm.md §ipc): one SPSC request
// ring and one SPSC response ring per client, all in one segment. The daemon scans the
// clients round-robin and drains each one's ready requests in a batch (flat combining).
//
// Segment layout (byte offsets):
//   [0, 128)   header {magic u64 @0 = "BKVIPCV1", version u32 @8, max_clients u32 @12,
//                      depth u32 @16, req_slot_size u32 @20, resp_slot_size u32 @24,
//                      server_alive atomic u8 @28}
//   then per client c, at 128 + c * client_stride:
//              claim line (64 B) {claimed atomic u8 @0}
//              depth request slots, depth response slots (StampedRing layout:
//              {seq u32 @0, tag u32 @4, payload @8}, each align_up(8 + size, 64) bytes)
//
// Rings: FastForward with lap stamps (see stamped_ring.hpp). Neither side writes the
// other's ring: free space follows from the RPC's in-flight bound.
//  - Request ring, written by the client: the client has at most depth requests in
//    flight; each received response proves the server consumed that request, and the
//    server consumes in ring order, so with in_flight < depth the slot of position
//    pos - depth has been consumed.
//  - Response ring, written by the server: the server only replies to a request it
//    received (and refuses otherwise); the client posted that request with at most
//    depth in flight, i.e. after consuming all but depth - 1 earlier responses, which
//    covers the slot the reply reuses.
//
// Tokens: each request carries a "request slot" token in [0, depth) chosen by the client
// from its free list (the slot index of its per-call bookkeeping); the response carries
// it back. Ring positions cannot serve as tokens because replies may be out of order.
//
// Validation: the server drops (and counts) requests whose token is out of range or
// names a request of that client still awaiting a reply (an honest client reuses a
// token only after its response); the client drops (and counts) responses whose token
// is out of range or not awaited; reply() checks the handle's client index, token and
// that the request with that token awaits a reply (one flag per client and token), so
// a second reply is refused even while other requests of the client are held.
// The header's max_clients and depth are capped (kIpcMax*), sizes are computed with
// checked arithmetic, and attach refuses a header that declares more bytes than the
// segment has, naming the field; a client sizes its local state (depth entries) only
// from a validated header.
//
// Skip rule of poll_with_skip(), two parts, both deterministic and server-local:
//  1. exact: a client with `depth` requests received and not yet replied to cannot
//     post (its in-flight count is at least that), so it is not scanned at all;
//  2. back-off: a client found empty on `idle_after` consecutive scans is then scanned
//     only on every `period`-th poll (staggered by client index so the checks spread
//     evenly); finding a request resets it. An idle client that wakes up is seen
//     within `period` polls.
//
// Request hints, for a server and clients that one OS thread runs (the simulator): a
// client given them (IpcClient::use_request_hints) also sets its bit in the server's hint
// words at each call (kept in the server object, not in the segment:
// IpcServer::keep_request_hints), and poll_hinted() reads the request rings of the
// clients whose bit is set only, clearing the bits. It finds what poll() finds, in the
// same order, and leaves the same state (clients_scanned(), the skip rule's idle counts),
// because call() is the only writer of a request: a client with a request poll() would
// find has its bit set (requests found by the last poll and not yet taken by recv() get
// theirs again at the next poll_hinted()).
//
// Reply flags, for the same single-thread case: the owner of a server's clients gives
// the server one byte per client index, kept where the client reads anyway
// (IpcServer::use_reply_flags), and the server sets client c's byte to 1 at each response
// it publishes to c (serve(), reply()). A client that clears its byte before each poll
// can skip a poll while its byte is 0, because a poll leaves no response ready (it stops
// at the first position not published, or after depth positions, when the next one's
// slot still holds the response just read) and a server's publish is the only way a
// response becomes ready. The server only sets the bytes; clearing them is the client's
// (backend::Client).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "core/shm/common.hpp"
#include "core/shm/stamped_ring.hpp"

namespace bkv::shm {

inline constexpr uint64_t kIpcMagic = 0x424B564950435631ull;  // "BKVIPCV1"
inline constexpr uint32_t kIpcVersion = 1;

// Caps of the header fields (config at create, header at attach). They cover the
// benchkv limits (1024 client threads, queue depth 2^16).
inline constexpr uint32_t kIpcMaxClients = 1u << 16;
inline constexpr uint32_t kIpcMaxDepth = 1u << 16;

struct IpcHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t max_clients;
  uint32_t depth;  // per-client queue depth, power of two
  uint32_t req_slot_size;
  uint32_t resp_slot_size;
  uint8_t server_alive;  // atomic bool
  uint8_t pad[99];
};
static_assert(std::is_standard_layout_v<IpcHeader> && sizeof(IpcHeader) == 128);
static_assert(offsetof(IpcHeader, version) == 8 && offsetof(IpcHeader, max_clients) == 12);
static_assert(offsetof(IpcHeader, depth) == 16 && offsetof(IpcHeader, req_slot_size) == 20);
static_assert(offsetof(IpcHeader, resp_slot_size) == 24 && offsetof(IpcHeader, server_alive) == 28);

struct IpcClientLine {
  uint8_t claimed;  // atomic: set once by the client that owns this index
  uint8_t pad[63];
};
static_assert(sizeof(IpcClientLine) == kCacheLine && offsetof(IpcClientLine, claimed) == 0);

struct IpcConfig {
  uint32_t max_clients = 1;
  uint32_t depth = 4;  // power of two (benchkv --queue-depth)
};

// Server-local parameters of poll_with_skip() (rule 2; see the header comment).
struct IpcSkipConfig {
  uint32_t idle_after = 8;  // consecutive empty scans before a client is backed off
  uint32_t period = 8;      // power of two; 1 disables the back-off
};

template <class Req, class Resp>
struct IpcLayout {
  static_assert(std::is_trivially_copyable_v<Req> && std::is_trivially_copyable_v<Resp>,
                "ipc payloads are copied byte-wise through shared memory");
  static_assert(std::is_default_constructible_v<Req> && std::is_default_constructible_v<Resp>,
                "ipc payloads are read into default-constructed values");
  static constexpr size_t kReqSlotSize = StampedRing<Req>::kSlotSize;
  static constexpr size_t kRespSlotSize = StampedRing<Resp>::kSlotSize;
  static_assert(kReqSlotSize < (size_t{1} << 31) && kRespSlotSize < (size_t{1} << 31));
  static constexpr size_t kClientsOffset = sizeof(IpcHeader);

  // Throws ShmError naming the offending field (and the cap it exceeds).
  static void validate_config(const IpcConfig& c, const char* where) {
    const std::string w(where);
    if (c.max_clients == 0) throw ShmError(w + ": max_clients must be > 0");
    require_at_most(c.max_clients, kIpcMaxClients, w, "max_clients");
    if (!is_pow2(c.depth) || c.depth > kIpcMaxDepth)
      throw ShmError(w + ": queue depth " + std::to_string(c.depth) + " is not a power of two in [1, " +
                     std::to_string(kIpcMaxDepth) + "]");
  }
  // Bytes per client: claim line + depth request slots + depth response slots (checked).
  static constexpr std::optional<uint64_t> client_stride_bytes(uint32_t depth) noexcept {
    const auto slots = checked_mul(depth, kReqSlotSize + kRespSlotSize);
    return slots ? checked_add(sizeof(IpcClientLine), *slots) : std::nullopt;
  }
  // End of the segment: 128 + max_clients * client stride (checked).
  static constexpr std::optional<uint64_t> segment_end(const IpcConfig& c) noexcept {
    const auto stride = client_stride_bytes(c.depth);
    const auto clients = stride ? checked_mul(c.max_clients, *stride) : std::nullopt;
    return clients ? checked_add(kClientsOffset, *clients) : std::nullopt;
  }
  // Within the caps the sizes cannot overflow (so segment_end never fails there).
  static_assert(segment_end(IpcConfig{kIpcMaxClients, kIpcMaxDepth}).has_value());

  // Client stride of a validated depth.
  static constexpr size_t client_stride(uint32_t depth) noexcept {
    return sizeof(IpcClientLine) + size_t{depth} * (kReqSlotSize + kRespSlotSize);
  }
  // Total segment size for cfg. Throws ShmError naming the field if cfg is invalid or
  // the segment would exceed kMaxChannelSegmentBytes.
  static size_t segment_size(const IpcConfig& c) {
    validate_config(c, "ipc layout");
    const auto end = segment_end(c);
    if (!end || *end > kMaxChannelSegmentBytes)
      throw ShmError("ipc layout: max_clients=" + std::to_string(c.max_clients) + " x queue depth " +
                     std::to_string(c.depth) + " exceed the segment limit of " +
                     std::to_string(kMaxChannelSegmentBytes) + " bytes");
    return static_cast<size_t>(*end);
  }
  static_assert(kClientsOffset % kCacheLine == 0);
};

// Address arithmetic over a validated segment (config cached locally).
template <class Req, class Resp>
class IpcView {
 public:
  using Layout = IpcLayout<Req, Resp>;
  IpcView() = default;
  IpcView(std::byte* base, const IpcConfig& cfg) noexcept
      : base_(base), cfg_(cfg), stride_(Layout::client_stride(cfg.depth)) {}

  IpcHeader& header() const noexcept { return *reinterpret_cast<IpcHeader*>(base_); }
  std::byte* client_base(uint32_t c) const noexcept {
    assert(c < cfg_.max_clients);
    return base_ + Layout::kClientsOffset + c * stride_;
  }
  IpcClientLine& claim(uint32_t c) const noexcept { return *reinterpret_cast<IpcClientLine*>(client_base(c)); }
  StampedRing<Req> requests(uint32_t c) const noexcept {
    return StampedRing<Req>(client_base(c) + sizeof(IpcClientLine), cfg_.depth);
  }
  StampedRing<Resp> responses(uint32_t c) const noexcept {
    return StampedRing<Resp>(client_base(c) + sizeof(IpcClientLine) + StampedRing<Req>::bytes(cfg_.depth),
                             cfg_.depth);
  }
  bool server_alive() const noexcept {
    return atomic_field(header().server_alive).load(std::memory_order_acquire) != 0;
  }
  const IpcConfig& config() const noexcept { return cfg_; }

 private:
  std::byte* base_ = nullptr;
  IpcConfig cfg_{};
  size_t stride_ = 0;
};

// Reads and checks the header of an existing ipc segment: magic, version, counts within
// the caps, slot sizes of this build, and a segment size equal to what the header
// implies. Every header field is read once, into the returned config.
template <class Req, class Resp>
IpcConfig validate_ipc_segment(std::span<std::byte> mem) {
  using L = IpcLayout<Req, Resp>;
  if (mem.size() < sizeof(IpcHeader))
    throw ShmError("ipc attach: segment of " + std::to_string(mem.size()) + " bytes is smaller than the header");
  if (reinterpret_cast<uintptr_t>(mem.data()) % kCacheLine != 0)
    throw ShmError("ipc attach: segment is not 64-byte aligned");
  auto& h = *reinterpret_cast<IpcHeader*>(mem.data());
  const uint64_t magic = atomic_field(h.magic).load(std::memory_order_acquire);  // published last
  if (magic != kIpcMagic)
    throw ShmError("ipc attach: bad magic " + hex_u64(magic) + " (expected " + hex_u64(kIpcMagic) + " \"BKVIPCV1\")");
  if (h.version != kIpcVersion)
    throw ShmError("ipc attach: unsupported version " + std::to_string(h.version) + " (expected " +
                   std::to_string(kIpcVersion) + ")");
  const IpcConfig cfg{h.max_clients, h.depth};
  L::validate_config(cfg, "ipc attach: header");
  if (h.req_slot_size != L::kReqSlotSize || h.resp_slot_size != L::kRespSlotSize)
    throw ShmError("ipc attach: slot sizes " + std::to_string(h.req_slot_size) + "/" +
                   std::to_string(h.resp_slot_size) + " in the header differ from this build's " +
                   std::to_string(L::kReqSlotSize) + "/" + std::to_string(L::kRespSlotSize) +
                   " (different request/response types?)");
  // Within the caps the size does not overflow (static_assert in the layout).
  const uint64_t want = *L::segment_end(cfg);
  if (want > mem.size())
    throw ShmError("ipc attach: segment size " + std::to_string(mem.size()) + " does not match the header: max_clients=" +
                   std::to_string(cfg.max_clients) + " clients of " + std::to_string(L::client_stride(cfg.depth)) +
                   " B (queue depth " + std::to_string(cfg.depth) + ") end at byte " + std::to_string(want) +
                   ", beyond the segment of " + std::to_string(mem.size()) + " bytes");
  if (want != mem.size())
    throw ShmError("ipc attach: segment size " + std::to_string(mem.size()) + " does not match the header (" +
                   std::to_string(cfg.max_clients) + " clients x depth " + std::to_string(cfg.depth) + " -> " +
                   std::to_string(want) + " bytes)");
  return cfg;
}

// ---- server ----------------------------------------------------------------------

struct IpcHandle {
  uint32_t client;  // client index
  uint32_t token;   // the client's request slot, echoed in the response
};

template <class Req>
struct IpcRequest {
  IpcHandle handle;
  Req payload;
};

enum class IpcReplyStatus : uint8_t {
  kOk = 0,
  kBadClient,       // handle.client >= max_clients
  kBadToken,        // handle.token >= depth
  kNotOutstanding,  // no request of that client with that token is awaiting a reply
};

template <class Req, class Resp>
class alignas(kCacheLine) IpcServer {
 public:
  using Layout = IpcLayout<Req, Resp>;

  // Formats `mem` (exactly Layout::segment_size(cfg) bytes, 64-byte aligned).
  IpcServer(std::span<std::byte> mem, const IpcConfig& cfg, const IpcSkipConfig& skip = {}) : skip_(skip) {
    Layout::validate_config(cfg, "ipc create");
    if (skip.idle_after == 0 || !is_pow2(skip.period))
      throw ShmError("ipc create: skip rule needs idle_after > 0 and a power-of-two period (got " +
                     std::to_string(skip.idle_after) + ", " + std::to_string(skip.period) + ")");
    const size_t want = Layout::segment_size(cfg);
    if (mem.size() != want)
      throw ShmError("ipc create: segment has " + std::to_string(mem.size()) + " bytes, layout needs " +
                     std::to_string(want));
    if (reinterpret_cast<uintptr_t>(mem.data()) % kCacheLine != 0)
      throw ShmError("ipc create: segment is not 64-byte aligned");
    std::memset(mem.data(), 0, mem.size());
    view_ = IpcView<Req, Resp>(mem.data(), cfg);
    awaiting_.assign(size_t{cfg.max_clients} * cfg.depth, 0);
    clients_.reserve(cfg.max_clients);
    for (uint32_t c = 0; c < cfg.max_clients; ++c)
      clients_.push_back(ClientState{view_.requests(c), view_.responses(c), awaiting_.data() + size_t{c} * cfg.depth});
    ready_.assign(cfg.max_clients, Ready{});
    IpcHeader& h = view_.header();
    h.version = kIpcVersion;
    h.max_clients = cfg.max_clients;
    h.depth = cfg.depth;
    h.req_slot_size = static_cast<uint32_t>(Layout::kReqSlotSize);
    h.resp_slot_size = static_cast<uint32_t>(Layout::kRespSlotSize);
    atomic_field(h.server_alive).store(1, std::memory_order_relaxed);
    atomic_field(h.magic).store(kIpcMagic, std::memory_order_release);
  }

  IpcServer(const IpcServer&) = delete;  // one server state per segment
  IpcServer& operator=(const IpcServer&) = delete;
  IpcServer(IpcServer&&) noexcept = default;
  IpcServer& operator=(IpcServer&&) noexcept = default;

  // Scans every client; returns the number of requests ready (taken by recv()).
  uint32_t poll() noexcept { return scan(false); }
  // Same, but skips clients per the skip rule (header comment).
  uint32_t poll_with_skip() noexcept { return scan(true); }

  // Request hints (header comment): from now on, a client given request_hints() sets its
  // bit at each call. Only for a server and clients run by one OS thread, before any
  // client's first call: the words are plain memory, and a request published earlier
  // would have no bit.
  void keep_request_hints() {
    if (!hints_.empty()) return;
    const uint32_t n = view_.config().max_clients;
    const size_t words = (size_t{n} + 63) / 64;
    hints_.assign(words, 0);
    found_.assign(words, 0);
    unsaturated_.assign(words, 0);
    for (uint32_t c = 0; c < n; ++c)
      if (clients_[c].idle < skip_.idle_after) unsaturated_[c / 64] |= client_bit(c);
  }
  // The hint words, for IpcClient::use_request_hints; nullptr without keep_request_hints.
  uint64_t* request_hints() noexcept { return hints_.empty() ? nullptr : hints_.data(); }

  // Reply flags (header comment): from now on, each response published to client c sets
  // *flags[c] to 1. `flags` holds max_clients pointers, kept by the caller for the
  // server's life (an empty span: no flags again). Only for a server and clients run by
  // one OS thread: the bytes are plain memory.
  void use_reply_flags(std::span<uint8_t* const> flags) {
    if (!flags.empty() && flags.size() != view_.config().max_clients)
      throw ShmError("ipc reply flags: " + std::to_string(flags.size()) + " flags for " +
                     std::to_string(view_.config().max_clients) + " clients");
    reply_flags_ = flags.empty() ? nullptr : flags.data();
  }

  // poll(), reading the request rings of the hinted clients only (header comment): the
  // same requests in the same order, the same clients_scanned() and idle counts. Without
  // keep_request_hints, poll().
  uint32_t poll_hinted() noexcept {
    if (hints_.empty()) return scan(false);
    // Requests the last poll found that recv() has not taken: poll() finds them again.
    for (uint32_t i = ready_pos_; i < ready_count_; ++i)
      if (ready_[i].count != 0) hints_[ready_[i].client / 64] |= client_bit(ready_[i].client);
    ready_count_ = 0;
    ready_pos_ = 0;
    ++epoch_;
    const uint32_t n = view_.config().max_clients;
    const uint32_t depth = view_.config().depth;
    const size_t words = hints_.size();
    uint32_t total = 0;
    // poll()'s order: the clients from rr_start_ up, then those below it.
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t w = 0; w < words; ++w) {
        const uint32_t base = static_cast<uint32_t>(w * 64);
        const uint64_t from_start = rr_start_ <= base ? ~uint64_t{0}
                                    : rr_start_ >= base + 64 ? 0
                                                             : ~uint64_t{0} << (rr_start_ - base);
        for (uint64_t b = hints_[w] & (pass == 0 ? from_start : ~from_start); b != 0; b &= b - 1) {
          const uint32_t c = base + static_cast<uint32_t>(std::countr_zero(b));
          ClientState& st = clients_[c];
          uint32_t count = 0;
          while (count < depth && st.requests.ready(st.req_cursor + count)) ++count;
          if (count == 0) continue;
          found_[w] |= client_bit(c);
          ready_[ready_count_++] = Ready{c, count};
          total += count;
        }
      }
    }
    // Every client counts as scanned; the idle counts move as poll()'s scan moves them
    // (a client found is reset, any other counts one more empty scan, up to idle_after).
    clients_scanned_ += n;
    for (size_t w = 0; w < words; ++w) {
      hints_[w] = 0;
      for (uint64_t b = unsaturated_[w] & ~found_[w]; b != 0; b &= b - 1) {
        const uint32_t c = static_cast<uint32_t>(w * 64) + static_cast<uint32_t>(std::countr_zero(b));
        if (clients_[c].idle < skip_.idle_after) ++clients_[c].idle;
        if (clients_[c].idle >= skip_.idle_after) unsaturated_[w] &= ~client_bit(c);
      }
      for (uint64_t b = found_[w]; b != 0; b &= b - 1)
        clients_[static_cast<uint32_t>(w * 64) + static_cast<uint32_t>(std::countr_zero(b))].idle = 0;
      unsaturated_[w] |= found_[w];
      found_[w] = 0;
    }
    rr_start_ = (rr_start_ + 1 == n) ? 0 : rr_start_ + 1;
    return total;
  }

  // Next request found by the last poll, client by client (flat combining).
  std::optional<IpcRequest<Req>> recv() noexcept {
    while (ready_pos_ < ready_count_) {
      Ready& r = ready_[ready_pos_];
      if (r.count == 0) {
        ++ready_pos_;
        continue;
      }
      ClientState& st = clients_[r.client];
      IpcRequest<Req> out;
      uint32_t token = 0;
      st.requests.read(st.req_cursor, token, out.payload);  // ready() seen in scan
      ++st.req_cursor;
      --r.count;
      // Written by the client: never trusted (the token must be in range and free).
      if (token >= view_.config().depth || st.awaiting[token] != 0) {
        ++bad_requests_;
        continue;
      }
      st.awaiting[token] = 1;
      ++st.outstanding;
      out.handle = IpcHandle{r.client, token};
      return out;
    }
    return std::nullopt;
  }

  // recv() and reply() in one pass, for a server that answers every request at once:
  // for each request found by the last poll, in recv() order, respond(const Req&)
  // returns its response, which is published before the next request is read; then
  // answered(uint32_t client) runs. The checks and counts are recv()'s (a bad token is
  // counted in bad_requests() and not answered); the handle reply() would check is the
  // server's own, and the client's outstanding count ends where it started. respond and
  // answered must not call recv(). Returns the number of requests answered.
  template <class Respond, class Answered>
  uint32_t serve(Respond&& respond, Answered&& answered) {
    const uint32_t depth = view_.config().depth;
    uint32_t n = 0;
    for (; ready_pos_ < ready_count_; ++ready_pos_) {
      Ready& r = ready_[ready_pos_];
      ClientState& st = clients_[r.client];
      while (r.count > 0) {
        Req req;
        uint32_t token = 0;
        st.requests.read(st.req_cursor++, token, req);  // ready() seen in scan
        --r.count;  // cursor and count move together, as in recv()
        if (token >= depth || st.awaiting[token] != 0) {  // written by the client: never trusted
          ++bad_requests_;
          continue;
        }
        st.responses.publish(st.resp_head++, token, respond(static_cast<const Req&>(req)));
        flag_reply(r.client);
        answered(r.client);
        ++n;
      }
    }
    return n;
  }

  // Writes the response for handle into its client's response ring.
  IpcReplyStatus reply(const IpcHandle& handle, const Resp& resp) noexcept {
    if (handle.client >= view_.config().max_clients) return IpcReplyStatus::kBadClient;
    if (handle.token >= view_.config().depth) return IpcReplyStatus::kBadToken;
    ClientState& st = clients_[handle.client];
    if (st.awaiting[handle.token] == 0) return IpcReplyStatus::kNotOutstanding;
    st.awaiting[handle.token] = 0;
    --st.outstanding;
    st.responses.publish(st.resp_head++, handle.token, resp);
    flag_reply(handle.client);
    return IpcReplyStatus::kOk;
  }

  void shutdown() noexcept { atomic_field(view_.header().server_alive).store(0, std::memory_order_release); }

  uint64_t bad_requests() const noexcept { return bad_requests_; }
  uint32_t outstanding(uint32_t client) const noexcept { return clients_[client].outstanding; }
  uint64_t clients_scanned() const noexcept { return clients_scanned_; }  // for skip-rule metrics
  const IpcConfig& config() const noexcept { return view_.config(); }

 private:
  struct ClientState {
    StampedRing<Req> requests;  // the client's rings in the segment (addresses fixed at create)
    StampedRing<Resp> responses;
    uint8_t* awaiting;         // by token: 1 while its request awaits a reply (in awaiting_)
    uint64_t req_cursor = 0;   // next request position to read
    uint64_t resp_head = 0;    // next response position to write
    uint32_t outstanding = 0;  // received, not yet replied (the flags set in `awaiting`)
    uint32_t idle = 0;         // consecutive empty scans (saturates)
  };
  struct Ready {
    uint32_t client = 0;
    uint32_t count = 0;
  };

  // Counts, per client, the contiguous published requests at its cursor (one lap at
  // most), rotating the starting client every poll for fairness. Inlined into poll() and
  // poll_with_skip() (`skip` a constant there): it runs on every daemon loop.
  [[gnu::always_inline]] uint32_t scan(bool skip) noexcept {
    ready_count_ = 0;
    ready_pos_ = 0;
    ++epoch_;
    const uint32_t n = view_.config().max_clients;
    const uint32_t depth = view_.config().depth;
    uint32_t total = 0;
    uint32_t c = rr_start_;
    for (uint32_t k = 0; k < n; ++k, c = (c + 1 == n) ? 0 : c + 1) {
      ClientState& st = clients_[c];
      if (skip) {
        if (st.outstanding >= depth) continue;  // rule 1: the client cannot post
        if (st.idle >= skip_.idle_after && ((epoch_ + c) & (skip_.period - 1)) != 0) continue;  // rule 2
      }
      ++clients_scanned_;
      uint32_t count = 0;
      while (count < depth && st.requests.ready(st.req_cursor + count)) ++count;
      if (count == 0) {
        if (st.idle < skip_.idle_after) ++st.idle;
        continue;
      }
      st.idle = 0;
      if (!unsaturated_.empty()) [[unlikely]] unsaturated_[c / 64] |= client_bit(c);  // request hints kept
      ready_[ready_count_++] = Ready{c, count};
      total += count;
    }
    rr_start_ = (rr_start_ + 1 == n) ? 0 : rr_start_ + 1;
    return total;
  }
  static constexpr uint64_t client_bit(uint32_t c) noexcept { return uint64_t{1} << (c % 64); }
  void flag_reply(uint32_t c) noexcept {
    if (reply_flags_ != nullptr) *reply_flags_[c] = 1;
  }

  IpcView<Req, Resp> view_;
  IpcSkipConfig skip_;
  LineVector<uint8_t> awaiting_;  // max_clients * depth flags, depth per client (ClientState::awaiting)
  LineVector<ClientState> clients_;
  LineVector<Ready> ready_;  // [0, ready_count_): clients with requests found by the last poll
  uint32_t ready_count_ = 0;
  uint32_t ready_pos_ = 0;
  uint32_t rr_start_ = 0;
  uint64_t epoch_ = 0;
  uint64_t bad_requests_ = 0;
  uint64_t clients_scanned_ = 0;
  // Request hints (keep_request_hints; empty: none), one bit per client: hints_ set by
  // the clients' calls and cleared by poll_hinted(); found_ the clients its scan found
  // requests of; unsaturated_ a superset of the clients whose idle count is below
  // idle_after (the only ones an empty scan changes).
  LineVector<uint64_t> hints_;
  LineVector<uint64_t> found_;
  LineVector<uint64_t> unsaturated_;
  uint8_t* const* reply_flags_ = nullptr;  // use_reply_flags: max_clients pointers; nullptr: none
};

// ---- client ----------------------------------------------------------------------

enum class IpcCallStatus : uint8_t {
  kOk = 0,
  kFull,                // depth requests in flight: poll() first
  kServerDisconnected,  // server_alive is false
};

template <class Req, class Resp>
class alignas(kCacheLine) IpcClient {
 public:
  using Layout = IpcLayout<Req, Resp>;

  // Validates the segment and claims the first free client index. Claims are
  // permanent for the segment's life (ring positions live in the client object).
  static IpcClient connect(std::span<std::byte> mem) {
    const IpcConfig cfg = validate_ipc_segment<Req, Resp>(mem);
    IpcView<Req, Resp> view(mem.data(), cfg);
    check_alive(view);
    for (uint32_t c = 0; c < cfg.max_clients; ++c)
      if (try_claim(view, c)) return IpcClient(view, c);
    throw ShmError("ipc connect: all " + std::to_string(cfg.max_clients) + " client indices are taken");
  }

  // Validates the segment and claims client index `index`.
  static IpcClient connect(std::span<std::byte> mem, uint32_t index) {
    const IpcConfig cfg = validate_ipc_segment<Req, Resp>(mem);
    IpcView<Req, Resp> view(mem.data(), cfg);
    check_alive(view);
    if (index >= cfg.max_clients)
      throw ShmError("ipc connect: client index " + std::to_string(index) + " out of range (max_clients=" +
                     std::to_string(cfg.max_clients) + ")");
    if (!try_claim(view, index)) throw ShmError("ipc connect: client index " + std::to_string(index) + " is already taken");
    return IpcClient(view, index);
  }

  IpcClient(const IpcClient&) = delete;  // one client state per client index
  IpcClient& operator=(const IpcClient&) = delete;
  IpcClient(IpcClient&&) noexcept = default;
  IpcClient& operator=(IpcClient&&) noexcept = default;

  // Non-blocking: kFull when depth requests are in flight.
  IpcCallStatus call(const Req& req, uint64_t user_token = 0) noexcept {
    if (!view_.server_alive()) return IpcCallStatus::kServerDisconnected;
    if (free_count_ == 0) return IpcCallStatus::kFull;
    const uint32_t token = free_[--free_count_];
    busy_[token] = 1;
    user_tokens_[token] = user_token;
    requests_.publish(req_pos_++, token, req);
    if (hints_ != nullptr) hints_[index_ / 64] |= uint64_t{1} << (index_ % 64);
    return IpcCallStatus::kOk;
  }

  // Request hints (header comment): `words`, the server's IpcServer::request_hints(), set
  // at each call from now on. Only where one OS thread runs the server and this client,
  // the server keeping hints since before this client's first call. The words stay the
  // server's, which outlives this client.
  void use_request_hints(uint64_t* words) noexcept { hints_ = words; }

  // Delivers arrived responses in arrival order: on_response(uint64_t user_token,
  // const Resp&). Returns the number delivered (responses with a bad token are dropped
  // and counted in protocol_errors()). Inlined into the caller's loop: it runs on every
  // client step.
  template <class F>
  [[gnu::always_inline]] uint32_t poll(F&& on_response) {
    uint32_t n = 0;
    const uint32_t depth = view_.config().depth;
    for (uint32_t k = 0; k < depth && responses_.ready(resp_pos_); ++k) {
      uint32_t token = 0;
      Resp resp;
      responses_.read(resp_pos_++, token, resp);
      if (token >= depth || busy_[token] == 0) {
        ++protocol_errors_;
        continue;
      }
      const uint64_t user_token = user_tokens_[token];  // copy: the callback may reuse the slot
      busy_[token] = 0;
      free_[free_count_++] = token;
      ++n;
      on_response(user_token, static_cast<const Resp&>(resp));
    }
    return n;
  }

  // A cache hint's address (a caller that prefetches a poll ahead of it: the simulator):
  // the response slot the next poll() reads first.
  const void* next_response_line() const noexcept { return responses_.slot_address(resp_pos_); }
  uint32_t client_index() const noexcept { return index_; }
  uint32_t in_flight() const noexcept { return view_.config().depth - free_count_; }
  uint64_t protocol_errors() const noexcept { return protocol_errors_; }
  bool server_alive() const noexcept { return view_.server_alive(); }
  const IpcConfig& config() const noexcept { return view_.config(); }

 private:
  IpcClient(const IpcView<Req, Resp>& view, uint32_t index)
      : view_(view),
        index_(index),
        requests_(view.requests(index)),
        responses_(view.responses(index)),
        free_(view.config().depth, 0),
        busy_(view.config().depth, 0),
        user_tokens_(view.config().depth, 0) {
    for (uint32_t t = view.config().depth; t-- > 0;) free_[free_count_++] = t;  // token 0 first
  }

  static void check_alive(const IpcView<Req, Resp>& view) {
    if (!view.server_alive()) throw ShmError("ipc connect: the server has shut down");
  }
  static bool try_claim(const IpcView<Req, Resp>& view, uint32_t c) {
    uint8_t expected = 0;
    return atomic_field(view.claim(c).claimed).compare_exchange_strong(expected, 1, std::memory_order_acq_rel);
  }

  IpcView<Req, Resp> view_;
  uint32_t index_ = 0;
  StampedRing<Req> requests_;
  StampedRing<Resp> responses_;
  uint64_t req_pos_ = 0;   // next request position to write
  uint64_t resp_pos_ = 0;  // next response position to read
  LineVector<uint32_t> free_;         // [0, free_count_): free request-slot tokens (client-local, a stack)
  uint32_t free_count_ = 0;
  LineVector<uint8_t> busy_;          // token awaits a response
  LineVector<uint64_t> user_tokens_;  // caller's token per request slot
  uint64_t protocol_errors_ = 0;
  uint64_t* hints_ = nullptr;  // request hints (use_request_hints); nullptr: none
};

}  // namespace bkv::shm
