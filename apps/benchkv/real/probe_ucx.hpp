// `benchkv probe --transport ucx`: the probe over the UCX transport in one process, two
// UCP workers (initiator and target) driven alternately by this thread
// (probe::run_one_process). UCX_TLS comes from the environment, "sm,self" when unset.
// Built when UCX was found (BKV_PROBE_UCX).
#pragma once

#include <string>
#include <vector>

#include "backends/probe/probe.hpp"

namespace bkv::real {

// The UCX_TLS the run used is written to *tls.
std::vector<probe::TestResult> run_probe_ucx(const std::vector<probe::TestSpec>& plan, std::string* tls);

}  // namespace bkv::real
