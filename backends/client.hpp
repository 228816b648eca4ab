// The client thread of every backend: a closed loop that keeps `queue_depth` requests in
// flight, replaying its pre-generated pattern. Local requests (target rank = this node)
// go over ipc straight to the shard owner (key % D); remote requests take the backend's
// remote path (its traits' RemotePath): ipc to a daemon (Meta), the delegation ring of
// daemon #0 (Delegation), or the client's own copyrpc context (direct). A remote path has
//   static constexpr bool kSharedHead   every call contends on one shared ring head
//   static constexpr bool kDaemonAnswers its responses are written by a daemon's core
//                                        (into a line the client polls), not by a NIC
//   static RemotePath connect(NodeResources&, const ClientWiring<T>&)
//   bool try_call(const Request&, uint64_t token); void after_issue()
//   uint32_t poll(F on_response)   on_response(uint64_t token, const Response&)
//   bool failures_waiting()        (optional) requests refused at once wait for poll() to
//                                  report them failed
// The token is the client's own (returned with the response, never sent to a peer).
//
// Latency: every request's issue-to-answer time goes into the client's RequestLatency
// (core/metrics/latency_histogram.hpp), by op (get/put) and path (local/remote). The
// clock is meter.now_ns() (virtual time under the simulator: reading it charges nothing,
// so recording changes no simulated timing; the TSC-derived clock of core/tsc_clock.hpp
// on real threads), read at most once per step, when the step first needs it; requests
// issued and answers collected in one step share that reading. The token of a request is
// its index in the client's table of pending requests; free tokens are a stack. What
// recording costs: bench/kv/bench_client_latency.cpp, docs/benchmarks.md.
//
// step(): collect responses, then issue requests into the freed slots. It never blocks:
// a remote path that is full (delegation ring) leaves the request for the next step and
// says so in the result, so an event-driven scheduler retries it.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/daemon_services.hpp"
#include "core/metrics/latency_histogram.hpp"
#include "core/kv/history_oracle.hpp"
#include "core/kv/workload.hpp"

namespace bkv::backend {

struct ClientStepResult {
  uint32_t completed = 0;  // answers collected (requests reported failed included)
  uint32_t issued = 0;
  bool blocked = false;  // a request could not be posted: retry without waiting for a response
  bool again = false;    // paced issue (Client::set_paced_issue): step again once this step's costs are paid
};

// kRecordLatency = false: the same client without latency recording (for measuring what
// recording costs, bench/kv/bench_client_latency.cpp).
template <class Meter, class RemotePath, bool kRecordLatency = true>
class Client {
 public:
  // ipc: one connection per daemon of this node (index d = daemon d).
  Client(const NodeConfig& node, kv::Pattern pattern, std::vector<IpcClientT*> ipc, RemotePath remote, Meter& meter,
         ClientCounters& counters)
      : node_(node), pattern_(std::move(pattern)), ipc_(std::move(ipc)), remote_(remote), meter_(meter),
        counters_(counters), pending_(node.queue_depth), free_tokens_(node.queue_depth) {
    for (uint32_t t = node.queue_depth; t-- > 0;) free_tokens_[free_count_++] = t;
  }

  ClientStepResult step() {
    ClientStepResult res;
    StepClock clock{meter_};
    if (paced_) [[unlikely]]
      return step_paced(res, clock);
    collect(res, clock);
    while (!stopping_ && in_flight_ < node_.queue_depth) {
      if (!issue_next<true>(res, clock)) {
        res.blocked = true;
        break;
      }
    }
    remote_.after_issue();  // a path that batches (copyrpc) sends what was issued
    // A path that refused requests at once (their endpoint stopped) reports them failed at
    // its next poll: step again without waiting for a response.
    if constexpr (requires { remote_.failures_waiting(); })
      if (remote_.failures_waiting()) [[unlikely]] res.blocked = true;
    if (res.issued) {
      counters_.add_issued(res.issued);
      meter_.charge(Op::kClientRequest, res.issued);
      meter_.charge(Op::kRingOp, res.issued);
    }
    return res;
  }

  // Paced issue (the simulator's model key client_issue = "paced", docs/design.md
  // §Simulated threads): step() writes at most one request, at the step's start, and asks
  // to be stepped again (ClientStepResult::again) once the costs it charged are paid. A
  // request then becomes visible to the daemon after everything the client paid before
  // it: collecting the answers that freed its slot (and their handoff), the requests
  // written before it, and its own ring reservation. Without pacing (the default) a
  // step's requests are all written at the step's start and its costs only delay the next
  // step. The loop is the same (poll; issue into every freed slot; poll again): pacing
  // only splits it where it writes. No use on real threads, where writes take effect when
  // they are made.
  void set_paced_issue(bool on) noexcept { paced_ = on; }

  void stop_issuing() noexcept { stopping_ = true; }
  // Reports every issue and answer to `oracle` as client `client` of this node (nullptr:
  // none, the default). Needs the tokens of kRecordLatency.
  void set_oracle(kv::HistoryOracle* oracle, uint32_t client) noexcept
    requires kRecordLatency
  {
    oracle_ = oracle;
    oracle_client_ = client;
  }
  uint32_t in_flight() const noexcept { return in_flight_; }
  Meter& meter() noexcept { return meter_; }
  // Written by the client's own thread: another thread reads a copy taken on it.
  const metrics::RequestLatency& latency() const noexcept { return latency_; }
  void restart_latency_max() noexcept { latency_.restart_max(); }

 private:
  // An error answer. Reported failed (the path to the target rank stopped) is an outcome
  // a fault may cause, counted apart and not as completed; any other is an error.
  [[gnu::noinline]] void note_error_answer(const Response& r) {
    if (r.valid() && r.error == kv::ErrorCode::kEndpointStopped)
      ++failed_this_step_;
    else
      counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // `answers` collected this step, failed_this_step_ of them reported failed.
  [[gnu::noinline]] void count_failed(uint32_t answers) {
    counters_.add_completed(answers - failed_this_step_);
    counters_.failed.store(counters_.failed.load(std::memory_order_relaxed) + failed_this_step_, std::memory_order_relaxed);
    failed_this_step_ = 0;
  }

  // The clock of one step: read once, when the step first needs it (see the header).
  struct StepClock {
    Meter& meter;
    uint64_t now = 0;
    bool have = false;
    uint64_t operator()() {
      if (!have) {
        now = meter.now_ns();
        have = true;
      }
      return now;
    }
  };

  // Collects every answer waiting in the ipc rings and on the remote path.
  [[gnu::always_inline]] inline void collect(ClientStepResult& res, StepClock& clock) {
    auto on_resp = [&](uint64_t token, const Response& r) __attribute__((always_inline)) {
      if constexpr (kRecordLatency) {
        // Not a token this client gave out, or one with no request pending (a duplicate
        // answer): an error, and no request completes.
        if (token >= node_.queue_depth || !pending_[token].live) [[unlikely]] {  // queue_depth: pending_.size()
          counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
          return;
        }
        Pending& p = pending_[token];
        p.live = false;
        latency_[p.cls].record(clock() - p.issued_ns);
        free_tokens_[free_count_++] = static_cast<uint32_t>(token);
      }
      ++res.completed;
      if (oracle_ != nullptr) [[unlikely]] oracle_->answered(node_.rank, oracle_client_, static_cast<uint32_t>(token), r);
      if (!r.valid() || r.is_error()) [[unlikely]] note_error_answer(r);
    };
    const uint32_t before = res.completed;
    uint32_t visits = 0;  // response areas that held answers (one per ipc ring, one for the remote path)
    for (IpcClientT* c : ipc_) visits += c->poll(on_resp) > 0 ? 1 : 0;
    const uint32_t ipc_answers = res.completed - before;
    remote_.poll(on_resp);
    const uint32_t remote_answers = res.completed - before - ipc_answers;
    const uint32_t answers = ipc_answers + remote_answers;
    if (answers) {
      in_flight_ -= answers;
      if (failed_this_step_ == 0) [[likely]]
        counters_.add_completed(answers);
      else
        count_failed(answers);
      meter_.charge(Op::kRingOp, answers);
      // Every ipc answer, and a remote answer when a daemon wrote it, came as a line
      // from a daemon's core (sim::Model::response_handoff_ns; nothing on real runs).
      const bool daemon_wrote_remote = RemotePath::kDaemonAnswers && remote_answers > 0;
      meter_.answers_arrive(ipc_answers + (daemon_wrote_remote ? remote_answers : 0), visits + (daemon_wrote_remote ? 1 : 0));
    }
  }

  // Writes the next request of the pattern (a free slot must exist): over ipc to its
  // shard's daemon if local, else on the remote path. false: the path refused it (full),
  // and it stays the next request. kChargeReserve: a remote request on a shared ring head
  // pays its reservation right after the attempt (unpaced; paced issue pays it before).
  template <bool kChargeReserve>
  [[gnu::always_inline]] inline bool issue_next(ClientStepResult& res, StepClock& clock) {
    const Request req = pattern_.peek();
    const bool local = req.rank == node_.rank;
    uint32_t token = 0;
    if constexpr (kRecordLatency) token = free_tokens_[free_count_ - 1];  // in_flight < queue_depth: one is free
    // Recorded before the post: on real threads a daemon may apply the request at once.
    if (oracle_ != nullptr) [[unlikely]] oracle_->issued(node_.rank, oracle_client_, token, req);
    bool ok;
    if (local) {
      ok = ipc_[owner_of(req.key, node_.daemons)]->call(req, token) == shm::IpcCallStatus::kOk;
    } else {
      ok = remote_.try_call(req, token);
      if constexpr (kChargeReserve && RemotePath::kSharedHead) meter_.charge(Op::kRingReserve, 1);
    }
    if (!ok) {
      if (oracle_ != nullptr) [[unlikely]] oracle_->withdrawn(node_.rank, oracle_client_, token);
      return false;
    }
    if constexpr (kRecordLatency) {
      --free_count_;
      pending_[token] = Pending{clock(), metrics::latency_class(req.is_get(), local), true};
    }
    pattern_.advance();
    ++in_flight_;
    ++res.issued;
    return true;
  }

  // step() with paced issue (set_paced_issue). States: write_ready_ = the next request's
  // costs before its write (its ring reservation) are paid, so this step writes it first.
  // With slots still free, the step pays the next request's reservation and asks to run
  // again; with none free, the issue run is over: the path sends what was issued and the
  // client polls (collects), and if that frees slots, the next run starts.
  ClientStepResult step_paced(ClientStepResult& res, StepClock& clock) {
    if (write_ready_ && !stopping_) {
      if (!issue_next<false>(res, clock)) {
        // Refused (the ring is full): send what the run issued and poll, as the unpaced
        // loop does before it retries; the reservation stays paid.
        res.blocked = true;
        send_unsent();
        collect(res, clock);
        return res;
      }
      write_ready_ = false;
      unsent_ = true;
      counters_.add_issued(1);
      meter_.charge(Op::kClientRequest, 1);
      meter_.charge(Op::kRingOp, 1);
    }
    if (stopping_ || in_flight_ == node_.queue_depth) {
      send_unsent();
      collect(res, clock);
    }
    if constexpr (requires { remote_.failures_waiting(); })
      if (remote_.failures_waiting()) [[unlikely]] res.blocked = true;
    if (!stopping_ && in_flight_ < node_.queue_depth && !write_ready_) {
      if constexpr (RemotePath::kSharedHead)
        if (pattern_.peek().rank != node_.rank) meter_.charge(Op::kRingReserve, 1);
      write_ready_ = true;
    }
    res.again = write_ready_ && !stopping_ && !res.blocked;
    return res;
  }
  void send_unsent() {
    if (unsent_) remote_.after_issue();  // a path that batches (copyrpc) sends the run's requests
    unsent_ = false;
  }

  struct Pending {
    uint64_t issued_ns = 0;
    metrics::LatencyClass cls = metrics::LatencyClass::kGetLocal;
    bool live = false;  // issued and not yet answered
  };

  NodeConfig node_;
  kv::Pattern pattern_;
  std::vector<IpcClientT*> ipc_;
  RemotePath remote_;
  Meter& meter_;
  ClientCounters& counters_;
  uint32_t in_flight_ = 0;
  uint32_t failed_this_step_ = 0;  // answers of the current step that reported failed
  bool stopping_ = false;
  bool paced_ = false;        // set_paced_issue
  bool write_ready_ = false;  // paced issue: the next request's reservation is paid
  bool unsent_ = false;       // paced issue: requests written since the path last sent
  std::vector<Pending> pending_;       // by token
  std::vector<uint32_t> free_tokens_;  // [0, free_count_): tokens of no pending request (a stack)
  uint32_t free_count_ = 0;
  metrics::RequestLatency latency_;
  kv::HistoryOracle* oracle_ = nullptr;
  uint32_t oracle_client_ = 0;
};

}  // namespace bkv::backend
