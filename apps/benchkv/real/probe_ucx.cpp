#include "apps/benchkv/real/probe_ucx.hpp"

#include <cstdlib>

#include "apps/benchkv/results/probe_report.hpp"
#include "transports/ucx/ucx_transport.hpp"

namespace bkv::real {

std::vector<probe::TestResult> run_probe_ucx(const std::vector<probe::TestSpec>& plan, std::string* tls) {
  ucx::Config c;
  const char* env = std::getenv("UCX_TLS");
  c.tls = env != nullptr && *env != '\0' ? env : "sm,self";
  if (tls != nullptr) *tls = c.tls;
  c.send_queue_depth = 256;
  ucx::UcxTransport a(c), b(c);
  // One thread alternates the two sides here: tests with several posting threads are not run.
  return probe::run_one_process(a, b, plan, app::plan_qps(plan), app::plan_max_size(plan), 200'000'000);
}

}  // namespace bkv::real
