// The transports benchkv runs over, by name (--transport, JSON "transport"): one table,
// as backends/backend_kind.hpp is for the backends. A real transport's entry (how a node
// is made over it, under MPI) is in apps/benchkv/real/<name>.cpp and registers itself
// for its kind (apps/benchkv/real/transports.hpp); a build without that file (its
// libraries were not found) names `needs` when the transport is asked for. `benchkv probe`
// takes these names too, and one of its own, mlx5-emu (the NIC emulator, which runs in one
// process only: apps/benchkv/probe_main.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace bkv::app {

enum class TransportKind : uint8_t { kMlx5 = 0, kVerbs, kUcx, kSim };

struct TransportName {
  std::string_view name;
  TransportKind kind;
  bool rdma_device;        // takes the RDMA device options (--device, --device-index, --port, --gid-index)
  std::string_view needs;  // what the build needs for a real run over it ("": the simulator, always built)
};

inline constexpr std::string_view kNeedsRdma =
    "rdma-core (libibverbs-dev, the RDMA device library) or MPI (libopenmpi-dev)";
inline constexpr std::array<TransportName, 4> kTransportNames{{
    {"mlx5", TransportKind::kMlx5, true, kNeedsRdma},
    {"verbs", TransportKind::kVerbs, true, kNeedsRdma},
    {"ucx", TransportKind::kUcx, false, "UCX (libucx-dev) or MPI (libopenmpi-dev)"},
    {"sim", TransportKind::kSim, false, ""},
}};

constexpr const TransportName* transport_named(TransportKind k) noexcept {
  for (const auto& t : kTransportNames)
    if (t.kind == k) return &t;
  return nullptr;
}

}  // namespace bkv::app
