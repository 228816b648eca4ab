// The simulator's future-event set, chosen at run time: the binary heap
// (sim/event_set.hpp) or the calendar queue (sim/calendar_queue.hpp). Both are exact for
// the engine's total order (time, then sequence number), so a simulation runs the same
// events in the same order on either: only the cost differs (benchkv --event-set).
// The choice is made while the set is empty (before the first event is scheduled); each
// operation then dispatches on it with one well-predicted branch.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "sim/calendar_queue.hpp"
#include "sim/event_set.hpp"

namespace bkv::sim {

enum class EventSetKind : uint8_t { kBinaryHeap = 0, kCalendarQueue };

class SelectableEventSet {
 public:
  EventSetKind kind() const noexcept { return kind_; }
  void select(EventSetKind k) {
    if (!empty()) throw std::logic_error("SelectableEventSet: the set is chosen before any event is scheduled");
    kind_ = k;
  }

  // Inlined into the engine with the chosen set's operations (out of line, this call's
  // saved registers cost more than the dispatch).
  [[gnu::always_inline]] void push(const Event& ev) {
    if (kind_ == EventSetKind::kCalendarQueue)
      calendar_.push(ev);
    else
      heap_.push(ev);
  }
  const Event& min() const noexcept {
    return kind_ == EventSetKind::kCalendarQueue ? calendar_.min() : heap_.min();
  }
  [[gnu::always_inline]] Event pop_min() { return kind_ == EventSetKind::kCalendarQueue ? calendar_.pop_min() : heap_.pop_min(); }
  // f(the chosen set): for a loop of many operations that tests the choice once.
  template <class F>
  [[gnu::always_inline]] decltype(auto) visit(F&& f) {
    if (kind_ == EventSetKind::kCalendarQueue) return f(calendar_);
    return f(heap_);
  }
  size_t size() const noexcept { return kind_ == EventSetKind::kCalendarQueue ? calendar_.size() : heap_.size(); }
  bool empty() const noexcept { return size() == 0; }

 private:
  EventSetKind kind_ = EventSetKind::kBinaryHeap;
  BinaryHeapEventSet heap_;
  CalendarQueueEventSet calendar_;
};
static_assert(FutureEventSet<SelectableEventSet>);

}  // namespace bkv::sim
