// backends/client.hpp, the client's loop: every answer found is followed at once by one
// new request into the slot it freed (the original client's loop), on real threads in one
// step; with timed writes (the simulator) a step writes at most one request, at its
// start, and each request is written only after its client paid for everything before it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/client.hpp"
#include "core/shm/segment.hpp"
#include "tests/backends/client_rig.hpp"

using namespace bkv;
using namespace bkv::backend;

namespace {

// A clock that charges advance (1 ns per op unit), so a step's writes can be timed.
using StepMeter = test::TestClockMeter<true>;

// Logs every call ("C<slot>") and every answer it hands the client ("A<slot>") in the
// order they happen (the slot: a token's low kSlotBits = 17 bits, below its generation); answers, at the next poll, the tokens the test lists (and at the poll
// after it those of `then`); refuses calls while `refuse` is set.
struct LoggingPath {
  static constexpr bool kSharedHead = true;
  static constexpr bool kDaemonAnswers = true;
  std::vector<std::string>* log;
  std::vector<uint64_t>* to_answer;
  std::vector<uint64_t>* then;
  bool* refuse;
  bool try_call(const kv::Request&, uint64_t token) {
    if (*refuse) return false;
    log->push_back("C" + std::to_string(token & 0x1FFFF));
    return true;
  }
  template <class F>
  uint32_t poll(F&& f) {
    const std::vector<uint64_t> now = *to_answer;
    *to_answer = *then;
    then->clear();
    for (uint64_t t : now) {
      log->push_back("A" + std::to_string(t & 0x1FFFF));
      f(t, kv::Response::put_ok());
    }
    return static_cast<uint32_t>(now.size());
  }
  void after_issue() noexcept {}
};

struct Rig {
  NodeConfig node;
  StepMeter meter;
  ClientCounters counters;
  std::vector<std::string> log;
  std::vector<uint64_t> to_answer, then;
  bool refuse = false;
  Client<StepMeter, LoggingPath> client;
  Rig() : node(test::remote_only_node()), client(node, kv::Pattern(test::small_workload(), 0, 0), {}, LoggingPath{&log, &to_answer, &then, &refuse}, meter, counters) {}
};

}  // namespace

TEST_CASE("client loop: every answer is followed at once by one new request", "[backends][client]") {
  Rig rig;
  CHECK(rig.client.step().issued == 4);  // the first step issues the queue depth
  CHECK(rig.log == std::vector<std::string>{"C0", "C1", "C2", "C3"});
  rig.log.clear();
  rig.to_answer = {1, 3, 0};  // first-generation tokens are their slots
  const ClientStepResult s = rig.client.step();
  CHECK(s.completed == 3);
  CHECK(s.issued == 3);
  // Answer, request, answer, request: not all the answers first. Each request takes the
  // token (the slot) its answer just freed.
  CHECK(rig.log == std::vector<std::string>{"A1", "C1", "A3", "C3", "A0", "C0"});
  CHECK(rig.client.in_flight() == 4);
}

TEST_CASE("client loop, timed writes: one request per step, written after what its client paid", "[backends][client]") {
  Rig rig;
  rig.client.set_timed_writes(true);
  // The first queue depth: each step writes the request the previous one paid for.
  std::vector<uint64_t> write_times;
  for (int i = 0; i < 8 && rig.client.in_flight() < 4; ++i) {
    rig.meter.now = rig.meter.now_ns();  // the next step starts when this one's costs are paid
    rig.meter.charged = 0;
    const size_t before = rig.log.size();
    const ClientStepResult s = rig.client.step();
    CHECK(s.issued <= 1);
    if (rig.log.size() > before) write_times.push_back(rig.meter.now);
    if (rig.client.in_flight() < 4) CHECK(s.again);
  }
  CHECK(rig.client.in_flight() == 4);
  REQUIRE(write_times.size() == 4);
  for (size_t i = 1; i < write_times.size(); ++i) CHECK(write_times[i] > write_times[i - 1]);  // each waited for its costs

  // Three answers: the loop goes answer, request, answer, request, one write per step.
  rig.log.clear();
  rig.to_answer = {2, 0, 3};
  std::vector<std::string> per_step;
  for (int i = 0; i < 10; ++i) {
    rig.meter.now = rig.meter.now_ns();
    rig.meter.charged = 0;
    const size_t before = rig.log.size();
    const ClientStepResult s = rig.client.step();
    std::string what;
    for (size_t k = before; k < rig.log.size(); ++k) what += rig.log[k];
    per_step.push_back(what);
    CHECK(s.issued <= 1);
    if (!s.again) break;
  }
  // The scan finds all three at once; each following step writes the request the
  // previous one paid for and handles the next answer.
  CHECK(rig.log == std::vector<std::string>{"A2", "A0", "A3", "C2", "C0", "C3"});
  REQUIRE(per_step.size() >= 4);
  CHECK(per_step[0] == "A2A0A3");
  CHECK(per_step[1] == "C2");
  CHECK(per_step[2] == "C0");
  CHECK(per_step[3] == "C3");
  CHECK(rig.client.in_flight() == 4);
  CHECK(rig.counters.completed.load() == 3);
}

TEST_CASE("client loop, timed writes: a refused write is kept and retried, nothing is lost", "[backends][client]") {
  Rig rig;
  rig.client.set_timed_writes(true);
  rig.refuse = true;
  ClientStepResult s = rig.client.step();  // pays for the first request
  CHECK(s.again);
  s = rig.client.step();  // its write is refused: blocked, the request stays paid for
  CHECK(s.blocked);
  CHECK_FALSE(s.again);
  CHECK(rig.client.in_flight() == 0);
  rig.refuse = false;
  s = rig.client.step();  // the retry writes it
  CHECK(s.issued == 1);
  CHECK(rig.client.in_flight() == 1);
  CHECK(rig.log == std::vector<std::string>{"C0"});
}

TEST_CASE("client loop, timed writes: an answer that came while the client was stepping is found before it idles",
          "[backends][client]") {
  Rig rig;
  rig.client.set_timed_writes(true);
  for (int i = 0; i < 8 && rig.client.in_flight() < 4; ++i) rig.client.step();
  REQUIRE(rig.client.in_flight() == 4);
  rig.log.clear();
  rig.client.stop_issuing();  // no request follows an answer: a step ends with nothing to write
  rig.to_answer = {1};
  rig.then = {2};  // written while the client handles 1 (its wake-up finds it stepping)
  ClientStepResult s = rig.client.step();
  CHECK(s.completed == 1);
  // The step that handled the last answer it had scanned again before going idle.
  CHECK(s.again);
  s = rig.client.step();
  CHECK(s.completed == 1);
  CHECK(rig.client.in_flight() == 2);
  CHECK(rig.log == std::vector<std::string>{"A1", "A2"});
}

namespace {

// Answers the oldest requests first, `per_poll` of them at each poll (cycling 0, 1, 2, 3),
// and keeps the tokens it issued and handed over in order.
struct FifoPath {
  static constexpr bool kSharedHead = true;
  static constexpr bool kDaemonAnswers = true;
  std::deque<uint64_t>* issued;  // not yet answered, oldest first
  std::deque<uint64_t>* handed;  // answered, not yet handled by the client
  std::vector<uint64_t>* calls;  // every token called, in order
  uint32_t* polls;
  bool try_call(const kv::Request&, uint64_t token) {
    issued->push_back(token);
    calls->push_back(token);
    return true;
  }
  template <class F>
  uint32_t poll(F&& f) {
    const uint32_t n = std::min<uint32_t>((*polls)++ % 4, static_cast<uint32_t>(issued->size()));
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t t = issued->front();
      issued->pop_front();
      handed->push_back(t);
      f(t, kv::Response::put_ok());
    }
    return n;
  }
  void after_issue() noexcept {}
};

// A client with timed writes (queue depth 8) over FifoPath, with what the path logs: the
// set-up of the next-step hint tests.
struct TimedFifoRig {
  NodeConfig node = [] {
    NodeConfig n = test::remote_only_node();
    n.queue_depth = 8;
    return n;
  }();
  StepMeter meter;
  ClientCounters counters;
  std::deque<uint64_t> issued, handed;
  std::vector<uint64_t> calls;
  uint32_t polls = 0;
  Client<StepMeter, FifoPath> client{node, kv::Pattern(test::small_workload(), 0, 0), {},
                                     FifoPath{&issued, &handed, &calls, &polls}, meter, counters};
  TimedFifoRig() { client.set_timed_writes(true); }
};

}  // namespace

// The simulator's next-step hint (Client::add_next_step_lines, prefetched one event before
// the step): recorded after each step, it names the pending slot of the request the next
// step writes and, if it names another, that of the answer the next step handles; every
// address it lists is read here, so that under AddressSanitizer one outside the client's
// live memory fails the test.
TEST_CASE("client loop, timed writes: the next-step hint names the pending slots the next step uses",
          "[backends][client]") {
  TimedFifoRig rig;
  const auto* table0 = static_cast<const std::byte*>(rig.client.pending_line(0));
  const auto* table_end = table0 + 16 * rig.node.queue_depth;
  auto in_table = [&](const void* p) { return p >= table0 && static_cast<const std::byte*>(p) < table_end; };
  uint32_t issue_hinted = 0, answer_hinted = 0;
  for (int i = 0; i < 400; ++i) {
    LineList hint;
    hint.reserve_step(rig.client.step_line_count());
    rig.client.add_next_step_lines(hint);
    for (uint32_t k = 0; k < LineList::kMax; ++k) {  // the idle entries too
      volatile std::byte b = *static_cast<const std::byte*>(hint.at[k]);  // live memory
      (void)b;
    }
    const size_t calls_before = rig.calls.size();
    const ClientStepResult s = rig.client.step();
    std::vector<const void*> used;
    if (rig.calls.size() > calls_before) {
      REQUIRE(rig.calls.size() == calls_before + 1);
      used.push_back(rig.client.pending_line(rig.calls.back()));
      CHECK(hint.step_at(0) == used.back());  // the free list's top is the slot the write takes
      ++issue_hinted;
    }
    if (s.completed > 0) {  // the oldest answer handed over (perhaps by this step's own scan)
      REQUIRE(s.completed == 1);
      REQUIRE_FALSE(rig.handed.empty());
      used.push_back(rig.client.pending_line(rig.handed.front()));
      rig.handed.pop_front();
    }
    // Every pending slot the hint names is one the step used.
    for (uint32_t k = 0; k < hint.step; ++k)
      if (in_table(hint.step_at(k))) {
        CHECK(std::find(used.begin(), used.end(), hint.step_at(k)) != used.end());
        if (hint.step_at(k) != hint.step_at(0)) ++answer_hinted;
      }
    if (!s.again) rig.meter.now += 100;  // idle until an answer comes: the next poll finds it
    rig.meter.charged = 0;
  }
  CHECK(rig.counters.completed.load() > 100);
  CHECK(issue_hinted > 100);
  CHECK(answer_hinted > 0);  // a later answer's slot was named, not only the next write's
}

// The hint list's two parts (core/cache_hint.hpp): the per-step entries reserved first
// (idle until written, from the list's end down), then the set-up's from its start; an
// address past the capacity is dropped, never written beyond the list; add_line_once
// skips an address in the line added last; every entry, in use or not, names live memory
// (prefetch() asks for all of them).
TEST_CASE("LineList: the per-step part is reserved first, the capacity is never exceeded", "[backends][client]") {
  alignas(64) static std::byte lines[64 * (LineList::kMax + 4)];
  auto line = [](uint32_t i) { return static_cast<const void*>(lines + 64 * i); };
  LineList l;
  for (const void* a : l.at) CHECK(a == LineList::idle());
  CHECK(l.reserve_step(2) == 2);
  l.add(line(0));
  l.add_line_once(line(1));
  l.add_line_once(static_cast<const std::byte*>(line(1)) + 8);  // the same line: skipped
  REQUIRE(l.stable == 2);
  CHECK(l.at[0] == line(0));
  CHECK(l.at[1] == line(1));
  CHECK(l.step_at(0) == LineList::idle());
  for (uint32_t i = 2; i < LineList::kMax + 4; ++i) l.add(line(i));
  CHECK(l.stable == LineList::kMax - 2);  // the last ones dropped
  CHECK(l.at[LineList::kMax - 3] == line(LineList::kMax - 3));
  l.set_step(0, line(LineList::kMax + 1));
  l.set_step(1, line(LineList::kMax + 2));
  CHECK(l.at[LineList::kMax - 1] == line(LineList::kMax + 1));
  CHECK(l.at[LineList::kMax - 2] == line(LineList::kMax + 2));
  CHECK(l.at[LineList::kMax - 3] == line(LineList::kMax - 3));  // the per-step writes leave the set-up's entries
  LineList big;
  CHECK(big.reserve_step(LineList::kMax + 5) == LineList::kMax);  // all per-step, nothing beyond
  big.add(line(0));
  CHECK(big.stable == 0);
  l.prefetch();
  big.prefetch();
}

// With several daemons per node (an ipc connection each), a client names more lines than
// the list holds: the per-step ones are reserved before the set-up's, so each ipc
// connection's next response is named (the list once filled up with the set-up's lines,
// two per connection, and dropped them), up to the list's capacity.
TEST_CASE("client loop: with several daemons, the next-step hint names every connection's next response",
          "[backends][client]") {
  for (const uint32_t daemons : {1u, 2u, 4u, 8u, 12u, 14u}) {
    INFO("daemons " << daemons);
    NodeConfig node = test::remote_only_node();
    node.daemons = daemons;
    node.queue_depth = 8;
    const shm::IpcConfig icfg{1, node.queue_depth};
    std::vector<shm::Segment> segs;
    std::vector<std::unique_ptr<IpcServerT>> servers;
    std::vector<std::unique_ptr<IpcClientT>> conns;
    std::vector<IpcClientT*> ipc;
    for (uint32_t d = 0; d < daemons; ++d) {
      segs.push_back(shm::Segment::create_process(shm::IpcLayout<Request, Response>::segment_size(icfg)));
      servers.push_back(std::make_unique<IpcServerT>(segs.back().bytes(), icfg));
      conns.push_back(std::make_unique<IpcClientT>(IpcClientT::connect(segs.back().bytes())));
      ipc.push_back(conns.back().get());
    }
    StepMeter meter;
    ClientCounters counters;
    std::deque<uint64_t> issued, handed;
    std::vector<uint64_t> calls;
    uint32_t polls = 0;
    Client<StepMeter, FifoPath> client{node, kv::Pattern(test::small_workload(), 0, 0), ipc,
                                       FifoPath{&issued, &handed, &calls, &polls}, meter, counters};
    client.set_timed_writes(true);
    LineList l;
    const uint32_t reserved = l.reserve_step(client.step_line_count());
    CHECK(reserved == std::min(3 + daemons, LineList::kMax));
    client.add_stable_step_lines(l);
    CHECK(l.stable + l.step <= LineList::kMax);
    for (int i = 0; i < 20; ++i) {
      (void)client.step();
      client.add_next_step_lines(l);
      const void* const* per_step = l.at + (LineList::kMax - l.step);
      const void* const* end = l.at + LineList::kMax;
      for (uint32_t d = 0; d < daemons && 3 + d < LineList::kMax; ++d)
        CHECK(std::find(per_step, end, ipc[d]->next_response_line()) != end);
      meter.now += 100;
      meter.charged = 0;
    }
    l.prefetch();
  }
}

// The stable part of a client's hint (Client::add_stable_step_lines), recorded once and
// kept: it names the client's counters, and a refill with the next step's lines keeps it.
TEST_CASE("client loop: the stable step lines name the counters and survive the next-step refill",
          "[backends][client]") {
  TimedFifoRig rig;
  LineList l;
  l.reserve_step(rig.client.step_line_count());
  rig.client.add_stable_step_lines(l);
  auto names_counters = [&] {
    return std::find(l.at, l.at + l.stable, static_cast<const void*>(&rig.counters)) != l.at + l.stable;
  };
  CHECK(names_counters());
  const uint32_t stable = l.stable;
  for (int i = 0; i < 20; ++i) {
    rig.client.add_next_step_lines(l);
    CHECK(l.stable == stable);
    CHECK(names_counters());
    (void)rig.client.step();
    rig.meter.now += 100;
    rig.meter.charged = 0;
  }
}

namespace {

// A client of rank 0 of two (about half its requests local, over ipc to the node's one
// daemon), with timed writes, its ipc server answering every request at once; with
// `flagged`, the server sets the client's ipc reply flag (Client::use_ipc_reply_flag,
// as the simulator's nodes do).
struct LocalRig {
  NodeConfig node = [] {
    NodeConfig n = test::remote_only_node();
    n.rank = 0;
    return n;
  }();
  shm::IpcConfig icfg{1, node.queue_depth};
  shm::Segment seg = shm::Segment::create_process(shm::IpcLayout<Request, Response>::segment_size(icfg));
  IpcServerT server{seg.bytes(), icfg};
  IpcClientT conn = IpcClientT::connect(seg.bytes(), 0);
  StepMeter meter;
  ClientCounters counters;
  std::deque<uint64_t> issued, handed;
  std::vector<uint64_t> calls;
  uint32_t polls = 0;
  Client<StepMeter, FifoPath> client{node, kv::Pattern(test::small_workload(), 0, 0), {&conn},
                                     FifoPath{&issued, &handed, &calls, &polls}, meter, counters};
  std::vector<uint8_t*> flags;
  uint64_t served = 0;
  explicit LocalRig(bool flagged) {
    client.set_timed_writes(true);
    if (flagged) {
      flags.push_back(client.use_ipc_reply_flag());
      server.use_reply_flags(flags);
    }
  }
  void serve() {
    server.poll();
    served += server.serve([](const Request&) { return kv::Response::put_ok(); }, [](uint32_t) {});
  }
};

}  // namespace

// The simulator's ipc reply flag: a client that reads its ipc ring only when the server
// has set its flag finds the same answers in the same steps as one that reads it at
// every scan, and its next-step hint names the ring's next response only when the flag
// is set.
TEST_CASE("client loop: with an ipc reply flag, the same answers in the same steps", "[backends][client]") {
  LocalRig plain(false), flagged(true);
  uint32_t flag_set = 0, flag_clear = 0;
  for (int i = 0; i < 400; ++i) {
    const ClientStepResult a = plain.client.step(), b = flagged.client.step();
    REQUIRE(a.completed == b.completed);
    REQUIRE(a.issued == b.issued);
    REQUIRE(a.again == b.again);
    REQUIRE(plain.client.in_flight() == flagged.client.in_flight());
    // Per-step entry 3 (after the write's pending slot and the next answer's two): the
    // ipc ring's next response, named only when the next step will read it.
    auto ipc_line = [&] {
      LineList l;
      REQUIRE(l.reserve_step(flagged.client.step_line_count()) == 4);
      flagged.client.add_next_step_lines(l);
      return l.step_at(3);
    };
    auto check_ipc_line = [&] {
      if (*flagged.flags[0] != 0) {
        ++flag_set;
        CHECK(ipc_line() == flagged.conn.next_response_line());
      } else {
        ++flag_clear;
        CHECK(ipc_line() == LineList::idle());
      }
    };
    check_ipc_line();  // a step's scan clears it, a step that scans not leaves it
    if (i % 3 != 2) {  // the daemon answers between most steps
      plain.serve();
      flagged.serve();
    }
    check_ipc_line();
    for (LocalRig* r : {&plain, &flagged}) {
      r->meter.now += 100;
      r->meter.charged = 0;
    }
  }
  CHECK(plain.calls == flagged.calls);
  CHECK(flag_set > 50);
  CHECK(flag_clear > 50);
  CHECK(flagged.served > 100);  // local answers, found only through the flag
  CHECK(flagged.counters.completed.load() == plain.counters.completed.load());
  CHECK(flagged.counters.completed.load() > 200);
}
