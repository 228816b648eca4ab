#include "apps/benchkv/simulator/kv_mode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "apps/benchkv/node/node_runtime.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/results/results.hpp"
#include "apps/benchkv/simulator/runner.hpp"
#include "apps/benchkv/simulator/step_log.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "backends/node_backends.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"
#include "sim/des_transport.hpp"

static_assert(bkv::app::kMaxRingPageBatch == bkv::software_nic::PagedMemory::kMaxGiveBackPages,
              "--ring-page-batch takes what PagedMemory accepts");

namespace bkv::app {

using namespace bkv::sim;

namespace {

struct SimWaker {
  std::vector<SimThread*> clients;
  SimThread* current = nullptr;  // the daemon whose step is running
  Time wake_ns = 0;
  void wake(uint32_t c) {
    if (c < clients.size() && current) clients[c]->wake(current->now() + wake_ns);
  }
  void prefetch(uint32_t c) const noexcept {
    if (c < clients.size()) clients[c]->prefetch_wake();
  }
};

// Simulated threads: a thread's meter is its simulated clock; the waker schedules the
// answered client.
struct SimThreads {
  using Meter = SimThread;
  using Waker = SimWaker;
  std::vector<std::unique_ptr<SimThread>>* threads = nullptr;
  SimWaker waker_;
  SimThread& meter(uint32_t t) { return *(*threads)[t]; }
  Waker& waker() { return waker_; }
};

// A thread's discrete-event transport, owned by the fabric.
struct MakeDesTransport {
  sim::DesFabric* fabric = nullptr;
  uint32_t node = 0;
  sim::DeviceContextConfig ccfg;
  sim::DesTransport& operator()(uint32_t /*thread*/, SimThread& th) { return fabric->create_transport(node, th, ccfg); }
};

using SimRuntime = app::NodeRuntime<SimThreads, MakeDesTransport>;


// A client's remote path's hint for the lines found from shared state rather than the
// client's (Delegation's shm::DelegationClient::StepHint; nothing for the other paths).
struct NoPathHint {
  void prefetch() const noexcept {}
};
template <class Client>
auto path_hint_of(const Client& c) {
  if constexpr (requires { c.remote_path().step_hint(); })
    return c.remote_path().step_hint();
  else
    return NoPathHint{};
}

struct Snapshot {
  backend::DaemonMetrics m;
  Time busy_ns = 0;
  uint64_t steps = 0;
  copyrpc::RttHistogram rtt;
};

// The KV mode: NP nodes of node backend B (its traits: backends/node_backends.hpp), every
// daemon and client on its own simulated thread; the drain looks every 10 us.
template <class B>
class Experiment final : public SimRun {
 public:
  using SimNode = backend::Node<B, SimRuntime>;

  Experiment(const app::Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress)
      : SimRun(o, model, progress, derive_seed(o.seed, {0x4E4943ull}), o.client_threads, 10'000),
        D_(o.server_threads), C_(o.client_threads) {
    for (const std::string& text : o.faults) model_.faults.push_back(sim::Fault::parse(text));
    loss_rng_ = Rng(derive_seed(o.seed, {0x4C4F5353ull /* "LOSS" */}));
    sim::check_shape(model_.faults, np_, D_);
    sim::check_resend_reach(model_.faults, startup_, o.runs, duration_);
    build();
  }

  ExperimentResult run() {
    const bool drained = run_timeline(0);
    if (!drained && !oracle_) throw std::runtime_error("simulation ended with requests still in flight");

    ExperimentResult res;
    if (interruption()) res.interrupted = interruption()->to_json();
    if (oracle_) {  // the oracle reports requests still in flight as lost
      for (auto& n : nodes_) n->attach_oracle(nullptr);
      check_all_endpoints();
      res.exactly_once = oracle_->check();
      res.oracle = std::move(oracle_);
      res.credit_checks = credit_checks_;
      res.credit_violations = credit_violations_;
      res.credit_examples = credit_examples_;
    }
    // The life statistics scale the kept epochs to fill the life: none finished (a signal
    // during start-up or warm-up) leaves nothing to scale, and the summary without "life".
    if (o_.life_s > 0 && life_kept_ns_ > 0) res.life = life_statistics();
    res.runs = std::move(runs());
    res.daemons = std::move(daemon_metrics_);
    res.inflight = std::move(samples_);
    res.total_issued = total_issued();
    res.total_completed = total_completed();
    for (auto& n : nodes_)
      for (uint32_t c = 0; c < C_; ++c) res.errors += n->counters(c).errors.load();
    for (auto& n : nodes_) res.errors += n->client_protocol_errors();
    for (auto& n : nodes_)
      for (uint32_t c = 0; c < C_; ++c) res.failed += n->counters(c).failed.load();
    if (tracing_) {
      res.trace_json = finish_trace();
      res.trace_events = trace_events_;
    }
    double head_wait = 0;
    for (uint32_t r = 0; r < np_; ++r) head_wait += head_lines_[r].mean_wait_ns() / np_;
    res.extra = timeline_json();
    res.setup_provenance = setup_provenance();
    res.extra["ring_head_mean_wait_ns"] = head_wait;
    res.extra["issued"] = res.total_issued;
    res.extra["completed"] = res.total_completed;
    res.extra["errors"] = res.errors;
    res.extra["model"] = model_.to_json();
    if (res.exactly_once) {
      const kv::HistoryOracle::Verdict& v = *res.exactly_once;
      nlohmann::json counts = nlohmann::json::object();
      for (size_t k = 0; k < kv::HistoryOracle::kViolationKinds; ++k)
        counts[kv::HistoryOracle::to_string(static_cast<kv::HistoryOracle::ViolationKind>(k))] = v.counts[k];
      res.extra["exactly_once"] = {{"requests", v.requests},        {"answered", v.answered},
                                   {"failed", v.failed},            {"gets_checked", v.gets_checked},
                                   {"puts_applied", v.puts_applied}, {"puts_matched", v.puts_matched},
                                   {"broken_connections", v.broken_connections}, {"violations", counts},
                                   {"examples", v.examples},        {"credit_checks", res.credit_checks},
                                   {"credit_violations", res.credit_violations},
                                   {"credit_examples", res.credit_examples}};
    }
    if (model_.response_handoff_ns > 0) {  // absent when off: the outputs of models without it keep their bytes
      double handoff_wait = 0;
      uint64_t handoffs = 0;
      for (uint32_t r = 0; r < np_; ++r) {
        handoff_wait += answer_handoffs_[r].mean_wait_ns() / np_;
        handoffs += answer_handoffs_[r].uses();
      }
      res.extra["answer_handoff_mean_wait_ns"] = handoff_wait;
      res.extra["answer_handoff_holds"] = handoffs;  // one hold per client step that collected answers
      if (model_.response_handoff_unit == HandoffUnit::kVisit) {  // absent per answer: those outputs keep their bytes
        uint64_t answers = 0, transfers = 0;
        for (uint32_t r = 0; r < np_; ++r)
          for (uint32_t c = 0; c < C_; ++c) {
            answers += threads_[r][D_ + c]->handoff_answers();
            transfers += threads_[r][D_ + c]->handoff_transfers();
          }
        res.extra["answer_handoff_answers"] = answers;
        res.extra["answer_handoff_transfers"] = transfers;  // one per visit
      }
    }
    // Per-NIC figures: over each run's kept epochs, and over the whole simulation.
    res.extra["nics"] = nics_json();
    return res;
  }

 private:
  // ---- the runner's hooks (apps/benchkv/simulator/runner.hpp)
  void start() override {
    if (startup_ > 0) {  // the clients start: the daemons' idle spin ends
      const TargetId startup_target = engine_.add_member<Experiment, &Experiment::on_startup_end>(this);
      engine_.schedule(startup_, startup_target, 0);
    }
    if (!o_.inflight_samples.empty()) {
      sample_target_ = engine_.add_member<Experiment, &Experiment::on_sample>(this);
      sample_every_ = std::max<Time>(1, static_cast<Time>(std::llround(o_.inflight_sample_interval_us * 1000)));
      engine_.schedule(startup_, sample_target_, 0);  // from the clients' start
    }
    if (o_.trim == 0) latency_window_start();
    if (!o_.step_log.empty()) step_log_ = std::make_unique<StepLog>(StepLog{np_, D_ + C_, D_, {}});
    start_threads();
  }
  void runs_ended() override {
    if (step_log_) {
      step_log_->write(o_.step_log);
      step_log_.reset();
    }
  }
  void stop_issuing() override {
    for (auto& n : nodes_) n->stop_issuing();
  }
  // An endpoint stopped on an error no fault explains (a protocol error: a duplicate
  // executed, a forged batch): the run is refused already, and calls its peer has
  // pending toward it may wait for ever (nothing tells the peer), so the drain would
  // spin out its whole limit for nothing. It stops once a drain check finds nothing
  // ended since the previous one (calls failed back by the stop end first).
  bool drain_futile() override {
    const uint64_t in_flight = requests_in_flight();
    const bool stuck = endpoint_stopped_unexplained_ && in_flight == drain_in_flight_;
    drain_in_flight_ = in_flight;
    return stuck;
  }
  bool idle() const override { return requests_in_flight() == 0; }
  uint64_t requests_in_flight() const {
    uint64_t in_flight = 0;
    for (const auto& n : nodes_) in_flight += n->in_flight();
    return in_flight;
  }
  uint64_t completed(uint32_t rank, uint32_t client) const override {
    return nodes_[rank]->counters(client).completed.load(std::memory_order_relaxed);
  }
  Totals totals() const override { return {total_issued(), total_completed()}; }

  void build() {
    threads_.resize(np_);
    runtimes_.resize(np_);
    head_lines_ = std::make_unique<SharedResource[]>(np_);
    answer_handoffs_ = std::make_unique<SharedResource[]>(np_);
    for (uint32_t r = 0; r < np_; ++r) {
      fabric_.add_node(model_.nic);
      for (uint32_t t = 0; t < D_ + C_; ++t) {
        const bool client = t >= D_;
        // Appended piece by piece: GCC 12 at -O3 warns -Wrestrict (a false positive) on
        // the inlined operator+ chain.
        std::string name = "r";
        name += std::to_string(r);
        name += client ? ".c" : ".d";
        name += std::to_string(client ? t - D_ : t);
        threads_[r].push_back(std::make_unique<SimThread>(engine_, model_.cpu, derive_seed(o_.seed, {0x544852ull, r, t}), name));
        if (model_.ring_head_contention && SimNode::RemotePath::kSharedHead && client)
          threads_[r].back()->bind_shared(Op::kRingReserve, &head_lines_[r]);
        if (model_.response_handoff_ns > 0 && client)
          threads_[r].back()->bind_answer_handoff(&answer_handoffs_[r], model_.response_handoff_ns,
                                                  model_.response_handoff_unit == HandoffUnit::kVisit);
      }
      SimThreads th;
      th.threads = &threads_[r];
      th.waker_.wake_ns = static_cast<Time>(std::llround(model_.client_wake_ns));
      for (uint32_t c = 0; c < C_; ++c) th.waker_.clients.push_back(threads_[r][D_ + c].get());
      MakeDesTransport make;
      make.fabric = &fabric_;
      make.node = r;
      runtimes_[r] = std::make_unique<SimRuntime>(D_ + C_, std::move(th), std::move(make));
      app::NodeSetup ns = app::node_setup(o_, r, np_);
      // Simulated clients draw their patterns as they replay them (core/kv/workload.hpp):
      // the same requests, without np x clients tables written before the first event.
      ns.workload.storage = kv::PatternStorage::kOnDemand;
      nodes_.push_back(std::make_unique<SimNode>(ns.node, ns.loop, ns.workload, ns.context, *runtimes_[r]));
    }
    // One thread steps every client: they record into one set of histograms (what is read
    // is their merge, the same either way), which stays in the cache at any NP. Given
    // before the clients are built (connect_in_process starts the nodes).
    for (auto& n : nodes_) n->share_client_latency(&latency_);
    backend::connect_in_process(nodes_);
    // A client writes each request when it has paid for it, so its steps are pieces of
    // its loop; a daemon's loop may span several steps (docs/design_simulator.md §Simulated
    // threads). Each step lasts what it charges; a loop charges its own cost once.
    for (auto& n : nodes_) n->set_timed_writes(true);  // the clients exist once connected
    for (auto& node_threads : threads_)
      for (auto& th : node_threads) th->set_min_step(1);
    if (o_.check_exactly_once) {
      oracle_ = std::make_shared<kv::HistoryOracle>();
      for (auto& n : nodes_) n->attach_oracle(oracle_.get());
    }
    for (const sim::Fault& f : model_.faults) {
      switch (f.kind) {
        case sim::FaultKind::kLinkDelay: link_delays_.push_back(f); break;
        case sim::FaultKind::kSlowNode: slow_nodes_.push_back(f); break;
        case sim::FaultKind::kStallDaemon: stalls_.push_back(f); break;
        case sim::FaultKind::kPacketLoss: packet_losses_.push_back(f); break;
        case sim::FaultKind::kQpError: qp_errors_.push_back(f); break;
        case sim::FaultKind::kRnrStorm: rnr_storms_.push_back(f); break;
      }
    }
    fabric_.network().set_duplicate_detection(model_.psn_duplicate_detection);
    if (!link_delays_.empty()) fabric_.network().set_link_delay(&Experiment::link_delay, this);
    if (!packet_losses_.empty() || !qp_errors_.empty() || !rnr_storms_.empty()) {
      connection_faults_ = true;
      fabric_.network().enable_connection_faults(packet_losses_.empty() ? nullptr : &Experiment::packet_loss, this);
      if (!rnr_storms_.empty()) fabric_.network().set_rnr_storm(&Experiment::rnr_storm, this);
      if (oracle_) fabric_.network().set_connection_failed(&Experiment::connection_failed, this);
      const TargetId qp_error_target = engine_.add_member<Experiment, &Experiment::on_qp_error>(this);
      for (uint32_t i = 0; i < qp_errors_.size(); ++i) engine_.schedule(qp_errors_[i].start_ns(), qp_error_target, i);
    }
    bindings_.reserve(size_t(np_) * (D_ + C_));
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t t = 0; t < D_ + C_; ++t) {
        SimThread& th = *threads_[r][t];
        bindings_.push_back({this, t >= D_ ? &nodes_[r]->client(t - D_) : nullptr, &th, {}, {}, r, t});
        // A daemon's start-up loops spin (kIdleSpin; on_startup_end ends it); clients never do.
        th.set_step(t < D_ ? &Experiment::daemon_step : &Experiment::client_step, &bindings_.back(),
                    t < D_ && startup_ > 0);
        if (t >= D_) {
          Binding& b = bindings_.back();
          b.next.reserve_step(b.client->step_line_count());
          b.client->add_stable_step_lines(b.next);
          b.path = path_hint_of(*b.client);
          th.set_step_prefetch(&Experiment::client_prefetch, &b);
        }
      }
    if (!o_.trace.empty()) {
      tracing_ = true;
      trace_begin_ = o_.trace_window->begin_ns();
      trace_end_ = o_.trace_window->end_ns();
    }
    startup_loops_.assign(size_t(np_) * D_, 0);
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t d = 0; d < D_; ++d) threads_[r][d]->set_observer(&Experiment::observe_daemon, &bindings_[r * (D_ + C_) + d]);
  }

  // Daemons start at 0, clients at the end of the start-up (spread over the stagger,
  // except the first start_burst_clients of each node, which start at once).
  void start_threads() {
    Rng rng(derive_seed(o_.seed, {0x535441ull}));
    const double stagger = o_.start_mode == app::StartMode::kStaggered ? o_.start_stagger_us * 1000.0 : 0.0;
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t t = 0; t < D_ + C_; ++t) {
        Time at = t >= D_ ? startup_ : 0;
        if (t >= D_ + o_.start_burst_clients && stagger > 0) at += static_cast<Time>(rng.uniform() * stagger);
        threads_[r][t]->start(at);
      }
  }

  using PathHint = decltype(path_hint_of(std::declval<const typename SimNode::ClientT&>()));
  // What a simulated thread's step needs: the experiment, and for a client's thread the
  // client itself (a step loads it from here, not through the node's table of clients)
  // and, for client_prefetch, the lines its next step reads behind the client's pointers
  // (Client::add_stable_step_lines, add_next_step_lines, recorded at the end of its step,
  // when they are at hand) and its remote path's hint. What client_prefetch and a client
  // step read lies in the first three lines: the pointers and the path's hint in the
  // first (Delegation's StepHint is 40 bytes for this), the list in the next two (a step
  // writes the second of them); the node and thread numbers, which daemon steps and the
  // rare paths read, after them.
  struct alignas(sim::kCacheLineBytes) Binding {
    Experiment* exp;
    typename SimNode::ClientT* client;  // null for a daemon's thread
    SimThread* self;  // the thread the step runs on (client_prefetch)
    [[no_unique_address]] PathHint path{};
    LineList next;
    uint32_t rank;
    uint32_t thread;
  };
  static_assert(3 * sizeof(void*) + sizeof(PathHint) <= sim::kCacheLineBytes, "the hint's context in one line");

  // The engine's hint before a client's step (SimThread::set_step_prefetch): its
  // thread's step lines, the client's first lines, which the step reads first, and the
  // lines recorded at the end of its last step.
  static constexpr size_t kClientPrefetchLines = 8;
  static void client_prefetch(void* ctx, uint32_t /*generation*/) {
    const auto* b = static_cast<const Binding*>(ctx);
    b->self->prefetch_step_state();
    const auto* c = reinterpret_cast<const char*>(b->client);
    constexpr size_t lines = std::min(kClientPrefetchLines, (sizeof(*b->client) + sim::kCacheLineBytes - 1) / sim::kCacheLineBytes);
    for (size_t l = 0; l < lines; ++l) prefetch_line(c + l * sim::kCacheLineBytes);
    b->next.prefetch();
    b->path.prefetch();
  }

  static StepResult daemon_step(void* ctx, SimThread& self) {
    auto* b = static_cast<Binding*>(ctx);
    Experiment& e = *b->exp;
    if (!e.stalls_.empty()) [[unlikely]] {
      // A stalled daemon: the step due now waits, busy, until the stall ends.
      const Time now = self.now();
      for (const sim::Fault& f : e.stalls_)
        if (f.node == b->rank && f.daemon == b->thread && f.active(now)) {
          self.advance(f.end_ns() - now);
          return StepResult::kContinue;
        }
    }
    if (e.step_log_) [[unlikely]] e.log_step(*b);
    e.runtimes_[b->rank]->waker().current = &self;
    const bool loop_ended = e.nodes_[b->rank]->step_daemon(b->thread);
    if (!e.slow_nodes_.empty()) [[unlikely]] e.slow_down(b->rank, self);
    if (e.oracle_) [[unlikely]] e.check_endpoints(b->rank, b->thread);
    // Before the clients start nothing can reach a daemon, so its loops are identical and
    // idle: skipped in closed form until on_startup_end wakes it (exact: see SimThread).
    if (loop_ended && self.step_start() < e.startup_) return StepResult::kIdleSpin;
    return StepResult::kContinue;
  }

  static StepResult client_step(void* ctx, SimThread& self) {
    auto* b = static_cast<Binding*>(ctx);
    Experiment& e = *b->exp;
    if (e.step_log_) [[unlikely]] e.log_step(*b);
    const auto r = b->client->step_timed();  // build() set timed writes
    b->client->add_next_step_lines(b->next);
    if (!e.slow_nodes_.empty()) [[unlikely]] e.slow_down(b->rank, self);
    if (e.oracle_) [[unlikely]] e.check_endpoints(b->rank, b->thread);
    if (r.blocked) self.wake(self.now() + static_cast<Time>(std::llround(e.model_.client_retry_ns)));
    return r.again ? StepResult::kContinue : StepResult::kIdle;
  }

  void log_step(const Binding& b) { step_log_->steps.push_back(b.rank * (D_ + C_) + b.thread); }

  // ---- faults (sim/faults.hpp)
  // A slow node: the step that just ran takes factor x its charged time (the largest
  // factor of the windows its start lies in).
  void slow_down(uint32_t rank, SimThread& self) {
    double factor = 1;
    for (const sim::Fault& f : slow_nodes_)
      if (f.node == rank && f.active(self.step_start())) factor = std::max(factor, f.factor);
    if (factor > 1) self.advance(static_cast<Time>(std::llround(double(self.charged_ns()) * (factor - 1))));
  }
  static Time link_delay(void* ctx, uint32_t from, uint32_t to, Time at) {
    Time extra = 0;
    for (const sim::Fault& f : static_cast<Experiment*>(ctx)->link_delays_)
      if (f.node == from && f.to_node == to && f.active(at)) extra += static_cast<Time>(std::llround(f.extra_ns));
    return extra;
  }

  // A request packet on a link with a packet_loss window: lost with the fault's
  // probability, drawn from the losses' own stream (only for packets a window covers).
  static bool packet_loss(void* ctx, uint32_t from, uint32_t to, Time at, sim::Retransmission& rt) {
    auto& e = *static_cast<Experiment*>(ctx);
    for (const sim::Fault& f : e.packet_losses_)
      if (f.node == from && f.to_node == to && f.active(at) && e.loss_rng_.uniform() < f.loss) {
        rt = sim::Retransmission{sim::ack_timeout_ns(f.timeout), f.retry_cnt};
        e.trace_instant("packet lost", from, at, "{\"to\":" + std::to_string(to) + "}");
        return true;
      }
    return false;
  }
  // A WRITE+IMM landing on node `node` at `at`: RNR NAKed if an rnr_storm window of the
  // node covers `at` (the smallest retry count among overlapping storms applies).
  static bool rnr_storm(void* ctx, uint32_t node, Time at, uint32_t& rnr_retry) {
    bool storm = false;
    for (const sim::Fault& f : static_cast<Experiment*>(ctx)->rnr_storms_)
      if (f.node == node && f.active(at)) {
        rnr_retry = storm ? std::min(rnr_retry, f.rnr_retry) : f.rnr_retry;
        storm = true;
      }
    return storm;
  }
  // A connection a fault broke: the oracle accepts failure answers between the two nodes
  // from now on.
  static void connection_failed(void* ctx, uint32_t node, uint32_t peer) {
    static_cast<Experiment*>(ctx)->oracle_->connection_broken(node, peer);
  }
  // An instant event on node `rank`'s trace (fault events), inside the trace window.
  void trace_instant(const char* name, uint32_t rank, Time at, const std::string& args) {
    if (!tracing_ || at < trace_begin_ || at >= trace_end_) return;
    ++trace_events_;
    char buf[128];
    std::snprintf(buf, sizeof buf, "{\"name\":\"%s\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%u,\"ts\":%.3f,\"args\":", name,
                  rank, at / 1000.0);
    trace_ << buf << args << "},\n";
  }
  // qp_error fault i: every QP of its node connected to its peer node fails now.
  void on_qp_error(uint32_t i) {
    const sim::Fault& f = qp_errors_[i];
    sim::Network& net = fabric_.network();
    for (uint32_t q = 0; q < net.qp_count(); ++q) {
      const sim::QpState& s = net.qp(q);
      if (s.node == f.node && s.connected() && net.qp(s.peer).node == f.to_node) net.fail_connection(q);
    }
    trace_instant("qp error", f.node, engine_.now(), "{\"peer\":" + std::to_string(f.to_node) + "}");
  }

  // ---- copyrpc endpoint checks (with the oracle): after every step of a thread that owns
  // a context, each of its endpoints holds the credit invariant and has not stopped (with
  // packet_loss, qp_error or rnr_storm faults an endpoint may stop on an error completion).
  void check_endpoints(uint32_t rank, uint32_t thread) {
    auto* ctx = nodes_[rank]->context_of(thread);
    if (ctx == nullptr) return;
    for (uint32_t i = 0; i < ctx->endpoint_count(); ++i) {
      const auto& ep = ctx->endpoint(i);
      ++credit_checks_;
      const bool running = ep.error == copyrpc::EndpointError::kNone ||
                           (connection_faults_ && ep.error == copyrpc::EndpointError::kCompletionError);
      if (ep.credit_invariant_holds() && running && ep.resp_committed <= ep.resp_reservation) continue;
      ++credit_violations_;
      if (!running) endpoint_stopped_unexplained_ = true;
      if (credit_examples_.size() < 8)
        credit_examples_.push_back("rank " + std::to_string(rank) + " thread " + std::to_string(thread) +
                                   " endpoint " + std::to_string(i) + ": in_flight " + std::to_string(ep.in_flight()) +
                                   " R " + std::to_string(ep.resp_reservation) + " C " +
                                   std::to_string(ep.remote_ring.length) + " error " +
                                   std::to_string(static_cast<int>(ep.error)));
    }
  }
  void check_all_endpoints() {
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t t = 0; t < D_ + C_; ++t) check_endpoints(r, t);
  }

  // ---- start-up, epochs and runs
  void on_startup_end(uint32_t) {
    for (auto& node_threads : threads_)
      for (uint32_t d = 0; d < D_; ++d) {
        node_threads[d]->wake(startup_);
        node_threads[d]->set_may_idle_spin(false);  // no step from now on spins (daemon_step)
      }
  }
  // The daemons' loop statistics cover each run's kept epochs (the steady state).
  void kept_began(uint32_t) override { snapshot_all(run_snap_); }

  void epoch_recorded(RunResults& rr, uint32_t run, uint32_t epoch) override {
    const uint32_t idx = run * epochs_ + epoch;
    if (progress_) progress_(app::format_progress(rr, o_.runs, epoch));
    // Latency is kept over the kept epochs, as the Mops are.
    if (epoch + 1 == rr.end_kept_epoch()) rr.set_latency(latency_sum().since(latency_start_));
    const uint32_t next_run = (idx + 1) / epochs_, next_epoch = (idx + 1) % epochs_;
    if (next_run < o_.runs && next_epoch == o_.trim) latency_window_start();
  }

  // Every client's request latency, merged: the histogram all clients record into
  // (32-bit counts, as a client's), widened.
  metrics::MergedRequestLatency latency_sum() const {
    metrics::MergedRequestLatency sum;
    sum.merge(latency_);
    return sum;
  }
  void latency_window_start() {
    latency_.restart_max();
    latency_start_ = latency_sum();
  }

  uint64_t total_issued() const {
    uint64_t s = 0;
    for (auto& n : nodes_)
      for (uint32_t c = 0; c < C_; ++c) s += n->counters(c).issued.load(std::memory_order_relaxed);
    return s;
  }
  uint64_t total_completed() const {
    uint64_t s = 0;
    for (auto& n : nodes_)
      for (uint32_t c = 0; c < C_; ++c) s += n->counters(c).completed.load(std::memory_order_relaxed);
    return s;
  }

  // Daemon d of rank r as of now, settled: the loops a start-up's idle spin skipped up to
  // now are accounted first (SimThread::settle), so its thread's counts and its metrics
  // (which the observer keeps) hold every loop that started before now. Without it a
  // read at the clients' start sees none of the start-up's loops, and the daemon's next
  // step adds all of them after the read. Every read of daemon figures goes through here
  // (the thread's own counts are settled by it too).
  const backend::DaemonMetrics& settled_metrics(uint32_t r, uint32_t d) {
    threads_[r][d]->settle(engine_.now());
    return nodes_[r]->daemon_metrics(d);
  }

  void snapshot_all(std::vector<Snapshot>& out) {
    out.clear();
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t d = 0; d < D_; ++d) {
        const backend::DaemonMetrics& m = settled_metrics(r, d);
        const SimThread& th = *threads_[r][d];
        auto* ctx = nodes_[r]->context_of(d);
        out.push_back({m, th.busy_ns_at(engine_.now()), th.steps(),
                       ctx ? ctx->stats().rtt : copyrpc::RttHistogram{}});
      }
  }

  void run_ended(RunResults& /*rr*/, uint32_t /*run*/) override {}

  // A signal ended the run inside its kept window: latency and daemon figures over the
  // kept epochs that finished.
  void run_interrupted(RunResults& rr, uint32_t run) override {
    rr.set_latency(latency_sum().since(latency_start_));
    kept_ended(rr, run);
  }

  // The daemons' figures over a run's kept epochs (from on_kept_begin's snapshot).
  void kept_ended(RunResults& rr, uint32_t run) override {
    std::vector<Snapshot> now;
    snapshot_all(now);
    const Time window = rr.kept_duration_ns();
    const double secs = double(window) * 1e-9;
    if (life_kept_.empty()) life_kept_.resize(now.size());
    for (size_t i = 0; i < now.size(); ++i) life_kept_[i].merge(now[i].m, run_snap_[i].m);
    life_kept_ns_ += window;
    life_kept_requests_ += rr.kept_requests();
    life_end_ns_ = engine_.now();
    life_end_completed_ = total_completed();
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t d = 0; d < D_; ++d) {
        const Snapshot& a = run_snap_[r * D_ + d];
        const Snapshot& b = now[r * D_ + d];
        app::DaemonReport dm;
        dm.run = run;
        dm.rank = r;
        dm.daemon = d;
        dm.cqe = b.m.cqe.since(a.m.cqe);
        dm.completions = b.m.completions.since(a.m.completions);
        dm.inflight_avg = dm.cqe.loops ? double(b.m.inflight_sum - a.m.inflight_sum) / double(dm.cqe.loops) : 0.0;
        dm.extra["busy_fraction"] = double(b.busy_ns - a.busy_ns) / double(window);
        dm.extra["loops_per_s"] = double(dm.cqe.loops) / secs;
        dm.extra["loop_ns_avg"] = dm.cqe.loops ? double(window) / double(dm.cqe.loops) : 0.0;
        dm.extra["calls"] = double(b.m.calls - a.m.calls);
        dm.extra["replies"] = double(b.m.replies - a.m.replies);
        dm.extra["local_ops"] = double(b.m.local_ops - a.m.local_ops);
        dm.extra["backlog_peak"] = double(b.m.backlog_peak);
        dm.extra["protocol_errors"] = double(b.m.protocol_errors - a.m.protocol_errors);
        if (b.m.failed_calls != a.m.failed_calls)  // absent when none: outputs without faults keep their bytes
          dm.extra["failed_calls"] = double(b.m.failed_calls - a.m.failed_calls);
        dm.extra["work_loop_fraction"] = dm.cqe.loops ? double(b.m.busy_loops - a.m.busy_loops) / double(dm.cqe.loops) : 0.0;
        const copyrpc::RttHistogram rtt = b.rtt.since(a.rtt);
        if (rtt.count()) {
          dm.extra["rtt_mean_us"] = rtt.mean_ns() / 1000.0;
          dm.extra["rtt_p50_us"] = rtt.percentile_ns(0.5) / 1000.0;
          dm.extra["rtt_p99_us"] = rtt.percentile_ns(0.99) / 1000.0;
        }
        daemon_metrics_.push_back(std::move(dm));
      }
    life_end_ = std::move(now);
  }

  // ---- in-flight samples
  // The first sample, at the clients' start, starts the counting: its CQEs and loops
  // are 0 (the start-up's idle loops are not sampled), each later row's are those since
  // the row before it.
  void on_sample(uint32_t) {
    const Time now = engine_.now();
    const bool first = last_sample_.empty();
    if (first) last_sample_.resize(size_t(np_) * D_);
    for (uint32_t r = 0; r < np_; ++r) {
      uint64_t completed = 0;
      for (uint32_t c = 0; c < C_; ++c) completed += nodes_[r]->counters(c).completed.load(std::memory_order_relaxed);
      for (uint32_t d = 0; d < D_; ++d) {
        const backend::DaemonMetrics& m = settled_metrics(r, d);
        auto& last = last_sample_[r * D_ + d];
        if (first) last = {m.cqe.cqes, m.cqe.loops};
        samples_.push_back({now, r, d, nodes_[r]->daemon_calls_in_flight(d), static_cast<uint32_t>(m.cqe.cqes - last.first),
                            m.cqe.loops - last.second, completed});
        last = {m.cqe.cqes, m.cqe.loops};
      }
    }
    if (now + sample_every_ <= run_start(o_.runs)) engine_.schedule(now + sample_every_, sample_target_, 0);
  }

  // ---- trace (Chrome / Perfetto trace-event JSON)
  static void observe_daemon(void* ctx, const SimThread& self) {
    auto* b = static_cast<Binding*>(ctx);
    Experiment& e = *b->exp;
    const Time start = self.step_start();
    if (start < e.startup_) {  // every loop of the start-up is one step
      e.startup_loops_[b->rank * e.D_ + b->thread] += self.repeat();
      if (self.reporting_skipped()) e.nodes_[b->rank]->record_idle_loops(b->thread, self.repeat());
    }
    if (!e.tracing_) return;
    if (start < e.trace_begin_ || start >= e.trace_end_) return;
    ++e.trace_events_;
    const uint32_t cqes = self.step_phase(Phase::kCqes);
    std::ostringstream& os = e.trace_;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"loop\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"cqes\":%u}},\n",
                  b->rank, b->thread, start / 1000.0, self.last_step_ns() / 1000.0, cqes);
    os << buf;
    if (cqes) {
      std::snprintf(buf, sizeof buf,
                    "{\"name\":\"cqes\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"args\":{\"n\":%u}},\n",
                    b->rank, b->thread, start / 1000.0, cqes);
      os << buf;
    }
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"calls_in_flight\",\"ph\":\"C\",\"pid\":%u,\"ts\":%.3f,\"args\":{\"d%u\":%llu}},\n", b->rank,
                  start / 1000.0, b->thread,
                  static_cast<unsigned long long>(e.nodes_[b->rank]->daemon_calls_in_flight(b->thread)));
    os << buf;
  }

  // The original's per-loop statistics (docs/calibration.md, "Like-for-like figures"):
  // loop-weighted means of the samples every loop takes at its end, over a daemon life of
  // life_s from the daemons' start. The simulated loops up to the last kept epoch's end
  // (start-up, warm-up, kept epochs) are followed by the kept epochs' loops, scaled to
  // fill the rest of the life; completed requests likewise.
  nlohmann::json life_statistics() const {  // at least one kept epoch finished (life_kept_ns_ > 0)
    const double life_ns = o_.life_s * 1e9;
    const double f = (life_ns - double(life_end_ns_)) / double(life_kept_ns_);
    nlohmann::json daemons = nlohmann::json::array();
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t d = 0; d < D_; ++d) {
        const size_t i = r * D_ + d;
        const backend::DaemonMetrics& end = life_end_[i].m;
        const LifeSums& kept = life_kept_[i];
        const double loops = double(end.completions.loops) + f * double(kept.completions.loops);
        auto per_loop = [&](double v) { return loops > 0 ? app::round6(v / loops) : 0.0; };
        nlohmann::json shares = nlohmann::json::object();
        for (size_t k = 0; k < metrics::kCqeBuckets; ++k)
          shares[metrics::kCqeBucketNames[k]] =
              per_loop(double(end.completions.buckets[k]) + f * double(kept.completions.buckets[k]));
        daemons.push_back(
            {{"rank", r},
             {"daemon", d},
             {"startup_loops", startup_loops_[i]},
             {"loops", app::round6(loops)},
             {"completions_per_loop_avg", per_loop(double(end.completions.cqes) + f * double(kept.completions.cqes))},
             {"completions_per_loop_share", std::move(shares)},
             {"cqe_per_loop_avg", per_loop(double(end.cqe.cqes) + f * double(kept.cqe.cqes))},
             {"inflight_avg", per_loop(double(end.inflight_sum) + f * double(kept.inflight_sum))}});
      }
    const double completed =
        double(life_end_completed_) + double(life_kept_requests_) * (life_ns - double(life_end_ns_)) / double(life_kept_ns_);
    return {{"life_s", o_.life_s},
            {"startup_ms", o_.startup_ms},
            {"total_mops", app::round6(completed / life_ns * 1e3)},
            {"daemons", std::move(daemons)}};
  }

  std::string finish_trace() {
    std::string body = trace_.str();
    if (!body.empty()) body.resize(body.size() - 2);  // drop the last ",\n"
    std::ostringstream out;
    out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
    for (uint32_t r = 0; r < np_; ++r) {
      if (r) out << ",\n";
      out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r << ",\"args\":{\"name\":\"rank " << r << "\"}}";
    }
    for (const sim::Fault& f : model_.faults) {  // one span per fault, on the node it hits
      char buf[256];
      std::snprintf(buf, sizeof buf, ",\n{\"name\":\"fault %s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":%s}",
                    sim::to_string(f.kind), f.node, f.kind == sim::FaultKind::kStallDaemon ? f.daemon : 0u,
                    f.start_ns() / 1000.0, (f.end_ns() - f.start_ns()) / 1000.0, f.to_json().dump().c_str());
      out << buf;
    }
    if (!body.empty()) out << ",\n" << body;
    out << "\n]}\n";
    return out.str();
  }

  uint32_t D_, C_;  // daemons and clients per node
  std::unique_ptr<StepLog> step_log_;  // --step-log: recording while set
  std::vector<std::vector<std::unique_ptr<SimThread>>> threads_;
  std::vector<std::unique_ptr<SimRuntime>> runtimes_;
  std::unique_ptr<SharedResource[]> head_lines_;  // per node: the delegation ring's head line
  std::unique_ptr<SharedResource[]> answer_handoffs_;  // per node: Model::response_handoff_ns
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::vector<Binding> bindings_;
  std::vector<app::DaemonReport> daemon_metrics_;
  std::vector<Snapshot> run_snap_;  // at the current run's first kept epoch
  // The kept epochs' loop samples of one daemon, over every run.
  struct LifeSums {
    metrics::CqeHistogram cqe, completions;
    uint64_t inflight_sum = 0;
    void merge(const backend::DaemonMetrics& b, const backend::DaemonMetrics& a) {
      cqe.merge(b.cqe.since(a.cqe));
      completions.merge(b.completions.since(a.completions));
      inflight_sum += b.inflight_sum - a.inflight_sum;
    }
  };
  std::vector<LifeSums> life_kept_;          // per daemon (rank-major)
  std::vector<Snapshot> life_end_;           // at the last kept epoch's end
  Time life_end_ns_ = 0, life_kept_ns_ = 0;  // that time; the kept epochs' total length
  uint64_t life_end_completed_ = 0, life_kept_requests_ = 0;
  std::vector<uint64_t> startup_loops_;      // per daemon: loops that started before the clients
  metrics::RequestLatency latency_;        // every client's (SimNode::share_client_latency)
  metrics::MergedRequestLatency latency_start_;  // at the start of the current run's kept epochs
  TargetId sample_target_{};
  Time sample_every_ = 10'000;
  std::vector<InflightSample> samples_;
  std::vector<std::pair<uint64_t, uint64_t>> last_sample_;
  bool tracing_ = false;
  Time trace_begin_ = 0, trace_end_ = 0;
  uint64_t trace_events_ = 0;  // written inside the window (loop slices, instants)
  std::shared_ptr<kv::HistoryOracle> oracle_;  // --check-exactly-once
  uint64_t credit_checks_ = 0, credit_violations_ = 0;
  std::vector<std::string> credit_examples_;
  std::vector<sim::Fault> slow_nodes_, stalls_, link_delays_, packet_losses_, qp_errors_, rnr_storms_;
  bool connection_faults_ = false;  // packet_loss, qp_error or rnr_storm faults: endpoints may stop
  bool endpoint_stopped_unexplained_ = false;  // check_endpoints saw a stop no fault explains
  uint64_t drain_in_flight_ = ~0ull;            // in flight at the previous drain check
  Rng loss_rng_;                    // packet losses (seeded from the run's seed)
  std::ostringstream trace_;
};

}  // namespace

ExperimentResult run_experiment(const app::Options& o, const sim::Model& model,
                                const std::function<void(const std::string&)>& progress) {
  if (o.transport != app::TransportKind::kSim) throw std::runtime_error("run_experiment: transport must be sim");
  if (!o.backend) throw std::runtime_error("no backend given");
  if (*o.backend == backend::BackendKind::kUcxAm)
    throw std::runtime_error("the ucx-am baseline has no simulated form: run it with --transport ucx");
  check_simulation_fits(o);
  return backend::with_node_backend(*o.backend, [&]<class B>() {
    Experiment<B> e(o, model, progress);
    return e.run();
  });
}

MemoryEstimate estimate_memory(const app::Options& o) {
  MemoryEstimate m;
  const uint32_t np = o.np, D = o.server_threads, C = o.client_threads;
  if (o.mode == Mode::kKv && o.backend && *o.backend != backend::BackendKind::kUcxAm)
    m.endpoints = 2 * backend::with_node_backend(*o.backend, [&]<class B>() { return B::connection_count(np, D, C); });
  m.threads = uint64_t{np} * (D + C);
  // Per endpoint: its bookkeeping (copyrpc endpoint, queue pair, registrations) and the
  // ring pages that traffic materializes (rings are paged: see sim/des_transport.hpp).
  // Kept pages (--ring-pages keep) stay resident once touched: the whole ring, at worst
  // (auto keeps them only where the whole rings fit: counted as released here).
  const uint64_t ring_pages =
      2 * (o.ring_pages == RingPages::kKeep ? o.ring_size : std::min<uint64_t>(o.ring_size, kEstimateRingPageBytes));
  const double bytes = double(m.endpoints) * double(kEstimateEndpointBytes + ring_pages) +
                       double(m.threads) * double(kEstimateThreadBytes) +
                       double(np) * double(o.key_range) * double(kEstimateKeyBytes) + double(kEstimateBaseBytes);
  m.bytes = bytes >= 1.8e19 ? ~uint64_t{0} : static_cast<uint64_t>(bytes);
  return m;
}

void check_simulation_fits(const app::Options& o) {
  const MemoryEstimate m = estimate_memory(o);
  const uint64_t avail = available_memory_bytes();
  if (avail == 0 || m.bytes <= avail) return;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "this simulation needs about %.1f GiB (%llu copyrpc endpoints, %llu simulated threads), more than "
                "the %.1f GiB of memory available (MemAvailable in /proc/meminfo); lower --np, --client-threads "
                "or --server-threads",
                double(m.bytes) / double(1ull << 30), static_cast<unsigned long long>(m.endpoints),
                static_cast<unsigned long long>(m.threads), double(avail) / double(1ull << 30));
  throw OptionError("np", buf);  // input too large for this machine: exit status 2 like any bad input
}

nlohmann::json write_experiment_outputs(const app::Options& o, const ExperimentResult& res) {
  app::write_csv_file(o.output, res.runs);
  nlohmann::json summary = app::summary_json(o, res.runs, res.daemons);
  summary["simulator"] = res.extra;
  summary["totals"] = {{"issued", res.total_issued}, {"completed", res.total_completed}, {"errors", res.errors}};
  // Requests reported failed: shown with faults or when any failed (outputs without keep their bytes).
  if (res.failed > 0 || res.extra["model"].contains("faults")) summary["totals"]["failed"] = res.failed;
  summary["provenance"] = app::provenance_json(true);  // simulated threads: no CPU map
  if (res.setup_provenance.is_object()) summary["provenance"].update(res.setup_provenance);
  if (!res.life.is_null()) summary["life"] = res.life;
  if (!res.interrupted.is_null()) summary["interrupted"] = res.interrupted;
  app::write_summary_file(o.summary, summary);
  if (!o.inflight_samples.empty()) app::write_inflight_csv(o.inflight_samples, res.inflight);
  if (!o.trace.empty()) {
    std::ofstream t(o.trace);
    t << res.trace_json;
    if (!t) throw std::runtime_error("cannot write the trace to " + o.trace);
    if (res.trace_events == 0)
      std::fprintf(stderr,
                   "benchkv: warning: no event fell in the trace window %.17g:%.17g us (the simulation ran to %.3f "
                   "us); %s holds only its metadata\n",
                   o.trace_window->begin_us, o.trace_window->end_us,
                   static_cast<double>(res.extra["virtual_end_ns"].get<uint64_t>()) / 1e3, o.trace.c_str());
  }
  if (res.exactly_once && (!res.exactly_once->ok() || res.credit_violations > 0)) {
    std::string msg = "exactly-once oracle: " + std::to_string(res.exactly_once->violations()) +
                      " violation(s), " + std::to_string(res.credit_violations) + " copyrpc endpoint check(s) failed";
    for (const auto& e : res.exactly_once->examples) msg += "\n  " + e;
    for (const auto& e : res.credit_examples) msg += "\n  " + e;
    throw std::runtime_error(msg);
  }
  return summary;
}

void write_inflight_csv(const std::string& path, const std::vector<InflightSample>& samples) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write in-flight samples to " + path);
  out << "t_us,rank,daemon,calls_in_flight,cqes,loops,rank_completed\n";
  char buf[192];
  for (const auto& s : samples) {
    std::snprintf(buf, sizeof buf, "%.3f,%u,%u,%llu,%u,%llu,%llu\n", s.t_ns / 1000.0, s.rank, s.daemon,
                  static_cast<unsigned long long>(s.calls_in_flight), s.cqes_since_last,
                  static_cast<unsigned long long>(s.loops_since_last), static_cast<unsigned long long>(s.rank_completed));
    out << buf;
  }
  if (!out) throw std::runtime_error("cannot write in-flight samples to " + path);
}

}  // namespace bkv::app
