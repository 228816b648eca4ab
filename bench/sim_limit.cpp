// The simulator's own limit: the backend steps of a simulated experiment (clients, the
// delegation ring, the daemon loop, copyrpc) for the same kind of requests, driven with
// no event engine, no cost model and no NIC model, over the instant loopback (a WRITE
// lands when it is posted). Every thread of every node is stepped once per round, as
// the simulator steps each thread once per event; what this program measures is the
// code the simulator cannot avoid running, so a simulated rate near it leaves little
// to gain in the engine, the cost model or the NIC model.
//
// Usage: bench_sim_limit [CONFIG.json] [rounds]
//   CONFIG.json  a benchkv config of a Delegation run (default configs/c1_np16.json):
//                np, client threads, queue depth, ring size, workload and loop policy
//                are taken from it; the model, duration and outputs are not used.
//   rounds       timed rounds after 200 warm-up rounds (default 2000)
// Prints the set-up, then completed requests per wall-clock second and thread steps per
// second. bench/sim_limit.sh runs it beside the simulator on the same config and prints
// the ratio.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/benchkv/instant_runtime.hpp"
#include "apps/benchkv/node_setup.hpp"
#include "apps/benchkv/options.hpp"
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
  // One step of every thread of every node; returns the steps taken.
  uint64_t round() {
    uint64_t steps = 0;
    for (auto& n : nodes)
      for (uint32_t t = 0; t < n->threads(); ++t, ++steps) {
        if (n->is_client(t)) n->step_client(t - n->config().daemons);
        else n->step_daemon(t);
      }
    return steps;
  }
  uint64_t completed() const {
    uint64_t s = 0;
    for (auto& n : nodes)
      for (uint32_t c = 0; c < n->config().clients; ++c) s += n->counters(c).completed.load();
    return s;
  }
};

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
  Cluster c(o);
  for (int i = 0; i < 200; ++i) c.round();
  const uint64_t done0 = c.completed();
  uint64_t steps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; ++i) steps += c.round();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t done = c.completed() - done0;
  std::printf("sim limit: %llu requests in %.3f s wall: %.3f M requests/s, %.2f M thread steps/s, %.2f requests per round\n",
              static_cast<unsigned long long>(done), s, double(done) / s * 1e-6, double(steps) / s * 1e-6,
              double(done) / double(rounds));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_sim_limit: %s\n", e.what());
  return 2;
}
