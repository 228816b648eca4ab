// Every future-event set implementation against a reference ordered set, and the engine
// driven by each implementation on the same scenario: the event order must be identical.
#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/random.hpp"
#include "sim/calendar_queue.hpp"
#include "sim/distributions.hpp"
#include "sim/engine.hpp"
#include "sim/event_set.hpp"
#include "sim/selectable_event_set.hpp"

using namespace bkv::sim;
using bkv::Rng;

namespace {

using Key = std::tuple<Time, uint64_t, uint32_t, uint32_t>;  // the whole event, (time, seq) first
Key key_of(const Event& ev) { return {ev.time, ev.seq, ev.target, ev.arg}; }

// Applies a stream of pushes and pops to the set under test and to a std::multiset, and
// compares size, min() and every popped event after each operation.
template <class Set>
class Checker {
 public:
  void push(Time t) {
    const Event ev{t, seq_, static_cast<uint32_t>(seq_ * 7 + 1), static_cast<uint32_t>(seq_ ^ 0x5A5A5A5Au)};
    ++seq_;
    set_.push(ev);
    ref_.insert(key_of(ev));
    check_min();
  }

  // Pops one event; returns its time (the caller's "now").
  Time pop() {
    REQUIRE(!ref_.empty());
    const Event got = set_.pop_min();
    const Key want = *ref_.begin();
    ref_.erase(ref_.begin());
    REQUIRE(key_of(got) == want);
    check_min();
    ++pops_;
    return got.time;
  }

  void drain() {
    while (!ref_.empty()) pop();
    REQUIRE(set_.empty());
  }

  size_t size() const { return ref_.size(); }
  uint64_t pops() const { return pops_; }
  const Set& set() const { return set_; }

 private:
  void check_min() {
    REQUIRE(set_.size() == ref_.size());
    REQUIRE(set_.empty() == ref_.empty());
    if (!ref_.empty()) REQUIRE(key_of(set_.min()) == *ref_.begin());
  }

  Set set_;
  std::multiset<Key> ref_;
  uint64_t seq_ = 0;
  uint64_t pops_ = 0;
};

// Discrete-event style: a population of `pending` events; each pop pushes a new event at
// now + delay(rng) (the hold model). `delay` draws the increment.
template <class Set>
void hold(Checker<Set>& c, Rng& rng, size_t pending, uint64_t ops, const std::function<Time(Rng&)>& delay) {
  Time now = 0;
  while (c.size() < pending) c.push(delay(rng));
  for (uint64_t i = 0; i < ops; ++i) {
    now = c.pop();
    c.push(now + delay(rng));
  }
  c.drain();
}

}  // namespace

TEMPLATE_TEST_CASE("event set pops what a reference multiset pops, random interleaving",
                   "[event_set]", BinaryHeapEventSet, CalendarQueueEventSet) {
  // Pushes at arbitrary times, not only after the last pop: a set may not assume times
  // only grow.
  Checker<TestType> c;
  Rng rng(11);
  for (int round = 0; round < 4; ++round) {
    const double push_p = round % 2 == 0 ? 0.6 : 0.4;
    for (int i = 0; i < 20000; ++i) {
      if (c.size() == 0 || rng.uniform() < push_p)
        c.push(rng.below(round < 2 ? 1000 : 1'000'000'000));
      else
        c.pop();
    }
  }
  c.drain();
  CHECK(c.pops() > 30000);
}

TEMPLATE_TEST_CASE("event set: hold model with exponential increments", "[event_set]", BinaryHeapEventSet,
                   CalendarQueueEventSet) {
  for (size_t pending : {1u, 3u, 100u, 5000u}) {
    Checker<TestType> c;
    Rng rng(pending);
    hold<TestType>(c, rng, pending, 40000, [](Rng& r) { return static_cast<Time>(sample_exponential(r, 1000.0)); });
  }
}

TEMPLATE_TEST_CASE("event set: many equal times are popped in sequence order", "[event_set]", BinaryHeapEventSet,
                   CalendarQueueEventSet) {
  SECTION("all events at one time, population kept steady") {
    Checker<TestType> c;
    Rng rng(3);
    hold<TestType>(c, rng, 2000, 30000, [](Rng&) { return Time{0}; });
  }
  SECTION("increments of 0 or 1 ns") {
    Checker<TestType> c;
    Rng rng(4);
    hold<TestType>(c, rng, 700, 30000, [](Rng& r) { return static_cast<Time>(r.below(2)); });
  }
  SECTION("a few distinct times, pushed in any order") {
    Checker<TestType> c;
    Rng rng(5);
    for (int i = 0; i < 30000; ++i) {
      if (c.size() == 0 || rng.uniform() < 0.55)
        c.push(100 * rng.below(4));
      else
        c.pop();
    }
    c.drain();
  }
}

TEMPLATE_TEST_CASE("event set: large time gaps up to the end of the time range", "[event_set]",
                   BinaryHeapEventSet, CalendarQueueEventSet) {
  SECTION("increments of random magnitude, 1 ns to 2^40 ns") {
    Checker<TestType> c;
    Rng rng(6);
    hold<TestType>(c, rng, 300, 30000, [](Rng& r) { return static_cast<Time>(r.below(uint64_t{1} << r.below(41))); });
  }
  SECTION("times spread over the whole 64-bit range, including kTimeNever") {
    Checker<TestType> c;
    Rng rng(7);
    for (int i = 0; i < 20000; ++i) {
      if (c.size() == 0 || rng.uniform() < 0.55) {
        const uint64_t pick = rng.below(4);
        const Time t = pick == 0 ? kTimeNever - rng.below(3) : pick == 1 ? rng.below(5) : rng.next();
        c.push(t);
      } else {
        c.pop();
      }
    }
    c.drain();
  }
  SECTION("a few events, far apart") {
    Checker<TestType> c;
    Rng rng(8);
    hold<TestType>(c, rng, 5, 20000, [](Rng& r) { return Time{1'000'000'000} + r.below(1'000'000'000'000); });
  }
}

TEMPLATE_TEST_CASE("event set: bursty and skewed increments", "[event_set]", BinaryHeapEventSet,
                   CalendarQueueEventSet) {
  SECTION("bimodal: mostly 0-9 ns, sometimes a millisecond") {
    Checker<TestType> c;
    Rng rng(9);
    hold<TestType>(c, rng, 1000, 50000,
                   [](Rng& r) { return r.uniform() < 0.9 ? r.below(10) : 1'000'000 + r.below(1000); });
  }
  SECTION("heavy tail: 1/u^2 ns") {
    Checker<TestType> c;
    Rng rng(10);
    hold<TestType>(c, rng, 1000, 50000, [](Rng& r) {
      const double u = 1.0 - r.uniform();  // (0, 1]
      const double d = 1.0 / (u * u);
      return d > 1e15 ? Time{1'000'000'000'000'000} : static_cast<Time>(d);
    });
  }
  SECTION("the distribution changes under a steady population") {
    // Dense (mean 1 ns), then sparse (mean 1 ms), then dense again: the calendar must
    // follow with its slot width; the order stays exact either way.
    Checker<TestType> c;
    Rng rng(12);
    Time now = 0;
    for (int i = 0; i < 2000; ++i) c.push(rng.below(2000));
    for (double mean : {1.0, 1e6, 1.0, 50.0}) {
      for (int i = 0; i < 30000; ++i) {
        now = c.pop();
        c.push(now + static_cast<Time>(sample_exponential(rng, mean)));
      }
    }
    c.drain();
  }
  SECTION("bursts: 500 events at one instant, then a quiet gap") {
    Checker<TestType> c;
    Rng rng(13);
    Time t = 0;
    for (int burst = 0; burst < 40; ++burst) {
      for (int i = 0; i < 500; ++i) c.push(t);
      for (int i = 0; i < 300; ++i) c.pop();
      t += 10'000 + rng.below(100'000);
    }
    c.drain();
  }
}

TEMPLATE_TEST_CASE("event set: growing and shrinking across every resize boundary", "[event_set]",
                   BinaryHeapEventSet, CalendarQueueEventSet) {
  Checker<TestType> c;
  Rng rng(14);
  Time now = 0;
  size_t most_buckets = 0;
  // Ramps 0 -> top -> 0 one event at a time, so every size from 0 to top is crossed in
  // both directions, with pushes after the last pop (the engine's pattern).
  for (size_t top : {1u, 2u, 9u, 17u, 33u, 4100u, 16u, 70000u}) {
    while (c.size() < top) c.push(now + rng.below(200));
    if constexpr (std::is_same_v<TestType, CalendarQueueEventSet>)
      most_buckets = std::max(most_buckets, c.set().bucket_count());
    while (c.size() > 0) {
      now = c.pop();
      if (rng.uniform() < 0.1) {  // a few pushes on the way down
        c.push(now + rng.below(200));
        now = c.pop();
      }
    }
    REQUIRE(c.set().empty());
  }
  if constexpr (std::is_same_v<TestType, CalendarQueueEventSet>) {
    CHECK(most_buckets >= 32768);                                               // 70000 events: grown
    CHECK(c.set().bucket_count() == CalendarQueueEventSet::kMinBuckets);  // empty again: shrunk back
  }
}

TEST_CASE("calendar queue re-fits its slot width when the time scale changes", "[event_set]") {
  CalendarQueueEventSet q;
  uint64_t seq = 0;
  Rng rng(15);
  for (int i = 0; i < 4096; ++i) q.push(Event{rng.below(4096), seq++, 0, 0});  // ~1 ns apart
  const uint64_t dense_width = q.slot_width();
  CHECK(dense_width <= 4);
  Time now = 0;
  for (int i = 0; i < 200000; ++i) {  // same population, now ~1 ms apart
    now = q.pop_min().time;
    q.push(Event{now + 1 + rng.below(8'000'000'000), seq++, 0, 0});
  }
  CHECK(q.slot_width() >= 100'000);
  CHECK(q.size() == 4096);
}

// --- the engine driven by each set ---
namespace {

// A closed network of FCFS stations with customers hopping between them (zero-delay hops
// give equal times), a ticker that fires bursts of same-time events, and far-future
// timers. All randomness is drawn inside handlers, so any difference in event order
// changes everything after it.
template <class Set>
struct Scenario {
  static constexpr uint32_t kStations = 12;
  static constexpr uint32_t kCustomers = 400;
  static constexpr uint32_t kDepart = 1u << 24;  // arg flag: service completion (else arrival)

  struct Station {
    Scenario* s = nullptr;
    uint32_t index = 0;
    TargetId self{};
    std::deque<uint32_t> waiting;
    bool busy = false;
    static void on(void* ctx, uint32_t arg) {
      auto* st = static_cast<Station*>(ctx);
      st->s->station_event(*st, arg);
    }
  };

  BasicEngine<Set> e;
  Rng rng{2024};
  std::vector<Station> stations{kStations};
  TargetId ticker{}, burst{}, timer{};
  std::vector<Event> trace;

  void station_event(Station& st, uint32_t arg) {
    const uint32_t customer = arg & (kDepart - 1);
    if (arg & kDepart) {
      const uint32_t next = static_cast<uint32_t>(rng.below(kStations));
      const Time hop = rng.uniform() < 0.3 ? 0 : rng.below(50);
      e.schedule_in(hop, stations[next].self, customer);
      st.busy = false;
      if (!st.waiting.empty()) {
        start(st, st.waiting.front());
        st.waiting.pop_front();
      }
    } else if (st.busy) {
      st.waiting.push_back(customer);
    } else {
      start(st, customer);
    }
  }
  void start(Station& st, uint32_t customer) {
    st.busy = true;
    const double mean = 20.0 + 15.0 * st.index;
    e.schedule_in(static_cast<Time>(sample_exponential(rng, mean)), st.self, customer | kDepart);
  }

  void run(Time limit) {
    for (uint32_t i = 0; i < kStations; ++i) {
      stations[i].s = this;
      stations[i].index = i;
      stations[i].self = e.add_target(&Station::on, &stations[i]);
    }
    ticker = e.add_target(
        [](void* ctx, uint32_t n) {
          auto* s = static_cast<Scenario*>(ctx);
          for (uint32_t k = 0; k < 1 + n % 40; ++k) s->e.schedule_in(0, s->burst, k);
          if (n % 7 == 0) s->e.schedule_in(1'000'000'000 + s->rng.below(1'000'000'000), s->timer, n);
          s->e.schedule_in(1000, s->ticker, n + 1);
        },
        this);
    burst = e.add_target([](void*, uint32_t) {}, this);
    timer = e.add_target([](void*, uint32_t) {}, this);
    e.set_trace([](void* ctx, const Event& ev) { static_cast<Scenario*>(ctx)->trace.push_back(ev); }, this);
    for (uint32_t c = 0; c < kCustomers; ++c) e.schedule(rng.below(100), stations[c % kStations].self, c);
    e.schedule(0, ticker, 0);
    e.run_until(limit);
  }
};

// Two runs of the scenario ran the same events in the same order and ended in the same
// state.
template <class A, class B>
void check_same_run(const Scenario<A>& got, const Scenario<B>& want) {
  REQUIRE(got.trace.size() == want.trace.size());
  for (size_t i = 0; i < want.trace.size(); ++i) {
    INFO("event " << i);
    REQUIRE(key_of(got.trace[i]) == key_of(want.trace[i]));
  }
  CHECK(got.e.trace_hash() == want.e.trace_hash());
  CHECK(got.e.now() == want.e.now());
  CHECK(got.e.pending() == want.e.pending());
  CHECK(got.e.next_time() == want.e.next_time());
  CHECK(got.e.events_scheduled() == want.e.events_scheduled());
}

}  // namespace

TEST_CASE("the engine runs the identical event sequence over every event set", "[event_set][engine]") {
  constexpr Time kLimit = 3'000'000;  // 3 ms virtual
  Scenario<BinaryHeapEventSet> heap;
  heap.run(kLimit);
  Scenario<CalendarQueueEventSet> calendar;
  calendar.run(kLimit);

  REQUIRE(heap.trace.size() > 100'000);
  // The scenario has what makes ordering hard: same-time events and far-future ones.
  size_t ties = 0;
  for (size_t i = 1; i < heap.trace.size(); ++i) ties += heap.trace[i].time == heap.trace[i - 1].time;
  CHECK(ties > heap.trace.size() / 4);
  CHECK(heap.e.pending() > 0);
  CHECK(heap.e.next_time() > 0);

  check_same_run(calendar, heap);
}

TEST_CASE("the engine's selectable event set runs the same sequence with the heap or the calendar queue",
          "[event_set][engine]") {
  constexpr Time kLimit = 3'000'000;
  Scenario<BinaryHeapEventSet> heap;
  heap.run(kLimit);
  REQUIRE(heap.trace.size() > 100'000);
  for (const EventSetKind kind : {EventSetKind::kBinaryHeap, EventSetKind::kCalendarQueue}) {
    INFO("kind " << static_cast<int>(kind));
    Scenario<SelectableEventSet> s;
    CHECK(s.e.event_set().kind() == EventSetKind::kBinaryHeap);  // the heap unless selected
    s.e.event_set_to_configure().select(kind);
    CHECK(s.e.event_set().kind() == kind);
    s.run(kLimit);
    check_same_run(s, heap);
    // Once events are scheduled, the set is no longer chosen.
    CHECK_THROWS_AS(s.e.event_set_to_configure(), std::logic_error);
  }
  SelectableEventSet set;
  set.push(Event{5, 0, 0, 0});
  CHECK_THROWS_AS(set.select(EventSetKind::kCalendarQueue), std::logic_error);
  CHECK(set.kind() == EventSetKind::kBinaryHeap);
  CHECK(set.pop_min().time == 5);
  set.select(EventSetKind::kCalendarQueue);  // empty again: may be chosen
  CHECK(set.kind() == EventSetKind::kCalendarQueue);
}
