// The exactly-once oracle (core/kv/history_oracle.hpp) on hand-made records: each rule
// at its boundary, and the buggy histories it must refuse (a put acknowledged and never
// applied, a put applied twice, a value nobody sent, failures no fault explains). The
// oracle on whole simulated runs: tests/sim/test_exactly_once.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/kv/history_oracle.hpp"

using namespace bkv;
using Oracle = kv::HistoryOracle;
using VK = Oracle::ViolationKind;
using kv::Request;
using kv::Response;

namespace {

const Response kStopped = Response::failure(kv::ErrorCode::kEndpointStopped);

// The one violation kind a verdict holds (and that it holds exactly `n` of it).
bool only(const Oracle::Verdict& v, VK k, uint64_t n = 1) { return v.count(k) == n && v.violations() == n; }

std::string first_example(const Oracle::Verdict& v) { return v.examples.empty() ? std::string() : v.examples[0]; }

// The verdict holds exactly one violation, of kind `k`, and its first example begins
// with `text`.
void check_only(const Oracle::Verdict& v, VK k, const std::string& text) {
  INFO(first_example(v));
  CHECK(only(v, k));
  CHECK(first_example(v).starts_with(text));
}

// Client 0 of rank 0 issues `first` with token `token`, withdraws it (its post refused),
// then issues the put `then` with the same token, which rank 1's store applies and the
// client sees acknowledged.
void withdraw_then_put(Oracle& o, uint32_t token, const Request& first, const Request& then) {
  o.issued(0, 0, token, first);
  o.withdrawn(0, 0, token);
  o.issued(0, 0, token, then);
  o.applied(1, then, Response::put_ok());
  o.answered(0, 0, token, Response::put_ok());
}

}  // namespace

TEST_CASE("the oracle refuses a put acknowledged but never applied and read back as not found", "[oracle]") {
  Oracle o;
  const Request put = Request::meta_put(1, 5, 111), get = Request::meta_get(1, 5);
  o.issued(0, 0, 0, put);
  o.answered(0, 0, 0, Response::put_ok());  // acknowledged; no store applied it
  o.issued(0, 0, 1, get);
  o.applied(1, get, Response::get_not_found());
  o.answered(0, 0, 1, Response::get_not_found());  // consistent with what the store did
  const Oracle::Verdict v = o.check();
  check_only(v, VK::kLostWrite, "lost_write: rank 0 client 0 token 0: put 111 of rank 1 key 5 answered PutOk");
  CHECK(v.puts_matched == 0);
  // The same with the apply: nothing wrong, and the get must see the value.
  Oracle ok;
  ok.issued(0, 0, 0, put);
  ok.applied(1, put, Response::put_ok());
  ok.answered(0, 0, 0, Response::put_ok());
  ok.issued(0, 0, 1, get);
  ok.answered(0, 0, 1, Response::get_ok(111));
  CHECK(ok.check().ok());
  CHECK(ok.check().puts_matched == 1);
  CHECK(ok.check().puts_applied == 1);
}

TEST_CASE("the oracle refuses a put applied twice as after a retransmission that undoes a later put", "[oracle]") {
  Oracle o;
  const Request a = Request::meta_put(1, 5, 111), b = Request::meta_put(1, 5, 222), get = Request::meta_get(1, 5);
  o.issued(0, 0, 0, a);
  o.applied(1, a, Response::put_ok());
  o.answered(0, 0, 0, Response::put_ok());
  o.issued(0, 1, 0, b);
  o.applied(1, b, Response::put_ok());
  o.answered(0, 1, 0, Response::put_ok());
  o.applied(1, a, Response::put_ok());  // the retransmitted request executed again
  o.issued(0, 0, 0, get);
  o.applied(1, get, Response::get_ok(111));
  o.answered(0, 0, 0, Response::get_ok(111));  // the key really holds 111 again
  const Oracle::Verdict v = o.check();
  check_only(v, VK::kDuplicateApply,
             "duplicate_apply: put 111 of rank 1 key 5 (rank 0 client 0) applied again at tick 6");
  CHECK(v.puts_applied == 3);
  // Also when its request had been reported failed (it may be applied once, not twice).
  Oracle f;
  f.connection_broken(0, 1);
  f.issued(0, 0, 0, a);
  f.applied(1, a, Response::put_ok());
  f.answered(0, 0, 0, kStopped);
  f.applied(1, a, Response::put_ok());
  CHECK(only(f.check(), VK::kDuplicateApply));
}

TEST_CASE("the oracle refuses a value applied that no client sent", "[oracle]") {
  const Request put = Request::meta_put(1, 5, 111);
  SECTION("a stray value") {
    Oracle o;
    o.applied(1, Request::meta_put(1, 5, 999), Response::put_ok());
    const Oracle::Verdict v = o.check();
    CHECK(only(v, VK::kUnknownWrite));
    CHECK(first_example(v) == "unknown_write: put 999 of rank 1 key 5 applied at tick 0: no request sent this value");
  }
  SECTION("a request's value corrupted on the way: unknown, and the acknowledged put lost") {
    Oracle o;
    o.issued(0, 0, 0, put);
    o.applied(1, Request::meta_put(1, 5, 112), Response::put_ok());
    o.answered(0, 0, 0, Response::put_ok());
    const Oracle::Verdict v = o.check();
    CHECK(v.count(VK::kUnknownWrite) == 1);
    CHECK(v.count(VK::kLostWrite) == 1);
    CHECK(v.violations() == 2);
  }
  SECTION("the value sent, for another key") {
    Oracle o;
    o.issued(0, 0, 0, put);
    o.applied(1, Request::meta_put(1, 6, 111), Response::put_ok());
    const Oracle::Verdict v = o.check();
    CHECK(v.count(VK::kUnknownWrite) == 1);
    CHECK(first_example(v).find("its request was a put 111 of rank 1 key 5") != std::string::npos);
  }
  SECTION("the value sent, applied by another rank's store") {
    Oracle o;
    o.issued(0, 0, 0, put);
    o.applied(0, put, Response::put_ok());
    CHECK(o.check().count(VK::kUnknownWrite) == 1);
  }
  SECTION("a request withdrawn (its post refused) never left: an apply of it is unknown") {
    Oracle o;
    o.issued(0, 0, 0, put);
    o.withdrawn(0, 0, 0);
    o.applied(1, put, Response::put_ok());
    CHECK(only(o.check(), VK::kUnknownWrite));
    // Issued again (the same request, the client retries it): from then on it is known.
    Oracle r;
    withdraw_then_put(r, 0, put, put);
    CHECK(r.check().ok());
    CHECK(r.check().requests == 1);
  }
}

TEST_CASE("the oracle refuses failures that no broken connection explains", "[oracle]") {
  // A run whose only fault was a slow node: no connection broke, so no request may be
  // reported failed.
  const Request remote = Request::meta_put(1, 5, 111), other = Request::meta_get(1, 6);
  Oracle o;
  o.issued(0, 0, 0, remote);
  o.issued(0, 0, 1, other);
  o.answered(0, 0, 0, kStopped);
  o.answered(0, 0, 1, kStopped);
  const Oracle::Verdict v = o.check();
  CHECK(only(v, VK::kUnexplainedFailure, 2));
  CHECK(v.failed == 2);
  CHECK(first_example(v).find("no fault broke a connection between rank 0 and rank 1") != std::string::npos);
  // A connection between the two nodes broken before the answer explains it, in either
  // direction of the record.
  for (const auto& [a, b] : {std::pair<uint32_t, uint32_t>{0, 1}, {1, 0}}) {
    Oracle e;
    e.issued(0, 0, 0, remote);
    e.connection_broken(a, b);
    e.answered(0, 0, 0, kStopped);
    CHECK(e.check().ok());
    CHECK(e.check().failed == 1);
    CHECK(e.check().broken_connections == 1);
  }
  // Broken after the answer, or between other nodes: not an explanation.
  Oracle late;
  late.issued(0, 0, 0, remote);
  late.answered(0, 0, 0, kStopped);
  late.connection_broken(0, 1);
  CHECK(only(late.check(), VK::kUnexplainedFailure));
  Oracle elsewhere;
  elsewhere.issued(0, 0, 0, remote);
  elsewhere.connection_broken(0, 2);
  elsewhere.answered(0, 0, 0, kStopped);
  CHECK(only(elsewhere.check(), VK::kUnexplainedFailure));
  // A local request (over ipc, no connection) is never explained.
  Oracle local;
  local.connection_broken(0, 1);
  local.issued(0, 0, 0, Request::meta_get(0, 5));
  local.answered(0, 0, 0, kStopped);
  CHECK(only(local.check(), VK::kUnexplainedFailure));
  // Only kEndpointStopped may end a valid request; any other error is a wrong answer.
  Oracle wrong;
  wrong.connection_broken(0, 1);
  wrong.issued(0, 0, 0, remote);
  wrong.answered(0, 0, 0, Response::failure(kv::ErrorCode::kWrongRank, 5));
  CHECK(only(wrong.check(), VK::kAnswerMismatch));
  // An invalid response (a call failed on a mismatched tag is answered Response{}).
  Oracle invalid;
  invalid.issued(0, 0, 0, remote);
  invalid.answered(0, 0, 0, Response{});
  CHECK(only(invalid.check(), VK::kAnswerMismatch));
}

TEST_CASE("the oracle's per-key history: each value is held from its apply to the next apply", "[oracle]") {
  const Request put1 = Request::meta_put(0, 5, 111), put2 = Request::meta_put(0, 5, 222);
  const Request get = Request::meta_get(0, 5);
  Oracle o;
  o.issued(0, 1, 0, put1);                        // tick 0 (client 1 writes)
  o.issued(0, 1, 1, put2);                        // tick 1
  o.issued(0, 0, 0, get);                         // tick 2: the get spans [2, 6]
  o.applied(0, put1, Response::put_ok());         // tick 3: the key holds 111
  o.applied(0, get, Response::get_ok(111));       // tick 4
  o.applied(0, put2, Response::put_ok());         // tick 5: the key holds 222
  o.answered(0, 0, 0, Response::get_ok(111));     // tick 6: 111 was held in [3, 5)
  o.answered(0, 1, 0, Response::put_ok());        // tick 7
  o.answered(0, 1, 1, Response::put_ok());        // tick 8
  CHECK(o.check().ok());
  CHECK(o.check().gets_checked == 1);
  // The get spans the first write: "not found" (held before it) and 222 (written in the
  // span) are both possible answers; a value never written is not.
  o.events()[6].resp = Response::get_not_found();
  CHECK(o.check().ok());
  o.events()[6].resp = Response::get_ok(222);
  CHECK(o.check().ok());
  o.events()[6].resp = Response::get_ok(333);
  CHECK(only(o.check(), VK::kStaleValue));
  // A get issued after the second write: only 222.
  Oracle later;
  later.issued(0, 1, 0, put1);
  later.applied(0, put1, Response::put_ok());
  later.applied(0, put2, Response::put_ok());  // (unknown: sent by nobody here)
  later.issued(0, 0, 0, get);
  later.answered(0, 0, 0, Response::get_ok(111));  // overwritten one tick before the issue
  const Oracle::Verdict lv = later.check();
  CHECK(lv.count(VK::kStaleValue) == 1);
  CHECK(lv.count(VK::kUnknownWrite) == 1);
  later.events().back().resp = Response::get_ok(222);
  CHECK(later.check().count(VK::kStaleValue) == 0);
  // A write right after the answer is outside the span.
  Oracle after;
  after.issued(0, 1, 0, put1);
  after.issued(0, 0, 0, get);
  after.answered(0, 0, 0, Response::get_ok(111));
  after.applied(0, put1, Response::put_ok());
  CHECK(after.check().count(VK::kStaleValue) == 1);
  // The write exactly at the answer's previous tick is inside it.
  Oracle just;
  just.issued(0, 1, 0, put1);
  just.issued(0, 0, 0, get);
  just.applied(0, put1, Response::put_ok());
  just.answered(0, 0, 0, Response::get_ok(111));
  CHECK(just.check().count(VK::kStaleValue) == 0);
}

TEST_CASE("an apply record the store answered with an error changed nothing", "[oracle]") {
  // A put the store refused (its response an error) neither enters the key's history nor
  // counts as the put's apply.
  const Request put = Request::meta_put(0, 5, 111), get = Request::meta_get(0, 5);
  Oracle o;
  o.issued(0, 1, 0, put);
  o.applied(0, put, Response::failure(kv::ErrorCode::kKeyOutOfRange, 5));
  o.issued(0, 0, 0, get);
  o.answered(0, 0, 0, Response::get_ok(111));  // the key never held 111
  const Oracle::Verdict v = o.check();
  CHECK(v.count(VK::kStaleValue) == 1);
  CHECK(v.count(VK::kLostRequest) == 1);  // the put, not answered yet
  CHECK(v.violations() == 2);
  CHECK(v.puts_applied == 0);
  o.answered(0, 1, 0, Response::put_ok());  // acknowledged, but never applied
  CHECK(o.check().count(VK::kLostWrite) == 1);
  CHECK(o.check().count(VK::kStaleValue) == 1);
}

TEST_CASE("the oracle counts one answer per request and tells tokens and withdrawals and values apart", "[oracle]") {
  const Request put1 = Request::meta_put(1, 5, 111), get = Request::meta_get(1, 5);
  // Reported failed ends the request: never failed and completed, never failed twice. A
  // failed put may have been applied (before or after its failure answer).
  Oracle g;
  g.connection_broken(0, 1);
  g.issued(0, 0, 1, put1);
  g.answered(0, 0, 1, kStopped);
  g.applied(1, put1, Response::put_ok());
  g.issued(0, 0, 1, get);
  g.answered(0, 0, 1, Response::get_ok(111));
  CHECK(g.check().ok());
  CHECK(g.check().failed == 1);
  std::vector<Oracle::Event> failed_then_answered = g.events();
  failed_then_answered.insert(failed_then_answered.begin() + 3,
                              Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 1, {}, Response::put_ok()});
  CHECK(only(Oracle::check(failed_then_answered), VK::kDuplicateAnswer));
  std::vector<Oracle::Event> failed_twice = g.events();
  failed_twice.insert(failed_twice.begin() + 3, failed_twice[2]);
  CHECK(only(Oracle::check(failed_twice), VK::kDuplicateAnswer));
  // A put answered PutOk before its apply: the answer claimed what had not happened.
  Oracle early;
  early.issued(0, 0, 0, put1);
  early.answered(0, 0, 0, Response::put_ok());
  early.applied(1, put1, Response::put_ok());
  CHECK(only(early.check(), VK::kLostWrite));
  // A token issued again while pending.
  Oracle t;
  t.issued(0, 1, 2, get);
  t.issued(0, 1, 2, get);
  const Oracle::Verdict tv = t.check();
  CHECK(tv.count(VK::kTokenReused) == 1);
  CHECK(tv.count(VK::kLostRequest) == 1);
  // Tokens of different clients and ranks are different requests.
  Oracle three;
  three.issued(0, 0, 0, get);
  three.issued(0, 1, 0, get);
  three.issued(1, 0, 0, get);
  three.answered(0, 0, 0, Response::get_not_found());
  three.answered(0, 1, 0, Response::get_not_found());
  three.answered(1, 0, 0, Response::get_not_found());
  CHECK(three.check().ok());
  CHECK(three.check().answered == 3);
  // A withdrawn request never left: not counted, not lost, and an answer for it is a
  // duplicate; withdrawing a token with nothing pending is one too.
  Oracle w;
  withdraw_then_put(w, 4, get, put1);
  const Oracle::Verdict wv = w.check();
  CHECK(wv.ok());
  CHECK(wv.requests == 1);
  CHECK(wv.answered == 1);
  std::vector<Oracle::Event> answered_withdrawn = w.events();
  answered_withdrawn.insert(answered_withdrawn.begin() + 2,
                            Oracle::Event{Oracle::EventKind::kAnswer, 0, 0, 4, {}, Response::get_not_found()});
  CHECK(only(Oracle::check(answered_withdrawn), VK::kDuplicateAnswer));
  w.withdrawn(0, 0, 4);
  CHECK(w.check().count(VK::kDuplicateAnswer) == 1);
  // Two requests with one put value cannot be told apart: refused. The same request
  // issued again after a withdrawal is one request.
  Oracle twice;
  twice.issued(0, 0, 0, put1);
  twice.issued(0, 1, 0, put1);
  CHECK(twice.check().count(VK::kValueReused) == 1);
  Oracle again;
  again.issued(0, 0, 0, put1);
  again.applied(1, put1, Response::put_ok());
  again.answered(0, 0, 0, Response::put_ok());
  again.issued(0, 0, 0, put1);  // not withdrawn: a second request with the same value
  CHECK(again.check().count(VK::kValueReused) == 1);
  // Lost requests are reported in issue order.
  Oracle lost;
  lost.issued(0, 0, 7, Request::meta_get(1, 70));
  lost.issued(0, 0, 3, Request::meta_get(1, 30));
  lost.issued(0, 0, 5, Request::meta_get(1, 50));
  const Oracle::Verdict lv = lost.check();
  REQUIRE(lv.examples.size() == 3);
  CHECK(lv.examples[0].find("key 70") != std::string::npos);
  CHECK(lv.examples[2].find("key 50") != std::string::npos);
}

TEST_CASE("the oracle keeps the first violations as examples and counts them all", "[oracle]") {
  Oracle o;
  for (uint32_t i = 0; i < 20; ++i) o.applied(1, Request::meta_put(1, i, 1000 + i), Response::put_ok());
  const Oracle::Verdict v = o.check();
  CHECK(v.count(VK::kUnknownWrite) == 20);
  REQUIRE(v.examples.size() == Oracle::Verdict::kMaxExamples);
  CHECK(v.examples[0].find("put 1000 ") != std::string::npos);
  CHECK(v.examples[7].find("put 1007 ") != std::string::npos);
  CHECK(std::string(Oracle::to_string(VK::kValueReused)) == "value_reused");
  CHECK(std::string(Oracle::to_string(VK::kUnexplainedFailure)) == "unexplained_failure");
}

TEST_CASE("oracle fields: a failure is explained by a break between the client's node and the target, not its index",
          "[oracle]") {
  // Client 3 of rank 0 sends to rank 1 in a run of four nodes. The client's index is
  // not a node: only a break between node 0 and node 1 explains its failure.
  const Request put = Request::meta_put(1, 5, 111);
  auto failed_after = [&](uint32_t a, uint32_t b) {
    Oracle o;
    o.issued(0, 3, 9, put);
    o.connection_broken(a, b);
    o.answered(0, 3, 9, kStopped);
    return o.check();
  };
  const Oracle::Verdict own_node = failed_after(0, 1);
  CHECK(own_node.ok());
  CHECK(own_node.failed == 1);
  CHECK(failed_after(1, 0).ok());
  // Node 3 (the number of the client's index) and the target: another pair of nodes.
  const Oracle::Verdict index_pair = failed_after(3, 1);
  INFO((index_pair.examples.empty() ? std::string() : index_pair.examples[0]));
  CHECK(only(index_pair, VK::kUnexplainedFailure));
  CHECK(only(failed_after(1, 3), VK::kUnexplainedFailure));
}

TEST_CASE("oracle fields: a withdrawn put's value issued again in another request is a reused value", "[oracle]") {
  // The same request issued again after its post was refused is the same put; another
  // request carrying the withdrawn request's value (another key, another rank, a get's
  // answer cannot carry a value) cannot be told apart from it.
  const Request put = Request::meta_put(1, 5, 111);
  auto reissued_as = [&](const Request& again) {
    Oracle o;
    o.issued(0, 2, 4, put);
    o.withdrawn(0, 2, 4);
    o.issued(0, 2, 4, again);
    o.applied(again.rank, again, Response::put_ok());
    o.answered(0, 2, 4, Response::put_ok());
    return o.check();
  };
  CHECK(reissued_as(put).ok());
  CHECK(reissued_as(put).puts_matched == 1);
  CHECK(reissued_as(Request::meta_put(1, 6, 111)).count(VK::kValueReused) == 1);
  CHECK(reissued_as(Request::meta_put(2, 5, 111)).count(VK::kValueReused) == 1);
  // Another client of the node issuing the withdrawn value: reused as well.
  Oracle other;
  other.issued(0, 2, 4, put);
  other.withdrawn(0, 2, 4);
  other.issued(0, 3, 4, put);
  CHECK(other.check().count(VK::kValueReused) == 1);
}
