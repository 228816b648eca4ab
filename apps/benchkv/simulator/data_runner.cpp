#include "apps/benchkv/simulator/data_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/simulator/rpc_runner.hpp"
#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

data::DataNodeConfig data_node_config(const Options& o, uint32_t rank, uint32_t np, uint32_t value_size) {
  data::DataNodeConfig c;
  c.rank = rank;
  c.np = np;
  c.clients = o.client_threads;
  c.queue_depth = o.queue_depth;
  c.max_value_bytes = value_size;
  c.value_bytes = value_size;
  c.key_range = o.key_range;
  c.read_ratio = o.read_ratio;
  c.remote_only = true;
  c.seed = o.seed;
  c.backend = o.data_backend == "direct"   ? data::DataBackend::kDirect
              : o.data_backend == "meta"   ? data::DataBackend::kMeta
              : o.data_backend == "ucx-am" ? data::DataBackend::kUcxAm
                                           : data::DataBackend::kDelegation;
  c.validate();
  return c;
}

namespace {

using namespace bkv::sim;
using Daemon = data::DataDaemon<DesTransport>;
using Client = data::DataClient<DesTransport>;

copyrpc::RttHistogram merged(const std::vector<std::unique_ptr<Client>>& clients) {
  copyrpc::RttHistogram h;
  for (const auto& c : clients) {
    const copyrpc::RttHistogram& l = c->latency();
    if (l.n == 0) continue;
    if (h.counts.empty()) h.counts.assign(copyrpc::RttHistogram::kBuckets, 0);
    for (size_t i = 0; i < l.counts.size(); ++i) h.counts[i] += l.counts[i];
    h.n += l.n;
    h.sum_ns += l.sum_ns;
  }
  return h;
}

// One value size: NP nodes, each a daemon #0 and client_threads clients on simulated
// threads over the simulated fabric.
class DataExperiment {
 public:
  // size_index of size_count: the run index counts over the sizes (size i has runs
  // i*runs ..), so progress lines count runs out of size_count * runs.
  DataExperiment(const Options& o, const Model& model, uint32_t value_size, uint32_t size_index, uint32_t size_count,
                 const std::function<void(const std::string&)>& progress)
      : o_(o), model_(model), value_size_(value_size), run_base_(size_index * o.runs),
        runs_total_(size_count * o.runs), progress_(progress),
        fabric_(engine_, derive_seed(o.seed, {0x4E4943ull, size_index})) {
    if (o.np < 2) throw std::invalid_argument("data: needs --np >= 2 (requests go to other nodes)");
    np_ = o.np;
    duration_ = duration_ns(o);
    interval_ = interval_ns(o);
    epochs_ = epochs_per_run(o);
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
      n->threads[0]->set_step(&DataExperiment::daemon_step, n.get());
      for (uint32_t i = 0; i < n->clients.size(); ++i) {
        n->client_steps.push_back(ClientStep{n.get(), i});
      }
      for (uint32_t i = 0; i < n->clients.size(); ++i)
        n->threads[i + 1]->set_step(&DataExperiment::client_step, &n->client_steps[i]);
    }
  }

  void run(DataResult& out) {
    first_run_ = static_cast<uint32_t>(out.runs.size());
    for (uint32_t r = 0; r < o_.runs; ++r) out.runs.emplace_back(run_base_ + r, np_, o_.client_threads, epochs_, o_.trim);
    out_ = &out;
    const TargetId epoch_target = engine_.add_member<DataExperiment, &DataExperiment::on_epoch>(this);
    for (uint32_t r = 0; r < o_.runs; ++r)
      for (uint32_t e = 0; e < epochs_; ++e)
        engine_.schedule(uint64_t(r) * duration_ + uint64_t(e + 1) * interval_, epoch_target, r * epochs_ + e);
    for (auto& n : nodes_)
      for (auto& t : n->threads) t->start(0);
    const Time end = uint64_t(o_.runs) * duration_;
    engine_.run_until(end);
    for (auto& n : nodes_)
      for (auto& c : n->clients) c->stop_issuing();
    drain_target_ = engine_.add_member<DataExperiment, &DataExperiment::on_drain_check>(this);
    drain_deadline_ = end + kDrainLimit;
    engine_.schedule(end, drain_target_, 0);
    engine_.run();
    if (!drained_) throw std::runtime_error("data: simulation ended with operations still in flight");

    for (auto& n : nodes_) {
      for (auto& c : n->clients) {
        out.issued += c->counters().issued.load();
        out.completed += c->counters().completed.load();
        out.errors += c->counters().errors.load() + c->protocol_errors();
      }
      out.errors += n->daemon->protocol_errors();
      out.rejected += n->daemon->server_counters().rejected_total();
    }
    nlohmann::json nics = nlohmann::json::array();
    for (uint32_t r = 0; r < np_; ++r) nics.push_back(fabric_.network().report_json(r, engine_.now()));
    out.extra["sizes"].push_back({{"value_size", value_size_},
                                  {"events", engine_.events_run()},
                                  {"virtual_end_ns", engine_.now()},
                                  {"drain_ns", engine_.now() - end},
                                  {"nics", std::move(nics)}});
  }

 private:
  static constexpr Time kDrainLimit = 1'000'000'000;  // 1 s of virtual time

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

  void on_epoch(uint32_t idx) {
    const uint32_t run = idx / epochs_, epoch = idx % epochs_;
    RunResults& rr = out_->runs[first_run_ + run];
    if (last_completed_.empty()) last_completed_.assign(np_ * o_.client_threads, 0);
    for (uint32_t r = 0; r < np_; ++r)
      for (uint32_t i = 0; i < o_.client_threads; ++i) {
        const uint64_t now = nodes_[r]->clients[i]->counters().completed.load(std::memory_order_relaxed);
        uint64_t& last = last_completed_[r * o_.client_threads + i];
        rr.record(r, i, epoch, now - last, interval_);
        last = now;
      }
    if (epoch + 1 == rr.first_kept_epoch()) snapshot(kept_start_latency_, kept_start_bytes_);
    if (epoch + 1 == rr.end_kept_epoch()) {
      uint64_t bytes = 0;
      snapshot(kept_latency_, bytes);
      kept_latency_ = histogram_delta(kept_start_latency_, kept_latency_);
      kept_bytes_ = bytes - kept_start_bytes_;
    }
    if (progress_) progress_(format_progress(rr, runs_total_, epoch));
    if (epoch + 1 == epochs_) finish_run(run);
  }

  void snapshot(copyrpc::RttHistogram& h, uint64_t& bytes) {
    h = copyrpc::RttHistogram{};
    bytes = 0;
    for (auto& n : nodes_) {
      const copyrpc::RttHistogram m = merged(n->clients);
      if (m.n) {
        if (h.counts.empty()) h.counts.assign(copyrpc::RttHistogram::kBuckets, 0);
        for (size_t i = 0; i < m.counts.size(); ++i) h.counts[i] += m.counts[i];
        h.n += m.n;
        h.sum_ns += m.sum_ns;
      }
      for (auto& c : n->clients) bytes += c->counters().bytes.load(std::memory_order_relaxed);
    }
  }

  void finish_run(uint32_t run) {
    RunResults& rr = out_->runs[first_run_ + run];
    DataRunStats s;
    s.value_size = value_size_;
    s.run = run_base_ + run;
    s.ops = rr.kept_requests();
    s.duration_ns = rr.kept_duration_ns();
    s.bytes = kept_bytes_;
    s.latency = std::move(kept_latency_);
    out_->stats.push_back(std::move(s));
    snapshot(kept_start_latency_, kept_start_bytes_);  // the next run's window opens here when it trims nothing
    const auto [issued, completed] = client_totals();
    run_counts_.close_run(rr, issued, completed);
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

  void on_drain_check(uint32_t) {
    bool idle = true;
    for (auto& n : nodes_) {
      idle = idle && n->daemon->idle();
      for (auto& c : n->clients) idle = idle && c->in_flight() == 0;
    }
    if (idle) {
      drained_ = true;
      const auto [issued, completed] = client_totals();
      run_counts_.add_drain(out_->runs.back(), issued, completed);
      engine_.stop();
      return;
    }
    if (engine_.now() >= drain_deadline_) {
      engine_.stop();
      return;
    }
    engine_.schedule_in(1000, drain_target_, 0);
  }

  const Options& o_;
  Model model_;
  uint32_t value_size_;
  uint32_t run_base_;
  uint32_t runs_total_;  // runs over every size, for the progress lines
  std::function<void(const std::string&)> progress_;
  Engine engine_;
  DesFabric fabric_;
  uint32_t np_ = 0, epochs_ = 0, first_run_ = 0;
  Time duration_ = 0, interval_ = 0, drain_deadline_ = 0;
  TargetId drain_target_{};
  std::vector<std::unique_ptr<Node>> nodes_;
  DataResult* out_ = nullptr;
  std::vector<uint64_t> last_completed_;
  copyrpc::RttHistogram kept_start_latency_, kept_latency_;
  uint64_t kept_start_bytes_ = 0, kept_bytes_ = 0;
  RunCounter run_counts_;
  bool drained_ = false;
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
  }
  return res;
}

nlohmann::json data_summary(const Options& o, const DataResult& r) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const DataRunStats& s : r.stats) {
    nlohmann::json j = {{"value_size", s.value_size}, {"run", s.run},
                        {"ops", s.ops},                {"bytes", s.bytes},
                        {"duration_ns", s.duration_ns}, {"ops_per_s", round6(s.ops_per_s())},
                        {"gib_per_s", round6(s.gib_per_s())}};
    if (s.latency.n) {
      j["latency_p50_us"] = round6(s.latency.percentile_ns(0.5) / 1000.0);
      j["latency_p99_us"] = round6(s.latency.percentile_ns(0.99) / 1000.0);
    }
    sizes.push_back(std::move(j));
  }
  return {{"backend", o.data_backend},
          {"clients_per_rank", o.client_threads},
          {"queue_depth", o.queue_depth},
          {"read_ratio", o.read_ratio},
          {"rejected", r.rejected},
          {"runs", std::move(sizes)}};
}

std::string data_table(const Options& o, const DataResult& r) {
  std::ostringstream out;
  char line[200];
  std::snprintf(line, sizeof line, "%-10s %8s %4s %12s %9s %10s %10s\n", "backend", "size", "run", "ops/s", "GiB/s",
                "p50 (us)", "p99 (us)");
  out << line;
  for (const DataRunStats& s : r.stats) {
    std::snprintf(line, sizeof line, "%-10s %8u %4u %12.0f %9.3f %10.2f %10.2f\n", o.data_backend.c_str(), s.value_size,
                  s.run + 1, s.ops_per_s(), s.gib_per_s(), s.latency.percentile_ns(0.5) / 1000.0,
                  s.latency.percentile_ns(0.99) / 1000.0);
    out << line;
  }
  return out.str();
}

std::string data_csv_report(const nlohmann::json& data) {
  std::string out = "value_size,run,ops,bytes,duration_ns,ops_per_s,gib_per_s,latency_p50_ns,latency_p99_ns\n";
  // The summary holds the percentiles in microseconds rounded to 1e-6: whole nanoseconds
  // (histogram bucket bounds) come back exactly.
  const auto ns = [](const nlohmann::json& run, const char* key) {
    if (!run.contains(key)) return std::string();
    return std::to_string(std::llround(run[key].get<double>() * 1000.0));
  };
  for (const nlohmann::json& r : data.at("runs")) {
    char line[200];
    std::snprintf(line, sizeof line, "%u,%u,%llu,%llu,%llu,%.6f,%.6f,", r.at("value_size").get<uint32_t>(),
                  r.at("run").get<uint32_t>(), static_cast<unsigned long long>(r.at("ops").get<uint64_t>()),
                  static_cast<unsigned long long>(r.at("bytes").get<uint64_t>()),
                  static_cast<unsigned long long>(r.at("duration_ns").get<uint64_t>()), r.at("ops_per_s").get<double>(),
                  r.at("gib_per_s").get<double>());
    out += line + ns(r, "latency_p50_us") + "," + ns(r, "latency_p99_us") + "\n";
  }
  return out;
}

int write_data_outputs(const Options& o, const DataResult& res, const std::string& section, const nlohmann::json& details) {
  // The per-epoch CSV leads with each run's value size (the run index counts over sizes).
  std::vector<uint32_t> value_size_of_run;
  for (const RunResults& run : res.runs) {
    const auto s = std::find_if(res.stats.begin(), res.stats.end(), [&](const DataRunStats& d) { return d.run == run.run(); });
    if (s == res.stats.end()) throw std::logic_error("data: run " + std::to_string(run.run()) + " has no statistics");
    value_size_of_run.push_back(s->value_size);
  }
  write_csv_file(o.output, res.runs, value_size_of_run);
  nlohmann::json summary = summary_json(o, res.runs, {});
  summary["data"] = data_summary(o, res);
  summary[section] = details;
  summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
  // Real data runs step every thread of a rank on its main thread: no CPU map.
  summary["provenance"] = provenance_json(o.transport == TransportKind::kSim);
  write_summary_file(o.summary, summary);
  if (o.report == ReportFormat::kText) std::fputs(data_table(o, res).c_str(), stdout);
  if (o.report == ReportFormat::kCsv) std::fputs(data_csv_report(summary["data"]).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return consistency_status(res.issued, res.completed, res.errors, "data operations");
}

}  // namespace bkv::app
