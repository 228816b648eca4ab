// benchkv sweep SWEEP.json: a grid of simulated runs (docs/sweeps.md).
//
// A sweep file (strict: unknown keys and bad values are errors naming them):
//   {
//     "description": "...",                       optional
//     "base": "../c1_np8.json",                   a config file (relative to the sweep
//                                                 file) or an object of option keys
//     "set": {"duration": 0.03, ...},             options fixed for every run (optional)
//     "grid": {                                   axes, in order; the runs are their
//       "np": [2, 4, 8],                          product, the last axis varying fastest.
//       "start_mode": ["sync", "staggered"],      A list: values of one key. A key is an
//       "model.nic.send.qp_window": [8, 64],      option's JSON key or "model." + a path
//       "variant": {"calibrated": {},             in the simulator model. An object: named
//                   "no contention": {...}}       values, each setting several keys.
//     },
//     "output": "../../out/regime",               directory (relative to the sweep file)
//     "plot": [{...}]                             for scripts/plot_sweep.py (optional)
//   }
// Output directory: runs/NNNN/ (each run's CSV, summary, model, row.json) and results.csv
// (one row per run: run, every axis, then the summary figures). A run whose row.json
// exists is not run again (resume after interruption) if row.json records the run's
// effective configuration (options, model content) with the same hash; otherwise the
// sweep is refused (exit status 2) naming what changed.
// Modes: the KV backends, rpc (one message size per run) and data (one value size per
// run), all simulated. Runs in parallel on local cores (-j N, one child process per run;
// by default as many as the machine has cores, fewer when the runs' estimated memory
// would not fit), the runs estimated to take longest first (the rows keep their order),
// or under mpirun as MPI ranks: rank r runs the runs r, r + size, ... of that order and
// the rows are gathered to rank 0, which writes results.csv. Before any run starts the ranks agree on the sweep and on the
// runs left to run (sweep.cpp, agree_on_sweep); a rank that differs ends every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bkv::app {

// The summary figures of a run, in CSV column order after the axes: the rate (Mops; rpc:
// M calls/s; data: M operations/s) over the runs and per issuing rank (rpc: per caller), daemon #0's CQEs per loop
// and calls in flight (empty without daemons: rpc, data), the request totals, the latency
// of every request of the run's kept epochs merged (ns; rpc: round trips), with
// --repeat N the 95 % confidence interval of mops_total over the repetitions (else empty),
// and whether that latency came from a saturated histogram ("true" or "false"; empty
// with the latency columns: docs/outputs.md §A sweep's results.csv).
inline const std::vector<std::string> kSweepFigures = {
    "mops_total",     "mops_per_rank",  "cqe_per_loop",   "inflight",        "issued",         "completed",
    "errors",         "latency_mean_ns", "latency_p50_ns", "latency_p99_ns", "latency_p999_ns", "latency_max_ns",
    "mops_ci95_low",  "mops_ci95_high", "latency_saturated"};

struct SweepRun {
  uint32_t index = 0;
  std::vector<std::string> labels;  // one per axis
  nlohmann::json config;            // option keys of this run (absolute model path)
  nlohmann::json model_patch;       // "model." keys: path -> value (object, may be empty)
};

struct Sweep {
  std::string file;
  std::string output_dir;            // absolute
  std::vector<std::string> axes;     // axis names, in order
  std::vector<SweepRun> runs;
  nlohmann::json plot;               // as given (validated), or null
  std::vector<std::string> warnings; // options of "base"/"set" that some runs ignore, one line each
};

// Reads, expands and validates a sweep file: every run's options and model are checked
// before anything runs. Throws std::runtime_error naming the file, the key and the run.
Sweep load_sweep(const std::string& path);

// A 64-bit FNV-1a digest of everything that decides the sweep's rows: its axes, labels
// and every run's effective configuration (option values, and the contents of the config
// and model files they name, not their paths). No path is in it, so two checkouts in
// different directories give the same digest. Ranks under mpirun compare it, and their
// output directory, before any run starts; `benchkv sweep --check` prints it.
uint64_t sweep_fingerprint(const Sweep& s);

// `benchkv sweep ...`: argv[1] is "sweep". Returns the exit status.
int sweep_main(int argc, char** argv);

}  // namespace bkv::app
