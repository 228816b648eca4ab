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
  const uint32_t qps = app::plan_qps(plan), size = app::plan_max_size(plan);
  probe::Initiator<ucx::UcxTransport> init(a, qps, size);
  probe::Target<ucx::UcxTransport> target(b, qps, size);
  probe::connect(init, target);
  // One thread alternates the two sides here: tests with several posting threads are not run.
  std::vector<probe::TestSpec> one_thread;
  for (const probe::TestSpec& t : plan)
    if (t.threads == 1) one_thread.push_back(t);
  init.set_plan(one_thread);
  probe::run_in_one_thread(init, target, 200'000'000);
  return init.results();
}

}  // namespace bkv::real
