// The exactly-once oracle: a record of every request's issue and answer and of every
// store operation, checked after a run (docs/reliability.md, "The exactly-once oracle").
//
// What it checks (check()):
//  1. exactly once: every issued request got exactly one answer. An answer for a token
//     with no request pending is a duplicate (or an answer nobody asked for); a request
//     still pending at the end is lost. An error answer (kError; kEndpointStopped when
//     the copyrpc endpoint the request went over stopped) counts as "reported failed"
//     and is allowed: it ends the request, so an answer after it is a duplicate.
//  2. the answer fits the request: PutOk for a put; GetOk / GetNotFound for a get.
//  3. per-key history: a get's value (or "not found") is one the store held for that key
//     at some point between the get's issue and its answer.
//
// Time is the oracle's own event order: every recorded event (issue, answer, store
// operation) takes the next tick. The simulator runs every simulated thread in one OS
// thread, so the order the events are recorded in is the order they happened in; the
// value a store slot held between two ticks is exactly the last put applied before.
// (Virtual time is not used: simulated threads timestamp their work mid-step, and two
// daemons writing one key (direct backend) can carry timestamps out of the order their
// writes took effect.)
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
  enum class EventKind : uint8_t { kIssue = 0, kAnswer = 1, kApply = 2, kWithdraw = 3 };

  // One recorded event; its tick is its index in events().
  //   kIssue:    client (rank, client, token) issued `req`
  //   kAnswer:   client (rank, client, token) received `resp`
  //   kApply:    the store of node `rank` executed `req` (client and token unused)
  //   kWithdraw: client (rank, client, token) took back the request it had just
  //              recorded as issued: its post was refused, so it never left
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
    kAnswerMismatch,       // the answer's kind does not fit the request's
    kStaleValue,           // a get's value was not held by the key during the get
  };
  static constexpr size_t kViolationKinds = 5;
  static constexpr const char* to_string(ViolationKind k) noexcept {
    switch (k) {
      case ViolationKind::kDuplicateAnswer: return "duplicate_answer";
      case ViolationKind::kLostRequest: return "lost_request";
      case ViolationKind::kTokenReused: return "token_reused";
      case ViolationKind::kAnswerMismatch: return "answer_mismatch";
      case ViolationKind::kStaleValue: return "stale_value";
    }
    return "unknown";
  }

  struct Verdict {
    uint64_t requests = 0;       // issued
    uint64_t answered = 0;       // answered exactly once (errors included)
    uint64_t failed = 0;         // of those, answered with kError
    uint64_t gets_checked = 0;   // gets whose value was checked against the key's history
    uint64_t puts_applied = 0;   // puts the stores executed
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

    // Pass 1: the history of every key (rank, key): (tick, value) of each put applied,
    // in tick order.
    struct Write {
      uint64_t tick;
      uint64_t value;
    };
    std::unordered_map<uint64_t, std::vector<Write>> history;  // by key_id(rank, key)
    auto key_id = [](uint32_t rank, uint64_t key) { return (uint64_t{rank} << 40) ^ key; };
    for (uint64_t t = 0; t < events.size(); ++t) {
      const Event& e = events[t];
      if (e.kind == EventKind::kApply && e.req.is_put() && e.resp.kind == ResponseKind::kPutOk) {
        history[key_id(e.rank, e.req.key)].push_back(Write{t, e.req.value});
        ++v.puts_applied;
      }
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

    // Pass 2: requests by (rank, client, token).
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
    for (uint64_t t = 0; t < events.size(); ++t) {
      const Event& e = events[t];
      if (e.kind == EventKind::kWithdraw) {
        // Only the request just issued on that token can be withdrawn.
        const auto it = pending.find(slot_id(e));
        if (it == pending.end()) {
          violation(ViolationKind::kDuplicateAnswer,
                    who(e) + " withdrawn at tick " + std::to_string(t) + " with no request pending");
          continue;
        }
        pending.erase(it);
        --v.requests;
      } else if (e.kind == EventKind::kIssue) {
        ++v.requests;
        auto [it, fresh] = pending.try_emplace(slot_id(e), Pending{t, e.req});
        if (!fresh) {
          violation(ViolationKind::kTokenReused, who(e) + " issued again at tick " + std::to_string(t) +
                                                     " while its request of tick " +
                                                     std::to_string(it->second.issue_tick) + " was pending");
          it->second = Pending{t, e.req};
        }
      } else if (e.kind == EventKind::kAnswer) {
        const auto it = pending.find(slot_id(e));
        if (it == pending.end()) {
          violation(ViolationKind::kDuplicateAnswer,
                    who(e) + " answered at tick " + std::to_string(t) + " with no request pending");
          continue;
        }
        const Pending p = it->second;
        pending.erase(it);
        ++v.answered;
        if (e.resp.is_error()) {
          ++v.failed;
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
        if (p.req.is_get()) {
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
      }
    }
    for (const auto& [id, p] : pending) {
      (void)id;
      violation(ViolationKind::kLostRequest, "request issued at tick " + std::to_string(p.issue_tick) + " (rank " +
                                                 std::to_string(p.req.rank) + " key " + std::to_string(p.req.key) +
                                                 ") never answered");
    }
    return v;
  }

 private:
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
