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
//   static constexpr bool kLocalToo (optional, false if absent) requests to the client's
//                                  own rank take the remote path too (the NIC's loopback)
//                                  instead of ipc
//   static constexpr bool kRefillAfterPoll (optional, false if absent) the client refills
//                                  its slots after the poll instead of following each
//                                  answer at once (the original direct client)
// The token is the client's own (returned with the response, never sent to a peer): the
// index of the request's slot in the client's table of pending requests, and in the bits
// above it the slot's generation, which moves on each time the slot's request is
// answered. A slot's request follows its answer at once, so a duplicate of that answer
// finds the slot live again; the generation tells it apart.
//
// Latency: every request's issue-to-answer time goes into the client's RequestLatency
// (core/metrics/latency_histogram.hpp), by op (get/put) and path (local/remote). The
// clock is meter.now_ns() (virtual time under the simulator: reading it charges nothing,
// so recording changes no simulated timing; the TSC-derived clock of core/tsc_clock.hpp
// on real threads), read at most once per step, when the step first needs it; requests
// issued and answers collected in one step share that reading. Free slots are a stack. What
// recording costs: bench/kv/bench_client_latency.cpp, docs/benchmarks.md.
//
// step(): the loop of the original client (docs/design_backends.md §Client loop): the first step
// issues queue_depth requests; every step scans the response areas (each ipc ring, then
// the remote path) and follows every answer it finds at once by one new request, into
// the slot that answer freed. It never blocks: a remote path that is full (delegation
// ring) leaves the request for the next step and says so in the result, so an
// event-driven scheduler retries it.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/daemon_services.hpp"
#include "core/cache_hint.hpp"
#include "core/metrics/latency_histogram.hpp"
#include "core/kv/history_oracle.hpp"
#include "core/kv/workload.hpp"

namespace bkv::backend {

struct ClientStepResult {
  uint32_t completed = 0;  // answers collected (requests reported failed included)
  uint32_t issued = 0;
  bool blocked = false;  // a request could not be posted: retry without waiting for a response
  bool again = false;    // timed writes (Client::set_timed_writes): step again once this step's costs are paid
};

// kRecordLatency = false: the same client without latency recording (for measuring what
// recording costs, bench/kv/bench_client_latency.cpp).
template <class Meter, class RemotePath, bool kRecordLatency = true>
class alignas(64) Client {
 public:
  // ipc: one connection per daemon of this node (index d = daemon d). shared_latency:
  // as share_latency(shared_latency) right after construction, without allocating the
  // client's own histograms first (nullptr: its own).
  Client(const NodeConfig& node, kv::Pattern pattern, std::vector<IpcClientT*> ipc, RemotePath remote, Meter& meter,
         ClientCounters& counters, metrics::RequestLatency* shared_latency = nullptr)
      : remote_(remote), meter_(meter), counters_(counters),
        latency_(shared_latency),
        pending_(std::make_unique<Pending[]>(node.queue_depth)),
        ipc_(std::make_unique<IpcClientT*[]>(ipc.size())),
        rank_(node.rank), queue_depth_(node.queue_depth), daemons_(node.daemons),
        ipc_count_(static_cast<uint32_t>(ipc.size())), pattern_(std::move(pattern)) {
    if (latency_ == nullptr) share_latency(nullptr);  // its own histograms
    std::copy(ipc.begin(), ipc.end(), ipc_.get());
    // The free list holds every slot, 0 on top (as a stack of the slots pushed from the
    // last down to 0).
    for (uint32_t t = node.queue_depth; t-- > 0;) push_free(t);
  }

  ClientStepResult step() {
    if (timed_writes_) [[unlikely]]
      return step_timed_out_of_line();
    ClientStepResult res;
    StepClock clock{meter_};
    // The loop body of docs/design_backends.md §Client loop: every answer found is followed at once
    // by one new request into the slot it freed.
    collect(res, clock, [&] {
      if constexpr (!kRefillAfterPoll)
        if (!stopping_ && !issue_next(res, clock)) res.blocked = true;
    });
    // The first step issues the whole queue depth; a refused request is retried here.
    while (!res.blocked && !stopping_ && in_flight_ < queue_depth_) {
      if (!issue_next(res, clock)) {
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

  // Timed writes (the simulator, docs/design_simulator.md §Simulated threads): a simulated step's
  // writes are visible from the step's start, so the loop above is cut where it writes.
  // A step writes at most one request, at its start, then handles one answer found by the
  // last scan of the response areas and pays for the request that answer frees (its
  // bookkeeping, its ring-slot write and, on a shared ring head, its reservation), and
  // asks to be stepped again (ClientStepResult::again) once those costs are paid. So each
  // request becomes visible after everything its client paid before it, in the order of
  // the loop above: answer, request, answer, request. No use on real threads, where writes
  // take effect when they are made. Set-up only, before the first step: the answers
  // buffer is made anew, and answers found but not yet handled would be dropped.
  void set_timed_writes(bool on) {
    timed_writes_ = on;
    found_ = on ? std::make_unique<Found[]>(queue_depth_) : nullptr;
  }
  // step() of a client with timed writes, for a caller that set them: the simulator's
  // step, into which the whole timed step is inlined (one call per step, not three).
  [[gnu::always_inline]] ClientStepResult step_timed() {
    assert(timed_writes_);
    ClientStepResult res;
    StepClock clock{meter_};
    return step_timed(res, clock);
  }
  void stop_issuing() noexcept { stopping_ = true; }
  // Reports every issue and answer to `oracle` as client `client` of this node (nullptr:
  // none, the default). Needs the tokens of kRecordLatency.
  void set_oracle(kv::HistoryOracle* oracle, uint32_t client) noexcept
    requires kRecordLatency
  {
    oracle_ = oracle;
    oracle_client_ = client;
    has_oracle_ = oracle != nullptr;
  }
  uint32_t in_flight() const noexcept { return in_flight_; }
  Meter& meter() noexcept { return meter_; }
  // Written by the client's own thread: another thread reads a copy taken on it.
  const metrics::RequestLatency& latency() const noexcept { return *latency_; }
  void restart_latency_max() noexcept { latency_->restart_max(); }
  // Cache hints for the simulator (apps/benchkv/simulator/kv_mode.cpp), which steps
  // thousands of clients in turn: a prefetcher that runs one event before a client's step
  // finds this object cold, so the addresses its step needs behind this object's pointers
  // are recorded in a list the prefetcher reads. Addresses only: nothing here changes or
  // decides anything.
  // The lines every step may read that stay where they are: the remote path's state, the
  // table of ipc connections and each connection's two lines, the counters, the ops the
  // step charges (a meter that says where they lie: the simulated thread's); added after
  // the per-step entries are reserved, the last of them dropped when the list is full
  // (more than one daemon per node: the ops' lines first).
  void add_stable_step_lines(LineList& out) const noexcept {
    if constexpr (requires { remote_.add_stable_lines(out); }) remote_.add_stable_lines(out);
    out.add(ipc_.get());
    for (uint32_t i = 0; i < ipc_count_; ++i) {
      out.add(ipc_[i]);
      out.add(reinterpret_cast<const std::byte*>(ipc_[i]) + 64);
    }
    out.add(&counters_);
    if constexpr (requires { meter_.op_line(Op::kRingOp); }) {  // the ops a step charges
      out.add_line_once(meter_.op_line(Op::kRingOp));
      out.add_line_once(meter_.op_line(Op::kClientRequest));
      if constexpr (RemotePath::kSharedHead) out.add_line_once(meter_.op_line(Op::kRingReserve));
    }
  }
  // At the end of a step with timed writes (its lines at hand): what the next step reads
  // first, as far as known now, into the list's per-step entries in this order (idle()
  // where the step names nothing): if it writes a request (one paid for), the pending
  // slot the request takes (the free list's top) and the remote path's next call (its
  // response slot and call record); the next answer found and, when it shares its line
  // with the answer before it (which this step handled or wrote: the token is read only
  // where that costs no miss), its pending slot; each ipc connection's next response, as
  // many as the list reserved (reserve_step(step_line_count()), before the stable lines).
  static constexpr bool kNamesCallLines = requires(const RemotePath& r) { r.next_call_lines(); };
  static constexpr uint32_t kFixedStepLines = 3 + (kNamesCallLines ? 2 : 0);
  static_assert(kFixedStepLines <= LineList::kMax);
  uint32_t step_line_count() const noexcept { return kFixedStepLines + ipc_count_; }
  [[gnu::always_inline]] void add_next_step_lines(LineList& out) const noexcept {
    const void* const idle = LineList::idle();
    const void* write_slot = idle;
    if constexpr (kRecordLatency) write_slot = write_ready_ ? &pending_[free_head_] : idle;
    out.set_step(0, write_slot);
    uint32_t i = 1;
    if constexpr (kNamesCallLines) {
      const void* resp_slot = idle;
      const void* call = idle;
      if (write_ready_) {
        const auto next = remote_.next_call_lines();
        resp_slot = next.response_slot;
        call = next.call;
      }
      out.set_step(1, resp_slot);
      out.set_step(2, call);
      i = 3;
    }
    const void* found = idle;
    const void* found_slot = idle;
    if (found_head_ < found_count_) {
      const Found& f = found_[found_head_];
      found = &f;
      if constexpr (kRecordLatency)
        if (reinterpret_cast<uintptr_t>(&f) % 64 != 0) found_slot = pending_line(f.token);  // 2nd of its line
    }
    out.set_step(i, found);
    out.set_step(i + 1, found_slot);
    i += 2;
    // With an ipc reply flag, the next step polls no ipc ring unless it is set now.
    const bool ipc_due = !ipc_flagged_ || ipc_answered_ != 0;
    for (uint32_t k = 0; k < ipc_count_ && i < out.step; ++k, ++i)
      out.set_step(i, ipc_due ? ipc_[k]->next_response_line() : idle);
  }
  // Where the pending slot of `token` lies (the table's first slot for a token beyond the
  // queue depth: a hint's address is never outside the table).
  const void* pending_line(uint64_t token) const noexcept
    requires kRecordLatency
  {
    const uint64_t slot = token & kSlotMask;
    return &pending_[slot < queue_depth_ ? slot : 0];
  }
  const RemotePath& remote_path() const noexcept { return remote_; }

  // Where one OS thread runs this client and its node's daemons (the simulator): the
  // byte the ipc servers set at each response to this client (IpcServer::use_reply_flags,
  // given to every server this client is connected to, before its first call). From
  // now on a scan reads the ipc rings only while it is set. The byte lies in the
  // object's second line, which every step reads anyway.
  uint8_t* use_ipc_reply_flag() noexcept {
    ipc_flagged_ = true;
    ipc_answered_ = 0;
    return &ipc_answered_;
  }

  // Records into `shared` instead of the client's own histograms (nullptr: its own again),
  // for clients that one thread steps (the simulator): the histograms of many clients are
  // one hot set of cache lines instead of 31 KB per client (its own are freed, so the
  // clients' hot fields lie close together). Their merge is the same (counts and sums add,
  // the maximum is the maximum), so the readers of the sum see the same values.
  void share_latency(metrics::RequestLatency* shared) {
    if (shared != nullptr) {
      own_latency_.reset();
      latency_ = shared;
    } else {
      if (!own_latency_) own_latency_ = std::make_unique<metrics::RequestLatency>();
      latency_ = own_latency_.get();
    }
  }

 private:
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

  // One answer: ends its request (latency, oracle, counters). false: its token names no
  // request of this client that is pending (a token never given out, or a duplicate
  // answer), an error that ends nothing.
  [[gnu::always_inline]] inline bool answer(uint64_t token, const Response& r, StepClock& clock) {
    // Every answer reaches the oracle, the ones dropped below included (a duplicate is a
    // violation there).
    if (has_oracle_) [[unlikely]] record_answer(token, r);
    if constexpr (kRecordLatency) {
      const uint64_t slot = token & kSlotMask;
      // A slot beyond the queue depth, one with no request pending, or an answer of an
      // earlier generation of the slot (a duplicate).
      if (slot >= queue_depth_ || !pending_[slot].live || token >> kSlotBits != pending_[slot].generation)
          [[unlikely]] {
        counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return false;
      }
      Pending& p = pending_[slot];
      p.live = false;
      p.generation = static_cast<uint16_t>((p.generation + 1u) & kGenerationMask);
      (*latency_)[p.cls].record(clock() - p.issued_ns);
      push_free(static_cast<uint32_t>(slot));
    }
    --in_flight_;
    if (!r.valid() || r.is_error()) [[unlikely]]
      error_answer(r);
    else
      counters_.add_completed(1);
    return true;
  }
  // An answer for the oracle (a token beyond 32 bits, never one this client gave out, is
  // recorded as the largest token: a duplicate answer there).
  [[gnu::noinline]] void record_answer(uint64_t token, const Response& r) {
    const uint32_t t = token > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(token);
    oracle_->answered(rank_, oracle_client_, t, r);
  }
  // An error answer. Reported failed (the path to the target rank stopped) is an outcome
  // a fault may cause, counted apart and not as completed; any other is an error (and
  // counts as completed: its request was answered).
  [[gnu::noinline]] void error_answer(const Response& r) {
    if (r.valid() && r.error == kv::ErrorCode::kEndpointStopped) {
      counters_.failed.store(counters_.failed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    counters_.add_completed(1);
  }

  // Scans the response areas: every ipc ring (one per daemon of the node), then the remote
  // path, calling on_answer(token, response, area) for each answer found; `area` says
  // whether a daemon's core wrote the answer (every ipc answer, and a remote one when
  // RemotePath::kDaemonAnswers) and whether it is the first found in its response area.
  struct Area {
    bool daemon_wrote;
    bool first;
  };
  // kHinted: a remote path that offers poll_hinted (the same answers in the same order,
  // reading fewer response slots) is polled with it. With an ipc reply flag
  // (use_ipc_reply_flag) the ipc rings are read only when a server answered since the
  // last scan, which finds the same answers (core/shm/ipc.hpp, reply flags: a poll leaves
  // no response ready, so the flag is cleared before it).
  template <bool kHinted = false, class OnAnswer>
  [[gnu::always_inline]] inline void scan(OnAnswer&& on_answer) {
    if (!ipc_flagged_ || ipc_answered_ != 0) {
      ipc_answered_ = 0;
      for (uint32_t i = 0; i < ipc_count_; ++i) {
        IpcClientT* c = ipc_[i];
        bool first = true;
        c->poll([&](uint64_t token, const Response& r) __attribute__((always_inline)) {
          on_answer(token, r, Area{true, first});
          first = false;
        });
      }
    }
    bool first = true;
    auto on_remote = [&](uint64_t token, const Response& r) __attribute__((always_inline)) {
      on_answer(token, r, Area{RemotePath::kDaemonAnswers, first});
      first = false;
    };
    if constexpr (kHinted && requires { remote_.poll_hinted(on_remote); })
      remote_.poll_hinted(on_remote);
    else
      remote_.poll(on_remote);
  }
  // Reading `answers` answer lines, `from_daemons` of them written by a daemon's core in
  // `visits` response areas (sim::Model::response_handoff_ns; nothing on real runs).
  void charge_answers(uint32_t answers, uint32_t from_daemons, uint32_t visits) {
    meter_.charge(Op::kRingOp, answers);
    meter_.answers_arrive(from_daemons, visits);
  }

  // The loop body's answers: each one found ends its request, then after_each() runs
  // (the request that replaces it).
  template <class AfterEach>
  [[gnu::always_inline]] inline void collect(ClientStepResult& res, StepClock& clock, AfterEach&& after_each) {
    uint32_t answers = 0, from_daemons = 0, visits = 0;
    scan([&](uint64_t token, const Response& r, Area a) __attribute__((always_inline)) {
      ++answers;
      from_daemons += a.daemon_wrote ? 1 : 0;
      visits += a.daemon_wrote && a.first ? 1 : 0;
      if (!answer(token, r, clock)) return;
      ++res.completed;
      after_each();
    });
    if (answers) charge_answers(answers, from_daemons, visits);
  }

  // Writes the next request of the pattern (a free slot must exist): over ipc to its
  // shard's daemon if local, else on the remote path. false: the path refused it (full),
  // and it stays the next request.
  [[gnu::always_inline]] inline bool issue_next(ClientStepResult& res, StepClock& clock) {
    const Request req = pattern_.peek();
    const bool local = req.rank == rank_;
    const bool by_ipc = local && !kLocalToo;
    uint32_t token = 0, slot = 0;
    if constexpr (kRecordLatency) {
      slot = free_head_;  // in_flight < queue_depth: one is free
      token = slot | uint32_t{pending_[slot].generation} << kSlotBits;
    }
    // Recorded before the post: on real threads a daemon may apply the request at once.
    if (has_oracle_) [[unlikely]] oracle_->issued(rank_, oracle_client_, token, req);
    bool ok;
    if (by_ipc) {
      ok = ipc_[owner_of(req.key, daemons_)]->call(req, token) == shm::IpcCallStatus::kOk;
    } else {
      ok = remote_.try_call(req, token);
      // The reservation on a shared ring head (untimed: paid after the write).
      if (!timed_writes_ && RemotePath::kSharedHead) meter_.charge(Op::kRingReserve, 1);
    }
    if (!ok) {
      if (has_oracle_) [[unlikely]] oracle_->withdrawn(rank_, oracle_client_, token);
      return false;
    }
    if constexpr (kRecordLatency) {
      Pending& p = pending_[slot];
      free_head_ = p.next_free;
      p.issued_ns = clock();
      p.cls = metrics::latency_class(req.is_get(), local);
      p.live = true;
    }
    pattern_.advance();
    ++in_flight_;
    ++res.issued;
    return true;
  }

  // step() with timed writes (set_timed_writes). write_ready_: the next request is paid
  // for, so this step writes it first. found_[found_head_, found_count_): the answers the
  // last scan found and no step has handled yet.
  [[gnu::always_inline]] ClientStepResult step_timed(ClientStepResult& res, StepClock& clock) {
    if (write_ready_) {
      if (stopping_) {
        write_ready_ = false;  // paid for, never written: nothing to undo
      } else if (!issue_next(res, clock)) {
        // Refused (the ring is full): send what was written and retry later; the request
        // stays paid for.
        res.blocked = true;
        send_unsent();
        return res;
      } else {
        write_ready_ = false;
        unsent_ = true;
        counters_.add_issued(1);
      }
    }
    if (found_head_ == found_count_) {
      if (!stopping_ && in_flight_ < queue_depth_) {
        // A request owed without an answer: the first queue depth, or a refused one.
        prepare_next();
        res.again = true;
        return res;
      }
      rescan();
    }
    if (found_head_ < found_count_) {
      const Found& f = found_[found_head_++];
      charge_answers(1, f.area.daemon_wrote ? 1 : 0, f.area.daemon_wrote && f.area.first ? 1 : 0);
      if (answer(f.token, f.resp, clock)) {
        ++res.completed;
        if (!stopping_) prepare_next();
      }
      // Nothing more to do here: scan again before going idle. An answer written since
      // the last scan woke a thread that was stepping anyway, so no wake-up is coming.
      if (!write_ready_ && found_head_ == found_count_) rescan();
    }
    if constexpr (requires { remote_.failures_waiting(); })
      if (remote_.failures_waiting()) [[unlikely]] res.blocked = true;
    res.again = write_ready_ || found_head_ < found_count_;
    return res;
  }
  [[gnu::noinline]] ClientStepResult step_timed_out_of_line() { return step_timed(); }
  void rescan() {
    send_unsent();
    found_head_ = found_count_ = 0;
    scan<true>([&](uint64_t token, const Response& r, Area a) { found_[found_count_++] = Found{token, r, a}; });
  }
  // Pays for the next request before its write: its bookkeeping, the slot write and, on
  // a shared ring head, the reservation (a remote request; a local one goes over ipc).
  [[gnu::always_inline]] void prepare_next() {
    meter_.charge(Op::kClientRequest, 1);
    meter_.charge(Op::kRingOp, 1);
    if constexpr (RemotePath::kSharedHead)
      if (kLocalToo || pattern_.peek_rank() != rank_) meter_.charge(Op::kRingReserve, 1);
    write_ready_ = true;
  }
  void send_unsent() {
    if (unsent_) remote_.after_issue();  // a path that batches (copyrpc) sends what was written
    unsent_ = false;
  }

  // 32 bytes, aligned so that no answer straddles two lines.
  struct alignas(32) Found {
    uint64_t token = 0;
    Response resp;
    Area area{};
  };
  static_assert(sizeof(Found) == 32);

  static constexpr bool kLocalToo = [] {
    if constexpr (requires { RemotePath::kLocalToo; }) return RemotePath::kLocalToo;
    return false;
  }();
  static constexpr bool kRefillAfterPoll = [] {
    if constexpr (requires { RemotePath::kRefillAfterPoll; }) return RemotePath::kRefillAfterPoll;
    return false;
  }();

  // Token = slot | generation << kSlotBits, 32 bits (a direct client's copyrpc token
  // carries 32): the slot takes 17 bits (queue depth <= 2^16), the generation the rest.
  static constexpr uint32_t kSlotBits = 17;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  static constexpr uint32_t kGenerationMask = (1u << (32 - kSlotBits)) - 1;
  static_assert(kGenerationMask <= UINT16_MAX);
  // A slot of the table of pending requests. A free slot is on the free list: a stack
  // threaded through next_free, top at free_head_, so that taking and returning a slot
  // touch only the line of the slot itself.
  struct Pending {
    uint64_t issued_ns = 0;
    uint32_t next_free = 0;   // free: the slot below it on the free list
    uint16_t generation = 0;  // of the slot's current (or next) request
    metrics::LatencyClass cls = metrics::LatencyClass::kGetLocal;
    bool live = false;  // issued and not yet answered
  };
  static_assert(sizeof(Pending) == 16);
  void push_free(uint32_t slot) noexcept {
    pending_[slot].next_free = free_head_;
    free_head_ = slot;
  }

  // Layout: one thread steps thousands of clients in turn under the simulator, so a step
  // finds none of its client's lines in the cache. What a step reads comes first and,
  // with the pattern's replay state right after it (core/kv/workload.hpp), fills the
  // first three lines of the object (line-aligned) over the Delegation path; the rest
  // after.
  RemotePath remote_;
  Meter& meter_;
  ClientCounters& counters_;
  // Where latency is recorded: own_latency_, or histograms shared with other clients
  // (share_latency). Apart from the client, so its hot fields are not 31 KB apart.
  metrics::RequestLatency* latency_;
  std::unique_ptr<Pending[]> pending_;  // by token: queue_depth_ slots
  std::unique_ptr<Found[]> found_;      // timed writes: answers of the last scan (queue_depth_ entries)
  std::unique_ptr<IpcClientT*[]> ipc_;  // ipc_count_ connections, one per daemon of the node
  uint32_t rank_;
  uint32_t queue_depth_;
  uint32_t daemons_;
  uint32_t ipc_count_;
  uint32_t in_flight_ = 0;
  uint32_t found_head_ = 0, found_count_ = 0;
  uint32_t free_head_ = 0;     // top of the free list (Pending)
  bool stopping_ = false;
  bool timed_writes_ = false;  // set_timed_writes
  bool write_ready_ = false;   // timed writes: the next request is paid for
  bool unsent_ = false;        // timed writes: requests written since the path last sent
  bool has_oracle_ = false;    // oracle_ != nullptr
  bool ipc_flagged_ = false;   // use_ipc_reply_flag: ipc_answered_ is kept by the servers
  uint8_t ipc_answered_ = 0;   // set by an ipc server's response, cleared by a scan
  kv::Pattern pattern_;
  std::unique_ptr<metrics::RequestLatency> own_latency_;
  kv::HistoryOracle* oracle_ = nullptr;
  uint32_t oracle_client_ = 0;
};

}  // namespace bkv::backend
