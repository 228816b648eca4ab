// The simulator's own limit: the backend steps of a simulated experiment (clients, the
// delegation ring, the daemon loop, copyrpc) for the same kind of requests, driven with
// no event engine, no cost model and no NIC model, over the instant loopback (a WRITE
// lands when it is posted). Every thread of every node is stepped once per round, as
// the simulator steps each thread once per event; what this program measures is the
// code the simulator cannot avoid running, so a simulated rate near it leaves little
// to gain in the engine, the cost model or the NIC model.
//
// Two limits, printed one after the other:
//  1. round robin (always): every thread of every node is stepped once per round. With
//     instant delivery daemon #0 then finds far larger batches per loop than in the
//     simulated run, so per-loop costs amortize more than they can in the simulator: a
//     generous limit.
//  2. replay of a step log (when one is given): the sequence of thread steps a simulated
//     run executed (benchkv --step-log, apps/benchkv/simulator/step_log.hpp), replayed in that
//     order on the same backend code, still with no engine, no cost model and instant
//     loopback. The batch shapes then follow the simulated run's (a daemon loop finds
//     what the clients stepped before it issued since its previous step), except that a
//     response arrives as soon as it is sent, not a network delay later.
// Each line reports completed requests per wall-clock second and requests per daemon
// #0 step (the batch size per loop).
//
// Usage: bench_sim_limit [CONFIG.json] [rounds] [STEP_LOG]
//   CONFIG.json  a benchkv config of a Delegation run (default configs/c1_np16.json):
//                np, client threads, queue depth, ring size, workload and loop policy
//                are taken from it; the model, duration and outputs are not used.
//   rounds       timed rounds after 200 warm-up rounds (default 2000)
//   STEP_LOG     a step log of a simulated run of the same config (optional)
// bench/sim_limit.sh runs it beside the simulator on the same config (recording the step
// log in that run) and prints the ratios.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/node/instant_runtime.hpp"
#include "apps/benchkv/node/node_setup.hpp"
#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/simulator/step_log.hpp"
#include "backends/node_backends.hpp"

using namespace bkv;
using namespace bkv::backend;

namespace {

using DelegNode = Node<DelegationBackend, app::InstantRuntime>;

struct Cluster {
  loopback::InstantFabric fabric;
  std::vector<std::unique_ptr<app::InstantRuntime>> rts;
  std::vector<std::unique_ptr<DelegNode>> nodes;

  explicit Cluster(const app::Options& o) {
    for (uint32_t r = 0; r < o.np; ++r) {
      const app::NodeSetup s = app::node_setup(o, r, o.np);
      rts.push_back(std::make_unique<app::InstantRuntime>(s.node.daemons + s.node.clients, app::RealThreads{},
                                                          app::MakeInstantTransport{&fabric, {}}));
      nodes.push_back(std::make_unique<DelegNode>(s.node, s.loop, s.workload, s.context, *rts.back()));
    }
    connect_in_process(nodes);
  }
  void step(DelegNode& n, uint32_t t) {
    if (n.is_client(t)) {
      n.step_client(t - n.config().daemons);
    } else {
      n.step_daemon(t);
      daemon0_steps += t == 0;
    }
  }
  // One step of every thread of every node; returns the steps taken.
  uint64_t round() {
    uint64_t steps = 0;
    for (auto& n : nodes)
      for (uint32_t t = 0; t < n->threads(); ++t, ++steps) step(*n, t);
    return steps;
  }
  // The steps of a step log, in order; returns the steps taken.
  uint64_t replay(const app::StepLog& log) {
    const uint32_t per_node = log.threads_per_node;
    for (const uint32_t s : log.steps) step(*nodes[s / per_node], s % per_node);
    return log.steps.size();
  }
  uint64_t completed() const {
    uint64_t s = 0;
    for (auto& n : nodes)
      for (uint32_t c = 0; c < n->config().clients; ++c) s += n->counters(c).completed.load();
    return s;
  }
  uint64_t daemon0_steps = 0;  // steps of daemon #0, over all nodes
};

// Requests per daemon #0 loop: completed requests / daemon #0 steps (both over all nodes).
void report(const char* what, uint64_t done, double s, uint64_t steps, uint64_t daemon0_steps) {
  const double per_loop = daemon0_steps == 0 ? 0 : double(done) / double(daemon0_steps);
  std::printf("%s: %llu requests in %.3f s wall: %.3f M requests/s, %.2f M thread steps/s, %.1f requests per daemon "
              "#0 loop\n",
              what, static_cast<unsigned long long>(done), s, double(done) / s * 1e-6, double(steps) / s * 1e-6,
              per_loop);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string path = argc > 1 ? argv[1] : "configs/c1_np16.json";
  const long rounds = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 2000;
  if (rounds < 1) throw std::invalid_argument("rounds must be >= 1");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open");
  const nlohmann::json j = nlohmann::json::parse(in);
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  const app::Options o = app::options_from_json(j, dir);
  if (o.backend != BackendKind::kDelegation)
    throw std::invalid_argument(path + ": the limit is built for the Delegation backend only");
  std::printf("sim limit: %s: Delegation, np %u x (%u daemon + %u clients), queue depth %u, ring %llu B, "
              "instant loopback, %ld timed rounds after 200 warm-up rounds\n",
              path.c_str(), o.np, o.server_threads, o.client_threads, o.queue_depth,
              static_cast<unsigned long long>(o.ring_size), rounds);
  {
    Cluster c(o);
    for (int i = 0; i < 200; ++i) c.round();
    const uint64_t done0 = c.completed(), daemon0 = c.daemon0_steps;
    uint64_t steps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < rounds; ++i) steps += c.round();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report("sim limit, round robin", c.completed() - done0, s, steps, c.daemon0_steps - daemon0);
  }
  if (argc > 3) {
    const app::StepLog log = app::StepLog::read(argv[3]);
    if (log.np != o.np || log.daemons != o.server_threads || log.threads_per_node != o.server_threads + o.client_threads)
      throw std::invalid_argument(std::string(argv[3]) + ": the step log's shape (np " + std::to_string(log.np) +
                                  ", " + std::to_string(log.daemons) + " daemons of " +
                                  std::to_string(log.threads_per_node) + " threads per node) is not the config's");
    Cluster c(o);  // from the start, as the simulated run was
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t steps = c.replay(log);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report("sim limit, replay of the simulated run's steps", c.completed(), s, steps, c.daemon0_steps);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_sim_limit: %s\n", e.what());
  return 2;
}
