// JSON configs of the simulator (cost model, NIC model, distributions) and the
// distributions' sampling.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.hpp"
#include "sim/cost_model.hpp"
#include "sim/distributions.hpp"
#include "sim/model.hpp"
#include "sim/nic_config.hpp"
#include "tests/sim/model_error.hpp"

using namespace bkv::sim;
using bkv::Op;
using nlohmann::json;

namespace {
// The message of the std::invalid_argument thrown by f, or "" if nothing was thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("cost model defaults name every op and round-trip through JSON", "[config]") {
  const CostModel d = CostModel::defaults();
  const json j = d.to_json();
  for (const char* name : bkv::kOpNames) {
    INFO(name);
    REQUIRE(j.contains(name));
    CHECK(j[name].get<double>() > 0.0);
  }
  CostModel m = d;
  m[Op::kCqe] = 41.5;
  m.jitter.mode = JitterMode::kRelative;
  m.jitter.dist = Distribution::normal(0.0, 0.1, -0.5);
  const CostModel back = CostModel::from_json(m.to_json());
  CHECK(back.ns == m.ns);
  CHECK(back.jitter.mode == JitterMode::kRelative);
  CHECK(back.jitter.dist.kind == DistKind::kNormal);
  CHECK(back.jitter.dist.b == 0.1);
  CHECK(back.jitter.dist.c == -0.5);
  CHECK(back.to_json() == m.to_json());
}

TEST_CASE("cost model: partial JSON keeps defaults - bad input names the key", "[config]") {
  const CostModel m = CostModel::from_json(json{{"cqe", 99}});
  CHECK(m[Op::kCqe] == 99);
  CHECK(m[Op::kLoop] == CostModel::defaults()[Op::kLoop]);

  CHECK(error_of([] { CostModel::from_json(json{{"cqes", 1}}); }).find("cost.cqes: unknown key") != std::string::npos);
  CHECK(error_of([] { CostModel::from_json(json{{"doorbell", -1}}); }).find("cost.doorbell") != std::string::npos);
  CHECK(error_of([] { CostModel::from_json(json{{"loop", "fast"}}); }).find("cost.loop: must be a number") !=
        std::string::npos);
  CHECK(error_of([] { CostModel::from_json(json{{"jitter", {{"mode", "sideways"}}}}); }).find("cost.jitter.mode") !=
        std::string::npos);
  // Relative jitter that could make a cost negative (factor below 0) is refused.
  CHECK(error_of([] {
          CostModel::from_json(json{{"jitter", {{"mode", "relative"}, {"distribution", {{"kind", "normal"}, {"mean", 0}, {"stddev", 1}}}}}});
        }).find("cost.jitter.distribution") != std::string::npos);
  CHECK(error_of([] { CostModel::from_json(json::array()); }).find("must be a JSON object") != std::string::npos);
}

TEST_CASE("NIC config round-trips and rejects unknown keys and bad values by path", "[config]") {
  NicConfig c;
  c.send.engines = 3;
  c.send.qp_window = 2;
  c.latency.jitter = Distribution::pareto(10, 2.5);
  c.qp_cache.entries = 64;
  const NicConfig back = NicConfig::from_json(c.to_json());
  CHECK(back.to_json() == c.to_json());
  CHECK(back.send.engines == 3);
  CHECK(back.latency.jitter.kind == DistKind::kPareto);

  const NicConfig p = NicConfig::from_json(json{{"send", {{"qp_window", 9}}}});
  CHECK(p.send.qp_window == 9);
  CHECK(p.send.engines == NicConfig{}.send.engines);

  CHECK(error_of([] { NicConfig::from_json(json{{"send", {{"windows", 1}}}}); }) == "nic.send.windows: unknown key");
  CHECK(error_of([] { NicConfig::from_json(json{{"send", {{"qp_window", 0}}}}); }).find("nic.send.qp_window") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"send", {{"engines", -2}}}}); }).find("nic.send.engines") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"link", {{"bandwidth_gbps", 0}}}}); }).find("nic.link.bandwidth_gbps") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"qp_cache", {{"entries", 10}, {"ways", 4}}}}); })
            .find("nic.qp_cache.entries") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"latency", {{"jitter", {{"kind", "normal"}, {"mean", 0}, {"stddev", 5}}}}}}); })
            .find("nic.latency.jitter") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"latency", {{"jitter", {{"kind", "gamma"}}}}}}); })
            .find("nic.latency.jitter.kind: unknown distribution") == 0);
  CHECK(error_of([] { NicConfig::from_json(json{{"rnr", {{"retry_limit", 8}}}}); }).find("nic.rnr.retry_limit") == 0);
  // An integer past INT64_MAX is too large, not negative (it was reported as ">= 0").
  CHECK(error_of([] { NicConfig::from_json(json{{"send", {{"engines", 18446744073709551615ull}}}}); }) ==
        "nic.send.engines: must be an integer in [0, 4096] (got 18446744073709551615)");
  CHECK(error_of([] { NicConfig::from_json(json{{"send", {{"engines", -1}}}}); }) ==
        "nic.send.engines: must be an integer >= 0 (got -1)");
  // Inline payloads: at most what one mlx5 send WQE can carry (its 6-bit DS field).
  CHECK(NicConfig::from_json(json{{"inline_max_bytes", 972}}).inline_max_bytes == 972);
  CHECK(error_of([] { NicConfig::from_json(json{{"inline_max_bytes", 973}}); }) ==
        "nic.inline_max_bytes: must be an integer in [0, 972] (got 973)");
}

TEST_CASE("model times beyond an hour of virtual time are refused by key instead of overflowing", "[config]") {
  // Times are converted to integer nanoseconds and picoseconds (llround, casts): a value
  // past the range is undefined there, and ran as a run that never finished or as a
  // clamped time. Each must be an error naming its key.
  const double huge = 1e300;
  const double hour_ns = 3.6e12;
  CHECK(error_of([&] { NicConfig::from_json(json{{"doorbell_ns", huge}}); }).find("nic.doorbell_ns: must be <=") == 0);
  CHECK(error_of([&] { NicConfig::from_json(json{{"latency", {{"base_ns", 1e19}}}}); })
            .find("nic.latency.base_ns: must be <=") == 0);
  CHECK(error_of([&] { NicConfig::from_json(json{{"pcie", {{"read_latency_ns", huge}}}}); })
            .find("nic.pcie.read_latency_ns: must be <=") == 0);
  CHECK(error_of([&] { NicConfig::from_json(json{{"rnr", {{"delay_ns", huge}}}}); }).find("nic.rnr.delay_ns: must be <=") == 0);
  // Per byte: 2^32 bytes at the limit still fit in 64-bit picoseconds.
  CHECK(error_of([&] { NicConfig::from_json(json{{"send", {{"per_byte_ns", 1e7}}}}); })
            .find("nic.send.per_byte_ns: must be <=") == 0);
  CHECK(error_of([&] { CostModel::from_json(json{{"loop", huge}}); }).find("cost.loop: must be <=") == 0);
  // One hour is accepted.
  CHECK(NicConfig::from_json(json{{"doorbell_ns", hour_ns}}).doorbell_ns == hour_ns);
  CHECK(CostModel::from_json(json{{"loop", hour_ns}})[Op::kLoop] == hour_ns);

  using bkv::test::model_error;
  for (const char* key : {"client_wake_ns", "client_retry_ns", "response_handoff_ns"}) {
    INFO(key);
    CHECK(model_error(json{{key, huge}}).find(std::string("m.") + key + ": must be") == 0);
    CHECK(model_error(json{{key, std::numeric_limits<double>::infinity()}}).find(std::string("m.") + key + ": must be") == 0);
    CHECK(model_error(json{{key, hour_ns}}) == "");
  }
}

TEST_CASE("distributions: deterministic streams with the configured mean", "[config]") {
  struct Case {
    Distribution d;
    double mean;
    double tol;
  };
  const std::vector<Case> cases{
      {Distribution::constant(7), 7, 1e-12},
      {Distribution::uniform(10, 30), 20, 0.01},
      {Distribution::exponential(50), 50, 0.02},
      {Distribution::normal(100, 10), 100, 0.01},
      {Distribution::lognormal(40, 20), 40, 0.02},
      {Distribution::pareto(10, 3), 15, 0.03},
      {Distribution::spike(0.1, 500), 50, 0.05},
  };
  for (const Case& c : cases) {
    INFO(to_string(c.d.kind));
    bkv::Rng a(42), b(42), other(43);
    double sum = 0;
    double min = 1e300;
    bool differs = false;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const double x = c.d.sample(a);
      REQUIRE(x == c.d.sample(b));  // same seed, same stream
      differs |= x != c.d.sample(other);
      sum += x;
      min = std::min(min, x);
    }
    CHECK(sum / n == Approx(c.mean).epsilon(c.tol));
    CHECK(c.d.mean() == Approx(c.mean));
    CHECK(min >= c.d.lower_bound());
    if (c.d.kind != DistKind::kConstant) CHECK(differs);
  }
  // Truncated normal never goes below its bound.
  const Distribution t = Distribution::normal(0, 1, -0.5);
  bkv::Rng r(1);
  for (int i = 0; i < 100000; ++i) REQUIRE(t.sample(r) >= -0.5);
}

TEST_CASE("distribution JSON round trip and errors", "[config]") {
  for (const Distribution& d : {Distribution::constant(3), Distribution::uniform(1, 2), Distribution::exponential(4),
                                Distribution::normal(5, 1, 0), Distribution::lognormal(6, 2),
                                Distribution::pareto(7, 1.5), Distribution::spike(0.25, 9)}) {
    const Distribution back = distribution_from_json(distribution_to_json(d), "x");
    CHECK(back.kind == d.kind);
    CHECK(back.a == d.a);
    CHECK(back.b == d.b);
    CHECK(distribution_to_json(back) == distribution_to_json(d));
  }
  CHECK(error_of([] { distribution_from_json(json{{"kind", "uniform"}, {"min", 5}, {"max", 1}}, "j"); }) ==
        "j.max: must be >= min");
  CHECK(error_of([] { distribution_from_json(json{{"kind", "exponential"}}, "j"); }) == "j.mean: missing");
  CHECK(error_of([] { distribution_from_json(json{{"kind", "exponential"}, {"mean", 1}, {"sd", 2}}, "j"); }) ==
        "j.sd: unknown key");
  CHECK(error_of([] { distribution_from_json(json{{"kind", "spike"}, {"probability", 2}, {"value", 1}}, "j"); })
            .find("j.probability") == 0);
}
