// The future-event set of the discrete-event engine: what an implementation must offer,
// the event record it holds, and the default implementation (a binary heap).
//
// Total order: an event comes before another if its time is earlier, or if the times
// are equal and its insertion sequence number is smaller. Sequence numbers are unique
// (the engine hands them out from a counter), so the order is total and every correct
// implementation pops exactly the same events in exactly the same order. That is what
// keeps the simulator's output independent of which set is plugged in.
//
// What the engine needs, and so all the interface has:
//   push(ev)    add an event (any time: a set does not assume times only grow)
//   min()       the first event in the total order; precondition: !empty()
//   pop_min()   remove and return it;                precondition: !empty()
//   size(), empty()
// There is no cancellation: a finished or superseded activity simply ignores its event
// (targets check a generation number in the event argument).
//
// Implementations: BinaryHeapEventSet (here, the default) and CalendarQueueEventSet
// (sim/calendar_queue.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace bkv::sim {

using Time = uint64_t;  // virtual nanoseconds since the start of the simulation
inline constexpr Time kTimeNever = std::numeric_limits<Time>::max();

struct Event {
  Time time;
  uint64_t seq;     // global insertion order: breaks ties between equal times
  uint32_t target;  // index into the engine's target table
  uint32_t arg;
};
static_assert(sizeof(Event) == 24, "events stay small: the sets move them around");
static_assert(std::is_trivially_copyable_v<Event>);

// The ordering rule of the future-event set: earlier time first, then earlier insertion.
constexpr bool event_before(const Event& a, const Event& b) noexcept {
  return a.time < b.time || (a.time == b.time && a.seq < b.seq);
}

template <class S>
concept FutureEventSet = std::default_initializable<S> && requires(S s, const S cs, const Event& ev) {
  { s.push(ev) } -> std::same_as<void>;
  { cs.min() } -> std::same_as<const Event&>;
  { s.pop_min() } -> std::same_as<Event>;
  { cs.size() } -> std::same_as<size_t>;
  { cs.empty() } -> std::same_as<bool>;
};

// Binary min-heap in a std::vector that only grows to the peak number of pending events.
// Sifts move a hole (one move per level instead of a swap). O(log n) push and pop.
class BinaryHeapEventSet {
 public:
  BinaryHeapEventSet() { heap_.reserve(kInitialCapacity); }

  void push(const Event& ev) {
    heap_.push_back(ev);
    size_t i = heap_.size() - 1;
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!event_before(ev, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = ev;
  }

  const Event& min() const noexcept { return heap_.front(); }

  Event pop_min() {
    const Event first = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return first;
    size_t i = 0;
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && event_before(heap_[child + 1], heap_[child])) ++child;
      if (!event_before(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
    return first;
  }

  size_t size() const noexcept { return heap_.size(); }
  bool empty() const noexcept { return heap_.empty(); }

 private:
  static constexpr size_t kInitialCapacity = 1024;
  std::vector<Event> heap_;
};
static_assert(FutureEventSet<BinaryHeapEventSet>);

}  // namespace bkv::sim
