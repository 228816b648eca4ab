#include "sim/sim_thread.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sim/nic_config.hpp"

namespace bkv::sim {

SimThread::SimThread(Engine& engine, const CostModel& costs, uint64_t seed, std::string name)
    : engine_(engine), jitter_on_(costs.jitter.mode != JitterMode::kNone), jitter_(costs.jitter), rng_(seed),
      name_(std::move(name)) {
  for (size_t i = 0; i < kOpCount; ++i) {
    if (!(costs.ns[i] >= 0.0) || !std::isfinite(costs.ns[i]))
      throw std::invalid_argument(std::string("cost model: ") + kOpNames[i] + " must be a finite value >= 0");
    slot(i).cost_ps = static_cast<uint64_t>(std::llround(costs.ns[i] * 1000.0));
  }
  refresh_slow_ops();
  // Minimum step: the loop cost rounded up to whole ns, at least 1 ns.
  min_step_ = std::max<Time>(1, (slot(static_cast<size_t>(Op::kLoop)).cost_ps + 999) / 1000);
  target_ = engine_.add_target(&SimThread::on_event, this);
}

void SimThread::refresh_slow_ops() noexcept {
  uint32_t m = 0;
  for (size_t i = 0; i < kOpCount; ++i)
    if (jitter_on_ || slot(i).shared != nullptr) m |= 1u << i;
  slow_ops_ = m;
}

void SimThread::charge_slow(size_t i, uint32_t n) noexcept {
  if (jitter_on_) [[unlikely]] return charge_jittered(i, n);
  // Without jitter an op is slow only for its shared resource: a call of no other
  // function, so no register is saved.
  OpSlot& op = slot(i);
  const uint64_t cost = op.cost_ps * n;
  const uint64_t ps = op.shared->hold(step_start_ * 1000 + charged_ps_, cost);
  charged_ps_ += ps;
  op.extra_ps += ps - cost;
  op.count += n;
}

void SimThread::charge_jittered(size_t i, uint32_t n) noexcept {
  const uint64_t cost = slot(i).cost_ps * n;
  uint64_t ps = jittered(cost);
  if (slot(i).shared != nullptr) ps = slot(i).shared->hold(step_start_ * 1000 + charged_ps_, ps);
  charged_ps_ += ps;
  slot(i).extra_ps += ps - cost;  // may wrap (jitter shortened the cost): exact mod 2^64
  slot(i).count += n;
}

SimThread::OpTotals SimThread::op_totals() const noexcept {
  OpTotals t;
  for (size_t i = 0; i < kOpCount; ++i) {
    t.count[i] = slot(i).count;
    t.extra_ps[i] = slot(i).extra_ps;
  }
  return t;
}

uint64_t SimThread::jittered(uint64_t ps) noexcept {
  const double x = jitter_.dist.sample(rng_);
  double v;
  if (jitter_.mode == JitterMode::kRelative) {
    v = static_cast<double>(ps) * (1.0 + x);
  } else {
    v = static_cast<double>(ps) + x * 1000.0;
  }
  if (!(v <= kMaxModelNs * 1000.0)) [[unlikely]] {  // NaN too; llround would be undefined
    if (!jitter_faulted_) jitter_fault_ = x;
    jitter_faulted_ = true;
    return 0;
  }
  return v <= 0.0 ? 0 : static_cast<uint64_t>(std::llround(v));
}

void SimThread::jitter_out_of_range() const {
  const std::string drawn =
      std::isfinite(jitter_fault_) ? "the sample " + nlohmann::json(jitter_fault_).dump() : std::string("a non-finite sample");
  throw std::runtime_error("cpu.jitter: thread '" + name_ + "' drew " + drawn +
                           ", which makes one cost longer than an hour of virtual time (kMaxModelNs): the "
                           "distribution's tail is too heavy for a CPU cost");
}

inline void SimThread::schedule_step(Time t) {
  ++generation_;  // any earlier pending event becomes stale
  pending_ = true;
  pending_time_ = t;
  engine_.schedule_inline(t, target_, generation_);
}

void SimThread::wake_slow(Time at) {
  if (exited_) return;
  if (in_step_) {
    // Coalesced into the decision taken when the step ends.
    if (!wake_in_step_ || at < wake_in_step_time_) wake_in_step_time_ = at;
    wake_in_step_ = true;
    return;
  }
  Time t = std::max({at, busy_until_, engine_.now()});
  if (spinning_) {
    // Resume at the first loop boundary at or after t: the phase of the skipped loops.
    const Time k = (t - spin_origin_ + spin_period_ - 1) / spin_period_;
    t = spin_origin_ + k * spin_period_;
  }
  if (pending_ && pending_time_ <= t) return;
  schedule_step(t);
}

void SimThread::account_skipped(Time now) {
  spinning_ = false;
  const uint64_t k = (now - spin_origin_) / spin_period_;
  if (k == 0) return;
  steps_ += k;
  skipped_steps_ += k;
  busy_ps_ += k * spin_charged_ps_;
  for (size_t i = 0; i < kOpCount; ++i) {
    slot(i).count += k * spin_ops_.count[i];
    slot(i).extra_ps += k * spin_ops_.extra_ps[i];
  }
  last_step_ns_ = spin_period_;
  // The last skipped loop is the last step (busy_ns_at, and settle() leaves it so).
  step_start_ = now - spin_period_;
  busy_until_ = now;
  if (observer_ != nullptr) {
    step_phase_.fill(0);
    phases_recorded_ = false;
    repeat_ = k;
    reporting_skipped_ = true;
    observer_(observer_ctx_, *this);
    reporting_skipped_ = false;
    repeat_ = 1;
  }
}

void SimThread::settle(Time now) {
  if (in_step_) throw std::logic_error("SimThread '" + name_ + "': settle() during its own step");
  if (!spinning_ || now <= spin_origin_) return;  // no skipped loop started before now
  const Time k = (now - spin_origin_ + spin_period_ - 1) / spin_period_;  // loops started before now
  const Time boundary = spin_origin_ + k * spin_period_;
  account_skipped(boundary);
  spinning_ = true;
  spin_origin_ = boundary;
}

Time SimThread::busy_ns_at(Time t) const noexcept {
  assert(!in_step_ && t >= step_start_);
  uint64_t ps = busy_ps_;
  if (spinning_ && t > spin_origin_) ps += (t - spin_origin_) / spin_period_ * spin_charged_ps_;
  const uint64_t last_end_ps = step_start_ * 1000 + charged_ps_;  // charged work of the last step
  if (last_end_ps > t * 1000) ps -= last_end_ps - t * 1000;
  return ps / 1000;
}

void SimThread::on_event(void* ctx, uint32_t generation) {
  auto* self = static_cast<SimThread*>(ctx);
  if (generation != self->generation_ || !self->pending_) return;  // superseded wake-up
  self->run_step();
}

void SimThread::begin_spin_step() {
  if (spinning_) account_skipped(engine_.now());
  if (may_idle_spin_) step_ops0_ = op_totals();
}

void SimThread::no_step_function() const {
  throw std::logic_error("SimThread '" + name_ + "': no step function set");
}

void SimThread::run_step() {
  pending_ = false;
  if (step_fn_ == nullptr) [[unlikely]] no_step_function();
  if (spinning_ || may_idle_spin_) [[unlikely]] begin_spin_step();
  step_start_ = engine_.now();
  charged_ps_ = 0;
  if (phases_recorded_) {  // all 0 otherwise: a client's step does not touch their line
    step_phase_.fill(0);
    phases_recorded_ = false;
  }
  wake_in_step_ = false;
  in_step_ = true;
  const StepResult res = step_fn_(step_ctx_, *this);
  in_step_ = false;
  if (jitter_faulted_) [[unlikely]] jitter_out_of_range();
  const Time charged_ns = (charged_ps_ + 999) / 1000;
  const Time duration = std::max(charged_ns, min_step_);
  busy_until_ = step_start_ + duration;
  ++steps_;
  busy_ps_ += charged_ps_;
  last_step_ns_ = duration;
  if (observer_ != nullptr) observer_(observer_ctx_, *this);
  // One call of the inlined schedule_step() for every result that steps again.
  Time next = busy_until_;
  bool again = true;
  if (res == StepResult::kIdle) {
    again = wake_in_step_;
    next = std::max(wake_in_step_time_, busy_until_);
  } else if (res != StepResult::kContinue) [[unlikely]] {
    again = end_step_rare(res, duration, next);
  }
  wake_in_step_ = false;
  if (again) schedule_step(next);
}

bool SimThread::end_step_rare(StepResult res, Time duration, Time& next) {
  if (res == StepResult::kExit) {
    exited_ = true;
    return false;
  }
  if (!may_idle_spin_) [[unlikely]]
    throw std::logic_error("SimThread '" + name_ + "': a step returned kIdleSpin, but its thread was not set up " +
                           "to spin (set_step's may_idle_spin)");
  if (wake_in_step_) {
    next = std::max(wake_in_step_time_, busy_until_);
    return true;
  }
  spinning_ = true;
  spin_origin_ = busy_until_;
  spin_period_ = duration;
  spin_charged_ps_ = charged_ps_;
  for (size_t i = 0; i < kOpCount; ++i) {
    spin_ops_.count[i] = slot(i).count - step_ops0_.count[i];
    spin_ops_.extra_ps[i] = slot(i).extra_ps - step_ops0_.extra_ps[i];
  }
  return false;
}

}  // namespace bkv::sim
