// backends/client.hpp: each request's issue-to-answer time lands in the histogram of its
// class, answers in any order; a token the client did not give out, or an answer with
// no request pending, is an error and completes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/client.hpp"
#include "tests/backends/client_rig.hpp"

using namespace bkv;
using namespace bkv::backend;

namespace {

// A clock the test sets.
using SetClockMeter = test::TestClockMeter<false>;

// Keeps the tokens of the calls; answers, at the next poll, the tokens the test lists.
struct ScriptedRemotePath {
  static constexpr bool kSharedHead = false;
  static constexpr bool kDaemonAnswers = false;
  std::vector<uint64_t>* called;
  std::vector<uint64_t>* to_answer;
  bool try_call(const kv::Request&, uint64_t token) {
    called->push_back(token);
    return true;
  }
  template <class F>
  uint32_t poll(F&& f) {
    for (uint64_t t : *to_answer) f(t, kv::Response::put_ok());
    const auto n = static_cast<uint32_t>(to_answer->size());
    to_answer->clear();
    return n;
  }
  void after_issue() noexcept {}
};

struct Rig {
  NodeConfig node;
  SetClockMeter meter;
  ClientCounters counters;
  std::vector<uint64_t> called, to_answer;
  Client<SetClockMeter, ScriptedRemotePath> client;
  explicit Rig(metrics::RequestLatency* shared = nullptr)
      : node(test::remote_only_node()),
        client(node, kv::Pattern(test::small_workload(), 0, 0), {}, ScriptedRemotePath{&called, &to_answer}, meter,
               counters, shared) {}
  metrics::LatencyHistogram remote() const {
    metrics::LatencyHistogram h = client.latency()[metrics::LatencyClass::kGetRemote];
    h.merge(client.latency()[metrics::LatencyClass::kPutRemote]);
    return h;
  }
};

}  // namespace

TEST_CASE("client latency: each answer records its own issue time, answers out of order", "[backends][latency]") {
  Rig rig;
  rig.meter.now = 100;
  CHECK(rig.client.step().issued == 4);
  REQUIRE(rig.called.size() == 4);
  const std::vector<uint64_t> first = rig.called;
  rig.called.clear();

  rig.meter.now = 150;  // two answers, the later-issued first
  rig.to_answer = {first[2], first[0]};
  const ClientStepResult s2 = rig.client.step();
  CHECK(s2.completed == 2);
  CHECK(s2.issued == 2);
  REQUIRE(rig.called.size() == 2);
  // The freed slots are reused, each by one new request (a token's slot: its low 17 bits).
  std::vector<uint64_t> reused = {rig.called[0] & 0x1FFFF, rig.called[1] & 0x1FFFF}, freed = {first[2], first[0]};
  std::sort(reused.begin(), reused.end());
  std::sort(freed.begin(), freed.end());
  CHECK(reused == freed);

  rig.meter.now = 400;  // the rest: two issued at 100, two at 150
  rig.to_answer = {rig.called[1], first[3], rig.called[0], first[1]};
  CHECK(rig.client.step().completed == 4);

  const metrics::LatencyHistogram h = rig.remote();
  CHECK(h.count() == 6);
  CHECK(h.sum_ns() == 50 + 50 + 250 + 250 + 300 + 300);
  CHECK(h.max_ns() == 300);
  CHECK(rig.client.latency().all().count() == 6);  // no local class got any
  CHECK(rig.counters.completed.load() == 6);
  CHECK(rig.counters.errors.load() == 0);
  // Gets and puts are told apart: the first 6 requests of the same pattern.
  kv::Pattern same(test::small_workload(), 0, 0);
  uint64_t gets = 0;
  for (int i = 0; i < 6; ++i, same.advance()) gets += same.peek().is_get() ? 1 : 0;
  INFO(gets << " gets among the first 6 requests");
  CHECK(gets > 0);
  CHECK(gets < 6);
  CHECK(rig.client.latency()[metrics::LatencyClass::kGetRemote].count() == gets);
  CHECK(rig.client.latency()[metrics::LatencyClass::kPutRemote].count() == 6 - gets);
}

TEST_CASE("client latency: an unknown token or an answer with nothing pending is an error", "[backends][latency]") {
  Rig rig;
  rig.meter.now = 10;
  rig.client.stop_issuing();  // nothing issued: every token is free
  rig.to_answer = {0};
  const ClientStepResult s = rig.client.step();
  CHECK(s.completed == 0);
  CHECK(rig.counters.errors.load() == 1);
  CHECK(rig.client.in_flight() == 0);

  Rig rig2;
  rig2.meter.now = 10;
  CHECK(rig2.client.step().issued == 4);
  rig2.meter.now = 30;
  rig2.to_answer = {4, 1u << 20};  // out of range (queue depth 4)
  CHECK(rig2.client.step().completed == 0);
  CHECK(rig2.counters.errors.load() == 2);
  CHECK(rig2.client.in_flight() == 4);
  CHECK(rig2.client.latency().all().count() == 0);
}

TEST_CASE("client latency: a duplicate answer while other requests are pending completes nothing", "[backends][latency]") {
  Rig rig;
  rig.meter.now = 10;
  REQUIRE(rig.client.step().issued == 4);
  const uint64_t t = rig.called[0];
  rig.to_answer = {t, t};  // the second is a duplicate: three requests are still pending
  rig.meter.now = 20;
  const ClientStepResult s = rig.client.step();
  CHECK(s.completed == 1);
  CHECK(rig.counters.errors.load() == 1);
  CHECK(s.issued == 1);  // refilled once: the duplicate freed no second token
  CHECK(rig.client.in_flight() == 4);
  // The four requests in flight hold four different tokens.
  std::vector<uint64_t> live(rig.called.end() - 4, rig.called.end());
  std::sort(live.begin(), live.end());
  CHECK(std::adjacent_find(live.begin(), live.end()) == live.end());
  CHECK(rig.remote().count() == 1);
}

TEST_CASE("client latency: clients that share histograms record into them, and the sum is what their own would give",
          "[backends][latency]") {
  // Two clients on their own histograms, then the same two on one shared set: the same
  // requests and answers at the same times.
  auto run = [](Rig& a, Rig& b) {
    a.meter.now = b.meter.now = 100;
    CHECK(a.client.step().issued == 4);
    b.meter.now = 130;
    CHECK(b.client.step().issued == 4);
    a.meter.now = 260;
    a.to_answer = {a.called[1], a.called[3]};
    CHECK(a.client.step().completed == 2);
    b.meter.now = 1000;
    b.to_answer = {b.called[0]};
    CHECK(b.client.step().completed == 1);
  };
  Rig own_a, own_b;
  run(own_a, own_b);
  metrics::MergedRequestLatency expected;  // (a client's recorder only records; merging needs 64-bit counts)
  expected.merge(own_a.client.latency());
  expected.merge(own_b.client.latency());

  Rig a, b;
  metrics::RequestLatency shared;
  a.client.share_latency(&shared);
  b.client.share_latency(&shared);
  run(a, b);
  CHECK(&a.client.latency() == &shared);
  CHECK(&b.client.latency() == &shared);
  const metrics::LatencyHistogram got = shared.all(), want = expected.all();
  CHECK(got.count() == 3);
  CHECK(got.count() == want.count());
  CHECK(got.sum_ns() == want.sum_ns());
  CHECK(got.max_ns() == want.max_ns());
  CHECK(got.max_ns() == 870);
  bool same_buckets = true;
  for (uint32_t c = 0; c < metrics::kLatencyClasses; ++c)
    for (uint32_t k = 0; k < metrics::LatencyHistogram::kBuckets; ++k)
      same_buckets = same_buckets && shared.by_class[c].bucket_count(k) == expected.by_class[c].bucket_count(k);
  CHECK(same_buckets);
  // The maximum restarts once for every client sharing it.
  b.client.restart_latency_max();
  CHECK(a.client.latency().all().max_ns() == 0);
  // Back on its own histograms: empty, and the shared set no longer moves.
  a.client.share_latency(nullptr);
  CHECK(&a.client.latency() != &shared);
  CHECK(a.client.latency().all().count() == 0);

  // Clients built on the shared set (no histograms of their own first) record the same.
  metrics::RequestLatency built_shared;
  Rig c(&built_shared), d(&built_shared);
  CHECK(&c.client.latency() == &built_shared);
  run(c, d);
  CHECK(built_shared.all().count() == 3);
  CHECK(built_shared.all().sum_ns() == want.sum_ns());
  CHECK(built_shared.all().max_ns() == want.max_ns());
}

TEST_CASE("every answer reaches the oracle including the ones the client drops", "[backends][oracle]") {
  // The client drops an answer it cannot use (a duplicate, a token it never gave out),
  // counting an error; the oracle must see it too, as a duplicate answer.
  Rig rig;
  kv::HistoryOracle oracle;
  rig.client.set_oracle(&oracle, 3);
  rig.meter.now = 10;
  REQUIRE(rig.client.step().issued == 4);
  const uint64_t t = rig.called[0];
  rig.client.stop_issuing();
  rig.to_answer = {t, t, 4, uint64_t{1} << 40};
  rig.client.step();
  CHECK(rig.counters.errors.load() == 3);
  std::vector<kv::HistoryOracle::Event> answers;
  for (const auto& e : oracle.events())
    if (e.kind == kv::HistoryOracle::EventKind::kAnswer) answers.push_back(e);
  REQUIRE(answers.size() == 4);
  CHECK(answers[0].token == t);
  CHECK(answers[1].token == t);
  CHECK(answers[2].token == 4);
  CHECK(answers[3].token == UINT32_MAX);  // beyond 32 bits: recorded as the largest token
  CHECK(answers[0].client == 3);
  CHECK(answers[0].rank == 2);
  CHECK(oracle.check().count(kv::HistoryOracle::ViolationKind::kDuplicateAnswer) == 3);
}

TEST_CASE("client tokens: a slot's generation wraps at its 15 bits, and the answers after the wrap still complete",
          "[backends][latency]") {
  // Token = slot | generation << 17 in 32 bits: the generation has 15 bits, so after
  // 32768 answers a slot's generation must wrap to 0, not carry into bit 32 (a token
  // that kept only its low 32 bits would no longer name its request's generation).
  Rig rig;
  rig.meter.now = 10;
  REQUIRE(rig.client.step().issued == 4);
  constexpr uint32_t kRounds = (1u << 15) + 2;  // every slot's generation passes 32767
  size_t answered_from = 0;
  for (uint32_t i = 0; i < kRounds; ++i) {
    rig.to_answer.assign(rig.called.begin() + static_cast<std::ptrdiff_t>(answered_from), rig.called.end());
    answered_from = rig.called.size();
    const ClientStepResult s = rig.client.step();
    if (s.completed != 4 || s.issued != 4) {
      INFO("round " << i);
      REQUIRE(s.completed == 4);
      REQUIRE(s.issued == 4);
    }
  }
  CHECK(rig.counters.errors.load() == 0);
  CHECK(rig.counters.completed.load() == uint64_t{4} * kRounds);
  CHECK(rig.client.in_flight() == 4);
  // Round i issues generation i + 1: the last, 32770, wrapped to 2.
  std::vector<uint64_t> last(rig.called.end() - 4, rig.called.end());
  for (const uint64_t t : last) CHECK(t >> 17 == 2);
}
