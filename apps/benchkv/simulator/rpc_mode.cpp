#include "apps/benchkv/simulator/rpc_mode.hpp"

#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/simulator/runner.hpp"

#include <cstdio>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "core/random.hpp"
#include "sim/des_transport.hpp"
#include "sim/engine.hpp"
#include "sim/sim_thread.hpp"

namespace bkv::app {

namespace {

using namespace bkv::sim;

// A seed derived for message size `size_index` of a list: the first size's are those of
// a single-size run (whose outputs keep their bytes), the others' also derive from the index.
uint64_t size_seed(uint64_t seed, uint64_t stream, uint32_t size_index, std::initializer_list<uint64_t> more = {}) {
  std::vector<uint64_t> path{stream};
  path.insert(path.end(), more.begin(), more.end());
  if (size_index > 0) path.push_back(0x53495a45ull /* "SIZE" */ + size_index);
  switch (path.size()) {
    case 1: return derive_seed(seed, {path[0]});
    case 2: return derive_seed(seed, {path[0], path[1]});
    default: return derive_seed(seed, {path[0], path[1], path[2]});
  }
}

// The rpc mode, one message size: thread 0 calls, threads 1..servers answer; the caller
// is the only client of the CSV (rank 0, client 0; the servers' rows are zeros). The
// drain looks every 1 us. Size i of a list runs runs i * runs .. (i + 1) * runs - 1.
class RpcExperiment final : public SimRun {
 public:
  using Thread = rpc::RpcThread<DesTransport>;

  RpcExperiment(const Options& o, const Model& model, const std::function<void(const std::string&)>& progress,
                uint32_t message_size, uint32_t size_index, uint32_t size_count)
      : SimRun(o, model, progress, size_seed(o.seed, 0x4E4943ull, size_index), 1, 1000),
        message_size_(message_size), run_base_(size_index * o.runs), size_count_(size_count) {
    // --np 1 is NIC loopback: one node whose NIC carries both ends (caller thread and
    // server thread), as copyrpc's loopback micro-benchmarks run on one machine.
    const bool loopback = np_ == 1;
    const uint32_t servers = loopback ? 1 : np_ - 1;
    const rpc::RpcConfig rc = rpc_config(o, message_size);
    const copyrpc::ContextConfig cc = rpc_context_config(o);
    for (uint32_t r = 0; r < np_; ++r) fabric_.add_node(model_.nic);
    // Thread 0 calls; threads 1..servers answer, each on its own rank's node (loopback:
    // on node 0, the caller's). Seeds and names are per thread, as they were per rank.
    for (uint32_t t = 0; t <= servers; ++t) {
      const uint32_t node = loopback ? 0 : t;
      std::string name = "r";  // appended, not an operator+ chain: GCC 12 -O3 -Wrestrict false positive
      name += std::to_string(t);
      name += ".rpc";
      threads_.push_back(
          std::make_unique<SimThread>(engine_, model_.cpu, size_seed(o.seed, 0x525043ull, size_index, {t}), std::move(name)));
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

  // Runs this size into `res` (its runs, statistics and totals added). The simulator's
  // figures: res.extra itself for a single size (as before lists), else one entry of
  // res.extra["sizes"].
  void run(RpcResult& res) {
    if (!run_timeline(run_base_)) throw std::runtime_error("rpc: simulation ended with calls still in flight");
    if (interruption()) res.interrupted = interruption()->to_json();
    for (RunResults& rr : runs()) res.runs.push_back(std::move(rr));
    for (RpcRunStats& s : stats_) res.stats.push_back(std::move(s));
    res.issued += caller().counters().issued.load();
    res.completed += caller().counters().completed.load();
    for (auto& t : rpc_) res.errors += t->counters().errors.load();
    res.setup_provenance = setup_provenance();
    nlohmann::json figures = timeline_json();
    if (size_count_ == 1) {
      res.extra = std::move(figures);
      res.extra["model"] = model_.to_json();
      res.extra["nics"] = nics_json();
      return;
    }
    figures["message_size"] = message_size_;
    figures["nics"] = nics_json();
    res.extra["model"] = model_.to_json();
    res.extra["sizes"].push_back(std::move(figures));
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
    if (epoch + 1 == rr.first_kept_epoch()) open_window();
    if (epoch + 1 == rr.end_kept_epoch()) kept_rtt_ = caller().rtt().since(kept_start_rtt_);
    if (progress_) {
      const std::string line = format_rpc_progress(rr, o_.runs, epoch, run_base_);
      progress_(size_count_ == 1 ? line : "message size " + std::to_string(message_size_) + ": " + line);
    }
  }

  // The run's figures once its kept epochs ended (or a signal ended them early).
  void kept_ended(RunResults& rr, uint32_t run) override {
    RpcRunStats s;
    s.run = run_base_ + run;  // the CSV's run index (it counts over the sizes)
    s.message_size = message_size_;
    s.calls = rr.kept_requests();
    s.duration_ns = rr.kept_duration_ns();
    s.rtt = std::move(kept_rtt_);
    stats_.push_back(std::move(s));
  }
  void run_interrupted(RunResults& rr, uint32_t run) override {
    kept_rtt_ = caller().rtt().since(kept_start_rtt_);
    kept_ended(rr, run);
  }

  void run_ended(RunResults& /*rr*/, uint32_t /*run*/) override {
    open_window();  // the next run's window opens here when it trims nothing
  }

  // A run's kept window opens: the caller's maximum restarts, its counts are noted.
  void open_window() {
    caller().restart_rtt_max();
    kept_start_rtt_ = caller().rtt();
  }

  uint32_t message_size_, run_base_, size_count_;
  std::vector<std::unique_ptr<SimThread>> threads_;
  std::vector<std::unique_ptr<Thread>> rpc_;
  std::vector<RpcRunStats> stats_;
  copyrpc::RttHistogram kept_start_rtt_, kept_rtt_;
};

}  // namespace

RpcResult run_rpc_sim(const Options& o, const sim::Model& model, const std::function<void(const std::string&)>& progress) {
  RpcResult res;
  const std::vector<uint32_t> sizes = rpc_message_sizes(o);
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    RpcExperiment e(o, model, progress, sizes[i], i, static_cast<uint32_t>(sizes.size()));
    e.run(res);
    if (!res.interrupted.is_null()) break;  // a signal: the sizes after this one are not run
  }
  return res;
}

}  // namespace bkv::app
