// The discrete-event engine: virtual time in integer nanoseconds and a future-event set
// ordered by (time, insertion sequence).
//
// Determinism: the engine reads no clock, starts no thread and never iterates a
// pointer-keyed container. Two events with the same time run in the order they were
// scheduled (the sequence number breaks the tie), so the same inputs give the same event
// order bit for bit.
//
// Handlers are type-erased without std::function and without allocation per event: an
// object registers once as a *target* (function pointer + context pointer) and gets a
// 32-bit TargetId; an event is {time, sequence, target, 32-bit argument}, 24 bytes.
// The argument tells the target what the event is about (a stage and a queue pair, a
// generation number, a slot index ...).
//
// The future-event set is a template parameter (sim/event_set.hpp: the FutureEventSet
// concept), resolved at compile time: no virtual call per event. Engine, the name the
// simulator uses, is the engine over the binary heap; BasicEngine<CalendarQueueEventSet>
// (sim/calendar_queue.hpp) runs the same events in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/event_set.hpp"
#include "sim/selectable_event_set.hpp"

namespace bkv::sim {

using Handler = void (*)(void* ctx, uint32_t arg);
// Optional, per target: called with its context (the target's own unless set_prefetcher
// gave another) and the next event's argument just before the current event runs, to
// issue cache prefetches for the state the next event will touch: the current event's
// run hides their latency. It must not change any state the simulation reads (it is a
// hint: the next event may still be preceded by one the current event schedules).
using Prefetcher = void (*)(void* ctx, uint32_t arg);

struct TargetId {
  uint32_t value = 0;
};

// Optional observer of every event run (tests, trace export).
using TraceFn = void (*)(void* ctx, const Event& ev);

template <FutureEventSet EventSet = BinaryHeapEventSet>
class BasicEngine {
 public:
  BasicEngine() = default;
  BasicEngine(const BasicEngine&) = delete;
  BasicEngine& operator=(const BasicEngine&) = delete;

  // Registers a handler. Targets live as long as the engine (there is no removal: a
  // finished object simply stops scheduling events).
  TargetId add_target(Handler fn, void* ctx, Prefetcher prefetch = nullptr) {
    if (fn == nullptr) throw std::invalid_argument("Engine::add_target: null handler");
    targets_.push_back(Target{fn, ctx, prefetch, ctx});
    return TargetId{static_cast<uint32_t>(targets_.size() - 1)};
  }
  // Replaces a target's prefetcher and the context it is called with (nullptr: none).
  void set_prefetcher(TargetId target, Prefetcher prefetch, void* prefetch_ctx) {
    Target& t = targets_.at(target.value);
    t.prefetch = prefetch;
    t.prefetch_ctx = prefetch_ctx;
  }

  // Convenience: a member function void T::M(uint32_t arg) as a target.
  template <class T, void (T::*M)(uint32_t)>
  TargetId add_member(T* obj) {
    return add_target([](void* ctx, uint32_t arg) { (static_cast<T*>(ctx)->*M)(arg); }, obj);
  }

  // Schedules target(arg) at absolute time t (t >= now(): the past cannot be changed).
  void schedule(Time t, TargetId target, uint32_t arg = 0) { schedule_inline(t, target, arg); }
  // The same, inlined into its caller: for the few call sites that schedule most of the
  // events (a simulated thread's next step, the NIC model's stages), where schedule()'s
  // own frame, a call that saves and restores the registers of the set's inlined push,
  // was a quarter of its instructions.
  [[gnu::always_inline]] void schedule_inline(Time t, TargetId target, uint32_t arg = 0) {
    if (t < now_) [[unlikely]] throw_past(t);
    events_.push(Event{t, next_seq_++, target.value, arg});
  }
  void schedule_in(Time delay, TargetId target, uint32_t arg = 0) { schedule(now_ + delay, target, arg); }

  Time now() const noexcept { return now_; }
  size_t pending() const noexcept { return events_.size(); }
  bool empty() const noexcept { return events_.empty(); }
  Time next_time() const noexcept { return events_.empty() ? kTimeNever : events_.min().time; }
  // Every event scheduled has run or is pending (there is no cancellation): no counter
  // per event.
  uint64_t events_run() const noexcept { return next_seq_ - events_.size(); }
  const EventSet& event_set() const noexcept { return events_; }  // read-only: statistics
  // The set to configure (SelectableEventSet::select) before any event is scheduled.
  EventSet& event_set_to_configure() {
    if (next_seq_ != 0) throw std::logic_error("Engine: the event set is configured before any event is scheduled");
    return events_;
  }
  uint64_t events_scheduled() const noexcept { return next_seq_; }

  // Runs events with time <= limit in order. Afterwards now() == limit unless stop() was
  // called (then now() is the time of the last event run). Returns the events run.
  uint64_t run_until(Time limit) {
    stop_ = false;
    const uint64_t before = events_run();
    // On a set chosen at run time, the loop runs on the chosen set itself: the choice is
    // tested once per call, not in each pop and minimum (pushes still test it).
    auto loop = [&](auto& set) __attribute__((always_inline)) {
      while (!stop_ && !set.empty() && set.min().time <= limit) run_one(set);
    };
    if constexpr (requires { events_.visit(loop); })
      events_.visit(loop);
    else
      loop(events_);
    if (!stop_ && limit != kTimeNever && limit > now_) now_ = limit;
    return events_run() - before;
  }

  // Runs until no event remains or stop() is called.
  uint64_t run() { return run_until(kTimeNever); }

  // Runs exactly one event if there is one; returns false when the set is empty.
  bool step() {
    if (events_.empty()) return false;
    run_one(events_);
    return true;
  }

  // Makes run()/run_until() return after the event being handled.
  void stop() noexcept { stop_ = true; }
  bool stopped() const noexcept { return stop_; }

  // A running hash of every event run (time, target, argument): two runs with the same
  // inputs have the same hash; used by determinism tests. On unless turned off before the
  // first event (the simulator, which never reads it, saves its two multiplications per
  // event); reading it when off is an error, not a zero that every run would share.
  uint64_t trace_hash() const {
    if (!hashing_) throw std::logic_error("Engine::trace_hash: the trace hash was turned off (set_trace_hash)");
    return hash_;
  }
  void set_trace_hash(bool on) {
    if (events_run() != 0) throw std::logic_error("Engine::set_trace_hash: the hash is chosen before the first event runs");
    hashing_ = on;
    update_observed();
  }
  bool trace_hash_on() const noexcept { return hashing_; }

  void set_trace(TraceFn fn, void* ctx) noexcept {
    trace_fn_ = fn;
    trace_ctx_ = ctx;
    update_observed();
  }

 private:
  struct Target {
    Handler fn;
    void* ctx;
    Prefetcher prefetch;  // may be null
    void* prefetch_ctx;   // what prefetch is called with
  };
  static_assert(sizeof(Target) == 32, "a target is half a line: the next event's is one load away");

  [[noreturn, gnu::noinline, gnu::cold]] void throw_past(Time t) const {
    throw std::logic_error("Engine::schedule: event at t=" + std::to_string(t) +
                           " ns is before the current time " + std::to_string(now_) + " ns");
  }

  // FNV-style mixing of one event into the trace hash.
  static constexpr uint64_t mix(uint64_t h, uint64_t v) noexcept {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0x100000001B3ull;
  }

  void update_observed() noexcept { observed_ = hashing_ || trace_fn_ != nullptr; }
  // The trace hash and the trace observer, out of the loop: one test per event for both.
  [[gnu::noinline]] void observe(const Event& ev) {
    if (hashing_) hash_ = mix(mix(hash_, ev.time), (uint64_t{ev.target} << 32) | ev.arg);
    if (trace_fn_ != nullptr) trace_fn_(trace_ctx_, ev);
  }

  // Inlined into run_until's loop (and step): a call per event saved and restored the
  // registers the set's inlined pop needs.
  // `set` is events_ or, on a SelectableEventSet, the set it chose.
  template <class Set>
  [[gnu::always_inline]] void run_one(Set& set) {
    const Event ev = set.pop_min();
    now_ = ev.time;
    if (observed_) observe(ev);
    if (!set.empty()) {
      // The next event's state travels to the cache while this one runs.
      const Event& next = set.min();
      const Target& n = targets_[next.target];
      if (n.prefetch != nullptr) n.prefetch(n.prefetch_ctx, next.arg);
    }
    const Target& t = targets_[ev.target];
    t.fn(t.ctx, ev.arg);
  }

  EventSet events_;
  std::vector<Target> targets_;
  Time now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t hash_ = 0xCBF29CE484222325ull;
  TraceFn trace_fn_ = nullptr;
  void* trace_ctx_ = nullptr;
  bool stop_ = false;
  bool hashing_ = true;
  bool observed_ = true;  // hashing_ || trace_fn_ != nullptr
};

// The engine the simulator runs on: the heap or the calendar queue, chosen at run time
// (sim/selectable_event_set.hpp); the heap unless selected.
using Engine = BasicEngine<SelectableEventSet>;

}  // namespace bkv::sim
