// The exactly-once oracle: a record of every request's issue and answer, of every
// store operation and of every connection a fault broke, checked after a run
// (docs/exactly_once.md, "The exactly-once oracle").
//
// What it checks (check()):
//  1. exactly once, as the clients see it: every issued request got exactly one
//     answer. An answer for a token with no request pending is a duplicate (or an
//     answer nobody asked for); a request still pending at the end is lost. Every
//     answer a client receives is recorded, duplicates included (backends/client.hpp
//     records before it drops an answer it cannot use).
//  2. exactly once, as the stores see it: every put is matched to the request that
//     sent it by its value (put values are unique per request, kv::put_value; two
//     requests issued with one value are a violation, value_reused). A put applied
//     twice is duplicate_apply (a retransmitted request executed again); a value no
//     issued request carries, or carried by a request that never left (withdrawn) or
//     sent for another key, is unknown_write; a put answered PutOk with no apply
//     before its answer is lost_write.
//  3. failures only where a fault could cause them: an error answer must be
//     kEndpointStopped ("reported failed", the request may or may not have executed:
//     one apply at most, at any time after its issue) and needs a connection between
//     the client's node and the request's target node that a fault broke before the
//     answer (connection_broken(), recorded by the simulator's network when a
//     connection fails, and by tests that stop endpoints by hand); without one it is
//     unexplained_failure. Any other error code is answer_mismatch.
//  4. the answer fits the request: PutOk for a put; GetOk / GetNotFound for a get.
//  5. per-key history: a get's value (or "not found") is one the store held for that key
//     at some point between the get's issue and its answer. Only puts the store
//     answered PutOk enter the history (an apply record answered otherwise changed
//     nothing).
// Gets are matched by their answers only: a get executed twice changes no state, and
// its second answer is a duplicate_answer.
//
// Time is the oracle's own event order: every recorded event (issue, answer, store
// operation, broken connection) takes the next tick. The simulator runs every simulated
// thread in one OS thread, so the order the events are recorded in is the order they
// happened in; the value a store slot held between two ticks is exactly the last put
// applied before. (Virtual time is not used: simulated threads timestamp their work
// mid-step, and two daemons writing one key (direct backend) can carry timestamps out
// of the order their writes took effect.)
//
// Runs on real OS threads (the in-process wall-clock cluster) construct the oracle
// with kSharedByThreads: every record then takes the oracle's mutex, and a store
// operation runs inside it with its record (kv::execute, through apply_lock()), so the
// record order is an order in which the operations really happened: a put recorded
// before another to the same key was applied before it, and the value a get read is
// the one of the last put recorded before it. A client records a request's issue
// before it posts the request (so no thread can apply it before its issue tick) and
// withdraws it when the post is refused (kWithdraw: the request never left).
//
// Recording is off unless a run asks for it: Store and Client hold a null pointer to
// the oracle by default and test it once per operation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kv/types.hpp"

namespace bkv::kv {

class HistoryOracle {
 public:
  enum class EventKind : uint8_t { kIssue = 0, kAnswer = 1, kApply = 2, kWithdraw = 3, kBreak = 4 };

  // One recorded event; its tick is its index in events().
  //   kIssue:    client (rank, client, token) issued `req`
  //   kAnswer:   client (rank, client, token) received `resp`
  //   kApply:    the store of node `rank` executed `req` (client and token unused)
  //   kWithdraw: client (rank, client, token) took back the request it had just
  //              recorded as issued: its post was refused, so it never left
  //   kBreak:    a fault broke a connection between node `rank` and node `client`
  //              (token, req and resp unused)
  struct Event {
    EventKind kind = EventKind::kIssue;
    uint32_t rank = 0;
    uint32_t client = 0;
    uint32_t token = 0;
    Request req{};
    Response resp{};
  };

  enum class ViolationKind : uint8_t {
    kDuplicateAnswer = 0,  // an answer for a token with no request pending
    kLostRequest,          // issued, never answered
    kTokenReused,          // a request issued on a token whose request was still pending
    kAnswerMismatch,       // the answer's kind does not fit the request's (or an error other than kEndpointStopped)
    kStaleValue,           // a get's value was not held by the key during the get
    kDuplicateApply,       // a put applied more than once
    kLostWrite,            // a put answered PutOk that no store applied before the answer
    kUnknownWrite,         // a put applied that no request in flight sent (its value, key or rank)
    kUnexplainedFailure,   // reported failed with no connection to the target broken by a fault
    kValueReused,          // two requests issued with one put value (they cannot be told apart)
  };
  static constexpr size_t kViolationKinds = 10;
  static constexpr const char* to_string(ViolationKind k) noexcept {
    switch (k) {
      case ViolationKind::kDuplicateAnswer: return "duplicate_answer";
      case ViolationKind::kLostRequest: return "lost_request";
      case ViolationKind::kTokenReused: return "token_reused";
      case ViolationKind::kAnswerMismatch: return "answer_mismatch";
      case ViolationKind::kStaleValue: return "stale_value";
      case ViolationKind::kDuplicateApply: return "duplicate_apply";
      case ViolationKind::kLostWrite: return "lost_write";
      case ViolationKind::kUnknownWrite: return "unknown_write";
      case ViolationKind::kUnexplainedFailure: return "unexplained_failure";
      case ViolationKind::kValueReused: return "value_reused";
    }
    return "unknown";
  }

  struct Verdict {
    uint64_t requests = 0;       // issued
    uint64_t answered = 0;       // answered exactly once (errors included)
    uint64_t failed = 0;         // of those, answered with kError
    uint64_t gets_checked = 0;   // gets whose value was checked against the key's history
    uint64_t puts_applied = 0;   // puts the stores executed (duplicates included)
    uint64_t puts_matched = 0;   // puts acknowledged (PutOk) whose one apply was found
    uint64_t broken_connections = 0;  // connection_broken() records
    uint64_t counts[kViolationKinds] = {};
    std::vector<std::string> examples;  // the first kMaxExamples violations, described

    static constexpr size_t kMaxExamples = 8;
    uint64_t violations() const noexcept {
      uint64_t n = 0;
      for (uint64_t c : counts) n += c;
      return n;
    }
    bool ok() const noexcept { return violations() == 0; }
    uint64_t count(ViolationKind k) const noexcept { return counts[static_cast<size_t>(k)]; }
  };

  enum class Threads : uint8_t { kOne, kSharedByThreads };
  explicit HistoryOracle(Threads threads = Threads::kOne) : shared_(threads == Threads::kSharedByThreads) {}

  void issued(uint32_t rank, uint32_t client, uint32_t token, const Request& req) {
    record(Event{EventKind::kIssue, rank, client, token, req, Response{}});
  }
  void withdrawn(uint32_t rank, uint32_t client, uint32_t token) {
    record(Event{EventKind::kWithdraw, rank, client, token, Request{}, Response{}});
  }
  void answered(uint32_t rank, uint32_t client, uint32_t token, const Response& resp) {
    record(Event{EventKind::kAnswer, rank, client, token, Request{}, resp});
  }
  // A store operation: the caller holds apply_lock() across the operation and this call.
  void applied(uint32_t rank, const Request& req, const Response& resp) {
    events_.push_back(Event{EventKind::kApply, rank, 0, 0, req, resp});
  }
  // A fault broke a connection between nodes `rank` and `peer` (either side may
  // report it; a failure answer between the two is explained from then on).
  void connection_broken(uint32_t rank, uint32_t peer) {
    record(Event{EventKind::kBreak, rank, peer, 0, Request{}, Response{}});
  }
  // Held across a store operation and its applied() record (empty for kOne).
  std::unique_lock<std::mutex> apply_lock() {
    return shared_ ? std::unique_lock<std::mutex>(mu_) : std::unique_lock<std::mutex>();
  }

  const std::vector<Event>& events() const noexcept { return events_; }
  std::vector<Event>& events() noexcept { return events_; }

  Verdict check() const { return check(events_); }

  // Checks any event list (tests feed it altered copies of a real run's events).
  static Verdict check(const std::vector<Event>& events) {
    Verdict v;
    auto violation = [&](ViolationKind k, std::string what) {
      ++v.counts[static_cast<size_t>(k)];
      if (v.examples.size() < Verdict::kMaxExamples) v.examples.push_back(std::string(to_string(k)) + ": " + what);
    };
    auto who = [](const Event& e) {
      return "rank " + std::to_string(e.rank) + " client " + std::to_string(e.client) + " token " +
             std::to_string(e.token);
    };
    auto describe = [](const Request& r) {
      return std::string(r.is_put() ? "put " + std::to_string(r.value) : std::string("get")) + " of rank " +
             std::to_string(r.rank) + " key " + std::to_string(r.key);
    };

    // Pass 1: the history of every key (rank, key): (tick, value) of each put applied,
    // in tick order (duplicates and unknown values included: it is what the store held).
    struct Write {
      uint64_t tick;
      uint64_t value;
    };
    std::unordered_map<uint64_t, std::vector<Write>> history;  // by key_id(rank, key)
    auto key_id = [](uint32_t rank, uint64_t key) { return (uint64_t{rank} << 40) ^ key; };
    for (uint64_t t = 0; t < events.size(); ++t) {
      const Event& e = events[t];
      if (is_put_applied(e)) history[key_id(e.rank, e.req.key)].push_back(Write{t, e.req.value});
    }
    // Did key (rank, key) hold `value` (kAbsentValue: no value) at some tick in
    // [from, to]? The value written at tick w_i is held over [w_i, w_{i+1}).
    auto held = [&](uint32_t rank, uint64_t key, uint64_t value, uint64_t from, uint64_t to) {
      const auto it = history.find(key_id(rank, key));
      if (it == history.end()) return value == kAbsentValue;
      const std::vector<Write>& w = it->second;
      // First write after `from`: the value held at `from` is the one before it.
      size_t i = static_cast<size_t>(
          std::upper_bound(w.begin(), w.end(), from, [](uint64_t t, const Write& x) { return t < x.tick; }) - w.begin());
      if ((i == 0 ? kAbsentValue : w[i - 1].value) == value) return true;
      for (; i < w.size() && w[i].tick <= to; ++i)
        if (w[i].value == value) return true;
      return false;
    };

    // Pass 2, in tick order: requests by (rank, client, token), puts by value, broken
    // connections by node pair.
    struct Pending {
      uint64_t issue_tick;
      Request req;
    };
    // (rank, client) in the high word, the whole 32-bit token in the low one: no two
    // requests share a key (a client's token carries its slot's generation in high bits).
    struct SlotHash {
      size_t operator()(const std::pair<uint64_t, uint32_t>& k) const noexcept {
        return std::hash<uint64_t>{}(k.first * 0x9E3779B97F4A7C15ull ^ k.second);
      }
    };
    std::unordered_map<std::pair<uint64_t, uint32_t>, Pending, SlotHash> pending;
    auto slot_id = [](const Event& e) { return std::pair<uint64_t, uint32_t>{uint64_t{e.rank} << 32 | e.client, e.token}; };
    // A put request, found by its value: who sent it, what, and how often it was applied.
    struct Put {
      uint32_t rank;    // the issuing client's node
      uint32_t client;  // and client
      Request req;
      uint64_t applies = 0;
      bool left = true;  // false while withdrawn (its post was refused)
    };
    std::unordered_map<uint64_t, Put> puts;  // by value
    std::unordered_map<uint64_t, bool> broken;  // by pair_id(a, b), a <= b
    auto pair_id = [](uint32_t a, uint32_t b) {
      return a <= b ? (uint64_t{a} << 32) | b : (uint64_t{b} << 32) | a;
    };
    for (uint64_t t = 0; t < events.size(); ++t) {
      const Event& e = events[t];
      switch (e.kind) {
        case EventKind::kBreak:
          ++v.broken_connections;
          broken[pair_id(e.rank, e.client)] = true;
          break;
        case EventKind::kApply: {
          if (!is_put_applied(e)) break;
          ++v.puts_applied;
          const auto it = puts.find(e.req.value);
          if (it == puts.end() || !it->second.left || !(it->second.req == e.req) || e.rank != e.req.rank) {
            const std::string why = it == puts.end()    ? "no request sent this value"
                                    : !it->second.left  ? "its request was withdrawn (never left its client)"
                                    : e.rank != e.req.rank ? "applied by the store of rank " + std::to_string(e.rank)
                                                           : "its request was a " + describe(it->second.req);
            violation(ViolationKind::kUnknownWrite,
                      describe(e.req) + " applied at tick " + std::to_string(t) + ": " + why);
            break;
          }
          if (++it->second.applies > 1)
            violation(ViolationKind::kDuplicateApply, describe(e.req) + " (rank " + std::to_string(it->second.rank) +
                                                          " client " + std::to_string(it->second.client) +
                                                          ") applied again at tick " + std::to_string(t) + ", apply #" +
                                                          std::to_string(it->second.applies));
          break;
        }
        case EventKind::kWithdraw: {
          // Only the request just issued on that token can be withdrawn.
          const auto it = pending.find(slot_id(e));
          if (it == pending.end()) {
            violation(ViolationKind::kDuplicateAnswer,
                      who(e) + " withdrawn at tick " + std::to_string(t) + " with no request pending");
            break;
          }
          if (it->second.req.is_put()) {
            const auto p = puts.find(it->second.req.value);
            if (p != puts.end() && p->second.rank == e.rank && p->second.client == e.client) p->second.left = false;
          }
          pending.erase(it);
          --v.requests;
          break;
        }
        case EventKind::kIssue: {
          ++v.requests;
          auto [it, fresh] = pending.try_emplace(slot_id(e), Pending{t, e.req});
          if (!fresh) {
            violation(ViolationKind::kTokenReused, who(e) + " issued again at tick " + std::to_string(t) +
                                                       " while its request of tick " +
                                                       std::to_string(it->second.issue_tick) + " was pending");
            it->second = Pending{t, e.req};
          }
          if (e.req.is_put()) {
            auto [p, new_value] = puts.try_emplace(e.req.value, Put{e.rank, e.client, e.req});
            if (!new_value) {
              // The same request issued again after its post was refused is the same put.
              if (!p->second.left && p->second.rank == e.rank && p->second.client == e.client &&
                  p->second.req == e.req) {
                p->second.left = true;
              } else {
                violation(ViolationKind::kValueReused, who(e) + " issued " + describe(e.req) + " at tick " +
                                                           std::to_string(t) + ", a value rank " +
                                                           std::to_string(p->second.rank) + " client " +
                                                           std::to_string(p->second.client) + " issued before");
              }
            }
          }
          break;
        }
        case EventKind::kAnswer: {
          const auto it = pending.find(slot_id(e));
          if (it == pending.end()) {
            violation(ViolationKind::kDuplicateAnswer,
                      who(e) + " answered at tick " + std::to_string(t) + " with no request pending");
            break;
          }
          const Pending p = it->second;
          pending.erase(it);
          ++v.answered;
          if (e.resp.is_error()) {
            ++v.failed;
            if (e.resp.error != ErrorCode::kEndpointStopped) {
              violation(ViolationKind::kAnswerMismatch, who(e) + ": " + describe(p.req) + " answered with error " +
                                                            std::to_string(static_cast<int>(e.resp.error)) +
                                                            " (only kEndpointStopped may end a valid request)");
            } else if (!broken.contains(pair_id(e.rank, p.req.rank))) {  // (a local request: never, no fault breaks (r, r))
              violation(ViolationKind::kUnexplainedFailure,
                        who(e) + ": " + describe(p.req) + " reported failed at tick " + std::to_string(t) +
                            " but no fault broke a connection between rank " + std::to_string(e.rank) +
                            " and rank " + std::to_string(p.req.rank) + " before");
            }
            continue;
          }
          const bool fits = p.req.is_put() ? e.resp.kind == ResponseKind::kPutOk
                                           : (e.resp.kind == ResponseKind::kGetOk || e.resp.kind == ResponseKind::kGetNotFound);
          if (!fits) {
            violation(ViolationKind::kAnswerMismatch, who(e) + ": a " + (p.req.is_put() ? "put" : "get") +
                                                          " answered with response kind " +
                                                          std::to_string(static_cast<int>(e.resp.kind)));
            continue;
          }
          if (p.req.is_put()) {
            const auto put = puts.find(p.req.value);
            if (put == puts.end() || put->second.applies == 0) {
              violation(ViolationKind::kLostWrite, who(e) + ": " + describe(p.req) + " answered PutOk at tick " +
                                                       std::to_string(t) + " but no store applied it before");
            } else {
              ++v.puts_matched;
            }
          } else {
            ++v.gets_checked;
            const uint64_t value = e.resp.kind == ResponseKind::kGetOk ? e.resp.value : kAbsentValue;
            if (!held(p.req.rank, p.req.key, value, p.issue_tick, t)) {
              violation(ViolationKind::kStaleValue,
                        who(e) + ": get of rank " + std::to_string(p.req.rank) + " key " + std::to_string(p.req.key) +
                            " (ticks " + std::to_string(p.issue_tick) + ".." + std::to_string(t) + ") returned " +
                            (value == kAbsentValue ? std::string("not found") : std::to_string(value)) +
                            ", a value the key did not hold in that span");
            }
          }
          break;
        }
      }
    }
    // Lost requests, in issue order (the map's order is not deterministic).
    std::vector<Pending> lost;
    for (const auto& [id, p] : pending) {
      (void)id;
      lost.push_back(p);
    }
    std::sort(lost.begin(), lost.end(), [](const Pending& a, const Pending& b) { return a.issue_tick < b.issue_tick; });
    for (const Pending& p : lost)
      violation(ViolationKind::kLostRequest, "request issued at tick " + std::to_string(p.issue_tick) + " (" +
                                                 describe(p.req) + ") never answered");
    return v;
  }

 private:
  // An apply record of a put the store executed (answered PutOk): it changed the key.
  static bool is_put_applied(const Event& e) noexcept {
    return e.kind == EventKind::kApply && e.req.is_put() && e.resp.kind == ResponseKind::kPutOk;
  }
  void record(const Event& e) {
    const std::unique_lock<std::mutex> lock = apply_lock();
    events_.push_back(e);
  }

  bool shared_;
  std::mutex mu_;
  std::vector<Event> events_;
};
// Three events per request (issue, store operation, answer): the memory the oracle costs.
static_assert(sizeof(HistoryOracle::Event) == 56);

}  // namespace bkv::kv
