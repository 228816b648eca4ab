// The CPU cost model: what each costed operation (bkv::Op, core/meter.hpp) costs a
// simulated thread, in nanoseconds, plus optional jitter.
//
// JSON form (every key optional; absent keys keep the defaults below):
//   { "loop": 10, "cq_poll": 8, ..., "client_request": 40,
//     "jitter": { "mode": "relative" | "absolute",
//                 "distribution": { "kind": "normal", "mean": 0, "stddev": 0.05, "min": -0.5 } } }
// Costs may be fractional (a simulated thread accumulates them in picoseconds).
// Unknown keys and negative or non-finite values are errors naming the key.
//
// Jitter applies per charge() call to the whole charge (cost[op] * n):
//   relative: charge * (1 + X), X from the distribution (X >= -1 required);
//   absolute: charge + X nanoseconds (X >= 0 required).
// Each simulated thread draws X from its own seeded stream.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/meter.hpp"
#include "sim/distributions.hpp"

namespace bkv::sim {

inline constexpr size_t kOpCount = static_cast<size_t>(Op::kCount);
inline constexpr size_t kPhaseCount = static_cast<size_t>(Phase::kCount);

enum class JitterMode : uint8_t { kNone = 0, kRelative, kAbsolute };

struct CostJitter {
  JitterMode mode = JitterMode::kNone;
  Distribution dist;
};

struct CostModel {
  std::array<double, kOpCount> ns{};  // indexed by Op
  CostJitter jitter;

  // Defaults for a current Xeon (Gold 6530-class, ~2-4 GHz, mesh LLC) with a ConnectX
  // NIC; see cost_model.cpp for the basis of each number.
  static CostModel defaults();

  double& operator[](Op op) noexcept { return ns[static_cast<size_t>(op)]; }
  double operator[](Op op) const noexcept { return ns[static_cast<size_t>(op)]; }

  // Parses over the defaults (absent keys keep their default).
  static CostModel from_json(const nlohmann::json& j, const std::string& path = "cost");
  nlohmann::json to_json() const;
};

// Index of an op name from kOpNames, or -1.
int op_index(const std::string& name) noexcept;

}  // namespace bkv::sim
