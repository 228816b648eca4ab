#include "apps/benchkv/cli/stop_signals.hpp"

#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace bkv::app {

namespace {

// Lock-free, so both a signal handler and other threads (real runs' watchdog) may read it.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;  // the second signal: the default action
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  // Inherited blocked (the mask survives exec), they would never arrive; one already
  // pending arrives here.
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  ::sigprocmask(SIG_UNBLOCK, &both, nullptr);
}

int stop_signal() noexcept { return g_stop_signal.load(std::memory_order_relaxed); }

std::string signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal " + std::to_string(sig);
}

int report_interruption(const nlohmann::json& interrupted, const std::string& output, const std::string& summary,
                        const std::string& detail) {
  const int sig = interrupted.is_object() && interrupted.contains("signal")
                      ? (interrupted["signal"] == "SIGINT" ? SIGINT : SIGTERM)
                      : stop_signal();
  if (sig == 0) return 0;
  const std::string where =
      !interrupted.is_object() ? std::string("while writing the outputs")
      : !interrupted.contains("epochs_done")  // (a real run stopped before any kept epoch finished)
          ? std::string("before any kept epoch finished")
          : "after epoch " + std::to_string(interrupted.at("epochs_done").get<uint32_t>()) + " of run " +
                std::to_string(interrupted.at("run").get<uint32_t>()) + detail;
  std::fprintf(stderr,
               "benchkv: interrupted by %s %s: %s holds the epochs measured until then, %s is marked "
               "\"interrupted\"\n",
               signal_name(sig).c_str(), where.c_str(), output.c_str(), summary.c_str());
  return 128 + sig;
}

}  // namespace bkv::app
