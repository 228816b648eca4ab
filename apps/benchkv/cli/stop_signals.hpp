// SIGINT and SIGTERM as a request to stop measuring, shared by every benchkv mode that
// keeps what it measured (simulated KV, rpc and data runs, sweeps, real runs under
// mpirun): the handler only records the signal; the mode looks at stop_signal() at its
// safe points (an epoch's end, a collective's wait, a sweep's wait for its runs), stops,
// writes what it measured marked "interrupted", says so on stderr and exits with
// 128 + the signal (130 for SIGINT, 143 for SIGTERM).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace bkv::app {

// Installs the handler for SIGINT and SIGTERM, also when the process inherited them
// ignored (a command started with & from a script has SIGINT ignored) or blocked (the
// signal mask survives exec; one already pending arrives now). A second signal ends the
// process (default action: the handler is reset once it ran).
void install_stop_signals();

// The signal that came (SIGINT or SIGTERM), 0 while none did. Async-signal-safe.
int stop_signal() noexcept;

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int sig);

// After a run wrote its outputs (`output`, the CSV, and `summary`): when a signal stopped
// it (`interrupted`: the summary's "interrupted" object, {"signal", "run", "epochs_done"};
// null when none did) or came while they were written, prints on stderr
//   benchkv: interrupted by SIGINT after epoch 3 of run 0: out.csv holds the epochs
//   measured until then, out.summary.json is marked "interrupted"
// (or "... while writing the outputs: ..."; `detail` follows "run 0" when given) and
// returns 128 + the signal; else 0.
int report_interruption(const nlohmann::json& interrupted, const std::string& output, const std::string& summary,
                        const std::string& detail = "");

}  // namespace bkv::app
