#include "apps/benchkv/simulator/rpc_runner.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/simulator/sim_runner.hpp"

#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

rpc::RpcConfig rpc_config(const Options& o) {
  return rpc::RpcConfig{o.endpoints, o.queue_depth, o.message_size};
}

copyrpc::RttHistogram histogram_delta(const copyrpc::RttHistogram& a, const copyrpc::RttHistogram& b) {
  copyrpc::RttHistogram d = b;
  for (size_t i = 0; i < a.counts.size() && i < d.counts.size(); ++i) d.counts[i] -= a.counts[i];
  d.n = b.n - a.n;
  d.sum_ns = b.sum_ns - a.sum_ns;
  return d;
}

copyrpc::ContextConfig rpc_context_config(const Options& o) {
  copyrpc::ContextConfig cc;
  cc.ring_size = o.ring_size;
  cc.srq_size = 1024;  // as the KV backends
  return cc;
}

namespace {

using namespace bkv::sim;

class RpcExperiment {
 public:
  using Thread = rpc::RpcThread<DesTransport>;

  RpcExperiment(const Options& o, const Model& model, const std::function<void(const std::string&)>& progress)
      : o_(o), model_(model), progress_(progress), fabric_(engine_, derive_seed(o.seed, {0x4E4943ull})) {
    // --np 1 is NIC loopback: one node whose NIC carries both ends (caller thread and
    // server thread), as copyrpc's loopback micro-benchmarks run on one machine.
    np_ = o.np;
    const bool loopback = np_ == 1;
    const uint32_t servers = loopback ? 1 : np_ - 1;
    duration_ = duration_ns(o);
    interval_ = interval_ns(o);
    epochs_ = epochs_per_run(o);
    fabric_.pages().set_discard_mode(discard_mode(o.ring_pages));
    fabric_.pages().set_give_back_pages(o.ring_page_batch);
    engine_.event_set_to_configure().select(event_set_kind(o.event_set));
    const rpc::RpcConfig rc = rpc_config(o);
    const copyrpc::ContextConfig cc = rpc_context_config(o);
    for (uint32_t r = 0; r < np_; ++r) fabric_.add_node(model_.nic);
    // Thread 0 calls; threads 1..servers answer, each on its own rank's node (loopback:
    // on node 0, the caller's). Seeds and names are per thread, as they were per rank.
    for (uint32_t t = 0; t <= servers; ++t) {
      const uint32_t node = loopback ? 0 : t;
      threads_.push_back(std::make_unique<SimThread>(engine_, model_.cpu, derive_seed(o.seed, {0x525043ull, t}),
                                                     "r" + std::to_string(t) + ".rpc"));
      DesTransport& tr = fabric_.create_transport(node, *threads_.back());
      rpc_.push_back(std::make_unique<Thread>(tr, cc, rc, t == 0));
    }
    for (uint32_t s = 1; s <= servers; ++s)
      for (uint32_t e = 0; e < rc.endpoints; ++e) {
        const uint32_t a = rpc_[0]->create_endpoint(), b = rpc_[s]->create_endpoint();
        rpc_[0]->context().connect(a, rpc_[s]->context().local_info(b));
        rpc_[s]->context().connect(b, rpc_[0]->context().local_info(a));
      }
    for (size_t t = 0; t < threads_.size(); ++t) threads_[t]->set_step(&RpcExperiment::step, rpc_[t].get());
  }

  RpcResult run() {
    for (uint32_t r = 0; r < o_.runs; ++r) results_.emplace_back(r, np_, 1, epochs_, o_.trim);
    const TargetId epoch_target = engine_.add_member<RpcExperiment, &RpcExperiment::on_epoch>(this);
    for (uint32_t r = 0; r < o_.runs; ++r)
      for (uint32_t e = 0; e < epochs_; ++e)
        engine_.schedule(uint64_t(r) * duration_ + uint64_t(e + 1) * interval_, epoch_target, r * epochs_ + e);
    for (auto& t : threads_) t->start(0);
    const Time end = uint64_t(o_.runs) * duration_;
    engine_.run_until(end);

    caller().stop_issuing();
    drain_target_ = engine_.add_member<RpcExperiment, &RpcExperiment::on_drain_check>(this);
    drain_deadline_ = end + kDrainLimit;
    engine_.schedule(end, drain_target_, 0);
    engine_.run();
    if (!drained_) throw std::runtime_error("rpc: simulation ended with calls still in flight");

    RpcResult res;
    res.runs = std::move(results_);
    res.stats = std::move(stats_);
    res.issued = caller().counters().issued.load();
    res.completed = caller().counters().completed.load();
    for (auto& t : rpc_) res.errors += t->counters().errors.load();
    res.extra = {{"events", engine_.events_run()},
                 {"virtual_end_ns", engine_.now()},
                 {"drain_ns", engine_.now() - end},
                 {"model", model_.to_json()}};
    nlohmann::json nics = nlohmann::json::array();
    for (uint32_t r = 0; r < np_; ++r) nics.push_back(fabric_.network().report_json(r, engine_.now()));
    res.extra["nics"] = std::move(nics);
    return res;
  }

 private:
  static constexpr Time kDrainLimit = 1'000'000'000;  // 1 s of virtual time

  Thread& caller() { return *rpc_[0]; }

  static StepResult step(void* ctx, SimThread& /*self*/) {
    static_cast<Thread*>(ctx)->step();
    return StepResult::kContinue;
  }

  void on_epoch(uint32_t idx) {
    const uint32_t run = idx / epochs_, epoch = idx % epochs_;
    RunResults& rr = results_[run];
    const uint64_t now = caller().counters().completed.load(std::memory_order_relaxed);
    rr.record(0, 0, epoch, now - last_completed_, interval_);
    for (uint32_t r = 1; r < np_; ++r) rr.record(r, 0, epoch, 0, interval_);
    last_completed_ = now;
    if (epoch + 1 == rr.first_kept_epoch()) kept_start_rtt_ = caller().rtt();  // the kept window opens
    if (epoch + 1 == rr.end_kept_epoch()) kept_rtt_ = histogram_delta(kept_start_rtt_, caller().rtt());
    if (progress_) progress_(format_rpc_progress(rr, o_.runs, epoch));
    if (epoch + 1 == epochs_) finish_run(run);
  }

  void finish_run(uint32_t run) {
    RpcRunStats s;
    s.run = run;
    s.calls = results_[run].kept_requests();
    s.duration_ns = results_[run].kept_duration_ns();
    s.rtt = std::move(kept_rtt_);
    kept_start_rtt_ = caller().rtt();  // the next run's window opens here when it trims nothing
    stats_.push_back(std::move(s));
    const uint64_t issued = caller().counters().issued.load(), completed = caller().counters().completed.load();
    run_counts_.close_run(results_[run], issued, completed);
  }

  void on_drain_check(uint32_t) {
    if (caller().in_flight() == 0) {
      drained_ = true;
      run_counts_.add_drain(results_.back(), caller().counters().issued.load(), caller().counters().completed.load());
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
  std::function<void(const std::string&)> progress_;
  Engine engine_;
  DesFabric fabric_;
  uint32_t np_ = 0, epochs_ = 0;
  Time duration_ = 0, interval_ = 0, drain_deadline_ = 0;
  TargetId drain_target_{};
  std::vector<std::unique_ptr<SimThread>> threads_;
  std::vector<std::unique_ptr<Thread>> rpc_;
  std::vector<RunResults> results_;
  std::vector<RpcRunStats> stats_;
  copyrpc::RttHistogram kept_start_rtt_, kept_rtt_;
  uint64_t last_completed_ = 0;
  RunCounter run_counts_;
  bool drained_ = false;
};

}  // namespace

RpcResult run_rpc_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress) {
  RpcExperiment e(o, model, progress);
  return e.run();
}

nlohmann::json rpc_summary(const Options& o, const RpcResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RpcRunStats& s : r.stats) {
    nlohmann::json j = {{"run", s.run}, {"calls", s.calls}, {"duration_ns", s.duration_ns}, {"mrps", round6(s.mrps())}};
    if (s.rtt.n) {
      j["rtt_mean_us"] = round6(s.rtt.mean_ns() / 1000.0);
      j["rtt_p50_us"] = round6(s.rtt.percentile_ns(0.5) / 1000.0);
      j["rtt_p99_us"] = round6(s.rtt.percentile_ns(0.99) / 1000.0);
    }
    runs.push_back(std::move(j));
  }
  return {{"endpoints", o.endpoints},
          {"queue_depth", o.queue_depth},
          {"message_size", o.message_size},
          {"callers", 1},
          {"servers", o.np == 1 ? 1u : o.np - 1},
          {"loopback", o.np == 1},
          {"runs", std::move(runs)}};
}

int write_rpc_outputs(const Options& o, const RpcResult& res, const std::string& section, const nlohmann::json& details) {
  write_csv_file(o.output, res.runs);
  nlohmann::json summary = summary_json(o, res.runs, {});
  summary["rpc"] = rpc_summary(o, res);
  summary[section] = details;
  summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
  if (!summary.contains("provenance")) summary["provenance"] = provenance_json(o.transport == TransportKind::kSim);
  write_summary_file(o.summary, summary);
  const std::string report = format_report(summary, o.report);
  std::fwrite(report.data(), 1, report.size(), stdout);
  if (o.report == ReportFormat::kText) std::fputs(rpc_table(o, res).c_str(), stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "wrote %s and %s\n", o.output.c_str(), o.summary.c_str());
  return consistency_status(res.issued, res.completed, res.errors, "calls");
}

std::string rpc_table(const Options& o, const RpcResult& r) {
  std::ostringstream out;
  char line[160];
  std::snprintf(line, sizeof line, "%9s %5s %6s %4s %10s %13s %13s\n", "endpoints", "QD", "size", "run", "Mrps",
                "RTT p50 (us)", "RTT p99 (us)");
  out << line;
  for (const RpcRunStats& s : r.stats) {
    std::snprintf(line, sizeof line, "%9u %5u %6u %4u %10.3f %13.2f %13.2f\n", o.endpoints, o.queue_depth,
                  o.message_size, s.run + 1, s.mrps(), s.rtt.percentile_ns(0.5) / 1000.0,
                  s.rtt.percentile_ns(0.99) / 1000.0);
    out << line;
  }
  return out.str();
}

}  // namespace bkv::app
