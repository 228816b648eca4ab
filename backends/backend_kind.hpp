// The KV backends benchkv can run, by name (the command line's and the config file's
// spelling). The run-time choice of a copyrpc node backend is made once, by
// with_node_backend (backends/node_backends.hpp); ucx-am is built separately
// (backends/ucx_am). What benchkv runs besides a KV backend (copyrpc alone, bulk values)
// are run modes of the app, not backends (apps/benchkv/cli/run_mode.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace bkv::backend {

enum class BackendKind : uint8_t { kMeta, kDelegation, kDirect, kUcxAm };

struct BackendName {
  std::string_view name;
  BackendKind kind;
};
inline constexpr std::array<BackendName, 4> kBackendNames{{{"meta", BackendKind::kMeta},
                                                           {"delegation", BackendKind::kDelegation},
                                                           {"direct", BackendKind::kDirect},
                                                           {"ucx-am", BackendKind::kUcxAm}}};

constexpr std::string_view to_string(BackendKind k) noexcept {
  for (const auto& b : kBackendNames)
    if (b.kind == k) return b.name;
  return "";
}

}  // namespace bkv::backend
