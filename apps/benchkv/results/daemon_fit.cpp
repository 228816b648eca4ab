#include "apps/benchkv/results/daemon_fit.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace bkv::app {

using nlohmann::json;

namespace {

// A count the other counts predict within this relative residual over the runs is not
// separated from them: no run varied it apart from them.
constexpr double kSeparable = 0.05;
// A daemon busy less than this fraction of its window slept or waited: its time is not
// the sum of its loops' costs (the simulator records busy_fraction; a real daemon spins).
constexpr double kMinBusy = 0.99;

constexpr size_t kCols = 5;
enum Col : size_t { kLoops = 0, kSlots, kCqes, kCalls, kLocal };
constexpr std::array<const char*, kCols> kColName = {"loops", "client rings looked at (loops x (clients + 1))", "CQEs",
                                                     "calls", "local ops"};
constexpr std::array<const char*, kCols> kColShort = {"per loop", "per ring looked at", "per CQE", "per call", "per local op"};

struct Row {
  std::array<double, kCols> x{};
  double y = 0;  // the daemon's time in its window, ns
};

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

double number_at(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_number())
    throw std::invalid_argument(where + ": no numeric \"" + key + "\"");
  const double v = j.at(key).get<double>();
  if (!std::isfinite(v) || v < 0) throw std::invalid_argument(where + ": \"" + key + "\" is negative or not finite");
  return v;
}

void rows_of(const NamedSummary& s, std::vector<Row>& rows) {
  const std::string& f = s.first;
  const json& j = s.second;
  if (!j.is_object() || !j.contains("config") || !j.at("config").is_object() || !j.contains("daemons") ||
      !j.at("daemons").is_array())
    throw std::invalid_argument("run summary (--from-run) " + f +
                                ": not a benchkv KV summary (no \"config\" object and \"daemons\" array)");
  const json& c = j.at("config");
  const std::string backend = c.value("backend", std::string());
  if (backend != "delegation")
    throw std::invalid_argument("run summary (--from-run) " + f + ": backend \"" + backend +
                                "\": the daemon fit models the delegation backend's daemon");
  const std::string where = "run summary (--from-run) " + f;
  if (number_at(c, "server_threads", where + " config") != 1)
    throw std::invalid_argument(where + ": server_threads must be 1 (the fit models one daemon per node)");
  const double clients = number_at(c, "client_threads", where + " config");
  size_t n = 0;
  for (const json& d : j.at("daemons")) {
    const std::string dw = where + " daemons[" + std::to_string(n++) + "]";
    const double loops = number_at(d, "loops", dw);
    if (loops == 0) continue;
    if (!d.contains("extra") || !d.at("extra").is_object()) throw std::invalid_argument(dw + ": no \"extra\" object");
    const json& e = d.at("extra");
    if (e.contains("busy_fraction") && number_at(e, "busy_fraction", dw + " extra") < kMinBusy)
      throw std::invalid_argument(dw + ": the daemon was busy " + num(e.at("busy_fraction").get<double>()) +
                                  " of its window: its time is not the sum of its loops' costs");
    Row r;
    r.y = loops * number_at(e, "loop_ns_avg", dw + " extra");
    r.x[kLoops] = loops;
    r.x[kSlots] = loops * (clients + 1);
    r.x[kCqes] = number_at(d, "cqes", dw);
    r.x[kCalls] = number_at(e, "calls", dw + " extra");
    r.x[kLocal] = number_at(e, "local_ops", dw + " extra");
    rows.push_back(r);
  }
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> column(const std::vector<Row>& rows, size_t j) {
  std::vector<double> v(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) v[i] = rows[i].x[j];
  return v;
}

// The part of column j (as a fraction of its norm) that the other active columns do not
// span (Gram-Schmidt on the others, then the residual of j's unit vector).
double unexplained(const std::vector<Row>& rows, const std::array<bool, kCols>& active, size_t j) {
  std::vector<std::vector<double>> q;
  for (size_t k = 0; k < kCols; ++k) {
    if (!active[k] || k == j) continue;
    std::vector<double> v = column(rows, k);
    double n = std::sqrt(dot(v, v));
    if (n == 0) continue;
    for (double& x : v) x /= n;
    for (const auto& u : q) {
      const double p = dot(v, u);
      for (size_t i = 0; i < v.size(); ++i) v[i] -= p * u[i];
    }
    n = std::sqrt(dot(v, v));
    if (n < 1e-9) continue;
    for (double& x : v) x /= n;
    q.push_back(std::move(v));
  }
  std::vector<double> r = column(rows, j);
  const double n = std::sqrt(dot(r, r));
  if (n == 0) return 0;
  for (double& x : r) x /= n;
  for (const auto& u : q) {
    const double p = dot(r, u);
    for (size_t i = 0; i < r.size(); ++i) r[i] -= p * u[i];
  }
  return std::sqrt(dot(r, r));
}

// Least squares of y on the active columns (independent by construction): the normal
// equations of the norm-scaled columns, Gauss-Jordan with partial pivoting.
std::array<double, kCols> least_squares(const std::vector<Row>& rows, const std::vector<double>& y,
                                        const std::array<bool, kCols>& active) {
  std::vector<size_t> idx;
  for (size_t k = 0; k < kCols; ++k)
    if (active[k]) idx.push_back(k);
  const size_t m = idx.size();
  std::vector<double> scale(m);
  std::vector<std::vector<double>> cols(m);
  for (size_t a = 0; a < m; ++a) {
    cols[a] = column(rows, idx[a]);
    scale[a] = std::sqrt(dot(cols[a], cols[a]));
    for (double& x : cols[a]) x /= scale[a];
  }
  std::vector<std::vector<double>> M(m, std::vector<double>(m + 1));
  for (size_t a = 0; a < m; ++a) {
    for (size_t b = 0; b < m; ++b) M[a][b] = dot(cols[a], cols[b]);
    M[a][m] = dot(cols[a], y);
  }
  for (size_t i = 0; i < m; ++i) {
    size_t p = i;
    for (size_t k = i + 1; k < m; ++k)
      if (std::abs(M[k][i]) > std::abs(M[p][i])) p = k;
    std::swap(M[i], M[p]);
    for (size_t k = 0; k < m; ++k) {
      if (k == i) continue;
      const double f = M[k][i] / M[i][i];
      for (size_t c = i; c <= m; ++c) M[k][c] -= f * M[i][c];
    }
  }
  std::array<double, kCols> coef{};
  for (size_t a = 0; a < m; ++a) coef[idx[a]] = M[a][m] / M[a][a] / scale[a];
  return coef;
}

}  // namespace

void fit_daemon_costs(const std::vector<NamedSummary>& runs, json& model, json& basis, std::set<std::string>& written,
                      const std::string& cq_poll_from) {
  std::vector<Row> rows;
  std::string files;
  for (const NamedSummary& s : runs) {
    rows_of(s, rows);
    files += (files.empty() ? "" : ", ") + s.first;
  }
  if (rows.empty()) throw std::invalid_argument("the run summaries (--from-run) have no daemon with loops");
  const json& cpu = model.at("cpu");
  const auto c = [&](const char* k) { return cpu.at(k).get<double>(); };
  // Each count's cost as the model's keys charge it (the base, or the probe's fit).
  const std::array<double, kCols> model_cost = {
      c("loop") + c("cq_poll"), c("poll_slot"), c("cqe") + c("flush") + c("doorbell"),
      c("call_encode") + c("reply_encode") + 2 * c("msg_parse") + c("kv_op") + 2 * c("ring_op"),
      c("kv_op") + 2 * c("ring_op")};
  const std::array<const char*, kCols> model_sum = {
      "cpu.loop + cpu.cq_poll", "cpu.poll_slot", "cpu.cqe + cpu.flush + cpu.doorbell",
      "cpu.call_encode + cpu.reply_encode + 2 cpu.msg_parse + cpu.kv_op + 2 cpu.ring_op", "cpu.kv_op + 2 cpu.ring_op"};

  std::vector<double> y(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) y[i] = rows[i].y;
  std::array<bool, kCols> active{};
  active.fill(true);
  std::array<std::string, kCols> why{};
  for (;;) {
    // The last column (in the order above) among those not separated goes first.
    size_t drop = kCols;
    double drop_r = 0;
    for (size_t j = 0; j < kCols; ++j) {
      if (!active[j]) continue;
      const double r = unexplained(rows, active, j);
      if (r < kSeparable) {
        drop = j;
        drop_r = r;
      }
    }
    if (drop == kCols) break;
    active[drop] = false;
    why[drop] = column(rows, drop) == std::vector<double>(rows.size(), 0.0)
                    ? std::string("none in the runs")
                    : std::string("the other counts predict the runs' ") + kColName[drop] + " within " +
                          num(100 * drop_r) + "% (runs at other loads, client counts or node counts separate it)";
    for (size_t i = 0; i < rows.size(); ++i) y[i] -= model_cost[drop] * rows[i].x[drop];
  }
  bool any = false;
  for (bool a : active) any = any || a;
  if (!any) throw std::invalid_argument("the run summaries (--from-run) separate no daemon cost: " + why[kLoops]);
  const std::array<double, kCols> a = least_squares(rows, y, active);
  double ss = 0, yy = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    double fit = 0;
    for (size_t j = 0; j < kCols; ++j)
      if (active[j]) fit += a[j] * rows[i].x[j];
    ss += (y[i] - fit) * (y[i] - fit);
    yy += rows[i].y * rows[i].y;
  }
  const std::string method = "least squares over " + std::to_string(rows.size()) + " daemons of " +
                             std::to_string(runs.size()) + " run summaries (" + files +
                             ") of each daemon's time (loops x loop_ns_avg) on its loops, client rings looked at, "
                             "CQEs, calls and local ops; relative residual " + num(std::sqrt(ss / yy));
  std::string per_event;
  for (size_t j = 0; j < kCols; ++j) {
    per_event += (per_event.empty() ? "" : "; ") + std::string(kColShort[j]) + " ";
    per_event += active[j] ? num(a[j]) + " ns" : "not separated (" + why[j] + "), the model's " + num(model_cost[j]) + " ns used";
    per_event += " (the model's " + std::string(model_sum[j]) + " = " + num(model_cost[j]) + " ns)";
  }
  std::string negative;
  for (size_t j = 0; j < kCols; ++j)
    if (active[j] && a[j] < 0) negative += (negative.empty() ? "" : ", ") + std::string(kColShort[j]);
  if (!negative.empty())
    per_event += ". Negative (" + negative +
                 "): the daemons' time is not a sum of per-event costs in these runs (a daemon that shared its CPU or "
                 "waited, or counts that changed for another reason), so read every figure here with doubt";
  basis["daemon costs per event (--from-run)"] =
      per_event + ". " + method +
      ". Per CQE, per call and per local op each hold several keys (a CQE's time also holds the WRITE sent back and "
      "ring reads the loop metrics do not count), so they are not written to the model: a difference from the model's "
      "sum says where the model's daemon is off";

  // cpu.loop: the per-loop cost without the loop's CQ poll.
  const double cq_poll = c("cq_poll");
  bool fitted = false;
  if (!active[kLoops]) {
    basis["cpu.loop (not fitted by the runs)"] = "loops: " + why[kLoops];
  } else if (a[kLoops] - cq_poll < 0) {
    basis["cpu.loop (not fitted by the runs)"] = "the runs' cost per loop, " + num(a[kLoops]) +
                                                 " ns, is below cpu.cq_poll (" + num(cq_poll) + " ns, " + cq_poll_from +
                                                 "): the loop is not what the model charges";
  } else {
    const bool from_probe = written.count("cpu.loop") > 0;
    model["cpu"]["loop"] = a[kLoops] - cq_poll;
    written.insert("cpu.loop");
    fitted = true;
    basis["cpu.loop"] = "one daemon loop's own cost: the runs' " + num(a[kLoops]) + " ns per loop minus cpu.cq_poll = " +
                        num(cq_poll) + " ns (" + cq_poll_from + "); " + method +
                        (from_probe ? "; it replaces the probe's cpu_loop_ns (the probe's own loop, not the daemon's)" : "");
  }
  if (!active[kSlots]) {
    basis["cpu.poll_slot (not fitted)"] = "client rings looked at: " + why[kSlots] + "; left at the base model";
  } else if (a[kSlots] < 0) {
    basis["cpu.poll_slot (not fitted)"] = "the runs' cost per client ring looked at is negative (" + num(a[kSlots]) +
                                          " ns): the loop is not linear in its clients here; left at the base model";
  } else {
    model["cpu"]["poll_slot"] = a[kSlots];
    written.insert("cpu.poll_slot");
    fitted = true;
    basis["cpu.poll_slot"] = "one look at the ring head or at a client's ipc ring: the runs' cost per loop per (clients + 1), " +
                             num(a[kSlots]) + " ns; " + method;
  }
  if (!fitted)
    throw std::invalid_argument("the run summaries (--from-run) determine neither cpu.loop nor cpu.poll_slot: " +
                                basis.value("cpu.loop (not fitted by the runs)", std::string()) + "; " +
                                basis.value("cpu.poll_slot (not fitted)", std::string()));
}

}  // namespace bkv::app
