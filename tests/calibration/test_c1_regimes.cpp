// Guards for the bistability at the full C1 scale (46 clients x QD 32 per node): under
// the default model (configs/model/c1.json) NP=16 holds the high equilibrium from a
// synchronized start and the low one from a staggered start; under the per-QP
// alternative (configs/model/candidates/per_qp/c1.json) NP=8 collapses while NP=16 holds.
// A change to the backends, copyrpc or the simulator that loses either fails here, not
// silently in the experiments.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/kv_mode.hpp"

using namespace bkv;

namespace {

struct Outcome {
  double mops_per_rank;
  double cqe_per_loop;
  double inflight;
};

Outcome run(const std::string& config, double duration_s, const std::string& model_file = "") {
  app::Options o = app::options_from_file(std::string(BKV_SOURCE_DIR) + "/configs/" + config);
  o.duration = duration_s;
  if (!model_file.empty()) o.model = std::string(BKV_SOURCE_DIR) + "/configs/model/" + model_file;
  o.trim = 2;  // keep only the last epochs: the state after the start transient
  o.inflight_samples.clear();
  o.output.clear();
  const sim::Model model = sim::Model::load_file(o.model);
  const app::ExperimentResult r = app::run_experiment(o, model, nullptr);
  REQUIRE(r.total_issued == r.total_completed);
  REQUIRE(r.errors == 0);
  Outcome out{r.runs[0].total_mops() / r.runs[0].num_ranks(), 0, 0};
  int n = 0;
  for (const auto& d : r.daemons)
    if (d.daemon == 0) {
      // Completions count responses: over the window they equal the calls issued, up to
      // the change in calls in flight (at most the node's 46 x 32 client slots).
      const double calls = d.extra.at("calls");
      INFO("rank " << d.rank << ": " << d.completions.cqes << " completions, " << calls << " calls");
      CHECK(std::abs(static_cast<double>(d.completions.cqes) - calls) <= 46.0 * 32.0);
      CHECK(d.completions.loops == d.cqe.loops);
      out.cqe_per_loop += d.cqe.average();
      out.inflight += d.inflight_avg;
      ++n;
    }
  out.cqe_per_loop /= n;
  out.inflight /= n;
  return out;
}

}  // namespace

TEST_CASE("default model: NP=16 holds the high equilibrium from a synchronized start, the low one staggered",
          "[calibration]") {
  const Outcome sync = run("c1_np16.json", 0.006);
  const Outcome staggered = run("c1_np16_staggered.json", 0.006);
  INFO("NP=16 sync: " << sync.mops_per_rank << " Mops/rank, " << sync.inflight << " in flight; staggered: "
                      << staggered.mops_per_rank << " Mops/rank, " << staggered.cqe_per_loop << " CQEs/loop");
  CHECK(sync.mops_per_rank > 5.0);
  CHECK(staggered.mops_per_rank < sync.mops_per_rank / 3.0);
  CHECK(staggered.inflight > 1000);  // the pipeline is full: the low state is not a lack of work
}

TEST_CASE("per-QP model: NP=8 collapses, NP=16 holds the high equilibrium", "[calibration]") {
  // 8 ms: the NP=8 collapse completes by ~2 ms of virtual time.
  const Outcome np8 = run("c1_np8.json", 0.008, "candidates/per_qp/c1.json");
  const Outcome np16 = run("c1_np16.json", 0.006, "candidates/per_qp/c1.json");
  INFO("NP=8: " << np8.mops_per_rank << " Mops/rank, " << np8.cqe_per_loop << " CQEs/loop, " << np8.inflight
                << " in flight; NP=16: " << np16.mops_per_rank << " Mops/rank, " << np16.cqe_per_loop << " CQEs/loop");
  CHECK(np8.cqe_per_loop < 2.0);
  CHECK(np8.mops_per_rank < np16.mops_per_rank / 3.0);
  CHECK(np8.inflight > 1000);  // the pipeline is full: the collapse is not a lack of work
  CHECK(np16.cqe_per_loop > 10.0);
}
