// A simulated CPU thread: a virtual clock that costed operations advance.
//
// Semantics (the contract every backend step relies on):
//  - A *step* is one call of the thread's step function (one iteration of a daemon's
//    event loop, or one activation of a client). It runs inside an engine event at the
//    step's start time S, so during the step the thread sees the world as it was at S:
//    events still in flight (completions, landings, wake-ups) are delivered in time order
//    *between* steps, never in the middle of one.
//  - Each charge(op, n) adds cost_model[op] * n (plus optional jitter from the thread's
//    own seeded stream) to the step's charged time C. now() = S + C, so everything the
//    step does is timestamped mid-step: a message posted after charging 120 ns carries
//    S + 120.
//  - The step occupies the thread until busy_until = S + max(C, min_step), where
//    min_step = max(1 ns, cost[loop]) so that even a step that charges nothing moves
//    the simulation forward (set_min_step overrides it for a thread).
//  - The step's result decides what follows: kContinue schedules the next step at
//    busy_until (a polling daemon); kIdle schedules nothing until wake() (an event-driven
//    client); kExit retires the thread.
//  - kIdleSpin is for a polling loop whose step found nothing to do and whose next
//    steps would be identical until something external happens (a completion, a ring
//    write that comes with a wake()). The thread stops stepping but keeps its loop
//    phase: it is as if it went on spinning with period P = this step's duration. A
//    wake at t resumes it at the first loop boundary >= t (busy_until + k*P), exactly
//    where stepping one by one would have noticed; the k skipped loops are accounted
//    (steps, busy time, op counts: k copies of the idle step) and reported to the
//    observer as one call with repeat() == k and all phase counts 0. With cost jitter
//    the skipped loops all take the idle step's duration. Only return kIdleSpin when
//    every input of the loop raises a wake (DesTransport completions do).
//    The skipped loops are accounted when the thread resumes, or earlier by settle(t):
//    whoever reads the thread's counts, or what its observer sums, from outside its
//    steps while it may be spinning settles it first, or sees the loops of the spin
//    missing.
//  - wake(t) asks for a step at t. Wake-ups coalesce: at most one step is pending; a
//    wake earlier than the pending step moves it earlier; a wake before busy_until (or
//    during a step) runs at busy_until. Waking a thread that already has a step pending
//    at or before t does nothing, so waking a polling thread is harmless.
//
// SimThread satisfies bkv::CostMeter (core/meter.hpp): backends written against a Meter
// template parameter charge it directly, non-virtually.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/cache_hint.hpp"
#include "core/meter.hpp"
#include "core/random.hpp"
#include "sim/cost_model.hpp"
#include "sim/engine.hpp"

namespace bkv::sim {

// A resource threads use one at a time (e.g. a cache line many cores write with atomic
// RMWs): uses are served in the order they are requested, each for its own duration.
// Requests are made at mid-step times of different threads, which the engine runs in
// step-start order, so the order is by request time up to one step of skew.
class SharedResource {
 public:
  // A use requested at `at_ps` lasting `ps`: returns the requester's total time (wait +
  // use) in picoseconds.
  uint64_t hold(uint64_t at_ps, uint64_t ps) noexcept {
    const uint64_t start = at_ps > free_ps_ ? at_ps : free_ps_;
    free_ps_ = start + ps;
    waited_ps_ += start - at_ps;
    ++uses_;
    return free_ps_ - at_ps;
  }
  uint64_t uses() const noexcept { return uses_; }
  double mean_wait_ns() const noexcept { return uses_ ? double(waited_ps_) * 1e-3 / double(uses_) : 0.0; }

 private:
  uint64_t free_ps_ = 0;
  uint64_t waited_ps_ = 0;
  uint64_t uses_ = 0;
};

inline constexpr size_t kCacheLineBytes = 64;

enum class StepResult : uint8_t { kContinue = 0, kIdle, kExit, kIdleSpin };

class alignas(kCacheLineBytes) SimThread {
 public:
  static constexpr bool kEnabled = true;

  using StepFn = StepResult (*)(void* ctx, SimThread& self);
  // Called after every step (metrics: loop time, CQEs per loop ...), and once for each
  // run of loops skipped by kIdleSpin (repeat() tells how many steps a call stands for).
  using StepObserver = void (*)(void* ctx, const SimThread& self);

  SimThread(Engine& engine, const CostModel& costs, uint64_t seed, std::string name = {});
  SimThread(const SimThread&) = delete;
  SimThread& operator=(const SimThread&) = delete;

  // may_idle_spin: the step may return kIdleSpin. Only such a thread keeps its op totals
  // at each step's start (the idle loop's charges are what the step added to them), a
  // copy of 2 x kOpCount counters per step that the other threads (event-driven clients,
  // most of a simulation's steps) do without; kIdleSpin from another thread is a
  // std::logic_error.
  void set_step(StepFn fn, void* ctx, bool may_idle_spin = false) noexcept {
    step_fn_ = fn;
    step_ctx_ = ctx;
    may_idle_spin_ = may_idle_spin;
  }
  // A member function StepResult T::M(SimThread&) as the step.
  template <class T, StepResult (T::*M)(SimThread&)>
  void bind(T* obj, bool may_idle_spin = false) noexcept {
    set_step([](void* ctx, SimThread& self) { return (static_cast<T*>(ctx)->*M)(self); }, obj, may_idle_spin);
  }
  // Whether the step may return kIdleSpin from now on (set_step's may_idle_spin): a
  // thread that spins only in a phase of the run (a daemon before its clients start) is
  // told when that phase is over, and its steps stop keeping their op totals.
  void set_may_idle_spin(bool on) noexcept { may_idle_spin_ = on; }
  // A cache hint for the thread's next step: when the engine's next event is this
  // thread's, fn(ctx, its argument) is called just before the current event runs
  // (Engine's Prefetcher, with ctx as given here: the hint reads no line of the thread
  // to find what to prefetch), to prefetch what the step will touch;
  // prefetch_step_state() gives the thread's own lines. fn must change nothing (a
  // stale wake-up calls it too). nullptr turns it off.
  void set_step_prefetch(Prefetcher fn, void* ctx) { engine_.set_prefetcher(target_, fn, ctx); }
  // The lines every step reads and writes (the first three: the layout below).
  void prefetch_step_state() const noexcept {
    for (size_t l = 0; l < kStepStateLines; ++l) prefetch_line(reinterpret_cast<const char*>(this) + l * kCacheLineBytes);
  }
  void set_observer(StepObserver fn, void* ctx) noexcept {
    observer_ = fn;
    observer_ctx_ = ctx;
  }

  // First step at `at` (same as wake()).
  void start(Time at) { wake(at); }
  // Accounts the loops of a kIdleSpin that started before `now` (steps, busy time, op
  // counts, one observer call for them, as resuming does) and spins on from the
  // boundary the last of them ends at (the phase is unchanged): the thread's counts and
  // its observer's then hold every loop that stepping one by one would have run by
  // `now`, and what follows (when a wake resumes it, what it accounts then) is as
  // without the call. Nothing to do unless the thread spins. Not during its own step
  // (a std::logic_error).
  void settle(Time now);
  // Inlined where it is called: most wake-ups find a step already due by `at` (a client
  // stepping through its answers, woken by each one daemon #0 delivers), which is exact
  // to answer here: a pending step is never one of a running or exited thread, and every
  // other path of wake_slow() either returns or keeps a pending step at or before `at`.
  [[gnu::always_inline]] void wake(Time at) {
    if (pending_ && pending_time_ <= at) return;
    wake_slow(at);
  }
  // A cache hint for a wake() to come (a daemon that knows a batch of answers before
  // waking their clients): the lines wake() reads and writes. Changes nothing.
  void prefetch_wake() const noexcept {
    for (size_t l = 0; l < kWakeStateLines; ++l) prefetch_line(reinterpret_cast<const char*>(this) + l * kCacheLineBytes);
  }

  // --- CostMeter ---
  // Inlined where it is called: an op with neither jitter nor a shared resource (every
  // op unless the model says otherwise) adds its cost and counts its uses, the others
  // take charge_slow(). The time each op was charged is not summed here: it is its cost
  // times its uses plus what jitter and waits added (OpSlot::extra_ps), the same number.
  [[gnu::always_inline]] void charge(Op op, uint32_t n = 1) noexcept {
    const size_t i = static_cast<size_t>(op);
    if ((slow_ops_ >> i) & 1u) [[unlikely]] return charge_slow(i, n);
    OpSlot& s = slot(i);
    charged_ps_ += s.cost_ps * n;
    s.count += n;
  }
  void record(Phase ph, uint32_t n) noexcept {
    step_phase_[static_cast<size_t>(ph)] += n;
    phase_total_[static_cast<size_t>(ph)] += n;
    phases_recorded_ = true;
  }
  // Makes `op` a use of a resource shared with other threads (a contended cache line):
  // each use holds it exclusively for the op's cost, and waits while another thread
  // holds it. nullptr unbinds.
  void bind_shared(Op op, SharedResource* r) noexcept {
    slot(static_cast<size_t>(op)).shared = r;
    refresh_slow_ops();
  }

  // Makes the answers this thread collects (answers_arrive) a use of `r` lasting `ns`
  // per transfer (sim::Model::response_handoff_ns): one transfer per answer, or with
  // `per_visit` one per response area that held answers. The thread waits while another
  // thread of the node holds `r`, then holds it itself. nullptr unbinds (the default: no
  // cost).
  void bind_answer_handoff(SharedResource* r, double ns, bool per_visit = false) noexcept {
    handoff_ = r;
    handoff_ps_ = static_cast<uint64_t>(std::llround(ns * 1000.0));
    handoff_per_visit_ = per_visit;
  }
  // --- CostMeter ---
  void answers_arrive(uint32_t n, uint32_t visits) noexcept {
    if (handoff_ == nullptr || n == 0) return;
    const uint32_t transfers = handoff_per_visit_ ? visits : n;
    handoff_answers_ += n;
    if (transfers == 0) return;  // answers of a visit already paid for
    handoff_transfers_ += transfers;
    charged_ps_ += handoff_->hold(step_start_ * 1000 + charged_ps_, handoff_ps_ * transfers);
  }
  // Answers collected through the handoff, and the transfers they were charged as.
  uint64_t handoff_answers() const noexcept { return handoff_answers_; }
  uint64_t handoff_transfers() const noexcept { return handoff_transfers_; }

  // Charges raw time not tied to an Op (a modelled wait, a timer).
  void advance(Time ns) noexcept { charged_ps_ += ns * 1000; }

  // Mid-step virtual time: step start + time charged so far. Outside a step: engine time.
  [[gnu::always_inline]] Time now() const noexcept {
    return in_step_ ? step_start_ + charged_ps_ / 1000 : engine_.now();
  }
  // CostMeter's clock (core/meter.hpp): the same virtual time.
  [[gnu::always_inline]] uint64_t now_ns() const noexcept { return now(); }

  Time step_start() const noexcept { return step_start_; }
  Time busy_until() const noexcept { return busy_until_; }
  Time charged_ns() const noexcept { return charged_ps_ / 1000; }
  bool in_step() const noexcept { return in_step_; }
  bool exited() const noexcept { return exited_; }
  bool step_pending() const noexcept { return pending_; }
  bool spinning() const noexcept { return spinning_; }
  // Number of identical steps the current observer call stands for (1 for a real step).
  uint64_t repeat() const noexcept { return repeat_; }
  // Whether the current observer call reports steps skipped by kIdleSpin (repeat() of
  // them) rather than one step that ran.
  bool reporting_skipped() const noexcept { return reporting_skipped_; }
  uint64_t skipped_steps() const noexcept { return skipped_steps_; }
  Time pending_time() const noexcept { return pending_ ? pending_time_ : kTimeNever; }
  Time min_step() const noexcept { return min_step_; }
  // Overrides the minimum step (>= 1 ns; the default is cost[loop]): for a thread whose
  // steps are not loop iterations, e.g. a client with timed writes
  // (backend::Client::set_timed_writes), whose steps last what they charge.
  void set_min_step(Time ns) noexcept { min_step_ = ns < 1 ? 1 : ns; }

  // Metrics.
  uint64_t steps() const noexcept { return steps_; }
  Time busy_ns() const noexcept { return busy_ps_ / 1000; }           // sum of charged time
  // Charged time up to virtual time t (at or after the last step's start, outside a
  // step): a step's charge is counted when it starts, so the part of the last step that
  // runs past t is taken off, and idle loops skipped in closed form (kIdleSpin) up to t
  // are added. busy_ns_at(b) - busy_ns_at(a) never exceeds b - a.
  Time busy_ns_at(Time t) const noexcept;
  Time last_step_ns() const noexcept { return last_step_ns_; }        // duration of the last step
  uint32_t step_phase(Phase ph) const noexcept { return step_phase_[static_cast<size_t>(ph)]; }
  uint64_t phase_total(Phase ph) const noexcept { return phase_total_[static_cast<size_t>(ph)]; }
  double op_ns_total(Op op) const noexcept {
    const OpSlot& s = slot(static_cast<size_t>(op));
    return static_cast<double>(s.cost_ps * s.count + s.extra_ps) * 1e-3;
  }
  uint64_t op_count(Op op) const noexcept { return slot(static_cast<size_t>(op)).count; }
  // Where charge(op) reads and writes (a cache hint's address: a caller that prefetches a
  // step's lines ahead of it).
  const void* op_line(Op op) const noexcept { return &slot(static_cast<size_t>(op)); }

  const std::string& name() const noexcept { return name_; }
  Engine& engine() noexcept { return engine_; }
  Rng& rng() noexcept { return rng_; }

 private:
  // Uses of each op and the time jitter and waits added to its cost (mod 2^64: an op's
  // charged time is cost * count + extra, exact in uint64 arithmetic as a running sum of
  // the charged times would be).
  struct OpTotals {
    std::array<uint64_t, kOpCount> count{};
    std::array<uint64_t, kOpCount> extra_ps{};
  };
  // An op's cost and its uses, side by side with what charge_slow() adds: a charge, fast
  // or slow, touches one line per op.
  struct alignas(32) OpSlot {
    uint64_t cost_ps = 0;
    uint64_t count = 0;
    uint64_t extra_ps = 0;             // charge_slow(): time jitter and waits added to the op's costs
    SharedResource* shared = nullptr;  // bind_shared
  };
  static_assert(sizeof(OpSlot) == 32 && kCacheLineBytes % sizeof(OpSlot) == 0, "an op's slot lies in one line");
  static_assert(kOpCount <= 32, "slow_ops_ holds one bit per op");
  // Where op i's slot lies in op_: the ops a client step charges (kRingOp, kClientRequest,
  // kRingReserve) first, the first of them in the step state's third line and the other
  // two in the line after it (see the layout below), then the rest in the enum's order.
  // Most steps of a simulation are client steps, so they touch two lines of ops, not three.
  static constexpr std::array<uint8_t, kOpCount> kSlotOf = [] {
    std::array<uint8_t, kOpCount> at{};
    constexpr Op kClientOps[] = {Op::kRingOp, Op::kClientRequest, Op::kRingReserve};
    uint8_t next = 0;
    for (Op op : kClientOps) at[static_cast<size_t>(op)] = next++;
    for (size_t i = 0; i < kOpCount; ++i) {
      bool client_op = false;
      for (Op op : kClientOps) client_op = client_op || static_cast<size_t>(op) == i;
      if (!client_op) at[i] = next++;
    }
    return at;
  }();
  static_assert([] {
    std::array<bool, kOpCount> taken{};
    for (uint8_t at : kSlotOf) {
      if (at >= kOpCount || taken[at]) return false;
      taken[at] = true;
    }
    return true;
  }(), "kSlotOf gives every op a slot of its own");
  [[gnu::always_inline]] OpSlot& slot(size_t op) noexcept { return op_[kSlotOf[op]]; }
  [[gnu::always_inline]] const OpSlot& slot(size_t op) const noexcept { return op_[kSlotOf[op]]; }

  // Of the layout below: wake() reads and writes the first two lines, a step the first three.
  static constexpr size_t kWakeStateLines = 2;
  static constexpr size_t kStepStateLines = 3;
  static void on_event(void* ctx, uint32_t generation);
  void run_step();
  void wake_slow(Time at);
  // run_step()'s rare paths, out of line: the skipped loops of a spin, the op totals of a
  // thread that may spin, a missing step function.
  [[gnu::noinline]] void begin_spin_step();
  [[noreturn, gnu::noinline, gnu::cold]] void no_step_function() const;
  // charge() of an op with jitter or a shared resource.
  [[gnu::noinline]] void charge_slow(size_t i, uint32_t n) noexcept;
  [[gnu::noinline]] void charge_jittered(size_t i, uint32_t n) noexcept;  // charge_slow() with jitter on
  // Sets slow_ops_ from the jitter mode and the shared resources bound.
  void refresh_slow_ops() noexcept;
  OpTotals op_totals() const noexcept;
  // A cost with cpu.jitter applied. A sample that makes it longer than kMaxModelNs (or
  // not finite) cannot be a time: it is kept in jitter_fault_ and the step ends in
  // jitter_out_of_range() (charge() is noexcept: it cannot throw itself).
  uint64_t jittered(uint64_t ps) noexcept;
  [[noreturn]] void jitter_out_of_range() const;
  // Inlined into run_step() and wake_slow(), with the engine's push.
  [[gnu::always_inline]] void schedule_step(Time t);
  // The end of a step that returned kExit or kIdleSpin: whether it steps again, at `next`.
  [[gnu::noinline]] bool end_step_rare(StepResult res, Time duration, Time& next);
  void account_skipped(Time now);

  // Layout: a simulation steps thousands of threads in turn, so a step finds none of its
  // thread's lines in the first-level cache. What every step reads and writes (on_event,
  // run_step, schedule_step, wake, now, charge, answers_arrive) comes first, in the
  // object's first three lines (the class is line-aligned), the third ending with the
  // first op slot; then the other ops, an op's cost, uses, added time and shared resource
  // in one half line, the client's ops first (kSlotOf); then what only daemons (the
  // observer, the loop phases), set-up, the spin, jitter and the readers touch. A client
  // step touches four lines of its thread: the first three and the next two ops' line.
  Engine& engine_;
  StepFn step_fn_ = nullptr;
  void* step_ctx_ = nullptr;
  Time step_start_ = 0;
  uint64_t charged_ps_ = 0;  // of the running (or last) step
  Time busy_until_ = 0;
  Time min_step_ = 1;
  Time pending_time_ = 0;
  Time wake_in_step_time_ = 0;
  uint32_t slow_ops_ = 0;  // bit i: op i takes charge_slow() (jitter on, or a shared resource bound)
  TargetId target_;
  uint32_t generation_ = 0;
  bool pending_ = false;       // a step event is scheduled (generation_ identifies it)
  bool in_step_ = false;
  bool exited_ = false;
  bool wake_in_step_ = false;  // wake() called during the running step
  bool spinning_ = false;      // kIdleSpin state below
  bool may_idle_spin_ = false;
  bool jitter_on_ = false;     // jitter_.mode is not kNone
  bool jitter_faulted_ = false;
  bool handoff_per_visit_ = false;
  bool phases_recorded_ = false;  // step_phase_ holds a count that is not 0 (record())
  StepObserver observer_ = nullptr;
  uint64_t steps_ = 0;
  uint64_t busy_ps_ = 0;
  Time last_step_ns_ = 0;
  SharedResource* handoff_ = nullptr;  // answers_arrive(): see bind_answer_handoff
  uint64_t handoff_ps_ = 0;
  uint64_t handoff_answers_ = 0;
  uint64_t handoff_transfers_ = 0;

  std::array<OpSlot, kOpCount> op_{};  // by kSlotOf: slot(op)

  void* observer_ctx_ = nullptr;
  // Counts of the running (or last) step: cleared at a step's start only when a step
  // recorded any (phases_recorded_), so a thread that never records (a client) does not
  // write their line.
  std::array<uint32_t, kPhaseCount> step_phase_{};

  CostJitter jitter_;
  double jitter_fault_ = 0;  // the first out-of-range sample of the step (jittered())
  Rng rng_;
  std::string name_;

  // kIdleSpin state: loops of period spin_period_ starting at spin_origin_.
  Time spin_origin_ = 0;
  Time spin_period_ = 1;
  uint64_t spin_charged_ps_ = 0;
  OpTotals spin_ops_;   // what one loop of the spin charges
  OpTotals step_ops0_;  // op_totals() at the start of the running step (may_idle_spin_ only)
  uint64_t repeat_ = 1;
  bool reporting_skipped_ = false;
  uint64_t skipped_steps_ = 0;

  std::array<uint64_t, kPhaseCount> phase_total_{};
};

static_assert(CostMeter<SimThread>);

}  // namespace bkv::sim
