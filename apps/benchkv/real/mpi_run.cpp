// The rank-level pieces of real runs that need no transport: pinning plan, outputs.
#include "apps/benchkv/real/mpi_run.hpp"

#include "apps/benchkv/results/fnv1a.hpp"
#include "apps/benchkv/results/provenance.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "apps/benchkv/results/results.hpp"
#include "core/tsc_clock.hpp"

namespace bkv::real {

namespace {

// Which CPUs a rank may use, and on which host: ranks that share both share the CPUs the
// plan hands out (each its own slice); a rank that mpirun bound to its own CPUs (e.g. the
// default --bind-to core) plans alone on them.
constexpr size_t kMaskWords = 16;  // CPUs 0..1023 (CPU_SETSIZE)
struct Affinity {
  uint64_t host = 0;  // hash of the processor name
  uint64_t mask[kMaskWords] = {};
  friend bool operator==(const Affinity&, const Affinity&) = default;
};
static_assert(std::is_trivially_copyable_v<Affinity> && sizeof(Affinity) == 8 * (1 + kMaskWords));
static_assert(kMaskWords * 64 >= CPU_SETSIZE);

}  // namespace

namespace {

// What check_same_run compares: the build's provenance and the options, as JSON texts.
struct RunTexts {
  std::string build, options;
};
RunTexts run_texts(const app::Options& o) {
  nlohmann::json opts = app::to_json(o);
  for (const char* k : {"device", "device_index", "port", "gid_index"}) opts.erase(k);
  return {app::build_provenance().dump(), opts.dump()};
}

struct RunFingerprint {
  uint64_t magic = 0;
  uint64_t build_hash = 0, options_hash = 0;
  uint64_t build_length = 0, options_length = 0;
};
static_assert(std::is_trivially_copyable_v<RunFingerprint>);
constexpr uint64_t kFingerprintMagic = 0x626b7672756e3031ull;  // "bkvrun01"

// The top-level keys whose values differ, "key: A (rank 0) vs B (rank j)", at most
// `limit` of them and a count of the rest.
std::string json_differences(const std::string& a_text, const std::string& b_text, size_t j, size_t limit = 4) {
  const nlohmann::json a = nlohmann::json::parse(a_text, nullptr, false), b = nlohmann::json::parse(b_text, nullptr, false);
  if (!a.is_object() || !b.is_object()) return "unreadable";
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items()) keys.push_back(k);
  for (const auto& [k, v] : b.items())
    if (!a.contains(k)) keys.push_back(k);
  std::string out;
  size_t shown = 0, more = 0;
  for (const std::string& k : keys) {
    const std::string va = a.contains(k) ? a[k].dump() : "(none)", vb = b.contains(k) ? b[k].dump() : "(none)";
    if (va == vb) continue;
    if (shown == limit) {
      ++more;
      continue;
    }
    out += (shown++ ? "; " : "") + k + ": " + va + " (rank 0) vs " + vb + " (rank " + std::to_string(j) + ")";
  }
  if (more) out += "; and " + std::to_string(more) + " more";
  return out;
}

}  // namespace

void check_same_run(const mpi::Session& s, const app::Options& o) {
  const RunTexts mine = run_texts(o);
  RunFingerprint f;
  f.magic = kFingerprintMagic;
  f.build_hash = app::fnv1a(mine.build);
  f.options_hash = app::fnv1a(mine.options);
  f.build_length = mine.build.size();
  f.options_length = mine.options.size();
  const std::vector<RunFingerprint> all = s.all_gather(f);
  const size_t n = all.size();
  auto same = [&](const RunFingerprint& a, const RunFingerprint& b) {
    return a.magic == b.magic && a.build_hash == b.build_hash && a.options_hash == b.options_hash &&
           a.build_length == b.build_length && a.options_length == b.options_length;
  };
  bool all_same = true;
  uint64_t longest = 1;
  for (const RunFingerprint& x : all) {
    all_same = all_same && same(x, all[0]);
    if (x.magic == kFingerprintMagic) longest = std::max({longest, x.build_length, x.options_length});
  }
  if (all_same) return;
  for (size_t j = 0; j < n; ++j)
    if (all[j].magic != kFingerprintMagic)
      throw std::runtime_error("rank " + std::to_string(j) + " is not a benchkv of this version (its start-up "
                               "fingerprint has another layout); run the same benchkv on every rank");
  // Some rank differs: every rank sends its two texts (padded to the longest) to every
  // rank, so each can say what differs.
  if (longest > (uint64_t{1} << 20)) throw std::runtime_error("the ranks' configurations differ (and are too long to compare)");
  const size_t slot = 2 * static_cast<size_t>(longest);
  std::vector<char> blob(slot, '\0');
  std::copy(mine.build.begin(), mine.build.end(), blob.begin());
  std::copy(mine.options.begin(), mine.options.end(), blob.begin() + static_cast<std::ptrdiff_t>(longest));
  std::vector<char> out;
  for (size_t j = 0; j < n; ++j) out.insert(out.end(), blob.begin(), blob.end());
  const std::vector<char> in = s.all_to_all(std::span<const char>(out), slot);
  auto text = [&](size_t j, bool options) {
    const char* at = in.data() + j * slot + (options ? longest : 0);
    return std::string(at, options ? all[j].options_length : all[j].build_length);
  };
  for (size_t j = 1; j < n; ++j) {
    if (same(all[j], all[0])) continue;
    if (all[j].build_hash != all[0].build_hash || all[j].build_length != all[0].build_length)
      throw std::runtime_error("rank " + std::to_string(j) + " runs another benchkv build than rank 0 (" +
                               json_differences(text(0, false), text(j, false), j) +
                               "); run the same benchkv on every rank");
    throw std::runtime_error("rank " + std::to_string(j) + " was started with other options than rank 0: " +
                             json_differences(text(0, true), text(j, true), j) +
                             "; every rank must get the same options");
  }
  throw std::runtime_error("the ranks' configurations differ");  // unreachable: some rank j > 0 differs
}

RankPlan plan_rank(const app::Options& o, const mpi::Session& s, std::string_view device) {
  // The threads' clock calibrates now (10 ms), not in the first step of a client, which
  // the other threads would wait for.
  (void)tsc_clock::scale();
  const std::vector<int> allowed = runtime::allowed_cpus();
  const runtime::CpuTopology topo = runtime::read_topology(device, &allowed);
  Affinity mine;
  mine.host = std::hash<std::string>{}(s.processor_name());
  for (int c : allowed)
    if (c >= 0 && static_cast<size_t>(c) < kMaskWords * 64) mine.mask[c / 64] |= uint64_t{1} << (c % 64);
  const std::vector<Affinity> all = s.all_gather(mine);
  runtime::PinRequest req;
  req.daemons = o.server_threads;
  req.clients = o.client_threads;
  req.local_rank = 0;
  req.local_size = 0;
  for (int r = 0; r < s.size(); ++r) {
    if (!(all[static_cast<size_t>(r)] == mine)) continue;
    if (r < s.rank()) ++req.local_rank;
    ++req.local_size;
  }
  RankPlan rp;
  rp.pins = runtime::plan_pinning(topo, req);
  const uint64_t threads = uint64_t{req.daemons + req.clients} * req.local_size;
  rp.oversubscribed = threads > topo.cpus.size();
  if (req.local_rank == 0 && !rp.pins.warning.empty()) {
    std::fprintf(stderr, "benchkv: %s%s\n", rp.pins.warning.c_str(),
                 rp.oversubscribed ? " (idle threads yield the CPU)" : "");
  }
  return rp;
}

void print_pin_notes(const std::vector<std::string>& notes, int rank) {
  for (const auto& n : notes) std::fprintf(stderr, "benchkv: rank %d: %s\n", rank, n.c_str());
}

// The summary's "real" section: `extra` (the transport's details), the rank's wall and
// drain times, and the per-rank totals.
static nlohmann::json real_section(const nlohmann::json& extra, const RealResult& res) {
  nlohmann::json real = extra;
  real["wall_s"] = app::round6(res.wall_s);
  real["drain_ns"] = res.drain_ns;
  nlohmann::json per_rank = nlohmann::json::array();
  for (const RankTotals& t : res.per_rank)
    per_rank.push_back({{"issued", t.issued}, {"completed", t.completed}, {"failed", t.failed}});
  real["per_rank"] = std::move(per_rank);
  return real;
}

void end_after_exception(const mpi::Session& s) {
  try {
    throw;
  } catch (const mpi::Interrupted& e) {
    interrupted_without_outputs(s, e);
  } catch (const app::OptionError& e) {
    s.abort(2, std::string("benchkv: ") + e.what());
  } catch (const std::exception& e) {
    s.abort(1, std::string("benchkv: ") + e.what());
  }
}

int real_ranks_checked(const mpi::Session& s, const app::Options& o) {
  if (s.size() >= 2) return 0;
  if (s.rank() == 0) {
    const std::string what = o.mode == app::Mode::kKv && o.backend
                                 ? std::string(app::to_string(*o.backend))
                                 : std::string(app::to_string(o.mode));
    const char* why = o.mode == app::Mode::kRpc    ? "rank 0 calls and the other ranks answer"
                      : o.mode == app::Mode::kData ? "its operations go to other nodes"
                                                   : "its requests to other nodes are what it measures";
    // The simulator runs one node (NIC loopback) for rpc and the copyrpc KV backends.
    const bool simulated_alone =
        o.mode == app::Mode::kRpc || (o.mode == app::Mode::kKv && o.backend != backend::BackendKind::kUcxAm);
    std::fprintf(stderr,
                 "benchkv: %s --transport %s: %d rank (benchkv started without mpirun, or mpirun -np 1): a real run "
                 "has one rank per node and %s, so one rank alone would measure nothing remote; start it under "
                 "mpirun with 2 or more ranks (mpirun -np 2 benchkv ...)%s\n",
                 what.c_str(), std::string(app::to_string(o.transport)).c_str(), s.size(), why,
                 simulated_alone ? "; one node is simulated only (--transport sim --np 1)" : "");
  }
  return 2;
}

std::string rank_output_path(const std::string& path, uint32_t rank) {
  if (rank == 0) return path;
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  std::string tag = ".rank";
  tag += std::to_string(rank);
  size_t at = name.rfind('.');
  if (name.ends_with(".summary.json")) at = name.size() - std::string_view(".summary.json").size();
  name.insert(at == std::string::npos ? name.size() : at, tag);
  return (p.parent_path() / name).string();
}

app::Options rank_own_outputs(const app::Options& o, uint32_t rank) {
  app::Options own = o;
  own.output = rank_output_path(o.output, rank);
  own.summary = rank_output_path(o.summary, rank);
  return own;
}

namespace {

// This rank's CPUs: its daemons', then its clients' (the order rank_provenance reads).
std::vector<int32_t> rank_cpus(const RankPlan& plan) {
  std::vector<int32_t> cpus;
  for (int c : plan.pins.daemon_cpus) cpus.push_back(c);
  for (int c : plan.pins.client_cpus) cpus.push_back(c);
  return cpus;
}

// The summary's "provenance" of a real KV run: the thread-to-CPU map of the ranks whose
// CPUs `cpus` holds (each rank's rank_cpus in turn, the first of them rank `first_rank`;
// every rank has plan's thread counts) and the transports UCX selected when `extra` has
// them.
nlohmann::json rank_provenance(const RankPlan& plan, std::span<const int32_t> cpus, uint32_t first_rank,
                               const nlohmann::json& extra) {
  std::vector<app::ThreadCpu> threads;
  const size_t daemons = plan.pins.daemon_cpus.size(), threads_per_rank = daemons + plan.pins.client_cpus.size();
  for (size_t k = 0; threads_per_rank && k < cpus.size(); ++k) {
    const size_t t = k % threads_per_rank;
    const bool daemon = t < daemons;
    // Appended, not "d" + std::to_string(...): GCC 12 at -O3 warns -Wrestrict (a false
    // positive) on that inlined operator+.
    std::string name = daemon ? "d" : "c";
    name += std::to_string(daemon ? t : t - daemons);
    threads.push_back({first_rank + static_cast<uint32_t>(k / threads_per_rank), std::move(name), cpus[k]});
  }
  nlohmann::json p = app::provenance_json(false, app::threads_json(threads));
  if (extra.contains("ucx_transports") && !extra["ucx_transports"].is_null())
    p["ucx_transports"] = extra["ucx_transports"];
  return p;
}

}  // namespace

// finish_incomplete's outputs of this rank (its own epochs): rank 0 in the named outputs,
// rank r in rank_output_path(..., r). An error is said on stderr, not thrown.
static void write_own_outputs(const mpi::Session& s, const app::Options& o, const RealResult& res,
                              const nlohmann::json& extra, const RankPlan& plan) {
  const bool interrupted = res.interrupted_by != 0;
  const uint32_t rank = static_cast<uint32_t>(s.rank());
  try {
    app::Options eff = rank_own_outputs(o, rank);
    eff.np = static_cast<uint32_t>(s.size());
    app::write_csv_file(eff.output, res.runs);
    nlohmann::json summary = app::summary_json(eff, res.runs, {});
    summary["incomplete"] = {{"reason", res.incomplete}, {"ranks_reported", nlohmann::json::array({rank})}};
    if (interrupted) {
      nlohmann::json mark = {{"signal", app::signal_name(res.interrupted_by)}};
      if (!res.runs.empty()) {
        mark["run"] = res.runs.back().run();
        mark["epochs_done"] = res.runs.back().epochs_done();
      }
      mark["gone_ranks"] = res.gone_peers;
      if (!res.failed_endpoints.empty()) mark["failed_endpoints"] = res.failed_endpoints;
      summary["interrupted"] = std::move(mark);
    }
    summary["real"] = real_section(extra, res);
    summary["real"].erase("ucx_transports");  // provenance's, below
    summary["real"]["ranks"] = s.size();
    summary["totals"] = {{"issued", res.issued},   {"completed", res.completed},   {"errors", res.errors},
                         {"failed", res.failed},   {"unanswered", res.unanswered}};
    // As a whole run's, for this rank's threads (no exchange: a peer may be gone).
    const std::vector<int32_t> cpus = rank_cpus(plan);
    summary["provenance"] = rank_provenance(plan, cpus, rank, extra);
    app::write_summary_file(eff.summary, summary);
    std::fprintf(stderr, "benchkv: rank %u: wrote %s and %s, marked %s (rank %u's epochs only; the other ranks' are zero)\n",
                 rank, eff.output.c_str(), eff.summary.c_str(), interrupted ? "interrupted and incomplete" : "incomplete",
                 rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: rank %u: %s\n", rank, e.what());
  }
  std::fflush(stderr);
}

void finish_incomplete(const mpi::Session& s, const app::Options& o, const RealResult& res,
                       const nlohmann::json& extra, const RankPlan& plan) {
  const bool interrupted = res.interrupted_by != 0;
  const char* pending = res.calls_failed_back
                            ? "every copyrpc endpoint stopped, their pending calls failed back"
                            : "this backend has no endpoints to stop: its calls to the lost peer stay unanswered";
  for (const std::string& line : res.failed_endpoints)  // stopped before the signal came
    std::fprintf(stderr, "benchkv: before the signal: %s\n", line.c_str());
  std::string where;
  if (interrupted) {
    where = res.runs.empty() ? std::string(" before any kept epoch finished")
                             : " after epoch " + std::to_string(res.runs.back().epochs_done()) + " of run " +
                                   std::to_string(res.runs.back().run());
  }
  std::fprintf(stderr,
               "benchkv: rank %d: %s; the measurement ended early on this rank%s: %llu requests issued, %llu completed, "
               "%llu reported failed (%s), %llu never answered\n",
               s.rank(), res.incomplete.c_str(), where.c_str(), static_cast<unsigned long long>(res.issued),
               static_cast<unsigned long long>(res.completed), static_cast<unsigned long long>(res.failed), pending,
               static_cast<unsigned long long>(res.unanswered));
  std::fflush(stderr);
  // Every surviving rank keeps its own epochs, so that no rank's measurement is lost
  // whichever peer died.
  const auto write = [&] { write_own_outputs(s, o, res, extra, plan); };
  if (interrupted) {
    // Every rank was or will be signalled, and mpirun ends the job anyway: nobody waits.
    write();
    ::_exit(128 + res.interrupted_by);
  }
  // The others wait for rank 0's outputs as long as rank 0 answers (it is alive), so that
  // their exit does not make mpirun end the job while rank 0 writes.
  const std::string why = s.write_after_peer_lost(write);
  if (s.rank() != 0)
    std::fprintf(stderr, "benchkv: rank %d: %s; ending this rank\n", s.rank(),
                 why.empty() ? "rank 0 has written its outputs" : why.c_str());
  else if (!why.empty())
    std::fprintf(stderr, "benchkv: rank 0: answering the other ranks while writing failed: %s\n", why.c_str());
  std::fflush(stderr);
  ::_exit(mpi::kPeerLostExitCode);
}

void interrupted_without_outputs(const mpi::Session& s, const mpi::Interrupted& e) {
  std::string gone;
  for (const int r : s.gone_peers()) gone += (gone.empty() ? "" : ", ") + std::to_string(r);
  if (!gone.empty()) gone = "; rank(s) " + gone + " died before it (process gone)";
  std::fprintf(stderr,
               "benchkv: rank %d: interrupted: %s%s; no outputs written by this rank (rank 0 writes what was "
               "measured, if the measurement had started); ending this rank\n",
               s.rank(), e.what(), gone.c_str());
  std::fflush(stderr);
  ::_exit(128 + e.signal);
}

InterruptMarks interrupt_marks(const mpi::Session& s, int sig, const std::vector<app::RunResults>& runs,
                               const std::string& counts) {
  const std::vector<int> gone = s.gone_peers();
  const std::string reason = interrupted_reason(sig, gone);
  const std::string where = runs.empty() ? std::string(" before any kept epoch finished")
                                         : " after epoch " + std::to_string(runs.back().epochs_done()) + " of run " +
                                               std::to_string(runs.back().run());
  std::fprintf(stderr, "benchkv: rank %d: %s; the measurement ended early on this rank%s: %s\n", s.rank(),
               reason.c_str(), where.c_str(), counts.c_str());
  std::fflush(stderr);
  InterruptMarks m;
  m.incomplete = {{"reason", reason}, {"ranks_reported", nlohmann::json::array({s.rank()})}};
  m.interrupted = {{"signal", app::signal_name(sig)}};
  if (!runs.empty()) {
    m.interrupted["run"] = runs.back().run();
    m.interrupted["epochs_done"] = runs.back().epochs_done();
  }
  m.interrupted["gone_ranks"] = gone;
  return m;
}

void exit_after_outputs(int sig, const std::function<int()>& write) {
  int status = 128 + sig;
  try {
    status = write();
  } catch (const std::exception& err) {
    std::fprintf(stderr, "benchkv: %s\n", err.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(status);
}

int finish_mpi(const mpi::Session& s, const app::Options& o, const RealResult& res, const nlohmann::json& extra,
               const RankPlan& plan) {
  // Thread-to-CPU map: every rank's daemon CPUs, then its client CPUs (the same counts
  // on every rank).
  const std::vector<int32_t> mine = rank_cpus(plan);
  const std::vector<int32_t> all_cpus = s.gather_to_root(std::span<const int32_t>(mine));
  return write_on_root(s, [&] {
    try {
      app::Options eff = o;
      eff.np = static_cast<uint32_t>(s.size());  // a real run's node count is the MPI size
      app::write_csv_file(eff.output, res.runs);
      nlohmann::json summary = app::summary_json(eff, res.runs, res.daemons);
      summary["real"] = real_section(extra, res);
      summary["real"].erase("ucx_transports");  // provenance's, below
      summary["totals"] = {{"issued", res.issued}, {"completed", res.completed}, {"errors", res.errors}};
      if (res.failed > 0) summary["totals"]["failed"] = res.failed;
      summary["provenance"] = rank_provenance(plan, all_cpus, 0, extra);
      app::write_summary_file(eff.summary, summary);
      const std::string report = app::format_report(summary, eff.report);
      std::fwrite(report.data(), 1, report.size(), stdout);
      std::fflush(stdout);
      std::fprintf(stderr, "wrote %s and %s\n", eff.output.c_str(), eff.summary.c_str());
      return app::consistency_status(res.issued, res.completed, res.errors, "requests", res.failed);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "benchkv: %s\n", e.what());
      return 1;
    }
  });  // every rank exits with rank 0's verdict
}

int write_on_root(const mpi::Session& s, const std::function<int()>& write, int own_status) {
  const uint64_t status = s.run_with_heartbeat(
      [&] { return static_cast<uint64_t>(s.rank() == 0 ? write() : own_status); },
      [&](const std::string& why) {
        std::fprintf(stderr, "benchkv: rank %d: %s; ending this rank%s\n", s.rank(), why.c_str(),
                     s.rank() == 0 ? " once its outputs are written" : " (rank 0 writes the outputs)");
      });
  if (const int sig = app::stop_signal(); sig != 0) {  // the measurement had ended: the outputs are whole
    std::fprintf(stderr, "benchkv: rank %d: interrupted by %s after the measurement ended%s\n", s.rank(),
                 app::signal_name(sig).c_str(), s.rank() == 0 ? " and the outputs were written" : "");
    return 128 + sig;
  }
  return static_cast<int>(status);
}

}  // namespace bkv::real
