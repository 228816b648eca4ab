#include "apps/benchkv/simulator/data_mode.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/results/rpc_results.hpp"
#include "apps/benchkv/simulator/runner.hpp"
#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

namespace {

using namespace bkv::sim;
using Daemon = data::DataDaemon<DesTransport>;
using Client = data::DataClient<DesTransport>;

// The data mode, one value size: NP nodes, each a daemon #0 and client_threads clients
// on simulated threads over the simulated fabric. The drain looks every 1 us.
class DataExperiment final : public SimRun {
 public:
  // size_index of size_count: the run index counts over the sizes (size i has runs
  // i*runs ..), so progress lines count runs out of size_count * runs.
  DataExperiment(const Options& o, const Model& model, uint32_t value_size, uint32_t size_index, uint32_t size_count,
                 const std::function<void(const std::string&)>& progress)
      : SimRun(o, model, progress, derive_seed(o.seed, {0x4E4943ull, size_index}), o.client_threads, 1000),
        value_size_(value_size), run_base_(size_index * o.runs), runs_total_(size_count * o.runs) {
    if (o.np < 2) throw std::invalid_argument("data: needs --np >= 2 (requests go to other nodes)");
    const copyrpc::ContextConfig cc = rpc_context_config(o);
    for (uint32_t r = 0; r < np_; ++r) {
      const data::DataNodeConfig c = data_node_config(o, r, np_, value_size);
      fabric_.add_node(model_.nic);
      Node& n = *nodes_.emplace_back(std::make_unique<Node>());
      n.store = std::make_unique<kv::BlobStore>(r, c.key_range, c.max_value_bytes, c.clients * c.queue_depth + 1);
      n.buffers = std::make_unique<data::ClientBuffers>(c.clients, c.slice_bytes());
      n.ring = shm::Segment::create_process(data::data_ring_bytes(c.backend, c.clients, c.queue_depth));
      n.threads.push_back(std::make_unique<SimThread>(engine_, model_.cpu, derive_seed(o.seed, {0x44415441ull, r, 0}),
                                                      "r" + std::to_string(r) + ".d0"));
      n.daemon = std::make_unique<Daemon>(fabric_.create_transport(r, *n.threads.back()), cc, c, *n.store, *n.buffers,
                                          n.ring.bytes());
      for (uint32_t i = 0; i < c.clients; ++i) {
        n.threads.push_back(std::make_unique<SimThread>(engine_, model_.cpu,
                                                        derive_seed(o.seed, {0x44415441ull, r, i + 1}),
                                                        "r" + std::to_string(r) + ".c" + std::to_string(i)));
        n.clients.push_back(std::make_unique<Client>(fabric_.create_transport(r, *n.threads.back()), cc, c, i,
                                                     *n.buffers, n.ring.bytes()));
      }
    }
    const bool daemon_mesh = data::daemon_calls_for_clients(data_node_config(o, 0, np_, value_size).backend);
    for (uint32_t a = 0; a < np_; ++a)
      for (uint32_t b = 0; b < np_; ++b) {
        if (a == b) continue;
        if (daemon_mesh) {
          if (a > b) continue;
          Daemon& da = *nodes_[a]->daemon;
          Daemon& db = *nodes_[b]->daemon;
          const uint32_t ea = da.create_endpoint_to(b), eb = db.create_endpoint_to(a);
          da.context().connect(ea, db.context().local_info(eb));
          db.context().connect(eb, da.context().local_info(ea));
        } else {
          for (auto& cl : nodes_[a]->clients) {
            Daemon& db = *nodes_[b]->daemon;
            const uint32_t ec = cl->create_endpoint_to(b), ed = db.create_serving_endpoint();
            cl->context()->connect(ec, db.context().local_info(ed));
            db.context().connect(ed, cl->context()->local_info(ec));
          }
        }
      }
    for (auto& n : nodes_) {
      n->daemon->set_client_waker(&DataExperiment::wake_client, n.get());
      n->threads[0]->set_step(&DataExperiment::daemon_step, n.get(), /*may_idle_spin=*/true);
      for (uint32_t i = 0; i < n->clients.size(); ++i) {
        n->client_steps.push_back(ClientStep{n.get(), i});
      }
      for (uint32_t i = 0; i < n->clients.size(); ++i)
        n->threads[i + 1]->set_step(&DataExperiment::client_step, &n->client_steps[i]);
    }
  }

  void run(DataResult& out) {
    out_ = &out;
    const bool drained = run_timeline(run_base_);
    if (interruption()) out.interrupted = interruption()->to_json();
    for (RunResults& rr : runs()) out.runs.push_back(std::move(rr));
    if (!drained) throw std::runtime_error("data: simulation ended with operations still in flight");

    for (auto& n : nodes_) {
      for (auto& c : n->clients) {
        out.issued += c->counters().issued.load();
        out.completed += c->counters().completed.load();
        out.errors += c->counters().errors.load() + c->protocol_errors();
      }
      out.errors += n->daemon->protocol_errors();
      out.rejected += n->daemon->server_counters().rejected_total();
    }
    nlohmann::json size = timeline_json();
    size["value_size"] = value_size_;
    size["nics"] = nics_json();
    out.extra["sizes"].push_back(std::move(size));
  }

 private:

  struct Node;
  struct ClientStep {
    Node* node;
    uint32_t index;
  };
  struct Node {
    std::unique_ptr<kv::BlobStore> store;
    std::unique_ptr<data::ClientBuffers> buffers;
    shm::Segment ring;
    std::vector<std::unique_ptr<SimThread>> threads;  // [0] daemon, then clients
    std::unique_ptr<Daemon> daemon;
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<ClientStep> client_steps;
  };

  static StepResult daemon_step(void* ctx, SimThread& self) {
    Node& n = *static_cast<Node*>(ctx);
    const uint32_t work = n.daemon->step();
    // Every input of an idle daemon raises a wake: its transport's completions, and the
    // clients' ring writes (client_step wakes it).
    (void)self;
    return work == 0 && n.daemon->idle() ? StepResult::kIdleSpin : StepResult::kContinue;
  }
  static StepResult client_step(void* ctx, SimThread& self) {
    const ClientStep& cs = *static_cast<const ClientStep*>(ctx);
    Client& c = *cs.node->clients[cs.index];
    const uint64_t issued = c.counters().issued.load(std::memory_order_relaxed);
    const bool waiting = c.step();
    if (c.counters().issued.load(std::memory_order_relaxed) != issued || waiting)
      cs.node->threads[0]->wake(self.now());  // a ring write (or a retry) for daemon #0
    return waiting ? StepResult::kContinue : StepResult::kIdle;
  }
  static void wake_client(void* ctx, uint32_t client) {
    Node& n = *static_cast<Node*>(ctx);
    SimThread& daemon = *n.threads[0];
    n.threads[client + 1]->wake(daemon.now());
  }

  // ---- the runner's hooks (apps/benchkv/simulator/runner.hpp)
  void start() override {
    for (auto& n : nodes_)
      for (auto& t : n->threads) t->start(0);
  }
  void stop_issuing() override {
    for (auto& n : nodes_)
      for (auto& c : n->clients) c->stop_issuing();
  }
  bool idle() const override {
    bool idle = true;
    for (auto& n : nodes_) {
      idle = idle && n->daemon->idle();
      for (auto& c : n->clients) idle = idle && c->in_flight() == 0;
    }
    return idle;
  }
  uint64_t completed(uint32_t rank, uint32_t client) const override {
    return nodes_[rank]->clients[client]->counters().completed.load(std::memory_order_relaxed);
  }
  Totals totals() const override {
    const auto [issued, completed] = client_totals();
    return {issued, completed};
  }

  void epoch_recorded(RunResults& rr, uint32_t /*run*/, uint32_t epoch) override {
    if (epoch + 1 == rr.first_kept_epoch()) open_window();
    if (epoch + 1 == rr.end_kept_epoch()) close_kept_window();
    if (progress_) {  // runs counted per size
      const std::string line = format_progress(rr, o_.runs, epoch, run_base_);
      progress_(runs_total_ == o_.runs ? line : "value size " + std::to_string(value_size_) + ": " + line);
    }
  }

  // The latency and bytes of the kept window, from its opening snapshot to now.
  void close_kept_window() {
    uint64_t bytes = 0;
    snapshot(kept_latency_, bytes);
    kept_latency_ = kept_latency_.since(kept_start_latency_);
    kept_bytes_ = bytes - kept_start_bytes_;
  }

  // Every client's latency, merged, and the value bytes moved so far.
  void snapshot(copyrpc::RttHistogram& h, uint64_t& bytes) {
    h = copyrpc::RttHistogram{};
    bytes = 0;
    for (auto& n : nodes_)
      for (auto& c : n->clients) {
        h.merge(c->latency());
        bytes += c->counters().bytes.load(std::memory_order_relaxed);
      }
  }
  // A run's kept window opens: the clients' maxima restart, the counts are noted.
  void open_window() {
    for (auto& n : nodes_)
      for (auto& c : n->clients) c->restart_latency_max();
    snapshot(kept_start_latency_, kept_start_bytes_);
  }

  // The run's figures once its kept epochs ended (or a signal ended them early).
  void kept_ended(RunResults& rr, uint32_t run) override {
    DataRunStats s;
    s.value_size = value_size_;
    s.run = run_base_ + run;
    s.ops = rr.kept_requests();
    s.duration_ns = rr.kept_duration_ns();
    s.bytes = kept_bytes_;
    s.latency = std::move(kept_latency_);
    out_->stats.push_back(std::move(s));
  }
  void run_interrupted(RunResults& rr, uint32_t run) override {
    close_kept_window();
    kept_ended(rr, run);
  }
  void run_ended(RunResults& /*rr*/, uint32_t /*run*/) override {
    open_window();  // the next run's window opens here when it trims nothing
  }

  // Requests issued and completed by every client so far.
  std::pair<uint64_t, uint64_t> client_totals() const {
    uint64_t issued = 0, completed = 0;
    for (const auto& n : nodes_)
      for (const auto& c : n->clients) {
        issued += c->counters().issued.load();
        completed += c->counters().completed.load();
      }
    return {issued, completed};
  }

  uint32_t value_size_;
  uint32_t run_base_;
  uint32_t runs_total_;  // runs over every size, for the progress lines
  std::vector<std::unique_ptr<Node>> nodes_;
  DataResult* out_ = nullptr;
  copyrpc::RttHistogram kept_start_latency_, kept_latency_;
  uint64_t kept_start_bytes_ = 0, kept_bytes_ = 0;
};

}  // namespace

DataResult run_data_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress) {
  DataResult res;
  res.extra["model"] = model.to_json();
  res.extra["sizes"] = nlohmann::json::array();
  const std::vector<uint32_t> sizes = data_value_sizes(o);
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    DataExperiment e(o, model, sizes[i], i, static_cast<uint32_t>(sizes.size()), progress);
    e.run(res);
    if (!res.interrupted.is_null()) break;  // a signal: the sizes after this one are not run
  }
  return res;
}

}  // namespace bkv::app
