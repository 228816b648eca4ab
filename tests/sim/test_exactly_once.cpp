// The exactly-once oracle (core/kv/history_oracle.hpp): it passes on simulated runs of
// every KV backend, and it fails when the record of such a run is altered to hold a
// duplicated answer, a dropped answer or a stale get value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"
#include "core/kv/history_oracle.hpp"
#include "sim/model.hpp"
#include "tests/sim/sim_run.hpp"

using namespace bkv;
using Oracle = kv::HistoryOracle;
using VK = Oracle::ViolationKind;

namespace {

app::Options small_run(backend::BackendKind b) {
  app::Options o = test::sim_run(b, 2, 2, 2, 4, 0.001, 0.5, 0);
  o.key_range = 64;  // few keys: many gets read keys other clients overwrite meanwhile
  o.check_exactly_once = true;
  return o;
}

app::ExperimentResult run(const app::Options& o) { return app::run_experiment(o, sim::Model::defaults(), nullptr); }

}  // namespace

TEST_CASE("the oracle passes on simulated runs of meta, delegation and direct", "[oracle]") {
  for (auto b : {backend::BackendKind::kMeta, backend::BackendKind::kDelegation, backend::BackendKind::kDirect}) {
    INFO("backend " << static_cast<int>(b));
    const app::ExperimentResult r = run(small_run(b));
    REQUIRE(r.exactly_once.has_value());
    const Oracle::Verdict& v = *r.exactly_once;
    for (const auto& e : v.examples) INFO(e);
    CHECK(v.ok());
    CHECK(v.requests == r.total_issued);
    CHECK(v.answered == r.total_completed);
    CHECK(v.requests > 1000);
    CHECK(v.gets_checked > 400);
    CHECK(v.puts_applied > 400);
    CHECK(r.credit_checks > 0);
    CHECK(r.credit_violations == 0);
    REQUIRE(r.extra.contains("exactly_once"));
    CHECK(r.extra["exactly_once"]["requests"] == v.requests);
  }
}

TEST_CASE("without --check-exactly-once nothing is recorded and the summary has no oracle", "[oracle]") {
  app::Options o = small_run(backend::BackendKind::kDelegation);
  o.check_exactly_once = false;
  const app::ExperimentResult r = run(o);
  CHECK_FALSE(r.exactly_once.has_value());
  CHECK(r.oracle == nullptr);
  CHECK_FALSE(r.extra.contains("exactly_once"));
}

TEST_CASE("the oracle fails on a run's record altered to hold a violation", "[oracle]") {
  const app::ExperimentResult r = run(small_run(backend::BackendKind::kDelegation));
  REQUIRE(r.oracle != nullptr);
  const std::vector<Oracle::Event>& events = r.oracle->events();
  REQUIRE(Oracle::check(events).ok());

  // The last answer of the run (no later issue on its token).
  size_t last_answer = events.size();
  for (size_t i = events.size(); i-- > 0;)
    if (events[i].kind == Oracle::EventKind::kAnswer) {
      last_answer = i;
      break;
    }
  REQUIRE(last_answer < events.size());

  SECTION("a duplicated answer") {
    std::vector<Oracle::Event> bad = events;
    bad.push_back(events[last_answer]);
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kDuplicateAnswer) == 1);
    CHECK(v.violations() == 1);
  }
  SECTION("a duplicated answer in the middle of the run") {
    // An answer delivered twice at once: the token has no request pending the second time.
    size_t mid = 0;
    for (size_t i = events.size() / 2; i < events.size(); ++i)
      if (events[i].kind == Oracle::EventKind::kAnswer) {
        mid = i;
        break;
      }
    REQUIRE(mid > 0);
    std::vector<Oracle::Event> bad = events;
    bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(mid) + 1, events[mid]);
    CHECK(Oracle::check(bad).count(VK::kDuplicateAnswer) == 1);
  }
  SECTION("a dropped answer") {
    std::vector<Oracle::Event> bad = events;
    bad.erase(bad.begin() + static_cast<std::ptrdiff_t>(last_answer));
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kLostRequest) == 1);
    CHECK(v.violations() == 1);
  }
  SECTION("a stale get value") {
    // A get answered GetOk whose key was written twice before the get was issued: its
    // answer is replaced by the older of the two values, which the key no longer held.
    std::map<std::pair<uint32_t, uint64_t>, std::vector<uint64_t>> writes;  // values in apply order
    std::map<uint64_t, std::pair<size_t, Oracle::Event>> issue_of;          // slot -> (tick, issue)
    auto slot = [](const Oracle::Event& e) { return (uint64_t{e.rank} << 40) ^ (uint64_t{e.client} << 20) ^ e.token; };
    size_t victim = events.size();
    uint64_t stale = 0;
    for (size_t i = 0; i < events.size() && victim == events.size(); ++i) {
      const Oracle::Event& e = events[i];
      if (e.kind == Oracle::EventKind::kApply && e.req.is_put()) writes[{e.rank, e.req.key}].push_back(e.req.value);
      if (e.kind == Oracle::EventKind::kIssue) {
        const auto& w = writes[{e.req.rank, e.req.key}];
        issue_of[slot(e)] = {w.size(), e};
      }
      if (e.kind == Oracle::EventKind::kAnswer && e.resp.kind == kv::ResponseKind::kGetOk) {
        const auto& [writes_before, issue] = issue_of.at(slot(e));
        const auto& w = writes[{issue.req.rank, issue.req.key}];
        if (writes_before >= 2 && w[writes_before - 2] != e.resp.value &&
            std::count(w.begin(), w.end(), w[writes_before - 2]) == 1) {
          victim = i;
          stale = w[writes_before - 2];
        }
      }
    }
    REQUIRE(victim < events.size());
    std::vector<Oracle::Event> bad = events;
    bad[victim].resp = kv::Response::get_ok(stale);
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kStaleValue) == 1);
    CHECK(v.violations() == 1);
    REQUIRE_FALSE(v.examples.empty());
    CHECK(v.examples[0].find("stale_value") == 0);
  }
  SECTION("a get answered not found after its key was written") {
    size_t victim = events.size();
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> written;
    std::map<uint64_t, Oracle::Event> issue_of;
    auto slot = [](const Oracle::Event& e) { return (uint64_t{e.rank} << 40) ^ (uint64_t{e.client} << 20) ^ e.token; };
    std::map<uint64_t, bool> written_at_issue;
    for (size_t i = 0; i < events.size() && victim == events.size(); ++i) {
      const Oracle::Event& e = events[i];
      if (e.kind == Oracle::EventKind::kApply && e.req.is_put()) ++written[{e.rank, e.req.key}];
      if (e.kind == Oracle::EventKind::kIssue) written_at_issue[slot(e)] = written[{e.req.rank, e.req.key}] > 0;
      if (e.kind == Oracle::EventKind::kAnswer && e.resp.kind == kv::ResponseKind::kGetOk && written_at_issue[slot(e)])
        victim = i;
    }
    REQUIRE(victim < events.size());
    std::vector<Oracle::Event> bad = events;
    bad[victim].resp = kv::Response::get_not_found();
    CHECK(Oracle::check(bad).count(VK::kStaleValue) == 1);
  }
  // The four kinds of bug the oracle once let through, planted in the record of a real
  // run: the verdict must name them.
  auto index_of = [&](auto pred, size_t from = 0) {
    for (size_t i = from; i < events.size(); ++i)
      if (pred(events[i])) return i;
    return events.size();
  };
  auto put_apply = [](const Oracle::Event& e) {
    return e.kind == Oracle::EventKind::kApply && e.req.is_put() && e.resp.kind == kv::ResponseKind::kPutOk;
  };
  SECTION("a store that drops acknowledged writes silently") {
    std::vector<Oracle::Event> bad;
    uint64_t dropped = 0;
    for (const Oracle::Event& e : events) {
      if (put_apply(e) && e.req.key % 2 == 0) {
        ++dropped;
        continue;
      }
      bad.push_back(e);
    }
    REQUIRE(dropped > 100);
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kLostWrite) > dropped * 9 / 10);  // the ones answered PutOk before the end
    CHECK(v.count(VK::kLostWrite) <= dropped);
  }
  SECTION("a put applied again later in the run") {
    const size_t first = index_of(put_apply);
    REQUIRE(first < events.size());
    std::vector<Oracle::Event> bad = events;
    bad.insert(bad.begin() + static_cast<std::ptrdiff_t>(events.size() / 2), events[first]);
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kDuplicateApply) == 1);
    CHECK(v.count(VK::kUnknownWrite) == 0);
  }
  SECTION("a value applied that no client sent") {
    const size_t victim = index_of(put_apply, events.size() / 2);
    REQUIRE(victim < events.size());
    std::vector<Oracle::Event> bad = events;
    bad[victim].req.value ^= 1;  // a bit flipped on the way
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kUnknownWrite) == 1);
    CHECK(v.count(VK::kLostWrite) <= 1);  // the request's own put, if acknowledged
  }
  SECTION("requests reported failed in a run without a broken connection") {
    std::vector<Oracle::Event> bad = events;
    uint64_t failed = 0;
    for (Oracle::Event& e : bad)
      if (e.kind == Oracle::EventKind::kAnswer && e.resp.kind == kv::ResponseKind::kGetNotFound) {
        e.resp = kv::Response::failure(kv::ErrorCode::kEndpointStopped);
        ++failed;
      }
    REQUIRE(failed > 0);
    const Oracle::Verdict v = Oracle::check(bad);
    CHECK(v.count(VK::kUnexplainedFailure) == failed);
    CHECK(v.violations() == failed);
  }
  SECTION("a put answered as a get") {
    size_t victim = events.size();
    std::map<uint64_t, bool> put_pending;
    auto slot = [](const Oracle::Event& e) { return (uint64_t{e.rank} << 40) ^ (uint64_t{e.client} << 20) ^ e.token; };
    for (size_t i = 0; i < events.size() && victim == events.size(); ++i) {
      const Oracle::Event& e = events[i];
      if (e.kind == Oracle::EventKind::kIssue) put_pending[slot(e)] = e.req.is_put();
      if (e.kind == Oracle::EventKind::kAnswer && put_pending[slot(e)]) victim = i;
    }
    REQUIRE(victim < events.size());
    std::vector<Oracle::Event> bad = events;
    bad[victim].resp = kv::Response::get_not_found();
    CHECK(Oracle::check(bad).count(VK::kAnswerMismatch) == 1);
  }
}
