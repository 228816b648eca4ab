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

TEST_CASE("the oracle's per-key history on hand-made records", "[oracle]") {
  Oracle o;
  const kv::Request put1 = kv::Request::meta_put(0, 5, 111), put2 = kv::Request::meta_put(0, 5, 222);
  const kv::Request get = kv::Request::meta_get(0, 5);
  o.issued(0, 0, 0, get);                            // tick 0
  o.applied(0, put1, kv::Response::put_ok());        // tick 1: the key holds 111
  o.applied(0, get, kv::Response::get_ok(111));      // tick 2
  o.applied(0, put2, kv::Response::put_ok());        // tick 3: the key holds 222
  o.answered(0, 0, 0, kv::Response::get_ok(111));   // tick 4: 111 was held in [0, 4]
  o.issued(0, 0, 0, get);                            // tick 5: 222 held since tick 3
  std::vector<Oracle::Event> ok_absent = o.events();
  o.answered(0, 0, 0, kv::Response::get_ok(222));   // tick 6
  CHECK(o.check().ok());
  o.events().back().resp = kv::Response::get_ok(111);  // overwritten at tick 3, before the issue
  CHECK(o.check().count(VK::kStaleValue) == 1);
  // Not found: only before the first put.
  ok_absent.push_back(Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 0, {}, kv::Response::get_not_found()});
  CHECK(Oracle::check(ok_absent).count(VK::kStaleValue) == 1);
  ok_absent[4].resp = kv::Response::get_not_found();  // the first get spans tick 0, before any put
  ok_absent.pop_back();
  ok_absent.push_back(Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 0, {}, kv::Response::get_ok(222)});
  CHECK(Oracle::check(ok_absent).ok());
  // An error answer is a reported failure, not a violation.
  Oracle f;
  f.issued(1, 0, 3, put1);
  f.answered(1, 0, 3, kv::Response::failure(kv::ErrorCode::kWrongRank, 5));
  CHECK(f.check().ok());
  CHECK(f.check().failed == 1);
  // Reported failed ends the request: exactly once, never failed and completed, never
  // failed twice. A failed put may still have been applied (the store saw it before the
  // endpoint stopped): a later get may return its value.
  Oracle g;
  g.issued(0, 0, 1, put1);
  g.applied(0, put1, kv::Response::put_ok());
  g.answered(0, 0, 1, kv::Response::failure(kv::ErrorCode::kEndpointStopped));
  g.issued(0, 0, 1, get);
  g.answered(0, 0, 1, kv::Response::get_ok(111));
  CHECK(g.check().ok());
  CHECK(g.check().failed == 1);
  std::vector<Oracle::Event> failed_then_answered = g.events();
  failed_then_answered.insert(failed_then_answered.begin() + 3,
                              Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 1, {}, kv::Response::put_ok()});
  CHECK(Oracle::check(failed_then_answered).count(VK::kDuplicateAnswer) == 1);
  std::vector<Oracle::Event> failed_twice = g.events();
  failed_twice.insert(failed_twice.begin() + 3, failed_twice[2]);
  CHECK(Oracle::check(failed_twice).count(VK::kDuplicateAnswer) == 1);
  // A token issued again while pending.
  Oracle t;
  t.issued(0, 1, 2, get);
  t.issued(0, 1, 2, get);
  const Oracle::Verdict tv = t.check();
  CHECK(tv.count(VK::kTokenReused) == 1);
  CHECK(tv.count(VK::kLostRequest) == 1);
  // A withdrawn request (its post refused) never left: not counted, not lost, and an
  // answer for it is a duplicate; withdrawing a token with nothing pending is one too.
  Oracle w;
  w.issued(0, 0, 4, get);
  w.withdrawn(0, 0, 4);
  w.issued(0, 0, 4, put1);
  w.applied(0, put1, kv::Response::put_ok());
  w.answered(0, 0, 4, kv::Response::put_ok());
  const Oracle::Verdict wv = w.check();
  CHECK(wv.ok());
  CHECK(wv.requests == 1);
  CHECK(wv.answered == 1);
  std::vector<Oracle::Event> answered_withdrawn = w.events();
  answered_withdrawn.insert(answered_withdrawn.begin() + 2,
                            Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 4, {}, kv::Response::get_not_found()});
  CHECK(Oracle::check(answered_withdrawn).count(VK::kDuplicateAnswer) == 1);
  w.withdrawn(0, 0, 4);
  CHECK(w.check().count(VK::kDuplicateAnswer) == 1);
}
