// flux: N-to-N request/response channels between the daemon threads of one node
// (docs/design_shm.md §flux). One SPSC ring per
// ordered pair (i -> j) carries both i's requests to j and i's responses to j's
// requests. The rings are lap-stamped FastForward rings (stamped_ring.hpp) in one
// process-memory Segment; each node (thread) owns all of its bookkeeping locally.
//
// Flow control and why rings never overflow: a node has at most max_inflight requests
// outstanding per target (call() refuses beyond that), and a node replies only to
// requests it received and has not answered (reply() refuses otherwise, per request:
// one flag per source and slot). So the
// unconsumed messages in ring i -> j are at most
//     (i's requests to j still unanswered)  <= max_inflight
//   + (i's responses to j not yet consumed) <= j's requests to i in flight <= max_inflight,
// and capacity >= 2 * max_inflight (asserted) makes every call() and reply() that
// passes those checks fit, with no consumer-to-producer traffic at all.
//
// Tokens: call(target, payload, token) keeps the caller's token in a per-target slab
// of max_inflight entries; the message carries the slab index (bit 31 of the ring tag
// marks responses). try_recv() returns a FluxReplyToken {source, slot} to answer with.
// Everything read from a ring is validated (slot index in range; for a request, no
// request of that source and slot awaits a reply: an honest caller reuses a slot only
// after its response; for a response, the slot awaits one); bad messages are dropped and
// counted in protocol_errors().
//
// Both poll() and try_recv() read the same inbound rings: poll() parks the requests it
// meets in a local FIFO that try_recv() serves first, and try_recv() parks responses
// for the next poll(). Each FIFO holds at most num_nodes * max_inflight entries (the
// in-flight bounds above), so parking never fails. Per-source order is preserved for
// requests and for responses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cassert>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/shm/common.hpp"
#include "core/shm/segment.hpp"
#include "core/shm/stamped_ring.hpp"

namespace bkv::shm {

// Caps of the network shape: nodes are daemon threads (benchkv allows 1024), capacity
// keeps ring positions' lap stamps meaningful and slot indices below kFluxResponseBit.
inline constexpr uint32_t kFluxMaxNodes = 1u << 16;
inline constexpr uint32_t kFluxMaxCapacity = 1u << 30;

struct FluxConfig {
  uint32_t capacity = 1024;     // slots per ordered-pair ring, power of two
  uint32_t max_inflight = 256;  // outstanding calls per (caller, target)
};

// Both rings of a pair can hold a full window of requests plus a full window of
// responses (see the header comment).
constexpr bool flux_capacity_suffices(const FluxConfig& c) noexcept {
  return uint64_t{c.capacity} >= 2 * uint64_t{c.max_inflight};
}
static_assert(flux_capacity_suffices(FluxConfig{}));

inline constexpr uint32_t kFluxResponseBit = 1u << 31;  // ring tag: response, else request
inline constexpr uint32_t kFluxSlotMask = kFluxResponseBit - 1;
static_assert(kFluxMaxCapacity / 2 <= kFluxSlotMask, "a slab index (< max_inflight <= capacity / 2) fits the tag");

struct FluxReplyToken {
  uint32_t source;  // node that sent the request
  uint32_t slot;    // its slab index, echoed in the response
};

template <class Payload>
struct FluxRequest {
  uint32_t source;
  FluxReplyToken token;
  Payload payload;
};

enum class FluxCallStatus : uint8_t {
  kOk = 0,
  kFull,       // max_inflight calls to that target are outstanding: poll() first
  kBadTarget,  // target >= num_nodes
};

enum class FluxReplyStatus : uint8_t {
  kOk = 0,
  kBadToken,        // token.source or token.slot out of range
  kNotOutstanding,  // no request from token.source with token.slot is awaiting a reply
};

template <class Payload, class Token = uint64_t>
class FluxNode;

// Owns the rings of a node's N daemon threads; hand out node(i) to thread i. The
// network must outlive its nodes.
template <class Payload, class Token = uint64_t>
class FluxNetwork {
 public:
  static_assert(std::is_trivially_copyable_v<Payload>, "flux payloads are copied byte-wise");
  static_assert(std::is_default_constructible_v<Payload>, "flux payloads are read into default-constructed values");
  using Ring = StampedRing<Payload>;

  FluxNetwork(uint32_t num_nodes, const FluxConfig& cfg = {}) : n_(num_nodes), cfg_(cfg) {
    if (num_nodes == 0) throw ShmError("flux: num_nodes must be > 0");
    require_at_most(num_nodes, kFluxMaxNodes, "flux", "num_nodes");
    if (!is_pow2(cfg.capacity) || cfg.capacity > kFluxMaxCapacity)
      throw ShmError("flux: capacity " + std::to_string(cfg.capacity) + " is not a power of two in [1, 2^30]");
    if (cfg.max_inflight == 0) throw ShmError("flux: max_inflight must be > 0");
    if (!flux_capacity_suffices(cfg))
      throw ShmError("flux: capacity " + std::to_string(cfg.capacity) + " must be >= 2 * max_inflight (" +
                     std::to_string(cfg.max_inflight) + ")");
    const auto bytes = segment_bytes(num_nodes, cfg.capacity);
    if (!bytes || *bytes > kMaxChannelSegmentBytes)
      throw ShmError("flux: num_nodes=" + std::to_string(num_nodes) + " squared rings of capacity " +
                     std::to_string(cfg.capacity) + " exceed the segment limit of " +
                     std::to_string(kMaxChannelSegmentBytes) + " bytes");
    taken_.assign(num_nodes, 0);
    seg_ = Segment::create_process(static_cast<size_t>(*bytes));
  }

  // Bytes of the rings: num_nodes^2 rings of capacity slots (checked).
  static constexpr std::optional<uint64_t> segment_bytes(uint32_t num_nodes, uint32_t capacity) noexcept {
    const auto rings = checked_mul(num_nodes, num_nodes);
    return rings ? checked_mul(*rings, Ring::bytes(capacity)) : std::nullopt;
  }

  // Node i's endpoint; each index can be taken once.
  FluxNode<Payload, Token> node(uint32_t i) {
    if (i >= n_) throw ShmError("flux: node " + std::to_string(i) + " out of range (" + std::to_string(n_) + " nodes)");
    if (taken_[i] != 0) throw ShmError("flux: node " + std::to_string(i) + " was already taken");
    taken_[i] = 1;
    return FluxNode<Payload, Token>(*this, i);
  }

  // Ring from -> to.
  Ring ring(uint32_t from, uint32_t to) const noexcept {
    assert(from < n_ && to < n_);
    return Ring(seg_.data() + (size_t{from} * n_ + to) * Ring::bytes(cfg_.capacity), cfg_.capacity);
  }
  uint32_t size() const noexcept { return n_; }
  const FluxConfig& config() const noexcept { return cfg_; }

 private:
  uint32_t n_;
  FluxConfig cfg_;
  Segment seg_;
  std::vector<uint8_t> taken_;
};

template <class Payload, class Token>
class alignas(kCacheLine) FluxNode {
 public:
  using Ring = StampedRing<Payload>;

  FluxNode(FluxNode&&) noexcept = default;
  FluxNode& operator=(FluxNode&&) noexcept = default;

  // Sends a request to target; on_response later gets `token` back with the response.
  FluxCallStatus call(uint32_t target, const Payload& payload, const Token& token) noexcept {
    if (target >= n_) return FluxCallStatus::kBadTarget;
    Peer& p = peers_[target];
    if (p.free.empty()) return FluxCallStatus::kFull;
    const uint32_t slot = p.free.back();
    p.free.pop_back();
    p.busy[slot] = 1;
    p.tokens[slot] = token;
    out_[target].publish(p.out_pos++, slot, payload);
    return FluxCallStatus::kOk;
  }

  // Answers a request obtained from try_recv().
  FluxReplyStatus reply(const FluxReplyToken& t, const Payload& payload) noexcept {
    if (t.source >= n_ || t.slot >= max_inflight_) return FluxReplyStatus::kBadToken;
    Peer& p = peers_[t.source];
    if (p.owed_slot[t.slot] == 0) return FluxReplyStatus::kNotOutstanding;
    p.owed_slot[t.slot] = 0;
    --p.owed;
    out_[t.source].publish(p.out_pos++, kFluxResponseBit | t.slot, payload);
    return FluxReplyStatus::kOk;
  }

  // Delivers responses: on_response(const Token&, const Payload&). Parks requests met
  // on the way for try_recv(). Returns the number of responses delivered.
  template <class F>
  uint32_t poll(F&& on_response) {
    uint32_t delivered = 0;
    while (!parked_resp_.empty()) {
      const Parked r = parked_resp_.pop();
      delivered += deliver(r.source, r.slot, r.payload, on_response);
    }
    uint32_t src = poll_start_;
    for (uint32_t k = 0; k < n_; ++k, src = next_node(src)) {
      Peer& p = peers_[src];
      const Ring& ring = in_[src];
      for (uint32_t m = 0; m < capacity_ && ring.ready(p.in_pos); ++m) {
        if (parked_req_.full() && (ring.tag(p.in_pos) & kFluxResponseBit) == 0) break;
        uint32_t tag = 0;
        Payload payload;
        ring.read(p.in_pos++, tag, payload);
        if ((tag & kFluxResponseBit) != 0) {
          delivered += deliver(src, tag & kFluxSlotMask, payload, on_response);
        } else if (tag >= max_inflight_) {  // a request's slab index: never trusted
          ++protocol_errors_;
        } else {
          parked_req_.push(Parked{src, tag, payload});
        }
      }
    }
    poll_start_ = next_node(poll_start_);
    return delivered;
  }

  // The next request from any source (round-robin over sources), with the token to
  // reply with.
  std::optional<FluxRequest<Payload>> try_recv() noexcept {
    while (!parked_req_.empty()) {
      const Parked e = parked_req_.pop();
      if (accept(e)) return FluxRequest<Payload>{e.source, FluxReplyToken{e.source, e.slot}, e.payload};
    }
    uint32_t src = recv_next_;
    for (uint32_t k = 0; k < n_; ++k, src = next_node(src)) {
      Peer& p = peers_[src];
      const Ring& ring = in_[src];
      for (uint32_t m = 0; m < capacity_ && ring.ready(p.in_pos); ++m) {
        if (parked_resp_.full() && (ring.tag(p.in_pos) & kFluxResponseBit) != 0) break;
        Parked e{src, 0, Payload{}};
        ring.read(p.in_pos++, e.slot, e.payload);
        if ((e.slot & kFluxResponseBit) != 0) {
          e.slot &= kFluxSlotMask;
          parked_resp_.push(e);
          continue;
        }
        if (e.slot >= max_inflight_ || !accept(e)) {  // a request's slab index: never trusted
          if (e.slot >= max_inflight_) ++protocol_errors_;
          continue;
        }
        recv_next_ = next_node(src);
        return FluxRequest<Payload>{e.source, FluxReplyToken{e.source, e.slot}, e.payload};
      }
    }
    return std::nullopt;
  }

  uint32_t id() const noexcept { return id_; }
  uint32_t num_nodes() const noexcept { return n_; }
  uint32_t in_flight(uint32_t target) const noexcept {
    return max_inflight_ - static_cast<uint32_t>(peers_[target].free.size());
  }
  uint32_t owed(uint32_t source) const noexcept { return peers_[source].owed; }
  uint64_t protocol_errors() const noexcept { return protocol_errors_; }

 private:
  friend class FluxNetwork<Payload, Token>;

  struct Peer {
    uint64_t out_pos = 0;        // next position in ring me -> peer
    uint64_t in_pos = 0;         // next position in ring peer -> me
    uint32_t owed = 0;           // requests from peer received, not yet replied
    LineVector<uint8_t> owed_slot;  // by the peer's slot: 1 while its request awaits our reply
    LineVector<uint32_t> free;  // free slab slots for calls to peer
    LineVector<uint8_t> busy;   // slab slot awaits a response
    LineVector<Token> tokens;   // caller tokens per slab slot
  };
  struct Parked {
    uint32_t source;
    uint32_t slot;
    Payload payload;
  };
  // Fixed-capacity FIFO (node-local); capacity rounded up to a power of two.
  class ParkQueue {
   public:
    explicit ParkQueue(size_t min_cap) : buf_(round_up_pow2(min_cap)), mask_(buf_.size() - 1) {}
    bool empty() const noexcept { return head_ == tail_; }
    bool full() const noexcept { return tail_ - head_ == buf_.size(); }
    void push(const Parked& e) noexcept { buf_[tail_++ & mask_] = e; }
    Parked pop() noexcept { return buf_[head_++ & mask_]; }

   private:
    static size_t round_up_pow2(size_t v) noexcept {
      size_t p = 1;
      while (p < v) p <<= 1;
      return p;
    }
    LineVector<Parked> buf_;
    uint64_t mask_;
    uint64_t head_ = 0, tail_ = 0;
  };

  template <class Net>
  FluxNode(Net& net, uint32_t id)
      : id_(id),
        n_(net.size()),
        capacity_(net.config().capacity),
        max_inflight_(net.config().max_inflight),
        peers_(n_),
        parked_req_(size_t{n_} * max_inflight_),
        parked_resp_(size_t{n_} * max_inflight_) {
    out_.reserve(n_);
    in_.reserve(n_);
    for (uint32_t j = 0; j < n_; ++j) {
      out_.push_back(net.ring(id, j));
      in_.push_back(net.ring(j, id));
      Peer& p = peers_[j];
      p.busy.assign(max_inflight_, 0);
      p.owed_slot.assign(max_inflight_, 0);
      p.tokens.resize(max_inflight_);
      p.free.reserve(max_inflight_);
      for (uint32_t s = max_inflight_; s-- > 0;) p.free.push_back(s);
    }
  }

  // Round-robin successor without a division on the data path.
  uint32_t next_node(uint32_t i) const noexcept { return i + 1 == n_ ? 0 : i + 1; }

  // A request (slot in range) is handed out: false, counted as a protocol error, if a
  // request of that source and slot still awaits our reply.
  bool accept(const Parked& e) noexcept {
    Peer& p = peers_[e.source];
    if (p.owed_slot[e.slot] != 0) {
      ++protocol_errors_;
      return false;
    }
    p.owed_slot[e.slot] = 1;
    ++p.owed;
    return true;
  }

  template <class F>
  uint32_t deliver(uint32_t src, uint32_t slot, const Payload& payload, F& on_response) {
    Peer& p = peers_[src];
    if (slot >= max_inflight_ || p.busy[slot] == 0) {  // from a ring: never trusted
      ++protocol_errors_;
      return 0;
    }
    const Token token = p.tokens[slot];  // copy: the callback may reuse the slot
    p.busy[slot] = 0;
    p.free.push_back(slot);
    on_response(token, payload);
    return 1;
  }

  uint32_t id_;
  uint32_t n_;
  uint32_t capacity_;
  uint32_t max_inflight_;
  LineVector<Peer> peers_;
  LineVector<Ring> out_;  // ring me -> j
  LineVector<Ring> in_;   // ring j -> me
  ParkQueue parked_req_;
  ParkQueue parked_resp_;
  uint32_t poll_start_ = 0;
  uint32_t recv_next_ = 0;
  uint64_t protocol_errors_ = 0;
};

}  // namespace bkv::shm
