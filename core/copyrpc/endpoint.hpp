// copyrpc endpoint state: one RC connection's send ring, receive ring, flow control and
// pending calls (docs/design_channels.md §copyrpc endpoints and rings, §copyrpc credits).
// Every position is a virtual u64 that only grows; `pos & (size-1)` is the
// ring offset. Behaviour lives in Context (context.hpp); this file is the state and the
// small pure functions over it, so the invariants can be read in one place.
//
// Send side (toward the peer):            Receive side (from the peer):
//   flush_start <= meta_pos <= producer      consumed <= parsed <= recv_producer
//   in_flight = producer - remote_consumer   recv_producer advances by imm*32 per CQE
//
// Credit invariant (checked after every operation by the property test):
//   in_flight + 2 * resp_reservation <= remote ring size
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cache_hint.hpp"
#include "core/copyrpc/config.hpp"
#include "core/copyrpc/metrics.hpp"
#include "core/copyrpc/page_give_back.hpp"
#include "core/copyrpc/wire.hpp"
#include "core/transport.hpp"

namespace bkv::copyrpc {

// Why an endpoint stopped: every receive-path check has its own code so a test (or a
// researcher reading a log) knows exactly which rule a peer broke.
enum class EndpointError : uint8_t {
  kNone = 0,
  kBadImmediate,         // imm = 0, or larger than the receive ring could hold (a
                         // non-zero imm always covers the 32-byte flow metadata:
                         // wire.hpp, so no batch can be shorter than its metadata)
  kRingOverrun,          // the batch would overwrite bytes not yet consumed
  kBadWrapMarker,        // a wrap marker that does not end exactly at the ring end
  kBadMessageCount,      // more messages than the batch can hold, or bytes left over
  kBadLength,            // a message's length runs past the batch
  kUnknownCallId,        // a response to no pending call
  kBadAllowance,         // a request asks for more response credit than was granted
  kBadCreditReturn,      // the peer claims to have consumed bytes never sent
  kBadCreditGrant,       // unaligned grant, or a balance larger than the ring
  kBadConsumerRead,      // the RDMA-READ consumer position is out of range
  kCompletionError,      // the NIC reported an error completion for this QP
  kStoppedByOwner,       // the owner stopped it (Context::stop_endpoint: a peer declared dead)
  kBadWriteLength,       // the WRITE placed fewer or more bytes than its immediate announces
                         // (past what it placed, the ring holds an earlier cycle's bytes)
  kBadResponseLength,    // a response's payload is longer than its call's allowance admits
                         // (the largest reply() sends for it: max_reply_payload)
};

constexpr const char* to_string(EndpointError e) noexcept {
  switch (e) {
    case EndpointError::kNone: return "none";
    case EndpointError::kBadImmediate: return "bad immediate (batch length)";
    case EndpointError::kRingOverrun: return "batch overruns unconsumed receive-ring bytes";
    case EndpointError::kBadWrapMarker: return "wrap marker does not end at the ring end";
    case EndpointError::kBadMessageCount: return "message count does not match the batch";
    case EndpointError::kBadLength: return "message length runs past the batch";
    case EndpointError::kUnknownCallId: return "response to an unknown call id";
    case EndpointError::kBadAllowance: return "request allowance exceeds granted credit";
    case EndpointError::kBadCreditReturn: return "credit return beyond the bytes sent";
    case EndpointError::kBadCreditGrant: return "invalid credit grant";
    case EndpointError::kBadConsumerRead: return "RDMA-READ consumer position out of range";
    case EndpointError::kCompletionError: return "error completion on the queue pair";
    case EndpointError::kStoppedByOwner: return "stopped by its owner";
    case EndpointError::kBadWriteLength: return "the WRITE's byte count does not match its immediate";
    case EndpointError::kBadResponseLength: return "response longer than its call's allowance";
  }
  return "unknown";
}

// A ring buffer's memory: power-of-two size, 64-byte aligned, zero-filled (so a NIC
// never reads uninitialized padding), registered with the transport by the owner.
// Either allocated here, or handed over by a transport with paged memory
// (PagedRingMemory in core/transport.hpp), which gets it back through `release`.
class RingMemory {
 public:
  using Release = void (*)(void* owner, std::byte* data, uint64_t size);

  RingMemory() = default;
  explicit RingMemory(uint64_t size)
      : data_(static_cast<std::byte*>(::operator new[](size, std::align_val_t{64}))), size_(size), mask_(size - 1) {
    for (uint64_t i = 0; i < size; ++i) data_[i] = std::byte{0};
  }
  // Zero-filled memory owned by `owner`, given back with release(owner, data, size).
  RingMemory(std::byte* data, uint64_t size, Release release, void* owner) noexcept
      : data_(data), size_(size), mask_(size - 1), release_(release), owner_(owner) {}
  RingMemory(RingMemory&& o) noexcept
      : data_(o.data_), size_(o.size_), mask_(o.mask_), release_(o.release_), owner_(o.owner_) {
    o.data_ = nullptr;
  }
  RingMemory& operator=(RingMemory&& o) noexcept {
    if (this != &o) {
      this->~RingMemory();
      data_ = o.data_;
      size_ = o.size_;
      mask_ = o.mask_;
      release_ = o.release_;
      owner_ = o.owner_;
      o.data_ = nullptr;
    }
    return *this;
  }
  RingMemory(const RingMemory&) = delete;
  ~RingMemory() {
    if (!data_) return;
    if (release_)
      release_(owner_, data_, size_);
    else
      ::operator delete[](data_, std::align_val_t{64});
    data_ = nullptr;
  }
  std::byte* data() const noexcept { return data_; }
  uint64_t size() const noexcept { return size_; }
  // size() - 1 (size is a power of two): `pos & mask()` is the ring offset of `pos`.
  uint64_t mask() const noexcept { return mask_; }
  std::byte* at(uint64_t pos) const noexcept { return data_ + (pos & mask_); }

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mask_ = 0;  // size_ - 1, kept (the append's offset and wrap tests use it)
  Release release_ = nullptr;
  void* owner_ = nullptr;
};

// Ring memory of `size` bytes for transport `t`: handed over by the transport where it
// supplies paged memory (given back to it when the ring is destroyed), else allocated here.
template <class T>
RingMemory make_ring_memory(T& t, uint64_t size) {
  if constexpr (PagedRingMemory<T>) {
    const RingMemory::Release release = [](void* owner, std::byte* p, uint64_t n) {
      static_cast<T*>(owner)->free_ring(p, n);
    };
    return RingMemory(t.allocate_ring(size), size, release, &t);
  } else {
    return RingMemory(size);
  }
}

// Pending calls: a slab indexed by call_id holding the caller's token, the call's
// allowance (the response credit it reserved at the peer, in bytes: the receive path
// bounds its response's payload by it) and, where calls are timed (`kTimed`: under a
// metering transport, i.e. in the simulator), the time each was made. O(1) insert and
// remove, no allocation once the slab has grown to the number of calls in flight, free
// ids taken last-freed first (the same ids either way). Where the free ids are kept
// depends on kTimed:
// - untimed (the real transports): a list threaded through the free slots' `state`. A
//   call reads the slot it takes for the next free id: the fewest instructions
//   (scripts/callgrind_copyrpc.sh, docs/benchmarks.md).
// - timed (the simulator): a stack of their own, whose top (a few lines, touched by every
//   call and release of the endpoint) stays cached. In the simulator every rank of the
//   cluster runs in one process, so a slot, touched once per round trip, has left the
//   cache by its next call, and the list made each call wait for that line before it
//   could take the id (the stores that follow do not wait).
// A slot's `state` word says whether its call is pending and carries the allowance:
// kNone + allowance while it is (an allowance is never 0), at most kNone while it is not
// (untimed: the next free id, kNone ending the list; timed: 0). The allowance takes no
// byte of its own in the slot.
// Token, state and call time share a slot (one line: a timed slot is 32-byte aligned), so
// a response finds, checks, times and frees its call with one bounds test and one line.
template <class Token, bool kTimed = false>
class CallSlab {
 public:
  // No call id: make_free_slot()'s answer when every id is taken, and the free list's end
  // (so where the list has a head, the compiler knows it is not kNone: call() tests
  // make_free_slot()'s answer for kNone at no cost). A pending slot's state is above it.
  static constexpr uint32_t kNone = kMaxCallId + 1;
  static constexpr uint32_t kMaxAllowance = ~0u - kNone;
  // The largest allowance call() reserves: an internal allowance for a reply of ring/8.
  static_assert(internal_allowance(kMaxRingSize / 8) <= kMaxAllowance, "every allowance fits the state word");

  // The id insert() will take: the last one freed, the slab grown by one if none is free.
  // Returns kNone when every call id is taken.
  uint32_t make_free_slot() {
    if constexpr (kTimed) {
      if (free_count_ != 0) [[likely]] return free_ids_[free_count_ - 1];
      if (slot_count_ > kMaxCallId) return kNone;
      free_ids_.push_back(0);  // room for every id on the stack (first: a throw leaves no slot)
      slots_.push_back(Slot{});
      free_ids_[0] = slot_count_;
      free_count_ = 1;
      return slot_count_++;
    } else {
      if (free_head_ != kNone) [[likely]] return free_head_;
      if (slot_count_ > kMaxCallId) return kNone;
      slots_.push_back(Slot{Token{}, kNone});
      free_head_ = slot_count_++;
      return free_head_;
    }
  }
  // Takes slot `id`, the one make_free_slot() returned, for `t`, a call that reserved
  // `allowance` bytes (1 to kMaxAllowance) of response credit: never allocates, never throws.
  // `started_ns`: when the call was made (kept where kTimed).
  void insert(uint32_t id, Token t, uint32_t allowance, uint64_t started_ns = 0) noexcept {
    assert(allowance != 0 && allowance <= kMaxAllowance);
    Slot& s = slots_[id];
    if constexpr (kTimed) {
      assert(free_count_ != 0 && free_ids_[free_count_ - 1] == id);
      --free_count_;
      s.token = std::move(t);
      s.state = kNone + allowance;
      s.started_ns = started_ns;
    } else {
      assert(free_head_ == id);
      free_head_ = s.state;
      s.token = std::move(t);
      s.state = kNone + allowance;
    }
  }
  // Nanoseconds from the making of call `id` (one find() returned non-null for, freed
  // or not since: release() keeps the time) to `now_ns`.
  uint64_t elapsed_ns(uint32_t id, uint64_t now_ns) const noexcept
    requires kTimed
  {
    return now_ns - slots_[id].started_ns;
  }
  bool contains(uint32_t id) const noexcept { return id < slot_count_ && pending(slots_[id]); }
  // The token of pending call `id`, or nullptr if `id` is not a pending call.
  Token* find(uint32_t id) noexcept {
    if (id >= slot_count_) return nullptr;
    Slot& s = slots_[id];
    return pending(s) ? &s.token : nullptr;
  }
  // The allowance pending call `id` (one find() returned non-null for) reserved.
  uint32_t allowance(uint32_t id) const noexcept {
    assert(contains(id));
    return slots_[id].state - kNone;
  }
  // A cache hint for a find(id) to come: the slot's line. Changes nothing.
  void prefetch(uint32_t id) const noexcept {
    if (id < slot_count_) prefetch_line(&slots_[id]);
  }
  // Frees the slot of pending call `id` (one find() returned non-null for). Never
  // allocates: the stack has room for every id.
  void release(uint32_t id) noexcept {
    if constexpr (kTimed) {
      slots_[id].state = kFreeTimed;
      assert(free_count_ < free_ids_.size());
      free_ids_[free_count_++] = id;
    } else {
      slots_[id].state = free_head_;
      free_head_ = id;
    }
  }
  // Takes every pending call, in call-id order: f(Token&&) for each, its slot freed.
  // Returns how many.
  template <class F>
  uint32_t take_all(F&& f) {
    uint32_t n = 0;
    for (uint32_t id = 0; id < slot_count_; ++id) {
      if (!pending(slots_[id])) continue;
      f(std::move(slots_[id].token));
      release(id);
      ++n;
    }
    return n;
  }
  // Pending calls (for inspection): every id handed out less the free ones; counted over
  // the slab where untimed (the list keeps no count).
  uint32_t size() const noexcept {
    if constexpr (kTimed) {
      return slot_count_ - free_count_;
    } else {
      uint32_t n = 0;
      for (uint32_t id = 0; id < slot_count_; ++id) n += pending(slots_[id]);
      return n;
    }
  }

 private:
  static constexpr uint32_t kFreeTimed = 0;  // timed: a free slot's state
  struct Untimed {};
  struct alignas(kTimed ? 32 : alignof(Token)) Slot {
    Token token;
    // kNone + the call's allowance while the slot's call is pending; else, untimed: the
    // next free id (kNone ends the list), timed: kFreeTimed
    uint32_t state = kFreeTimed;
    [[no_unique_address]] std::conditional_t<kTimed, uint64_t, Untimed> started_ns;
  };
  static_assert(!kTimed || 64 % sizeof(Slot) == 0, "a timed slot lies in one cache line");
  static bool pending(const Slot& s) noexcept { return s.state > kNone; }
  struct NoStack {};
  struct NoCount {};
  struct NoHead {};
  std::vector<Slot> slots_;
  // timed: [0, free_count_) the free ids, the last freed on top
  [[no_unique_address]] std::conditional_t<kTimed, std::vector<uint32_t>, NoStack> free_ids_;
  uint32_t slot_count_ = 0;  // slots_.size(), kept as a count (no division by the slot size)
  [[no_unique_address]] std::conditional_t<kTimed, uint32_t, NoCount> free_count_{};
  [[no_unique_address]] std::conditional_t<kTimed, NoHead, uint32_t> free_head_{kNoHead()};  // untimed: the list's head
  static constexpr auto kNoHead() noexcept {
    if constexpr (kTimed)
      return NoHead{};
    else
      return kNone;
  }
};

// One WRITE+IMM waiting to be posted: a finished batch or a wrap marker.
struct PendingEmit {
  uint64_t start;      // virtual position of the first byte (its metadata)
  uint32_t write_len;  // bytes written (a wrap marker writes only its 32-byte metadata)
  uint32_t imm;        // bytes the receiver's producer advances, in 32-byte units
};

// One endpoint's WRITE+IMMs finished but not yet posted (the send queue was full), oldest
// first. Unposted bytes are at most C and a wrap happens once per ring cycle, so a few
// entries suffice; a push beyond kCapacity means a bookkeeping bug and throws.
class PendingEmits {
 public:
  static constexpr uint32_t kCapacity = 8;

  bool empty() const noexcept { return count_ == 0; }
  const PendingEmit& front() const noexcept { return ring_[head_]; }
  void pop() noexcept {
    head_ = (head_ + 1) % kCapacity;
    --count_;
  }
  void push(const PendingEmit& pe) {
    if (count_ == kCapacity) throw std::logic_error("copyrpc: pending-emit queue overflow");
    ring_[(head_ + count_) % kCapacity] = pe;
    ++count_;
  }

 private:
  PendingEmit ring_[kCapacity];
  uint32_t head_ = 0, count_ = 0;
};

// Information a peer needs to connect to an endpoint, exchanged out of band.
template <class ConnectInfo>
struct EndpointInfo {
  ConnectInfo qp;
  uint64_t recv_ring_addr;
  uint64_t recv_ring_size;
  uint64_t consumer_addr;   // the 8-byte consumed-position word (RDMA READ fallback)
  uint64_t initial_credit;  // response credit granted to the peer at connect
  uint32_t recv_ring_rkey;
  uint32_t consumer_rkey;
};

template <class QueuePair, class Token, bool kTimedCalls = false>
struct Endpoint {
  uint32_t id = 0;
  QueuePair* qp = nullptr;
  bool connected = false;
  EndpointError error = EndpointError::kNone;
  bool takes_calls = false;  // connected and not stopped: call()'s one test

  RingMemory send_ring, recv_ring;
  MemoryRegion send_mr{}, recv_mr{}, consumer_mr{}, read_mr{};
  alignas(64) uint64_t consumer_word = 0;  // published consumed position (peer READs it)
  // recv() took requests whose payloads are held until the next flush: the consumed
  // position moved, and that flush publishes it (on the context's publish list). In the
  // word's line, the padding before read_buffer: set and cleared where the word is stored.
  bool publish_due = false;
  alignas(64) uint64_t read_buffer = 0;    // landing spot of our READ of the peer's word

  // ---- send side ----
  uint64_t producer = 0;     // next byte to write
  uint64_t flush_start = 0;  // first byte not yet handed to the NIC
  uint64_t meta_pos = 0;     // metadata slot of the open batch
  // Metadata bytes the next message adds for its batch: kFlowMetadataSize while no batch
  // is open (the message opens one), 0 while one is (kept as a byte count, the form
  // the append's arithmetic uses).
  uint64_t batch_open_cost = kFlowMetadataSize;
  // While a batch is open: the start of the next ring cycle, so a message whose stream
  // end is below it joins the batch without a wrap (reply()'s one test); 0 while none
  // is open (the message then opens one, through the append plan).
  uint64_t open_batch_end = 0;
  uint32_t batch_count = 0;
  PendingEmits emits;        // batches and wrap markers finished but not yet posted
  uint32_t unsignaled = 0;   // WQEs since the last signalled one
  bool dirty = false;        // on the context's flush list

  // ---- remote ring and flow control ----
  RemoteBuffer remote_ring{};
  RemoteBuffer remote_consumer_word{};
  uint64_t consumer_by_credit_return = 0;  // sum of ring_credit_return received
  uint64_t consumer_by_read = 0;       // last consumed position read by RDMA READ
  uint64_t resp_reservation = 0;       // R: credit granted to the peer, not yet used by replies
  uint64_t max_resp_reservation = 0;
  // Part of R held by requests received, not yet replied. Not next to R: reply() lowers
  // both by the same amount, and the compiler turns two adjacent updates into vector
  // instructions that cost more than the two subtractions.
  uint64_t resp_committed = 0;
  uint64_t peer_credit = 0;            // credit the peer granted us for our calls
  // call()'s limit on a response allowance: ring/8, or less if the peer's whole grant
  // (its initial credit) covers less; set at connect.
  uint64_t max_response_allowance = 0;
  // call()'s one test: a message whose stream end (producer + padded size) is below
  // this position joins the open batch without a wrap and within send_limit(); 0 while
  // no batch is open (the call opens one, through the precise tests).
  // Kept at most computed_call_fast_end() = min(send_limit() + 1, open_batch_end) by
  // every change that lowers either term (a grant, closing a batch, a wrap); a reply (R
  // lowered) and a consumer moving forward raise send_limit() and may leave it low,
  // which only sends a call to the precise tests, where it is refreshed.
  uint64_t call_fast_end = 0;

  // ---- receive side ----
  uint64_t recv_producer = 0;   // end of the bytes the peer has written (from imm)
  uint64_t parsed = 0;          // end of the bytes parsed
  uint64_t hold_pos = 0;        // start of the oldest batch with requests not yet taken
  // Receive-queue index (Context) of the last request parsed but not yet taken by
  // recv(), or kNoQueuedRequest: taking it unpins the batches from hold_pos on.
  static constexpr uint64_t kNoQueuedRequest = ~0ull;
  uint64_t last_queued = kNoQueuedRequest;
  uint64_t last_notified = 0;   // consumed position last reported to the peer
  uint64_t batches_received = 0;

  // ---- RDMA READ fallback ----
  uint64_t ringfull_mark = ~0ull;  // batches_received at the previous RingFull
  uint64_t ringfull_credit = 0;    // peer_credit at the previous RingFull
  uint32_t ringfull_streak = 0;
  bool need_read = false;
  bool read_outstanding = false;

  // ---- paged ring memory (PagedRingMemory transports only) ----
  PageGiveBack pages;  // how far whole pages have been given back

  CallSlab<Token, kTimedCalls> pending;  // timed only under a metering transport

  uint64_t ring_size() const noexcept { return send_ring.size(); }
  uint64_t recv_ring_size() const noexcept { return recv_ring.size(); }
  uint64_t ring_mask() const noexcept { return send_ring.mask(); }
  bool batch_open() const noexcept { return batch_open_cost == 0; }
  uint64_t remote_consumer() const noexcept {
    return consumer_by_credit_return > consumer_by_read ? consumer_by_credit_return : consumer_by_read;
  }
  uint64_t in_flight() const noexcept { return producer - remote_consumer(); }
  // Consumed position: bytes the peer may overwrite once it is published. Requests not
  // yet taken by recv() pin their batch; a request taken is published consumed at the
  // next flush (publish_due), so a handle's payload stays valid until then.
  bool has_queued_requests() const noexcept { return last_queued != kNoQueuedRequest; }
  uint64_t consumed() const noexcept { return has_queued_requests() ? hold_pos : parsed; }
  // Where the send stream may reach under the credit invariant (in_flight + 2R <= C).
  uint64_t send_limit() const noexcept { return remote_consumer() + remote_ring.length - 2 * resp_reservation; }
  uint64_t computed_call_fast_end() const noexcept {
    const uint64_t credit_end = send_limit() + 1;
    return credit_end < open_batch_end ? credit_end : open_batch_end;  // 0 with no batch open
  }
  void refresh_call_fast_end() noexcept { call_fast_end = computed_call_fast_end(); }
  bool credit_invariant_holds() const noexcept {
    return in_flight() + 2 * resp_reservation <= remote_ring.length;
  }
};

}  // namespace bkv::copyrpc
