// `benchkv probe` and `benchkv calibrate` (docs/your_cluster.md): the closed loop (probe the
// simulator running a known model, fit, recover every parameter the probe determines
// within 5%; a model fitted over a deranged base reaches the default model's C1 and C5
// states), the rate's shape under the per-node and the per-QP send path, the outputs,
// and bad input (status 2 with a message naming the problem).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

// A known per-node model whose every probed number differs from the built-in defaults
// (the fit's base), so that a recovered value can only have come from the probe.
json known_model(double per_wqe_ns, double flush, double doorbell, double cq_poll, double cqe, double loop) {
  return json{{"cpu", {{"loop", loop}, {"cq_poll", cq_poll}, {"cqe", cqe}, {"flush", flush}, {"doorbell", doorbell}}},
              {"nic", {{"send", {{"engines", 1}, {"per_wqe_ns", per_wqe_ns}}}}}};
}

json probe(const TempDir& dir, const std::string& model_name, const json& model, Outcome* out = nullptr) {
  write_file(dir / model_name, model.dump());
  const Outcome o = run_ok({"probe", "--transport", "sim", "--np", "2", "--model", model_name, "--scale", "0.5", "-o",
                            model_name + ".probe.json"},
                           dir.path());
  if (out) *out = o;
  return read_json(dir / (model_name + ".probe.json"));
}

double within(double got, double want) { return std::abs(got - want) / want; }

// Every key a fitted model's basis lists as left at the base (`left_entry`) is in exactly
// one "why left at the base: ..." entry ("KEY, KEY (given by ...): WHY"), and none falls
// under "other" (a key calibrate has no reason for).
void check_every_left_key_has_a_reason(const json& basis, const std::string& left_entry) {
  const auto split = [](const std::string& list) {
    std::vector<std::string> out;
    for (size_t at = 0; at < list.size();) {
      const size_t comma = list.find(", ", at);
      std::string k = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      out.push_back(k.substr(0, k.find(" (")));
      at = comma == std::string::npos ? list.size() : comma + 2;
    }
    return out;
  };
  std::map<std::string, int> reasons;
  for (auto it = basis.begin(); it != basis.end(); ++it) {
    if (it.key().rfind("why left at the base: ", 0) != 0) continue;
    CHECK(it.key() != "why left at the base: other");
    const std::string v = it.value().get<std::string>();
    for (const std::string& k : split(v.substr(0, v.find(": ")))) ++reasons[k];
  }
  const std::vector<std::string> left = split(basis.at(left_entry).get<std::string>());
  CHECK(left.size() > 30);
  for (const std::string& k : left) {
    INFO(k);
    CHECK(reasons[k] == 1);
  }
  CHECK(reasons.size() == left.size());
}

// What `probe --transport mlx5|verbs` with valid device options says here: the device
// lookup finds no device; a benchkv built without rdma-core or MPI (CI's sanitizer tree)
// has no probe over a device and says what the build lacks.
#if BKV_REAL_RDMA
constexpr const char* kNoMlx5Probe = "no RDMA";
constexpr const char* kNoVerbsProbe = "no RDMA";
#else
constexpr const char* kNoMlx5Probe = "--transport mlx5 between two ranks is not available in this build: rdma-core";
constexpr const char* kNoVerbsProbe = "--transport verbs between two ranks is not available in this build: rdma-core";
#endif

}  // namespace

TEST_CASE("probe: the closed loop recovers every parameter the probe determines within 5%", "[e2e][sim][probe]") {
  struct Known {
    double per_wqe_ns, flush, doorbell, cq_poll, cqe, loop;
  };
  // The default model's per-node send path and daemon costs, and a second, different set.
  const Known k = GENERATE(Known{590, 30, 150, 5, 120, 13}, Known{400, 45, 80, 12, 60, 25});
  CAPTURE(k.per_wqe_ns, k.flush, k.doorbell, k.cq_poll, k.cqe, k.loop);
  TempDir dir;
  Outcome o;
  const json p = probe(dir, "known.json", known_model(k.per_wqe_ns, k.flush, k.doorbell, k.cq_poll, k.cqe, k.loop), &o);
  CHECK(o.out.find("rate_k64_b1_s64") != std::string::npos);  // the table
  // Fit over the built-in defaults, so nothing can come from the base.
  const Outcome c = run_ok({"calibrate", "--from", "known.json.probe.json", "-o", "fitted.json"}, dir.path());
  const json m = read_json(dir / "fitted.json");
  CHECK(within(m["nic"]["send"]["per_wqe_ns"].get<double>(), k.per_wqe_ns) < 0.05);
  CHECK(m["nic"]["send"]["engines"] == 1);
  CHECK(within(m["cpu"]["flush"].get<double>(), k.flush) < 0.05);
  CHECK(within(m["cpu"]["doorbell"].get<double>(), k.doorbell) < 0.05);
  CHECK(within(m["cpu"]["cq_poll"].get<double>(), k.cq_poll) < 0.05);
  CHECK(within(m["cpu"]["cqe"].get<double>(), k.cqe) < 0.05);
  CHECK(within(m["cpu"]["loop"].get<double>(), k.loop) < 0.05);
  // Each fitted parameter names its probe measurement; the rest are listed as left.
  const json& basis = m["basis"];
  CHECK(basis["cpu.flush"].get<std::string>().find("cpu_wqe_build_ns") != std::string::npos);
  CHECK(basis["nic.send.engines = 1, nic.send.per_wqe_ns"].get<std::string>().find("rate_k8_b1_s64") != std::string::npos);
  const std::string left = basis["left at the base model (built-in defaults)"].get<std::string>();
  CHECK(left.find("cpu.msg_parse") != std::string::npos);
  CHECK(left.find("nic.latency.base_ns") != std::string::npos);
  CHECK(left.find("cpu.flush") == std::string::npos);
  CHECK(left.find("nic.send.per_wqe_ns") == std::string::npos);
  check_every_left_key_has_a_reason(basis, "left at the base model (built-in defaults)");
  // The per-node rate is flat from 1 to 64 QPs (one send path, the posting thread not saturated).
  const json& by = p["parameters"]["wqe_rate_by_qps"];
  const double r1 = by["1"]["rate_wqe_per_s"].get<double>(), r64 = by["64"]["rate_wqe_per_s"].get<double>();
  CHECK(within(r1, r64) < 0.05);
  CHECK(by["8"]["busy_fraction"].get<double>() < 0.9);
  CHECK(by["8"]["busy_fraction"].get<double>() > 0.1);
  // Every parameter records its conditions and tests; the run its provenance.
  CHECK(p["parameters"]["cpu_post_ns"]["conditions"]["batch"] == 1);
  CHECK(!p["parameters"]["cpu_cqe_ns"]["from"].empty());
  CHECK(p["provenance"].contains("git_commit"));
  CHECK(p["conditions"]["model"] == "known.json");
}

TEST_CASE("probe and calibrate: a model fitted to the default model's probe reaches its C1 and C5 states", "[e2e][sim][probe]") {
  // The known model is the shipped default (configs/model/c1.json). The fit's base is the
  // same file with every key the probe determines set far off (a 100 ns send path, cheap
  // CQEs and doorbells): with the base alone C5 NP=8 runs high, so its low state below can
  // only come back through the fitted values.
  const fs::path source(BKV_SOURCE_DIR);
  const std::string c1_model = (source / "configs" / "model" / "c1.json").string();
  TempDir dir;
  run_ok({"probe", "--transport", "sim", "--np", "2", "--model", c1_model, "--scale", "0.5", "-o", "known.probe.json"},
         dir.path());
  json base = read_json(c1_model);
  base["cpu"]["loop"] = 40;
  base["cpu"]["cq_poll"] = 20;
  base["cpu"]["cqe"] = 30;
  base["cpu"]["flush"] = 5;
  base["cpu"]["doorbell"] = 20;
  base["nic"]["send"]["per_wqe_ns"] = 100;
  write_file(dir / "base.json", base.dump());
  run_ok({"calibrate", "--from", "known.probe.json", "--base", "base.json", "-o", "fitted.json"}, dir.path());
  check_every_left_key_has_a_reason(read_json(dir / "fitted.json")["basis"], "left at the base model (base.json)");

  // Mops per rank over the kept epochs of one short run (C1's and C5's commands).
  const auto per_rank = [&](const std::string& model, uint32_t np, bool c5) {
    std::vector<std::string> args{"--config", (source / "configs" / (c5 ? "c1_np8.json" : "c1_np16.json")).string()};
    if (c5) args.insert(args.end(), {"delegation", "--np", std::to_string(np), "--queue-depth", "1", "--batch-hold-us", "0"});
    args.insert(args.end(), {"-d", "0.004", "--interval-ms", "1", "--trim", "1", "-r", "1", "--no-progress", "--model", model,
                             "-o", "out.csv"});
    run_ok(args, dir.path());
    return read_json(dir / "out.summary.json")["runs"][0]["total_mops"].get<double>() / np;
  };
  const std::string fitted = (dir / "fitted.json").string();
  const double c5_np4 = per_rank(fitted, 4, true), c5_np8 = per_rank(fitted, 8, true);
  const double c1_np16 = per_rank(fitted, 16, false);
  CAPTURE(c5_np4, c5_np8, c1_np16);
  // The states the default model reaches (docs/bistability.md §4): C5 high at NP=4 and
  // low (~1 per rank) at NP=8, C1 NP=16 high; the fitted model within 5% of each.
  CHECK(c5_np4 > 3.0);
  CHECK(c5_np8 < 1.5);
  CHECK(c1_np16 > 5.0);
  CHECK(within(c5_np4, per_rank(c1_model, 4, true)) < 0.05);
  CHECK(within(c5_np8, per_rank(c1_model, 8, true)) < 0.05);
  CHECK(within(c1_np16, per_rank(c1_model, 16, false)) < 0.05);
  // The base alone lifts C5 NP=8 out of the low state: the test sees what the fit did.
  CHECK(per_rank((dir / "base.json").string(), 8, true) > 3.0);
}

TEST_CASE("probe: a per-QP send path shows in the rate over queue pairs", "[e2e][sim][probe]") {
  // One WQE of a QP at a time, each with two exposed 2.5 us DMA reads (no BlueFlame, no
  // inline): the rate grows with QPs until the 16 engines or the posting thread bind.
  TempDir dir;
  const json model{{"nic",
                    {{"blueflame_max_wqes", 0}, {"inline_max_bytes", 0}, {"send", {{"qp_window", 1}}},
                     {"pcie", {{"read_latency_ns", 2500}}}}}};
  const json p = probe(dir, "per_qp.json", model);
  const json& by = p["parameters"]["wqe_rate_by_qps"];
  const double r1 = by["1"]["rate_wqe_per_s"].get<double>(), r2 = by["2"]["rate_wqe_per_s"].get<double>(),
               r8 = by["8"]["rate_wqe_per_s"].get<double>();
  CHECK(r1 < 250e3);  // ~5 us per WQE of one QP
  CHECK(within(r2, 2 * r1) < 0.1);
  CHECK(within(r8, 8 * r1) < 0.15);
  // The latencies exist for every size, and a gathered 4 KiB WRITE takes longer than 8 B.
  const json& wl = p["parameters"]["write_imm_latency_by_size"];
  CHECK(wl["4096"]["p50_ns"].get<double>() > wl["8"]["p50_ns"].get<double>());
  CHECK(p["parameters"]["read_latency_by_size"]["64"]["p50_ns"].get<double>() > 0);
  // The fit refuses a per-node send path for a rate that is not flat, says so, and
  // keeps the base's send path (built-in: 16 engines x 75 ns).
  CHECK(p["parameters"]["node_wqe_rate_per_s"]["conditions"]["flat"] == false);
  run_ok({"calibrate", "--from", "per_qp.json.probe.json", "-o", "fitted.json"}, dir.path());
  const json m = read_json(dir / "fitted.json");
  CHECK(m["nic"]["send"]["engines"] == 16);
  CHECK(m["nic"]["send"]["per_wqe_ns"] == 75.0);
  CHECK(m["basis"]["nic.send.per_wqe_ns (not fitted)"].get<std::string>().find("no per-node plateau") != std::string::npos);
  CHECK(m["basis"]["left at the base model (built-in defaults)"].get<std::string>().find("nic.send.per_wqe_ns") != std::string::npos);
  check_every_left_key_has_a_reason(m["basis"], "left at the base model (built-in defaults)");
  CHECK_THAT(m["basis"]["why left at the base: fitted keys the fit refused"].get<std::string>(),
             Catch::StartsWith("nic.send.engines, nic.send.per_wqe_ns: "));
}

TEST_CASE("probe and calibrate: bad input exits 2 with a message naming the problem", "[e2e][probe]") {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  write_file(dir / "not_probe.json", R"({"kind": "something else"})");
  write_file(dir / "broken.json", "{");
  write_file(dir / "empty_probe.json", R"({"kind": "benchkv-probe", "parameters": {}})");
  write_file(dir / "neg_probe.json", R"({"kind": "benchkv-probe", "parameters": {"cpu_cqe_ns": {"value": -3}}})");
  const Case c = GENERATE(Case{{"probe", "--np", "3"}, "--np 3"}, Case{{"probe", "--transport", "rdma"}, "expected mlx5, verbs, ucx, sim or mlx5-emu"},
                          Case{{"probe", "--transport", "ucx", "--device", "mlx5_0"}, "--device applies to"},
                          Case{{"probe", "--transport", "mlx5"}, kNoMlx5Probe}, Case{{"probe", "--model", "missing.json"}, "missing.json"},
                          // --port and --gid-index: checked before the device is opened.
                          Case{{"probe", "--transport", "mlx5", "--port", "0"}, "--port 0: must be an integer in [1, 255]"},
                          Case{{"probe", "--transport", "verbs", "--port", "256"}, "--port 256: must be"},
                          Case{{"probe", "--transport", "mlx5", "--gid-index", "-2"}, "--gid-index -2: must be -1 (LID)"},
                          Case{{"probe", "--transport", "mlx5", "--gid-index", "x"}, "--gid-index x: must be"},
                          Case{{"probe", "--transport", "ucx", "--port", "2"}, "--port applies to --transport mlx5 and verbs"},
                          Case{{"probe", "--gid-index", "0"}, "--gid-index applies to --transport mlx5 and verbs"},
                          Case{{"probe", "--transport", "verbs", "--port", "2", "--gid-index", "3"}, kNoVerbsProbe},
                          Case{{"probe", "--scale", "0"}, "--scale"}, Case{{"probe", "--bogus", "1"}, "unknown option --bogus"},
                          // A single-valued option given twice: refused, not the last one taken.
                          Case{{"probe", "-o", "m.json", "--output", "m2.json"}, "probe: --output given more than once"},
                          Case{{"probe", "--seed", "1", "--seed", "2"}, "probe: --seed given more than once"},
                          Case{{"calibrate", "--from", "a.json", "--from", "b.json", "-o", "m.json"},
                               "calibrate: --from given more than once"},
                          Case{{"calibrate", "--from", "a.json", "--base", "a.json", "--base", "b.json", "-o", "m.json"},
                               "calibrate: --base given more than once"},
                          Case{{"calibrate", "--from", "a.json", "-o", "m.json", "-o", "m2.json"},
                               "calibrate: -o given more than once"},
                          Case{{"calibrate", "-o", "m.json"}, "--from"}, Case{{"calibrate", "--from", "x.json"}, "-o"},
                          Case{{"calibrate", "--from", "missing.json", "-o", "m.json"}, "cannot be opened"},
                          Case{{"calibrate", "--from", "broken.json", "-o", "m.json"}, "malformed JSON"},
                          Case{{"calibrate", "--from", "not_probe.json", "-o", "m.json"}, "not a benchkv probe JSON"},
                          Case{{"calibrate", "--from", "empty_probe.json", "-o", "m.json"}, "determines no model parameter"},
                          Case{{"calibrate", "--from", "neg_probe.json", "-o", "m.json"}, "cpu_cqe_ns is negative"});
  CAPTURE(c.args);
  const Outcome o = run_benchkv(c.args, dir.path());
  CHECK(o.status == 2);
  CHECK(o.err.find(c.says) != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "m.json"));
  CHECK(!std::filesystem::exists(dir / "m2.json"));
}

TEST_CASE("calibrate: a cost the probe marked undetermined keeps the base model's value, and the basis says why",
          "[e2e][probe]") {
  TempDir dir;
  write_file(dir / "probe.json", R"j({"kind": "benchkv-probe", "transport": "ucx", "parameters": {
      "cpu_cqe_ns": {"value": 42, "unit": "ns", "from": ["rate_k1_b1_s64"], "method": "slope"},
      "cpu_doorbell_ns": {"value": -73, "unit": "ns", "from": ["rate_k1_b4_s64"], "method": "intercept",
                          "undetermined": "the least-squares intercept is negative (-73 ns)"}}})j");
  const Outcome o = run_ok({"calibrate", "--from", "probe.json", "-o", "fitted.json"}, dir.path());
  const json m = read_json(dir / "fitted.json");
  CHECK(m["cpu"]["cqe"].get<double>() == 42);
  CHECK(m["cpu"]["doorbell"].get<double>() >= 0);  // the base model's, not -73
  CHECK_THAT(m["basis"]["cpu.doorbell (not fitted)"].get<std::string>(), Catch::Contains("negative (-73 ns)"));
  CHECK_THAT(m["basis"]["left at the base model (built-in defaults)"].get<std::string>(), Catch::Contains("cpu.doorbell"));
  CHECK_THAT(o.out, Catch::Contains("cpu.doorbell (not fitted)"));
}

TEST_CASE("probe: several posting threads tell the send path's plateau from one thread's", "[e2e][sim][probe]") {
  TempDir dir;
  // The per-node send path (590 ns per WQE) sets the plateau: two and four posting threads
  // over the same queue pairs reach the one-thread rate, none of them saturated.
  const json node = probe(dir, "node.json", known_model(590, 30, 150, 5, 120, 13));
  const json& t = node["parameters"]["threads_over_one_thread"];
  CHECK(std::abs(t["value"].get<double>() - 1.0) < 0.1);
  CHECK(t["conditions"]["same_rate"] == true);
  CHECK(t["conditions"]["threads_cpu_bound"] == false);
  const json& by = node["parameters"]["wqe_rate_by_qps_threads"];
  CHECK(by.contains("8/2"));
  CHECK(by.contains("64/4"));
  CHECK(within(by["64/4"]["rate_wqe_per_s"].get<double>(), 1e9 / 590) < 0.05);
  // A fast send path (50 ns per WQE) behind an expensive post (400 + 300 ns): one thread
  // is saturated, and four reach about four times its rate, so the one-thread plateau is
  // the CPU's and the fit leaves the send path at its base.
  const json cpu = probe(dir, "cpu.json", known_model(50, 400, 300, 5, 120, 13));
  const json& c = cpu["parameters"]["threads_over_one_thread"];
  CHECK(cpu["parameters"]["node_wqe_rate_per_s"]["conditions"]["cpu_bound"] == true);
  CHECK(c["value"].get<double>() > 3.0);
  CHECK(c["conditions"]["same_rate"] == false);
  run_ok({"calibrate", "--from", "cpu.json.probe.json", "-o", "fitted.json"}, dir.path());
  const json m = read_json(dir / "fitted.json");
  CHECK(m["nic"]["send"]["per_wqe_ns"] == 75.0);  // the built-in base's
  CHECK(m["basis"].contains("nic.send.per_wqe_ns (not fitted)"));
}

TEST_CASE("calibrate: oversubscribed tests of several posting threads are no evidence that a CPU-bound plateau is the "
          "send path's",
          "[e2e][probe]") {
  // A probe as a 2-CPU host writes it: one posting thread busy 0.97 on a flat 1.5 M WQE/s
  // plateau, and two and four posting threads (with their target threads, 4 and 8 busy
  // threads) reaching the same rate while each yields the CPU after every loop, so none
  // looks saturated. Their rate is the two CPUs', not the send path's.
  const auto probe_json = [](const json& over_2, const json& over_4, bool run_over) {
    const auto entry = [](double rate, double busy, const char* test, const json& over) {
      json e{{"rate_wqe_per_s", rate}, {"busiest_thread_busy_fraction", busy}, {"test", test}};
      if (!over.is_null()) e["oversubscribed"] = over;
      return e;
    };
    const json one{{"value", 1.5e6}, {"unit", "WQE/s"}, {"from", {"rate_k8_b1_s64", "rate_k64_b1_s64"}}, {"method", "mean"},
                   {"conditions", {{"posting_thread_busy_max", 0.97}, {"cpu_bound", true}, {"spread", 0.01}, {"flat", true}}}};
    return json{{"kind", "benchkv-probe"},
                {"transport", "ucx"},
                {"conditions", {{"oversubscribed", run_over}}},
                {"parameters",
                 {{"node_wqe_rate_per_s", one},
                  {"cpu_cqe_ns", {{"value", 42}, {"unit", "ns"}, {"from", {"rate_k1_b1_s64"}}, {"method", "slope"}}},
                  {"wqe_rate_by_qps", {{"8", {{"rate_wqe_per_s", 1.5e6}}}, {"64", {{"rate_wqe_per_s", 1.49e6}}}}},
                  {"wqe_rate_by_qps_threads",
                   {{"8/2", entry(1.52e6, 0.45, "rate_k8_b1_s64_t2", over_2)},
                    {"8/4", entry(1.47e6, 0.3, "rate_k8_b1_s64_t4", over_4)},
                    {"64/4", entry(1.5e6, 0.3, "rate_k64_b1_s64_t4", over_4)}}},
                  // What an older probe wrote from every test, oversubscribed or not: it must
                  // not decide.
                  {"threads_over_one_thread",
                   {{"value", 1.01}, {"unit", "ratio"}, {"from", {"rate_k8_b1_s64_t2"}}, {"method", "largest ratio"},
                    {"conditions", {{"threads_cpu_bound", false}, {"same_rate", true}}}}}}}};
  };
  TempDir dir;
  const auto fit = [&](const json& p) {
    write_file(dir / "probe.json", p.dump());
    const Outcome o = run_ok({"calibrate", "--from", "probe.json", "-o", "fitted.json"}, dir.path());
    json m = read_json(dir / "fitted.json");
    m["stdout"] = o.out;
    return m;
  };
  // Marked per test (this probe), or only run-wide (an older probe): ignored, listed with
  // the reason, and the CPU-bound plateau is not fitted.
  const bool per_test = GENERATE(true, false);
  CAPTURE(per_test);
  const json m = per_test ? fit(probe_json(true, true, true)) : fit(probe_json(nullptr, nullptr, true));
  CAPTURE(m["basis"].dump(1));
  CHECK(m["nic"]["send"]["per_wqe_ns"] == 75.0);  // the built-in base's
  CHECK(m["nic"]["send"]["engines"] == 16);
  CHECK_THAT(m["basis"]["nic.send.per_wqe_ns (not fitted)"].get<std::string>(),
             Catch::Contains("busy 0.97") && Catch::Contains("only tests with several posting threads were oversubscribed"));
  const std::string ignored = m["basis"]["ignored probe measurements"].get<std::string>();
  CHECK_THAT(ignored, Catch::Contains("rate_k8_b1_s64_t2") && Catch::Contains("rate_k8_b1_s64_t4") &&
                          Catch::Contains("rate_k64_b1_s64_t4") && Catch::Contains("oversubscribed") &&
                          Catch::Contains("the scheduler"));
  CHECK_THAT(m["stdout"].get<std::string>(), Catch::Contains("ignored probe measurements"));

  // The same rates not oversubscribed are the evidence: the plateau is the send path's.
  const json fitted = fit(probe_json(false, false, false));
  CHECK(fitted["nic"]["send"]["engines"] == 1);
  CHECK(within(fitted["nic"]["send"]["per_wqe_ns"].get<double>(), 1e9 / 1.5e6) < 1e-9);
  CHECK_FALSE(fitted["basis"].contains("ignored probe measurements"));
  CHECK_THAT(fitted["basis"]["nic.send.engines = 1, nic.send.per_wqe_ns"].get<std::string>(),
             Catch::Contains("rate_k8_b1_s64_t2"));
  // One test not oversubscribed among oversubscribed ones: it alone decides, the others
  // are listed as ignored.
  const json mixed = fit(probe_json(false, true, true));
  CHECK(mixed["nic"]["send"]["engines"] == 1);
  CHECK_THAT(mixed["basis"]["ignored probe measurements"].get<std::string>(),
             Catch::Contains("rate_k64_b1_s64_t4") && !Catch::Contains("rate_k8_b1_s64_t2"));
  // A malformed mark is refused.
  json bad = probe_json(true, true, true);
  bad["parameters"]["wqe_rate_by_qps_threads"]["8/2"]["oversubscribed"] = "yes";
  write_file(dir / "bad.json", bad.dump());
  const Outcome o = run_benchkv({"calibrate", "--from", "bad.json", "-o", "bad_fit.json"}, dir.path());
  CHECK(o.status == 2);
  CHECK_THAT(o.err, Catch::Contains("wqe_rate_by_qps_threads[\"8/2\"]: \"oversubscribed\" is not a boolean"));
}

#ifdef BKV_TEST_PROBE_EMULATOR
TEST_CASE("probe --transport mlx5-emu: the mlx5 data path against the NIC emulator, end to end through calibrate",
          "[e2e][probe][mlx5]") {
  TempDir dir;
  const Outcome o = run_ok({"probe", "--transport", "mlx5-emu", "--scale", "0.25", "-o", "emu.json"}, dir.path());
  CHECK_THAT(o.out, Catch::Contains("benchkv probe over mlx5-emu") && Catch::Contains("not hardware numbers") &&
                        Catch::Contains("rate_k64_b1_s64"));
  const json j = read_json(dir / "emu.json");
  CHECK(j["transport"] == "mlx5-emu");
  CHECK_THAT(j["note"].get<std::string>(), Catch::Contains("NIC emulator") && Catch::Contains("not hardware numbers"));
  const json& c = j["conditions"];
  CHECK(c["one_thread"] == true);
  CHECK(c["delivery"].get<std::string>().find("eager") != std::string::npos);
  CHECK(c["inline_max_bytes"].get<uint32_t>() > 0);
  // Every one-thread test of the plan ran (8 rates over QPs, 4 batched, 5 WRITE and 3 READ
  // latencies); none with several posting threads.
  size_t rates = 0, latencies = 0;
  for (const json& t : j["tests"]) {
    INFO(t["name"]);
    CHECK(t["threads"] == 1);
    if (t["kind"] == "rate") {
      ++rates;
      CHECK(t["wqes"].get<uint64_t>() > 0);
      CHECK(t["rate_wqe_per_s"].get<double>() > 0);
    } else {
      ++latencies;
      CHECK(t["latency_ns"]["n"].get<uint64_t>() > 0);
    }
  }
  CHECK(rates == 12);
  CHECK(latencies == 8);
  CHECK_FALSE(j["parameters"].contains("wqe_rate_by_qps_threads"));
  CHECK(j["parameters"]["wqe_rate_by_qps"].size() == 8);
  // calibrate takes it; the basis names it as a probe over the emulator.
  const Outcome fit = run_ok({"calibrate", "--from", "emu.json", "-o", "fitted.json"}, dir.path());
  const json m = read_json(dir / "fitted.json");
  CHECK_THAT(m["description"].get<std::string>(), Catch::Contains("mlx5-emu") && Catch::Contains("not hardware numbers"));
  CHECK_THAT(fit.out, Catch::Contains("probe (mlx5-emu)"));
}
#endif

namespace {

// A short simulated delegation run of `model` (one daemon per node) at one load; returns
// its summary's file name.
std::string daemon_run(const TempDir& dir, const std::string& model, uint32_t np, uint32_t clients, uint32_t qd) {
  const std::string out = "run_np" + std::to_string(np) + "_c" + std::to_string(clients) + "_qd" + std::to_string(qd);
  run_ok({"delegation", "--transport", "sim", "--np", std::to_string(np), "--server-threads", "1", "--client-threads",
          std::to_string(clients), "--queue-depth", std::to_string(qd), "-d", "0.004", "--interval-ms", "1", "--trim", "1",
          "-r", "1", "--no-progress", "--report", "none", "--model", model, "-o", out + ".csv"},
         dir.path());
  return out + ".summary.json";
}

// Runs at loads that vary the clients (the rings looked at per loop), the queue depth
// (CQEs and calls per loop) and the nodes (local ops per call) apart from each other:
// np 2 and 3 x 2 and 8 clients x queue depth 1, 4 and 16 (about 2 s in all).
std::vector<std::string> load_grid(const TempDir& dir, const std::string& model) {
  std::vector<std::string> runs;
  for (uint32_t np : {2u, 3u})
    for (uint32_t clients : {2u, 8u})
      for (uint32_t qd : {1u, 4u, 16u}) runs.push_back(daemon_run(dir, model, np, clients, qd));
  return runs;
}

}  // namespace

TEST_CASE("calibrate --from-run: the daemon's loop costs come back from runs at several loads within 5%",
          "[e2e][sim][probe]") {
  // The known model is the built-in one (the fit's base) with the daemon's loop and its
  // look at each client ring changed, so a recovered value can only have come from the
  // runs' loop metrics.
  TempDir dir;
  const double loop = 25, poll_slot = 3;
  write_file(dir / "known.json", json{{"cpu", {{"loop", loop}, {"poll_slot", poll_slot}}}}.dump());
  const std::vector<std::string> runs = load_grid(dir, "known.json");
  std::vector<std::string> args{"calibrate", "--from-run"};
  args.insert(args.end(), runs.begin(), runs.end());
  args.insert(args.end(), {"-o", "fitted.json"});
  const Outcome o = run_ok(args, dir.path());
  const json m = read_json(dir / "fitted.json");
  CAPTURE(m["basis"].dump(1));
  CHECK(within(m["cpu"]["loop"].get<double>(), loop) < 0.05);
  CHECK(within(m["cpu"]["poll_slot"].get<double>(), poll_slot) < 0.05);
  // The basis names the runs behind each value; the rest is left at the base.
  CHECK_THAT(m["basis"]["cpu.loop"].get<std::string>(), Catch::Contains(runs[7]));
  CHECK_THAT(m["basis"]["cpu.poll_slot"].get<std::string>(), Catch::Contains("least squares over 30 daemons of 12 run summaries"));
  CHECK_THAT(m["basis"]["daemon costs per event (--from-run)"].get<std::string>(), Catch::Contains("per call"));
  const std::string left = m["basis"]["left at the base model (built-in defaults)"].get<std::string>();
  CHECK(left.find("cpu.loop") == std::string::npos);
  CHECK(left.find("cpu.poll_slot") == std::string::npos);
  CHECK(left.find("cpu.cqe") != std::string::npos);
  CHECK_THAT(o.out, Catch::Contains("cpu.poll_slot"));
  check_every_left_key_has_a_reason(m["basis"], "left at the base model (built-in defaults)");
  // No probe: the keys only it gives are named with it.
  CHECK_THAT(m["basis"]["why left at the base: fitted keys without a measurement"].get<std::string>(),
             Catch::Contains("cpu.cqe (given by the probe's cpu_cqe_ns (--from))"));

  // Runs at one client count cannot separate a look at a client ring from the loop: the
  // fit says so and keeps the base's poll_slot.
  const std::vector<std::string> same_clients{daemon_run(dir, "known.json", 2, 4, 1), daemon_run(dir, "known.json", 2, 4, 8)};
  write_file(dir / "base7.json", json{{"cpu", {{"poll_slot", 7}}}}.dump());
  run_ok({"calibrate", "--from-run", same_clients[0], same_clients[1], "--base", "base7.json", "-o", "one_count.json"},
         dir.path());
  const json one = read_json(dir / "one_count.json");
  CHECK(one["cpu"]["poll_slot"].get<double>() == 7);
  CHECK_THAT(one["basis"]["cpu.poll_slot (not fitted)"].get<std::string>(), Catch::Contains("predict"));
}

TEST_CASE("calibrate --from and --from-run together: the probe's CQ poll cost is taken out of the daemon's loop",
          "[e2e][sim][probe]") {
  // cq_poll differs from the base's too: cpu.loop within 5% needs the probe's value.
  TempDir dir;
  const double loop = 25, poll_slot = 3, cq_poll = 14, base_cq_poll = 5;
  write_file(dir / "base.json", json{{"cpu", {{"cq_poll", base_cq_poll}}}}.dump());
  json known = known_model(590, 30, 150, cq_poll, 120, loop);
  known["cpu"]["poll_slot"] = poll_slot;
  probe(dir, "known.json", known);
  const std::vector<std::string> runs = load_grid(dir, "known.json");
  // Several files after one --from-run, and --from-run repeated.
  std::vector<std::string> args{"calibrate", "--from", "known.json.probe.json", "--base", "base.json", "-o", "fitted.json",
                                "--from-run"};
  args.insert(args.end(), runs.begin(), runs.begin() + 6);
  args.push_back("--from-run");
  args.insert(args.end(), runs.begin() + 6, runs.end());
  run_ok(args, dir.path());
  const json m = read_json(dir / "fitted.json");
  CAPTURE(m["basis"].dump(1));
  CHECK(within(m["cpu"]["cq_poll"].get<double>(), cq_poll) < 0.05);
  CHECK(within(m["cpu"]["loop"].get<double>(), loop) < 0.05);
  CHECK(within(m["cpu"]["poll_slot"].get<double>(), poll_slot) < 0.05);
  CHECK_THAT(m["basis"]["cpu.loop"].get<std::string>(), Catch::Contains("cpu_cq_poll_ns"));
  CHECK_THAT(m["basis"]["cpu.loop"].get<std::string>(), Catch::Contains("replaces the probe's cpu_loop_ns"));
}

TEST_CASE("calibrate --from-run: bad run summaries exit 2 with a message naming the problem", "[e2e][probe]") {
  TempDir dir;
  write_file(dir / "probe_like.json", R"({"kind": "benchkv-probe", "parameters": {}})");
  write_file(dir / "meta.json", R"({"config": {"backend": "meta", "server_threads": 1, "client_threads": 2}, "daemons": []})");
  write_file(dir / "two.json", R"({"config": {"backend": "delegation", "server_threads": 2, "client_threads": 2}, "daemons": []})");
  write_file(dir / "none.json", R"({"config": {"backend": "delegation", "server_threads": 1, "client_threads": 2}, "daemons": []})");
  write_file(dir / "nocalls.json", R"({"config": {"backend": "delegation", "server_threads": 1, "client_threads": 2},
      "daemons": [{"loops": 10, "cqes": 1, "extra": {"loop_ns_avg": 30, "local_ops": 1}}]})");
  write_file(dir / "asleep.json", R"({"config": {"backend": "delegation", "server_threads": 1, "client_threads": 2},
      "daemons": [{"loops": 10, "cqes": 1, "extra": {"busy_fraction": 0.5, "loop_ns_avg": 30, "calls": 1, "local_ops": 1}}]})");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const Case c = GENERATE(Case{{"calibrate", "-o", "m.json"}, "--from-run SUMMARY.json"},
                          Case{{"calibrate", "--from-run", "-o", "m.json"}, "--from-run needs at least one"},
                          Case{{"calibrate", "--from-run", "missing.json", "-o", "m.json"}, "missing.json: cannot be opened"},
                          Case{{"calibrate", "--from-run", "probe_like.json", "-o", "m.json"}, "not a benchkv KV summary"},
                          Case{{"calibrate", "--from-run", "meta.json", "-o", "m.json"}, "backend \"meta\""},
                          Case{{"calibrate", "--from-run", "two.json", "-o", "m.json"}, "server_threads must be 1"},
                          Case{{"calibrate", "--from-run", "none.json", "-o", "m.json"}, "no daemon with loops"},
                          Case{{"calibrate", "--from-run", "nocalls.json", "-o", "m.json"}, "no numeric \"calls\""},
                          Case{{"calibrate", "--from-run", "asleep.json", "-o", "m.json"}, "busy 0.5 of its window"});
  CAPTURE(c.args);
  const Outcome o = run_benchkv(c.args, dir.path());
  CHECK(o.status == 2);
  CHECK(o.err.find(c.says) != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "m.json"));
}

TEST_CASE("calibrate --from-run: the least squares gives back exact per-event costs, and flags a negative one",
          "[e2e][probe]") {
  // Daemons whose time is exactly a sum of per-event costs (one with a negative cost per
  // CQE, which no CPU has): the fit must give back the loop and ring costs, and say that
  // the per-CQE figure is negative.
  TempDir dir;
  const double a_loop = 30, a_ring = 2, a_cqe = GENERATE(45.0, -40.0), a_call = 150, a_local = 70, cq_poll = 8;
  struct Counts {
    double clients, loops, cqes, calls, local;
  };
  const std::vector<Counts> counts{{2, 1e5, 2e3, 1e3, 1e3},    {2, 8e4, 3e4, 9e4, 9e4},   {8, 6e4, 5e4, 2e5, 1e5},
                                   {8, 1e5, 1e4, 1e4, 5e3},    {4, 7e4, 6e4, 1.5e5, 1.5e5}, {4, 9e4, 2e4, 4e4, 1e4}};
  std::vector<std::string> files;
  for (size_t i = 0; i < counts.size(); ++i) {
    const Counts& c = counts[i];
    const double t = a_loop * c.loops + a_ring * c.loops * (c.clients + 1) + a_cqe * c.cqes + a_call * c.calls + a_local * c.local;
    const json s{{"config", {{"backend", "delegation"}, {"server_threads", 1}, {"client_threads", c.clients}}},
                 {"daemons",
                  {{{"loops", c.loops},
                    {"cqes", c.cqes},
                    {"extra", {{"loop_ns_avg", t / c.loops}, {"calls", c.calls}, {"local_ops", c.local}}}}}}};
    files.push_back("s" + std::to_string(i) + ".json");
    write_file(dir / files.back(), s.dump());
  }
  write_file(dir / "base.json", json{{"cpu", {{"cq_poll", cq_poll}}}}.dump());
  std::vector<std::string> args{"calibrate", "--base", "base.json", "-o", "fitted.json", "--from-run"};
  args.insert(args.end(), files.begin(), files.end());
  run_ok(args, dir.path());
  const json m = read_json(dir / "fitted.json");
  CAPTURE(a_cqe, m["basis"].dump(1));
  CHECK(within(m["cpu"]["loop"].get<double>(), a_loop - cq_poll) < 1e-6);
  CHECK(within(m["cpu"]["poll_slot"].get<double>(), a_ring) < 1e-6);
  const std::string per_event = m["basis"]["daemon costs per event (--from-run)"].get<std::string>();
  CHECK((per_event.find("Negative (per CQE)") != std::string::npos) == (a_cqe < 0));
  CHECK_THAT(per_event, Catch::Contains("per call 150 ns"));
}
