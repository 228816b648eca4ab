// Simulated threads: charges, mid-step timestamps, next-step time, wake coalescing, jitter.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

using namespace bkv::sim;
using bkv::Op;
using bkv::Phase;

namespace {
CostModel simple_costs() {
  CostModel m;
  m.ns.fill(0.0);
  m[Op::kLoop] = 10;
  m[Op::kCqe] = 25;
  m[Op::kDoorbell] = 40;
  m[Op::kKvOp] = 2.5;  // fractional: accumulates in picoseconds
  return m;
}
}  // namespace

TEST_CASE("charges advance now() inside a step - the next step starts when the cost has elapsed", "[thread]") {
  Engine e;
  const CostModel costs = simple_costs();
  SimThread t(e, costs, 1, "daemon");
  struct Body {
    std::vector<Time> starts, mid, ends;
    int steps = 0;
    StepResult step(SimThread& th) {
      starts.push_back(th.now());
      REQUIRE(th.now() == th.step_start());
      th.charge(Op::kLoop);
      th.charge(Op::kCqe, 4);  // 100 ns
      mid.push_back(th.now());
      th.charge(Op::kKvOp, 3);  // 7.5 ns
      ends.push_back(th.now());
      th.record(Phase::kCqes, 4);
      return ++steps < 3 ? StepResult::kContinue : StepResult::kExit;
    }
  } body;
  t.bind<Body, &Body::step>(&body);
  t.start(1000);
  e.run();
  REQUIRE(body.steps == 3);
  // Step k starts at 1000 + k * ceil(117.5) = 1000 + 118 k.
  CHECK(body.starts == std::vector<Time>{1000, 1118, 1236});
  CHECK(body.mid == std::vector<Time>{1110, 1228, 1346});
  CHECK(body.ends == std::vector<Time>{1117, 1235, 1353});  // floor of 117.5
  CHECK(t.busy_until() == 1354);
  CHECK(t.exited());
  CHECK(t.steps() == 3);
  CHECK(t.phase_total(Phase::kCqes) == 12);
  CHECK(t.step_phase(Phase::kCqes) == 4);
  CHECK(t.op_count(Op::kCqe) == 12);
  CHECK(t.op_ns_total(Op::kKvOp) == Approx(22.5));
}

TEST_CASE("a step's phase counts are its own: 0 in a step that records none after one that did", "[thread]") {
  // run_step() clears the counts only after a step that recorded any (a client's thread
  // never does, and does not write their line).
  Engine e;
  const CostModel costs = simple_costs();
  SimThread t(e, costs, 1);
  struct Body {
    int steps = 0;
    StepResult step(SimThread& th) {
      ++steps;
      if (steps == 1) th.record(Phase::kCqes, 4);
      if (steps == 3) th.record(Phase::kResponses, 2);
      th.charge(Op::kLoop);
      return steps < 4 ? StepResult::kContinue : StepResult::kExit;
    }
  } body;
  std::vector<std::pair<uint32_t, uint32_t>> seen;  // (kCqes, kResponses) after each step
  t.bind<Body, &Body::step>(&body);
  t.set_observer([](void* ctx, const SimThread& th) {
    static_cast<decltype(seen)*>(ctx)->push_back({th.step_phase(Phase::kCqes), th.step_phase(Phase::kResponses)});
  }, &seen);
  t.start(0);
  e.run();
  CHECK(seen == std::vector<std::pair<uint32_t, uint32_t>>{{4, 0}, {0, 0}, {0, 2}, {0, 0}});
  CHECK(t.phase_total(Phase::kCqes) == 4);
  CHECK(t.phase_total(Phase::kResponses) == 2);
}

TEST_CASE("every op keeps its own cost, uses and added time, a shared one among them", "[thread]") {
  // The ops' slots are laid out in another order than the enum's (the client's first):
  // each op's numbers must stay its own, on the fast and the slow path.
  Engine e;
  CostModel costs;
  for (size_t i = 0; i < kOpCount; ++i) costs.ns[i] = double(i + 1);
  SimThread t(e, costs, 1);
  SharedResource head;
  t.bind_shared(Op::kRingReserve, &head);
  SimThread other(e, costs, 2);
  other.bind_shared(Op::kRingReserve, &head);
  struct Body {
    StepResult step(SimThread& th) {
      for (size_t i = 0; i < kOpCount; ++i) th.charge(static_cast<Op>(i), uint32_t(i + 1));
      return StepResult::kExit;
    }
  } body;
  t.bind<Body, &Body::step>(&body);
  other.bind<Body, &Body::step>(&body);
  other.start(0);
  t.start(0);
  e.run();
  const auto reserve = static_cast<size_t>(Op::kRingReserve);
  for (size_t i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    CHECK(t.op_count(op) == i + 1);
    // Cost (i + 1) ns x (i + 1) uses; the shared op also waits for the other thread's
    // hold of the head, (i + 1)^2 ns.
    const double own = double(i + 1) * double(i + 1);
    CHECK(t.op_ns_total(op) == Approx(i == reserve ? 2 * own : own));
    CHECK(other.op_count(op) == i + 1);
  }
}

TEST_CASE("a client step's ops lie in the thread's third and fourth lines", "[thread]") {
  // The layout a client step relies on (SimThread's layout comment): a client step touches
  // the first three lines of its thread and one more, the first of its ops ending the third
  // line and the other two in the fourth. A field added before the ops moves them, which no
  // value test sees.
  Engine e;
  SimThread t(e, CostModel{}, 1);
  const auto line_of = [&](Op op) {
    return (static_cast<const char*>(t.op_line(op)) - reinterpret_cast<const char*>(&t)) / std::ptrdiff_t(kCacheLineBytes);
  };
  CHECK(reinterpret_cast<uintptr_t>(&t) % kCacheLineBytes == 0);
  CHECK(line_of(Op::kRingOp) == 2);
  CHECK(line_of(Op::kClientRequest) == 3);
  CHECK(line_of(Op::kRingReserve) == 3);
}

TEST_CASE("a message posted mid-step carries the mid-step time", "[thread]") {
  Engine e;
  const CostModel costs = simple_costs();
  SimThread t(e, costs, 1);
  struct Receiver {
    Engine* e;
    std::vector<Time> at;
    static void on(void* ctx, uint32_t) {
      auto* r = static_cast<Receiver*>(ctx);
      r->at.push_back(r->e->now());
    }
  } rx{&e, {}};
  const TargetId target = e.add_target(&Receiver::on, &rx);
  struct Body {
    TargetId target;
    StepResult step(SimThread& th) {
      th.charge(Op::kCqe, 2);  // 50
      th.engine().schedule(th.now() + 300, target, 0);  // "wire latency" 300 after the post
      th.charge(Op::kDoorbell);
      return StepResult::kExit;
    }
  } body{target};
  t.bind<Body, &Body::step>(&body);
  t.start(0);
  e.run();
  CHECK(rx.at == std::vector<Time>{350});
}

TEST_CASE("a step that charges nothing still advances by the minimum step", "[thread]") {
  Engine e;
  CostModel costs = simple_costs();
  costs[Op::kLoop] = 0;
  SimThread t(e, costs, 1);
  struct Body {
    std::vector<Time> starts;
    StepResult step(SimThread& th) {
      starts.push_back(th.now());
      return starts.size() < 4 ? StepResult::kContinue : StepResult::kExit;
    }
  } body;
  t.bind<Body, &Body::step>(&body);
  t.start(5);
  e.run();
  CHECK(t.min_step() == 1);
  CHECK(body.starts == std::vector<Time>{5, 6, 7, 8});

  Engine e2;
  SimThread t2(e2, simple_costs(), 1);  // loop = 10 ns: the minimum step
  Body body2;
  t2.bind<Body, &Body::step>(&body2);
  t2.start(0);
  e2.run();
  CHECK(body2.starts == std::vector<Time>{0, 10, 20, 30});
}

TEST_CASE("event-driven threads: wake-ups coalesce into one pending step", "[thread]") {
  Engine e;
  SimThread t(e, simple_costs(), 1, "client");
  struct Body {
    std::vector<Time> starts;
    StepResult step(SimThread& th) {
      starts.push_back(th.now());
      th.charge(Op::kCqe, 4);  // 100 ns busy
      return StepResult::kIdle;
    }
  } body;
  t.bind<Body, &Body::step>(&body);

  // Three wakes for the same instant and one later: one step at 100, one at 150? No:
  // the later wake (150) falls inside the first step's busy time -> runs at busy_until 200.
  t.wake(100);
  t.wake(100);
  t.wake(120);  // later than the pending one: coalesced into it
  CHECK(t.pending_time() == 100);
  t.wake(90);   // earlier: moves the pending step earlier
  CHECK(t.pending_time() == 90);
  e.run();
  CHECK(body.starts == std::vector<Time>{90});
  CHECK(t.busy_until() == 190);

  // A wake before busy-until runs at busy-until.
  struct Waker {
    SimThread* t;
    Time at;
    static void on(void* ctx, uint32_t) {
      auto* w = static_cast<Waker*>(ctx);
      w->t->wake(w->at);
    }
  };
  Engine e2;
  SimThread t2(e2, simple_costs(), 1);
  Body body2;
  t2.bind<Body, &Body::step>(&body2);
  Waker w1{&t2, 0};
  Waker w2{&t2, 50};
  e2.schedule(0, e2.add_target(&Waker::on, &w1));
  e2.schedule(50, e2.add_target(&Waker::on, &w2));   // during the busy period [0, 100)
  e2.run();
  CHECK(body2.starts == std::vector<Time>{0, 100});
  CHECK(t2.steps() == 2);

  // No wake: an idle thread costs no events.
  const uint64_t before = e2.events_run();
  e2.run_until(1'000'000);
  CHECK(e2.events_run() == before);
}

TEST_CASE("a wake during a step schedules the next step at busy-until at the earliest", "[thread]") {
  Engine e;
  SimThread t(e, simple_costs(), 1);
  struct Body {
    std::vector<Time> starts;
    StepResult step(SimThread& th) {
      starts.push_back(th.now());
      th.charge(Op::kCqe, 2);                     // 50 ns
      if (starts.size() == 1) th.wake(th.now());  // "more work": wake at 50 -> busy-until 50
      if (starts.size() == 2) th.wake(th.now() + 1000);  // a timer
      return StepResult::kIdle;
    }
  } body;
  t.bind<Body, &Body::step>(&body);
  t.start(0);
  e.run();
  CHECK(body.starts == std::vector<Time>{0, 50, 1100});
}

TEST_CASE("cost jitter is deterministic per seed and differs across seeds", "[thread]") {
  auto run = [](uint64_t seed, JitterMode mode) {
    Engine e;
    CostModel costs = simple_costs();
    costs.jitter.mode = mode;
    costs.jitter.dist = mode == JitterMode::kRelative ? Distribution::normal(0.0, 0.2, -0.9)
                                                      : Distribution::exponential(5.0);
    SimThread t(e, costs, seed);
    struct Body {
      std::vector<Time> starts;
      StepResult step(SimThread& th) {
        starts.push_back(th.now());
        th.charge(Op::kCqe, 10);
        return starts.size() < 200 ? StepResult::kContinue : StepResult::kExit;
      }
    } body;
    t.bind<Body, &Body::step>(&body);
    t.start(0);
    e.run();
    return body.starts;
  };
  for (JitterMode mode : {JitterMode::kRelative, JitterMode::kAbsolute}) {
    const auto a = run(11, mode);
    const auto b = run(11, mode);
    const auto c = run(12, mode);
    CHECK(a == b);
    CHECK(a != c);
    // Mean step stays near the nominal 250 ns (relative) / 255 ns (absolute, mean +5).
    const double mean = static_cast<double>(a.back()) / 199.0;
    CHECK(mean == Approx(mode == JitterMode::kRelative ? 250.0 : 255.0).epsilon(0.06));
    // Jitter really varies the step length.
    bool varies = false;
    for (size_t i = 2; i < a.size(); ++i) varies |= (a[i] - a[i - 1]) != (a[1] - a[0]);
    CHECK(varies);
  }
}

TEST_CASE("a cost jitter sample beyond an hour stops the run with an error naming cpu.jitter", "[thread]") {
  // A heavy tail (pareto with shape 0.01) draws delays no 64-bit nanosecond count holds;
  // converting them was undefined (llround). The step that drew one ends the run with an
  // error naming the key and the thread, in both jitter modes.
  for (JitterMode mode : {JitterMode::kAbsolute, JitterMode::kRelative}) {
    Engine e;
    CostModel costs = simple_costs();
    costs.jitter.mode = mode;
    costs.jitter.dist = Distribution::pareto(1, 0.01);
    SimThread t(e, costs, 7, "client 3");
    struct Body {
      uint32_t steps = 0;
      StepResult step(SimThread& th) {
        th.charge(Op::kCqe, 10);
        return ++steps < 1000 ? StepResult::kContinue : StepResult::kExit;
      }
    } body;
    t.bind<Body, &Body::step>(&body);
    t.start(0);
    CHECK_THROWS_WITH(e.run(), Catch::Contains("cpu.jitter") && Catch::Contains("client 3"));
    CHECK(body.steps < 1000);  // it stopped at the first such sample, not at the end
  }
}

TEST_CASE("kIdleSpin skips idle loops exactly: same phase, same counts as stepping them", "[thread]") {
  // A polling loop: 30 ns when idle, 200 ns when it has work. Work items arrive from
  // outside at odd times (with a wake-up). Run once stepping every idle loop, once
  // skipping them with kIdleSpin: when work is seen, the time, the number of steps so
  // far, the loop charges so far and the observer's idle-loop count agree.
  struct Seen {
    Time at;
    uint64_t steps, loops, observed, observed_idle;
    bool operator==(const Seen&) const = default;
  };
  struct Obs {
    uint64_t calls = 0, idle = 0;
    static void on(void* ctx, const SimThread& th) {
      auto* o = static_cast<Obs*>(ctx);
      o->calls += th.repeat();
      if (th.step_phase(Phase::kLocalOps) == 0) o->idle += th.repeat();
    }
  };
  struct Body {
    bool skip;
    Obs* obs;
    uint32_t work = 0;
    std::vector<Seen> seen;
    StepResult step(SimThread& th) {
      th.charge(Op::kLoop);
      if (work > 0) {
        seen.push_back(Seen{th.step_start(), th.steps(), th.op_count(Op::kLoop), obs->calls, obs->idle});
        th.charge(Op::kKvOp);
        th.record(Phase::kLocalOps, 1);
        --work;
        return StepResult::kContinue;
      }
      return skip ? StepResult::kIdleSpin : StepResult::kContinue;
    }
  };
  struct Producer {
    SimThread* t;
    Body* b;
    static void on(void* ctx, uint32_t n) {
      auto* p = static_cast<Producer*>(ctx);
      p->b->work += n;
      p->t->wake(p->t->engine().now());
    }
  };
  auto run = [](bool skip, uint64_t* skipped) {
    Engine e;
    CostModel costs;
    costs.ns.fill(0.0);
    costs[Op::kLoop] = 30;
    costs[Op::kKvOp] = 170;
    SimThread t(e, costs, 1);
    Obs obs;
    Body body{skip, &obs};
    Producer prod{&t, &body};
    t.set_observer(&Obs::on, &obs);
    t.bind<Body, &Body::step>(&body, /*may_idle_spin=*/true);
    const TargetId target = e.add_target(&Producer::on, &prod);
    for (Time at : {1000u, 1001u, 5017u, 5018u, 9999u, 20000u}) e.schedule(at, target, at % 3 + 1);
    t.start(7);
    e.run_until(30'000);
    *skipped = t.skipped_steps();
    return body.seen;
  };
  uint64_t skipped_one = 0, skipped_spin = 0;
  const std::vector<Seen> one = run(false, &skipped_one);
  const std::vector<Seen> spin = run(true, &skipped_spin);
  REQUIRE(one.size() == 14);
  CHECK(spin == one);
  CHECK(skipped_one == 0);
  CHECK(skipped_spin > 500);  // most idle loops were never stepped
  // Work is seen on the loop grid: 7 + multiples of 30 until the first busy step.
  CHECK((one[0].at - 7) % 30 == 0);
  CHECK(one[0].at >= 1000);
  CHECK(one[0].at < 1030);
}

TEST_CASE("settle() gives a reader of a spinning thread every loop started before its time", "[thread]") {
  // The loop of the kIdleSpin test, read from outside its steps at odd times (readers
  // scheduled before it starts, so at a time a loop starts they run first): stepping
  // every idle loop, and skipping them with kIdleSpin and settle() before each read, the
  // readers see the same steps, loop charges, observer counts and busy time; and the
  // reads change nothing of the run (the times work is seen, the final counts).
  struct Read {
    Time at;
    uint64_t steps, loops, observed;
    Time busy;
    bool operator==(const Read&) const = default;
  };
  struct Obs {
    uint64_t calls = 0;
    static void on(void* ctx, const SimThread& th) { static_cast<Obs*>(ctx)->calls += th.repeat(); }
  };
  struct Body {
    bool skip;
    uint32_t work = 0;
    std::vector<Time> seen;
    StepResult step(SimThread& th) {
      th.charge(Op::kLoop);
      if (work > 0) {
        seen.push_back(th.step_start());
        th.charge(Op::kKvOp);
        --work;
        return StepResult::kContinue;
      }
      return skip ? StepResult::kIdleSpin : StepResult::kContinue;
    }
  };
  struct Rig {
    SimThread* t;
    Body* b;
    Obs* obs;
    std::vector<Read> reads;
    static void work(void* ctx, uint32_t n) {
      auto* r = static_cast<Rig*>(ctx);
      r->b->work += n;
      r->t->wake(r->t->engine().now());
    }
    static void read(void* ctx, uint32_t) {
      auto* r = static_cast<Rig*>(ctx);
      const Time now = r->t->engine().now();
      r->t->settle(now);
      r->reads.push_back(Read{now, r->t->steps(), r->t->op_count(Op::kLoop), r->obs->calls, r->t->busy_ns_at(now)});
    }
  };
  struct Outcome {
    std::vector<Time> seen;
    std::vector<Read> reads;
    uint64_t steps, observed;
  };
  auto run = [](bool skip, bool read) {
    Engine e;
    CostModel costs;
    costs.ns.fill(0.0);
    costs[Op::kLoop] = 30.4;  // a loop of 31 ns charging 30.4: busy_ns_at takes a part of one
    costs[Op::kKvOp] = 170;
    SimThread t(e, costs, 1);
    Obs obs;
    Body body{skip};
    Rig rig{&t, &body, &obs, {}};
    t.set_observer(&Obs::on, &obs);
    t.bind<Body, &Body::step>(&body, /*may_idle_spin=*/true);
    const TargetId work = e.add_target(&Rig::work, &rig);
    const TargetId reader = e.add_target(&Rig::read, &rig);
    if (read)  // 999 and 1030 lie on the idle loops' grid (7 + 31 k; work seen at 1030), the others not
      for (Time at : {5u, 7u, 500u, 999u, 1000u, 1030u, 1001u, 4000u, 9998u, 15000u}) e.schedule(at, reader, 0);
    for (Time at : {1000u, 1001u, 5017u, 9999u}) e.schedule(at, work, at % 3 + 1);
    t.start(7);
    e.run_until(20'000);
    t.settle(20'000);  // the loops of the last spin
    return Outcome{body.seen, rig.reads, t.steps(), obs.calls};
  };
  const Outcome one = run(false, true);
  const Outcome spin = run(true, true);
  const Outcome unread = run(true, false);
  REQUIRE(one.reads.size() == 10);
  REQUIRE(spin.reads.size() == 10);
  for (size_t i = 0; i < one.reads.size(); ++i) {
    INFO("read at " << one.reads[i].at);
    CHECK(spin.reads[i] == one.reads[i]);
  }
  CHECK(one.reads[2].steps == 16);  // (500 - 7) / 31 rounded up: the loop running at 500 counts
  CHECK(spin.seen == one.seen);
  CHECK(unread.seen == spin.seen);
  CHECK(spin.steps == unread.steps);
  CHECK(spin.observed == unread.observed);
}

TEST_CASE("busy_ns_at counts a step's charge up to the given time only", "[thread]") {
  Engine e;
  const CostModel costs = simple_costs();
  SimThread t(e, costs, 1, "daemon");
  struct Body {
    int steps = 0;
    StepResult step(SimThread& th) {
      th.charge(Op::kLoop);
      th.charge(Op::kCqe, 4);
      th.charge(Op::kKvOp, 3);  // 117.5 ns a step, back to back: steps start at 1000 + 118 k
      return ++steps < 50 ? StepResult::kContinue : StepResult::kExit;
    }
  } body;
  t.bind<Body, &Body::step>(&body);
  t.start(1000);
  e.run_until(1050);  // inside the first step (1000 .. 1117.5)
  CHECK(t.busy_ns() == 117);     // the whole step, counted at its start
  CHECK(t.busy_ns_at(1050) == 50);
  e.run_until(1200);  // inside the second (1118 .. 1235.5)
  CHECK(t.busy_ns_at(1200) == 117 + 82);
  // Windows: never more busy time than the window is long, and the sum of back-to-back
  // windows is the whole charge.
  Time prev_t = 1200, prev_busy = t.busy_ns_at(1200);
  for (Time w = 1237; w <= 7000; w += 37) {
    e.run_until(w);
    const Time busy = t.busy_ns_at(w);
    CHECK(busy - prev_busy <= w - prev_t);
    prev_t = w;
    prev_busy = busy;
  }
  CHECK(t.exited());
  CHECK(t.busy_ns_at(prev_t) == t.busy_ns());
}

TEST_CASE("kIdleSpin from a thread not set up to spin is an error, not a wrong count", "[thread]") {
  Engine e;
  CostModel costs;
  SimThread t(e, costs, 1, "client 3");
  t.set_step([](void*, SimThread& th) {
    th.charge(Op::kLoop);
    return StepResult::kIdleSpin;
  }, nullptr);
  t.start(10);
  CHECK_THROWS_WITH(e.run_until(100), Catch::Contains("client 3") && Catch::Contains("may_idle_spin"));
}

TEST_CASE("each op's charged time is its cost times its uses plus what jitter and shared waits added", "[thread]") {
  // charge() sums no time per op: an op's total is cost * uses, plus what charge_slow()
  // added (jitter, waits on a shared resource), plus the same for loops skipped by
  // kIdleSpin. Summed over the ops it must be the thread's whole charged time.
  auto sum_ops = [](const SimThread& t) {
    double ns = 0;
    for (size_t i = 0; i < kOpCount; ++i) ns += t.op_ns_total(static_cast<Op>(i));
    return ns;
  };
  Engine e;
  CostModel costs = simple_costs();
  costs[Op::kRingReserve] = 7;
  CostModel jittered = costs;
  jittered.jitter.mode = JitterMode::kRelative;
  jittered.jitter.dist = Distribution::normal(0.0, 0.2, -0.9);
  SharedResource line;
  SimThread plain(e, costs, 1, "plain");      // only kRingReserve is slow (shared)
  SimThread jit(e, jittered, 2, "jittered");  // every op is slow (jitter)
  plain.bind_shared(Op::kRingReserve, &line);
  jit.bind_shared(Op::kRingReserve, &line);
  struct Body {
    uint32_t steps = 0;
    StepResult step(SimThread& th) {
      th.charge(Op::kLoop);
      th.charge(Op::kCqe, 3);
      th.charge(Op::kRingReserve);
      th.charge(Op::kKvOp, 5);
      return ++steps < 300 ? StepResult::kContinue : StepResult::kExit;
    }
  } a, b;
  plain.bind<Body, &Body::step>(&a);
  jit.bind<Body, &Body::step>(&b);
  plain.start(0);
  jit.start(0);
  e.run();
  REQUIRE(line.uses() == 600);
  for (const SimThread* t : {&plain, &jit}) {
    CHECK(t->op_count(Op::kCqe) == 900);
    CHECK(sum_ops(*t) == Approx(static_cast<double>(t->busy_ns())).margin(1.0));
  }
  // Fast ops of the plain thread are exactly cost * uses; its shared op waited.
  CHECK(plain.op_ns_total(Op::kCqe) == 25.0 * 900);
  CHECK(plain.op_ns_total(Op::kKvOp) == 2.5 * 1500);
  CHECK(plain.op_ns_total(Op::kRingReserve) + jit.op_ns_total(Op::kRingReserve) > 7.0 * 600);
  CHECK(jit.op_ns_total(Op::kCqe) != 25.0 * 900);  // jitter changed it

  // Loops skipped by kIdleSpin count k copies of the idle loop's charges, jitter included.
  Engine e2;
  SimThread spin(e2, jittered, 3, "spinning");
  struct Spin {
    uint32_t steps = 0;
    StepResult step(SimThread& th) {
      th.charge(Op::kLoop);
      th.charge(Op::kCqe);
      return ++steps < 5 ? StepResult::kContinue : StepResult::kIdleSpin;
    }
  } s;
  spin.bind<Spin, &Spin::step>(&s, /*may_idle_spin=*/true);
  spin.start(0);
  e2.run_until(100'000);
  spin.wake(100'000);  // ends the spin: the skipped loops are accounted at the next step
  e2.run_until(200'000);
  REQUIRE(spin.skipped_steps() > 100);
  CHECK(spin.op_count(Op::kLoop) == spin.steps());
  CHECK(sum_ops(spin) == Approx(static_cast<double>(spin.busy_ns())).margin(1.0));
}

TEST_CASE("a thread's step prefetch is called before the event that precedes its step, with its own context",
          "[thread]") {
  Engine e;
  SimThread a(e, simple_costs(), 1, "a");
  SimThread b(e, simple_costs(), 2, "b");
  struct Body {
    std::vector<Time>* log;
    StepResult step(SimThread& th) {
      log->push_back(th.now());
      return StepResult::kIdle;
    }
  };
  std::vector<Time> a_steps, b_steps;
  Body ab{&a_steps}, bb{&b_steps};
  a.bind<Body, &Body::step>(&ab);
  b.bind<Body, &Body::step>(&bb);
  struct Hints {
    Engine* e;
    std::vector<uint64_t> at;  // events run when each hint came
    static void hint(void* ctx, uint32_t) {
      auto* h = static_cast<Hints*>(ctx);
      h->at.push_back(h->e->events_run());
    }
  } hints{&e, {}};
  b.set_step_prefetch(&Hints::hint, &hints);
  a.wake(10);
  b.wake(20);
  a.wake(30);
  e.run();
  // b's step is the 2nd event: its hint came as the 1st ran; a's steps bring none.
  CHECK(hints.at == std::vector<uint64_t>{1});
  CHECK(a_steps == std::vector<Time>{10});  // the wake at 30 came while a step was pending at 10: coalesced
  CHECK(b_steps == std::vector<Time>{20});
  a.prefetch_step_state();  // hints only: nothing to observe but that they run
  b.prefetch_wake();
}
