// A fully connected cluster of copyrpc contexts over the instant loopback transport.
#pragma once

#include <cstdint>

#include "core/copyrpc/context.hpp"
#include "tests/copyrpc/property_driver.hpp"
#include "transports/loopback/instant.hpp"

namespace bkv::test {

struct InstantCluster : ContextCluster<loopback::InstantFabric, loopback::InstantTransport> {
  explicit InstantCluster(uint32_t nodes, const copyrpc::ContextConfig& cfg, uint32_t sq_depth = 256)
      : ContextCluster(nodes, cfg, uint32_t{4096}, sq_depth) {}
};

}  // namespace bkv::test
