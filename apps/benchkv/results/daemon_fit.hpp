// `benchkv calibrate --from-run`: the delegation daemon's per-event CPU costs from the loop
// metrics of several short benchkv runs (docs/your_cluster.md, "The daemon's costs from
// benchkv runs").
//
// A daemon that never sleeps spends its whole window in loops, so each daemon of each run
// gives one equation:
//   loops x loop_ns_avg = a_loop x loops + a_slot x loops x (clients + 1)
//                       + a_cqe x cqes + a_call x calls + a_local x local_ops
// (daemon #0 of the delegation backend with one daemon per node: every loop takes one
// CQ poll and looks at the ring head and at each client's ipc ring; every CQE received
// is answered by one WRITE sent; a call issued comes with its response delivered and,
// in a uniform workload, one request served for a peer; a local op is one ipc request).
// One run is one equation per daemon and its counts are nearly proportional; runs at
// different loads (client counts, queue depths, node counts) make the least squares
// well posed. A count the other counts predict within kSeparable (relative) over the
// given runs is not separated: its cost is taken from the base model, subtracted, and
// listed as not fitted with the reason.
//
// What is written to the model: cpu.loop (a_loop minus the model's cpu.cq_poll, the
// probe's when it fitted one) and cpu.poll_slot (a_slot). a_cqe, a_call and a_local each
// hold several keys (a CQE's time also holds the WRITE sent back and ring reads the loop
// metrics do not count), so they are recorded in the basis next to the sum the model's
// keys give, and not written.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace bkv::app {

// A benchkv summary JSON and the name it came from (its path).
using NamedSummary = std::pair<std::string, nlohmann::json>;

// Fits the daemon costs of `runs` into `model` (a model JSON: its cpu keys are the base
// and are overwritten where fitted), adding the basis entries to `basis` and the keys
// written to `written`. `cq_poll_from` says where the model's cpu.cq_poll came from (a
// probe or the base). Throws std::invalid_argument naming the file and what is missing
// or unusable (not a KV summary, another backend, several daemons per node, no daemon
// loops), and when the runs determine neither written cost.
void fit_daemon_costs(const std::vector<NamedSummary>& runs, nlohmann::json& model, nlohmann::json& basis,
                      std::set<std::string>& written, const std::string& cq_poll_from);

}  // namespace bkv::app
