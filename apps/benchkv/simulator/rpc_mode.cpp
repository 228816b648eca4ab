#include "apps/benchkv/simulator/rpc_mode.hpp"

#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/simulator/runner.hpp"

#include <cstdio>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

namespace {

using namespace bkv::sim;

// The rpc mode: thread 0 calls, threads 1..servers answer; the caller is the only
// client of the CSV (rank 0, client 0; the servers' rows are zeros). The drain looks
// every 1 us.
class RpcExperiment final : public SimRun {
 public:
  using Thread = rpc::RpcThread<DesTransport>;

  RpcExperiment(const Options& o, const Model& model, const std::function<void(const std::string&)>& progress)
      : SimRun(o, model, progress, derive_seed(o.seed, {0x4E4943ull}), 1, 1000) {
    // --np 1 is NIC loopback: one node whose NIC carries both ends (caller thread and
    // server thread), as copyrpc's loopback micro-benchmarks run on one machine.
    const bool loopback = np_ == 1;
    const uint32_t servers = loopback ? 1 : np_ - 1;
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
    if (!run_timeline(0)) throw std::runtime_error("rpc: simulation ended with calls still in flight");
    RpcResult res;
    res.runs = std::move(runs());
    res.stats = std::move(stats_);
    res.issued = caller().counters().issued.load();
    res.completed = caller().counters().completed.load();
    for (auto& t : rpc_) res.errors += t->counters().errors.load();
    res.extra = timeline_json();
    res.setup_provenance = setup_provenance();
    res.extra["model"] = model_.to_json();
    res.extra["nics"] = nics_json();
    return res;
  }

 private:
  Thread& caller() { return *rpc_[0]; }
  const Thread& caller() const { return *rpc_[0]; }

  static StepResult step(void* ctx, SimThread& /*self*/) {
    static_cast<Thread*>(ctx)->step();
    return StepResult::kContinue;
  }

  // ---- the runner's hooks (apps/benchkv/simulator/runner.hpp)
  void start() override {
    for (auto& t : threads_) t->start(0);
  }
  void stop_issuing() override { caller().stop_issuing(); }
  bool idle() const override { return caller().in_flight() == 0; }
  uint64_t completed(uint32_t rank, uint32_t /*client*/) const override {
    return rank == 0 ? caller().counters().completed.load(std::memory_order_relaxed) : 0;
  }
  Totals totals() const override { return {caller().counters().issued.load(), caller().counters().completed.load()}; }

  void epoch_recorded(RunResults& rr, uint32_t /*run*/, uint32_t epoch) override {
    if (epoch + 1 == rr.first_kept_epoch()) kept_start_rtt_ = caller().rtt();  // the kept window opens
    if (epoch + 1 == rr.end_kept_epoch()) kept_rtt_ = histogram_delta(kept_start_rtt_, caller().rtt());
    if (progress_) progress_(format_rpc_progress(rr, o_.runs, epoch));
  }

  void run_ended(RunResults& rr, uint32_t run) override {
    RpcRunStats s;
    s.run = run;
    s.calls = rr.kept_requests();
    s.duration_ns = rr.kept_duration_ns();
    s.rtt = std::move(kept_rtt_);
    kept_start_rtt_ = caller().rtt();  // the next run's window opens here when it trims nothing
    stats_.push_back(std::move(s));
  }

  std::vector<std::unique_ptr<SimThread>> threads_;
  std::vector<std::unique_ptr<Thread>> rpc_;
  std::vector<RpcRunStats> stats_;
  copyrpc::RttHistogram kept_start_rtt_, kept_rtt_;
};

}  // namespace

RpcResult run_rpc_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress) {
  RpcExperiment e(o, model, progress);
  return e.run();
}

}  // namespace bkv::app
