// Completion queues of the software NIC and the poll loop every software transport uses
// (instant and wall-clock loopback, UCX, and the discrete-event transport).
//
// Rules implemented:
//  - a completion queue is FIFO: a poll returns the oldest completions first, at most
//    `max` of them, and a completion is handed to the user only after it has left the
//    queue (the callback may poll again or post);
//  - polling a send completion frees the send-queue slot of its WQE and of every
//    earlier WQE of the same queue pair (SendQueueSlots::free_through): the send CQ
//    entry carries the queue pair and the WQE's sequence number for that.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include "core/transport.hpp"

namespace bkv::software_nic {

// Growable FIFO of completions, owner thread only: the one completion ring of every
// software transport and of the discrete-event NIC model. Storage grows (doubling) with
// the entries actually queued, so a deep queue that is polled often costs little memory.
// Unbounded by default: it never drops an entry and grows while the user lets
// completions pile up. Bounded (bound_at_least), it holds at most bound() entries, as a
// hardware CQ of that depth: full() says when, and the owner treats a completion that
// finds it full as an overrun (the discrete-event model reports a simulation error, as
// a CQ overrun is on a real NIC); push() itself never checks.
// Invariants: head <= tail, tail - head <= storage, storage a power of two (or 0),
// mask = storage - 1 once it has grown, storage <= bound() when bounded.
template <class T>
class CompletionQueue {
 public:
  bool empty() const noexcept { return head_ == tail_; }
  uint64_t size() const noexcept { return tail_ - head_; }
  // Bounds the queue at the next power of two >= min_entries, unless it already has a
  // larger bound.
  void bound_at_least(uint64_t min_entries) noexcept {
    uint64_t b = 1;
    while (b < min_entries) b <<= 1;
    if (b > bound_) bound_ = b;
  }
  uint64_t bound() const noexcept { return bound_; }  // 0: unbounded
  bool full() const noexcept { return bound_ != 0 && size() == bound_; }
  // Inline and small (one per completion); growing is out of line.
  void push(const T& v) {
    if (size() == buf_.size()) [[unlikely]] grow();
    buf_[tail_++ & mask_] = v;
  }
  const T& front() const noexcept {
    assert(!empty());
    return buf_[head_ & mask_];
  }
  void pop() noexcept {
    assert(!empty());
    ++head_;
  }

 private:
  static constexpr uint64_t kInitialStorage = 64;
  static_assert((kInitialStorage & (kInitialStorage - 1)) == 0, "storage stays a power of two");
  [[gnu::noinline]] void grow() {
    const uint64_t first = bound_ != 0 && bound_ < kInitialStorage ? bound_ : kInitialStorage;
    std::vector<T> bigger(buf_.empty() ? first : buf_.size() * 2);
    for (uint64_t i = head_; i < tail_; ++i) bigger[i - head_] = buf_[i & mask_];
    tail_ -= head_;
    head_ = 0;
    buf_.swap(bigger);
    mask_ = buf_.size() - 1;
  }
  std::vector<T> buf_;
  uint64_t mask_ = 0;   // buf_.size() - 1 (the index mask of the ring; 0 while empty)
  uint64_t bound_ = 0;  // most entries held (a power of two), 0 = unbounded
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

// A send completion as it sits in the send CQ: what the user sees, plus the queue pair
// (`QpRef`: a pointer or an index, whatever the transport finds its slots with) and the
// sequence number of the WQE, whose slot and all earlier ones the poll frees.
template <class QpRef>
struct SendCqEntry {
  SendCompletion wc;
  QpRef qp;
  uint64_t seq;
};

// Drains up to `max` completions from `cq` (any FIFO with empty/front/pop), oldest
// first, calling on_completion(entry) for each after it left the queue.
template <class Queue, class OnEntry>
uint32_t poll_completion_queue(Queue& cq, uint32_t max, OnEntry&& on_entry) {
  uint32_t n = 0;
  while (n < max && !cq.empty()) {
    const auto entry = cq.front();
    cq.pop();
    ++n;
    on_entry(entry);
  }
  return n;
}

// The receive side of poll_recv(): entries are RecvCompletions.
template <class Queue, class OnCompletion>
uint32_t poll_recv_queue(Queue& cq, uint32_t max, OnCompletion&& on_completion) {
  return poll_completion_queue(cq, max, on_completion);
}

// The send side of poll_send(): before the user sees a completion, its WQE's slot and
// every earlier one of its queue pair are freed. `slots_of(entry)` returns the
// SendQueueSlots of the entry's queue pair.
template <class Queue, class SlotsOf, class OnCompletion>
uint32_t poll_send_queue(Queue& cq, uint32_t max, SlotsOf&& slots_of, OnCompletion&& on_completion) {
  return poll_completion_queue(cq, max, [&](const auto& entry) {
    slots_of(entry).free_through(entry.seq);
    on_completion(entry.wc);
  });
}

}  // namespace bkv::software_nic
