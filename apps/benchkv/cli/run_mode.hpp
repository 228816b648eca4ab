// What benchkv runs: a run mode, apart from the backend a KV run uses.
//
//   kv       the KV benchmark over one backend (backends/backend_kind.hpp: meta,
//            delegation, direct, ucx-am); named by the backend itself:
//            `benchkv [options] delegation`
//   rpc      copyrpc alone (backends/rpc): `benchkv rpc [options]`
//   data     bulk values by one-sided RDMA (backends/data): `benchkv data [options]`
//   sweep    a grid of simulated KV runs (apps/benchkv/sweep): `benchkv sweep SWEEP.json`
//   compare  two summaries side by side: `benchkv compare A.summary.json B.summary.json`
//
// kv, rpc and data are what the options describe (the positional word, the JSON key
// "backend": a backend's name for kv, else the mode's name); sweep and compare are
// commands of their own, with their own arguments.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace bkv::app {

enum class Mode : uint8_t { kKv, kRpc, kData, kSweep, kCompare };

struct ModeName {
  std::string_view name;
  Mode mode;
};
// The modes named by a word of their own (kv is named by its backend).
inline constexpr std::array<ModeName, 4> kModeNames{
    {{"rpc", Mode::kRpc}, {"data", Mode::kData}, {"sweep", Mode::kSweep}, {"compare", Mode::kCompare}}};
// The modes the options describe besides kv (the others are commands: sweep, compare).
inline constexpr bool described_by_options(Mode m) noexcept {
  return m == Mode::kKv || m == Mode::kRpc || m == Mode::kData;
}

constexpr std::string_view to_string(Mode m) noexcept {
  if (m == Mode::kKv) return "kv";
  for (const auto& n : kModeNames)
    if (n.mode == m) return n.name;
  return "";
}

// The mode a word names ("rpc", "sweep", ...), or none (kv is named by a backend).
constexpr std::optional<Mode> mode_named(std::string_view word) noexcept {
  for (const auto& n : kModeNames)
    if (n.name == word) return n.mode;
  return std::nullopt;
}

}  // namespace bkv::app
