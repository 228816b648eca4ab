// JSON form of the distributions (see distributions.hpp for the shapes).
#include "sim/distributions.hpp"

#include <cmath>
#include <limits>

#include "sim/json_fields.hpp"

namespace bkv::sim {

const char* to_string(DistKind k) noexcept {
  switch (k) {
    case DistKind::kConstant: return "constant";
    case DistKind::kUniform: return "uniform";
    case DistKind::kExponential: return "exponential";
    case DistKind::kNormal: return "normal";
    case DistKind::kLognormal: return "lognormal";
    case DistKind::kPareto: return "pareto";
    case DistKind::kSpike: return "spike";
  }
  return "?";
}

Distribution distribution_from_json(const nlohmann::json& j, const std::string& path, double min_support) {
  using json_detail::fail;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  json_detail::ObjectReader r(j, path);
  if (!r.has("kind")) fail(r.path_of("kind"), "missing (one of constant, uniform, exponential, normal, lognormal, pareto, spike)");
  const std::string kind = r.string("kind", "");
  Distribution d;
  if (kind == "constant") {
    d = Distribution::constant(r.required_number("value"));
  } else if (kind == "uniform") {
    const double lo = r.required_number("min");
    const double hi = r.required_number("max");
    if (hi < lo) fail(r.path_of("max"), "must be >= min");
    d = Distribution::uniform(lo, hi);
  } else if (kind == "exponential") {
    d = Distribution::exponential(r.required_number("mean", 0.0));
  } else if (kind == "normal") {
    const double mean = r.required_number("mean");
    const double sd = r.required_number("stddev", 0.0);
    const double lo = r.has("min") ? r.required_number("min") : -kInf;
    if (lo > mean) fail(r.path_of("min"), "must be <= mean (the truncated normal is redrawn below min)");
    d = Distribution::normal(mean, sd, lo);
  } else if (kind == "lognormal") {
    const double mean = r.required_number("mean", 0.0);
    const double sd = r.required_number("stddev", 0.0);
    if (mean <= 0.0) fail(r.path_of("mean"), "must be > 0");
    d = Distribution::lognormal(mean, sd);
  } else if (kind == "pareto") {
    const double scale = r.required_number("scale", 0.0);
    const double shape = r.required_number("shape", 0.0);
    if (scale <= 0.0) fail(r.path_of("scale"), "must be > 0");
    if (shape <= 0.0) fail(r.path_of("shape"), "must be > 0");
    d = Distribution::pareto(scale, shape);
  } else if (kind == "spike") {
    d = Distribution::spike(r.required_number("probability", 0.0, 1.0), r.required_number("value"));
  } else {
    fail(r.path_of("kind"), "unknown distribution '" + kind +
                                "' (expected constant, uniform, exponential, normal, lognormal, pareto, spike)");
  }
  r.finish();
  if (d.lower_bound() < min_support) {
    nlohmann::json lb = min_support;
    fail(path, std::string("a '") + kind + "' distribution here may produce values below " + lb.dump() +
                   (kind == "normal" ? " (set \"min\")" : ""));
  }
  return d;
}

nlohmann::json distribution_to_json(const Distribution& d) {
  nlohmann::json j;
  j["kind"] = to_string(d.kind);
  switch (d.kind) {
    case DistKind::kConstant: j["value"] = d.a; break;
    case DistKind::kUniform: j["min"] = d.a; j["max"] = d.b; break;
    case DistKind::kExponential: j["mean"] = d.a; break;
    case DistKind::kNormal:
      j["mean"] = d.a;
      j["stddev"] = d.b;
      if (std::isfinite(d.c)) j["min"] = d.c;
      break;
    case DistKind::kLognormal: j["mean"] = d.a; j["stddev"] = d.b; break;
    case DistKind::kPareto: j["scale"] = d.a; j["shape"] = d.b; break;
    case DistKind::kSpike: j["probability"] = d.a; j["value"] = d.b; break;
  }
  return j;
}

}  // namespace bkv::sim
