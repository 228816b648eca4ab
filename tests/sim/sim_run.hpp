// The options of a short simulated experiment for tests that run one in process.
#pragma once

#include <cstdint>

#include "apps/benchkv/cli/options.hpp"

namespace bkv::test {

// `backend` on `np` simulated nodes of `daemons` daemons and `clients` clients at
// `queue_depth`: one run of `duration` seconds in epochs of `interval_ms`, `trim` epochs
// left out at each end; no output files, no progress.
inline app::Options sim_run(backend::BackendKind backend, uint32_t np, uint32_t daemons, uint32_t clients,
                            uint32_t queue_depth, double duration, double interval_ms, uint32_t trim) {
  app::Options o;
  o.backend = backend;
  o.transport = app::TransportKind::kSim;
  o.np = np;
  o.server_threads = daemons;
  o.client_threads = clients;
  o.queue_depth = queue_depth;
  o.duration = duration;
  o.interval_ms = interval_ms;
  o.trim = trim;
  o.runs = 1;
  o.progress = false;
  o.output.clear();
  o.summary.clear();
  o.inflight_samples.clear();
  return o;
}

}  // namespace bkv::test
