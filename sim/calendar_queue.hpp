// A calendar queue: a future-event set with O(1) expected push and pop when event times
// are spread smoothly, exact for the engine's total order (time, then sequence number).
//
// Layout: time is cut into slots of 2^shift ns ("days"); slot s lives in bucket
// s mod bucket_count (a "year" is bucket_count slots). Each bucket holds its events in
// ascending (time, seq) order in an array of its own whose live part is [head, end):
//
//   time ──►  slot = time >> shift        bucket = slot & (bucket_count - 1)
//
//   bucket 0 [ . . . | e e e ]   . = consumed (index < head), e = pending, ascending
//   bucket 1 [ e ]
//   bucket 2 [ ]
//   ...
//
// Invariant: when the set is not empty, current_bucket_'s first live event is the
// minimum of the whole set, current_slot_ is its slot, and min_ is a copy of it. So
// min() is a read of the set's own fields. A bucket holding events has its first live
// event's time in its header (front_time), which is what the walk of pop reads.
//
// push: binary position search is not needed: a new event is usually the latest in its
//   bucket (ties in time come in sequence order), so the insertion point is found by
//   scanning from the back; an event before the bucket's first one takes the free slot
//   at head - 1 when there is one. An event later than the time of the bucket's last
//   event (kept in the bucket header) is appended without reading the events. An event
//   before the current minimum moves the current position back to it.
// pop: take the current bucket's first event, then walk forward slot by slot: the next
//   minimum is the first event found whose slot equals the slot being looked at. After a
//   whole year of buckets without a match (all events are far away), search the bucket
//   heads directly.
// Resize: the bucket count doubles when there are more than 2 events per bucket and
//   halves below 1/2; the slot width is recomputed from the spacing of the earliest
//   events. A rebuild with the same bucket count also happens when the measured work per
//   operation (buckets stepped over, events shifted) stays high, which is how the width
//   follows a time distribution that changes. Rebuilding sorts the events once, so each
//   bucket is refilled by appends. The order the set yields never depends on the width
//   or bucket count: only the cost does.
#pragma once

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "sim/event_set.hpp"

namespace bkv::sim {

class CalendarQueueEventSet {
 public:
  static constexpr size_t kMinBuckets = 8;
  // Target fill: between 1/2 and 2 events per bucket.
  static constexpr size_t kGrowWhenEventsPerBucket = 2;
  static constexpr size_t kShrinkWhenBucketsPerEvent = 2;
  // Width = next power of two >= kWidthPerSpacing x (mean spacing of the earliest events).
  static constexpr uint64_t kWidthPerSpacing = 2;
  static constexpr size_t kSpacingSample = 64;
  // Work check: every kCheckEveryYears x bucket_count operations; rebuild when the
  // average work per operation exceeded kMaxWorkPerOp steps.
  static constexpr uint64_t kCheckEveryYears = 8;
  static constexpr uint64_t kMaxWorkPerOp = 6;
  // A bucket drops its consumed prefix once it is this long and at least half the array.
  static constexpr size_t kCompactAfter = 32;
  static_assert(std::has_single_bit(kMinBuckets), "bucket counts are powers of two (index by mask)");
  // Growing at fill G halves the fill to G/2, shrinking at fill 1/S doubles it to 2/S;
  // both must land strictly between 1/S and G (G*S > 2). 4 keeps a factor of 2 margin.
  static_assert(kGrowWhenEventsPerBucket * kShrinkWhenBucketsPerEvent >= 4,
                "after a resize the fill sits between the two thresholds: no resize ping-pong");

  CalendarQueueEventSet() {
    buckets_.resize(kMinBuckets);
    set_thresholds();
  }

  // Inlined into the engine's schedule and run_one, like pop_min: out of line, their
  // calls and saved registers were a fifth of the set's instructions per event. What is
  // rare (a rebuild, a bucket's compaction, a year without a match) stays out of line.
  [[gnu::always_inline]] void push(const Event& ev) {
    if (size_ >= grow_at_) [[unlikely]]  // size_ + 1 > kGrowWhenEventsPerBucket * bucket_count()
      rebuild(bucket_count() * 2, &ev);
    else
      insert(ev);
    ++size_;
    count_op();
  }

  // A copy kept in the set itself: the engine reads the minimum's time after every event
  // and push compares with it, and the bucket it lives in is usually out of the cache by
  // then.
  const Event& min() const noexcept { return min_; }

  [[gnu::always_inline]] Event pop_min() {
    Bucket& b = buckets_[current_bucket_];
    const Event first = min_;
    ++b.head;
    if (b.head == b.end) {
      b.head = b.end = 0;
    } else {
      b.front_time = b.events[b.head].time;  // next to the event just taken
      if (b.head >= kCompactAfter && 2 * b.head >= b.end) [[unlikely]] compact(b);
    }
    --size_;
    // size_ * kShrinkWhenBucketsPerEvent < bucket_count() with more than kMinBuckets
    // buckets (shrink_below_ is 0 at kMinBuckets).
    if (size_ < shrink_below_ && size_ > 0) [[unlikely]] {
      rebuild(bucket_count() / 2, nullptr);
    } else if (size_ > 0) {
      find_next_min();
    }
    count_op();
    return first;
  }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // For tests and the benchmark: the current geometry and how often it was rebuilt.
  size_t bucket_count() const noexcept { return mask_ + 1; }
  uint64_t slot_width() const noexcept { return uint64_t{1} << shift_; }
  uint64_t rebuilds() const noexcept { return rebuilds_; }

 private:
  // A bucket's events in an array of its own rather than a std::vector: its push_back
  // stayed a call per event and its size a division by sizeof(Event). Emptied, a bucket
  // keeps its array.
  struct Bucket {
    std::unique_ptr<Event[]> events;
    uint32_t head = 0;      // events before head are consumed
    uint32_t end = 0;       // [head, end) are live, ascending (time, seq)
    uint32_t capacity = 0;  // of events
    // Copies of the first live and the last event's times while the bucket holds events
    // (push decides most insertions from the header alone).
    Time front_time = 0;
    Time back_time = 0;
  };
  static_assert(sizeof(Bucket) == 40, "a bucket header is well under a line: the walk of pop reads a few in a row");
  static constexpr uint32_t kFirstCapacity = 4;

  uint64_t slot_of(Time t) const noexcept { return t >> shift_; }
  size_t bucket_of_slot(uint64_t slot) const noexcept { return static_cast<size_t>(slot) & mask_; }

  // Puts ev in its bucket (size_ is the caller's business) and keeps the invariant.
  [[gnu::always_inline]] void insert(const Event& ev) {
    const bool new_min = size_ == 0 || event_before(ev, min_);
    const uint64_t slot = slot_of(ev.time);
    Bucket& b = buckets_[bucket_of_slot(slot)];
    if (b.head == b.end) {
      append(b, ev);
      b.front_time = b.back_time = ev.time;
    } else if (ev.time > b.back_time || (ev.time == b.back_time && ev.seq > max_seq_)) {
      // The usual case, decided from the bucket's header alone: later than every event
      // of the bucket (a tie in time goes after them when its sequence number is larger
      // than any pushed so far, as the engine's always are).
      append(b, ev);
      b.back_time = ev.time;
    } else if (b.head > 0 && ev.time < b.front_time) {
      b.events[--b.head] = ev;  // new first event of the bucket: reuse a consumed place
      b.front_time = ev.time;
    } else {
      insert_inside(b, ev);
    }
    if (new_min) {
      current_slot_ = slot;
      current_bucket_ = bucket_of_slot(slot);
      min_ = ev;
    }
    max_seq_ = std::max(max_seq_, ev.seq);
  }

  // Puts ev after the bucket's events (the caller keeps the times in the header).
  [[gnu::always_inline]] static void append(Bucket& b, const Event& ev) {
    if (b.end == b.capacity) [[unlikely]] make_room(b);
    b.events[b.end++] = ev;
  }

  // A full array: the live events move to its front when consumed places are at least
  // half of it, else to an array twice as large.
  [[gnu::noinline]] static void make_room(Bucket& b) {
    const uint32_t live = b.end - b.head;
    if (b.head > 0 && 2 * b.head >= b.capacity) {
      compact(b);
      return;
    }
    if (b.capacity > std::numeric_limits<uint32_t>::max() / 2)
      throw std::length_error("CalendarQueueEventSet: more than 2^31 events in one bucket");
    const uint32_t capacity = b.capacity == 0 ? kFirstCapacity : 2 * b.capacity;
    std::unique_ptr<Event[]> events(new Event[capacity]);
    std::copy(b.events.get() + b.head, b.events.get() + b.end, events.get());
    b.events = std::move(events);
    b.capacity = capacity;
    b.head = 0;
    b.end = live;
  }

  // An event before the last one of a non-empty bucket: placed by a scan from the back.
  [[gnu::noinline]] void insert_inside(Bucket& b, const Event& ev) {
    if (b.end == b.capacity) make_room(b);
    Event* v = b.events.get();
    uint32_t i = b.end++;
    while (i > b.head && event_before(ev, v[i - 1])) {
      v[i] = v[i - 1];
      --i;
    }
    v[i] = ev;
    work_ += b.end - 1 - i;
    b.front_time = v[b.head].time;
    b.back_time = v[b.end - 1].time;
  }

  // A bucket that never runs empty (a steady stream of equal or close times) drops its
  // consumed prefix; moving at most `head` live events per `head` pops.
  [[gnu::noinline]] static void compact(Bucket& b) {
    std::copy(b.events.get() + b.head, b.events.get() + b.end, b.events.get());
    b.end -= b.head;
    b.head = 0;
  }

  // Precondition: size_ > 0 and every pending event is at or after current_slot_.
  [[gnu::always_inline]] void find_next_min() {
    const size_t n = bucket_count();
    uint64_t slot = current_slot_;
    for (size_t step = 0; step < n; ++step, ++slot) {
      const Bucket& b = buckets_[bucket_of_slot(slot)];
      // Slots in this bucket are >= current_slot_ and congruent to `slot`: the bucket's
      // first event is in `slot` exactly when the set has events in that slot. The
      // header's front_time is tested first (an empty bucket keeps a stale one, so the
      // bucket must hold events too): most buckets stepped over are decided without
      // reading their events.
      if (slot_of(b.front_time) == slot && b.head < b.end) {
        assert(b.front_time == b.events[b.head].time);
        current_slot_ = slot;
        current_bucket_ = bucket_of_slot(slot);
        min_ = b.events[b.head];
        work_ += step;
        return;
      }
    }
    work_ += n;
    min_of_heads();
  }

  // A year without a match: the next event is more than a year away. Compare heads.
  [[gnu::noinline]] void min_of_heads() {
    const size_t n = bucket_count();
    const Event* best = nullptr;
    size_t best_bucket = 0;
    for (size_t i = 0; i < n; ++i) {
      const Bucket& b = buckets_[i];
      if (b.head < b.end && (best == nullptr || event_before(b.events[b.head], *best))) {
        best = &b.events[b.head];
        best_bucket = i;
      }
    }
    current_slot_ = slot_of(best->time);
    current_bucket_ = best_bucket;
    min_ = *best;
  }

  // Every kCheckEveryYears x bucket_count operations (ops_left_ counts them down).
  [[gnu::always_inline]] void count_op() {
    if (--ops_left_ != 0) [[likely]] return;
    check_work();
  }
  [[gnu::noinline]] void check_work() {
    const uint64_t ops = kCheckEveryYears * bucket_count();
    const bool costly = work_ > kMaxWorkPerOp * ops;
    ops_left_ = ops;
    work_ = 0;
    if (costly && size_ > 0) [[unlikely]] rebuild(bucket_count(), nullptr);
  }

  // The thresholds of the current bucket count: grow_at_, shrink_below_ and a full count
  // of operations until the next work check.
  void set_thresholds() noexcept {
    grow_at_ = kGrowWhenEventsPerBucket * bucket_count();
    shrink_below_ = bucket_count() > kMinBuckets
                        ? (bucket_count() + kShrinkWhenBucketsPerEvent - 1) / kShrinkWhenBucketsPerEvent
                        : 0;
    ops_left_ = kCheckEveryYears * bucket_count();
  }

  // Re-lays all pending events (plus *extra if given) over `bucket_count` buckets with a
  // slot width fitted to the earliest events. size_ does not include *extra.
  [[gnu::noinline]] void rebuild(size_t bucket_count, const Event* extra) {
    ++rebuilds_;
    scratch_.clear();
    scratch_.reserve(size_ + 1);
    for (Bucket& b : buckets_) {
      scratch_.insert(scratch_.end(), b.events.get() + b.head, b.events.get() + b.end);
      b.head = b.end = 0;
    }
    if (extra != nullptr) {
      scratch_.push_back(*extra);
      max_seq_ = std::max(max_seq_, extra->seq);
    }
    std::sort(scratch_.begin(), scratch_.end(), event_before);
    assert(std::has_single_bit(bucket_count));
    buckets_.resize(bucket_count);
    mask_ = bucket_count - 1;
    shift_ = shift_for(scratch_);
    set_thresholds();
    work_ = 0;
    for (const Event& ev : scratch_) {
      Bucket& b = buckets_[bucket_of_slot(slot_of(ev.time))];
      if (b.head == b.end) b.front_time = ev.time;
      append(b, ev);  // sorted input: every insertion is an append
      b.back_time = ev.time;
    }
    if (!scratch_.empty()) {
      current_slot_ = slot_of(scratch_.front().time);
      current_bucket_ = bucket_of_slot(current_slot_);
      min_ = scratch_.front();
    }
  }

  // log2 of the slot width for events sorted ascending: the mean spacing of the first
  // kSpacingSample distinct-or-not times, times kWidthPerSpacing, rounded up to a power
  // of two; 1 ns when the sample spans no time.
  static unsigned shift_for(const std::vector<Event>& sorted) {
    const size_t k = std::min(sorted.size(), kSpacingSample);
    if (k < 2) return 0;
    const uint64_t span = sorted[k - 1].time - sorted[0].time;
    const uint64_t spacing = span / (k - 1);
    if (spacing == 0) return 0;
    const uint64_t width = spacing > (uint64_t{1} << 62) / kWidthPerSpacing ? uint64_t{1} << 62
                                                                           : std::bit_ceil(spacing * kWidthPerSpacing);
    return static_cast<unsigned>(std::countr_zero(width));
  }

  std::vector<Bucket> buckets_;
  size_t mask_ = kMinBuckets - 1;  // buckets_.size() - 1 (a power of two less one)
  std::vector<Event> scratch_;
  size_t size_ = 0;
  unsigned shift_ = 0;
  uint64_t current_slot_ = 0;
  size_t current_bucket_ = 0;
  Event min_{};  // the first live event of current_bucket_ (valid while size_ > 0)
  uint64_t max_seq_ = 0;  // the largest sequence number inserted so far (0: none yet)
  size_t grow_at_ = 0;       // push rebuilds at twice the buckets when size_ reaches it
  size_t shrink_below_ = 0;  // pop rebuilds at half the buckets when 0 < size_ < it
  uint64_t ops_left_ = 0;    // operations until the next work check
  uint64_t work_ = 0;
  uint64_t rebuilds_ = 0;
};
static_assert(FutureEventSet<CalendarQueueEventSet>);

}  // namespace bkv::sim
