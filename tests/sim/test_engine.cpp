// The event engine: time order, deterministic tie-breaking, run limits, stop.
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/random.hpp"
#include "sim/engine.hpp"

using namespace bkv::sim;

namespace {
// A target that records the events it runs; with Log::hint as its prefetcher, also each
// prefetch hint: the argument named and how many events had run.
struct Log {
  Engine* engine = nullptr;
  std::vector<std::pair<Time, uint32_t>> seen;
  std::vector<std::pair<uint64_t, uint32_t>> hints;  // (events run so far, hinted argument)
  static void on(void* ctx, uint32_t arg) {
    auto* self = static_cast<Log*>(ctx);
    self->seen.emplace_back(self->engine->now(), arg);
  }
  static void hint(void* ctx, uint32_t arg) {
    auto* self = static_cast<Log*>(ctx);
    self->hints.emplace_back(self->engine->events_run(), arg);
  }
};

// An engine with one Log target `t`.
struct LoggedEngine {
  Engine e;
  Log log{&e, {}, {}};
  const TargetId t = e.add_target(&Log::on, &log);
};
}  // namespace

TEST_CASE_METHOD(LoggedEngine, "events run in time order, ties in insertion order", "[engine]") {
  e.schedule(30, t, 1);
  e.schedule(10, t, 2);
  e.schedule(20, t, 3);
  e.schedule(10, t, 4);  // same time as arg 2, inserted later: runs after it
  e.schedule(10, t, 5);
  e.schedule(0, t, 6);
  CHECK(e.pending() == 6);
  e.run();
  const std::vector<std::pair<Time, uint32_t>> want{{0, 6}, {10, 2}, {10, 4}, {10, 5}, {20, 3}, {30, 1}};
  CHECK(log.seen == want);
  CHECK(e.empty());
  CHECK(e.events_run() == 6);
}

TEST_CASE_METHOD(LoggedEngine, "many equal-time events keep insertion order through heap reshuffles", "[engine]") {
  bkv::Rng rng(7);
  // Interleave random times with blocks of equal times; the arg is the insertion index.
  std::vector<std::pair<Time, uint32_t>> inserted;
  for (uint32_t i = 0; i < 5000; ++i) {
    const Time when = rng.below(50);
    e.schedule(when, t, i);
    inserted.emplace_back(when, i);
  }
  e.run();
  REQUIRE(log.seen.size() == inserted.size());
  for (size_t i = 1; i < log.seen.size(); ++i) {
    const auto& a = log.seen[i - 1];
    const auto& b = log.seen[i];
    REQUIRE((a.first < b.first || (a.first == b.first && a.second < b.second)));
  }
}

TEST_CASE("handlers may schedule more events, including at the current time", "[engine]") {
  Engine e;
  struct Chain {
    Engine* e;
    TargetId self;
    std::vector<std::pair<Time, uint32_t>> seen;
    static void on(void* ctx, uint32_t arg) {
      auto* c = static_cast<Chain*>(ctx);
      c->seen.emplace_back(c->e->now(), arg);
      if (arg < 3) c->e->schedule(c->e->now(), c->self, arg + 10);  // same time, after the ones queued
      if (arg == 0) c->e->schedule_in(5, c->self, 1);
    }
  } chain{&e, {}, {}};
  chain.self = e.add_target(&Chain::on, &chain);
  e.schedule(100, chain.self, 0);
  e.schedule(100, chain.self, 2);
  e.run();
  const std::vector<std::pair<Time, uint32_t>> want{{100, 0}, {100, 2}, {100, 10}, {100, 12}, {105, 1}, {105, 11}};
  CHECK(chain.seen == want);
}

TEST_CASE_METHOD(LoggedEngine, "run_until stops at the limit and advances the clock to it", "[engine]") {
  e.schedule(5, t, 1);
  e.schedule(10, t, 2);
  e.schedule(11, t, 3);
  CHECK(e.run_until(10) == 2);
  CHECK(e.now() == 10);
  CHECK(e.pending() == 1);
  CHECK(e.next_time() == 11);
  CHECK(e.run_until(50) == 1);
  CHECK(e.now() == 50);
  CHECK(e.run_until(60) == 0);
  CHECK(e.now() == 60);
}

TEST_CASE("stop() ends the run after the current event", "[engine]") {
  Engine e;
  struct Stopper {
    Engine* e;
    int runs = 0;
    static void on(void* ctx, uint32_t arg) {
      auto* s = static_cast<Stopper*>(ctx);
      ++s->runs;
      if (arg == 1) s->e->stop();
    }
  } s{&e};
  const TargetId t = e.add_target(&Stopper::on, &s);
  e.schedule(1, t, 0);
  e.schedule(2, t, 1);
  e.schedule(3, t, 0);
  e.run();
  CHECK(s.runs == 2);
  CHECK(e.now() == 2);
  CHECK(e.stopped());
  CHECK(e.pending() == 1);
  e.run();  // a new run resumes
  CHECK(s.runs == 3);
}

TEST_CASE_METHOD(LoggedEngine, "scheduling in the past is an error", "[engine]") {
  e.schedule(10, t, 0);
  e.run();
  CHECK_THROWS_AS(e.schedule(9, t, 0), std::logic_error);
  CHECK_NOTHROW(e.schedule(10, t, 0));
}

TEST_CASE("member targets and the trace hash", "[engine]") {
  struct Counter {
    uint64_t sum = 0;
    void on(uint32_t arg) { sum += arg; }
  };
  auto run = [](uint32_t salt) {
    Engine e;
    Counter c;
    const TargetId t = e.add_member<Counter, &Counter::on>(&c);
    for (uint32_t i = 0; i < 100; ++i) e.schedule(i % 7, t, i ^ salt);
    e.run();
    return std::pair<uint64_t, uint64_t>{c.sum, e.trace_hash()};
  };
  const auto a = run(0);
  const auto b = run(0);
  const auto c = run(1);
  CHECK(a.first == 4950);
  CHECK(a.second == b.second);
  CHECK(a.second != c.second);
}


TEST_CASE("the trace hash can be turned off: the same events run, the observer still sees them", "[engine]") {
  struct Observed {
    std::vector<std::pair<Time, uint32_t>> events;
    static void on(void* ctx, const Event& ev) { static_cast<Observed*>(ctx)->events.emplace_back(ev.time, ev.arg); }
  };
  // The same 200 events (ties included) with the hash on and off, an observer on both.
  auto run = [](bool hash, bool observe) {
    Engine e;
    Log log{&e, {}, {}};
    Observed seen;
    const TargetId t = e.add_target(&Log::on, &log);
    e.set_trace_hash(hash);
    if (observe) e.set_trace(&Observed::on, &seen);
    bkv::Rng rng(7);
    for (uint32_t i = 0; i < 200; ++i) e.schedule(rng.next() % 50, t, i);
    e.run();
    CHECK(e.trace_hash_on() == hash);
    if (observe) CHECK(seen.events == log.seen);
    return log.seen;
  };
  const auto with_hash = run(true, true);
  REQUIRE(with_hash.size() == 200);
  CHECK(run(false, true) == with_hash);
  CHECK(run(false, false) == with_hash);
  // Off, the hash is not read as a value every run would share; it is chosen before the
  // first event runs.
  Engine e;
  const TargetId t = e.add_target([](void*, uint32_t) {}, nullptr);
  e.set_trace_hash(false);
  CHECK_THROWS_AS(e.trace_hash(), std::logic_error);
  e.schedule(1, t);
  e.run();
  CHECK_THROWS_AS(e.set_trace_hash(true), std::logic_error);
}

TEST_CASE("a target's prefetcher is told the next event before the current one runs", "[engine]") {
  Engine e;
  Log plain_log{&e, {}, {}};
  Log hinted_log{&e, {}, {}};
  const TargetId plain = e.add_target(&Log::on, &plain_log);
  const TargetId hinted = e.add_target(&Log::on, &hinted_log, &Log::hint);
  e.schedule(10, hinted, 1);
  e.schedule(20, plain, 2);
  e.schedule(30, hinted, 3);
  e.schedule(40, hinted, 4);
  e.run();
  // Before event k runs (k events counted as run, the current one included), the next
  // event is named if its target has a prefetcher: 3 before the 2nd event runs, 4 before
  // the 3rd; none before the 1st (the next is the plain target's) nor the last.
  const std::vector<std::pair<uint64_t, uint32_t>> want_hints{{2, 3}, {3, 4}};
  CHECK(hinted_log.hints == want_hints);
  // Hints change nothing that runs.
  const std::vector<std::pair<Time, uint32_t>> want_hinted{{10, 1}, {30, 3}, {40, 4}};
  const std::vector<std::pair<Time, uint32_t>> want_plain{{20, 2}};
  CHECK(hinted_log.seen == want_hinted);
  CHECK(plain_log.seen == want_plain);
}

TEST_CASE("set_prefetcher gives a target a prefetcher with a context of its own, or takes it away", "[engine]") {
  Engine e;
  Log target_log{&e, {}, {}};
  Log hint_log{&e, {}, {}};
  const TargetId t = e.add_target(&Log::on, &target_log);
  e.set_prefetcher(t, &Log::hint, &hint_log);
  e.schedule(10, t, 1);
  e.schedule(20, t, 2);
  e.run_until(15);
  // The hint went to its own context, not the target's.
  CHECK(hint_log.hints == std::vector<std::pair<uint64_t, uint32_t>>{{1, 2}});
  CHECK(target_log.hints.empty());
  e.set_prefetcher(t, nullptr, nullptr);
  e.schedule(30, t, 3);
  e.run();
  CHECK(hint_log.hints.size() == 1);
  CHECK(target_log.seen == std::vector<std::pair<Time, uint32_t>>{{10, 1}, {20, 2}, {30, 3}});
  CHECK_THROWS_AS(e.set_prefetcher(TargetId{7}, &Log::hint, &hint_log), std::out_of_range);
}
