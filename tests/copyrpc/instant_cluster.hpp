// Copyrpc contexts over the instant loopback transport: a fully connected cluster, and
// a pair of contexts with one endpoint each.
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

// A copyrpc context with 64-bit call tokens over the instant loopback.
using InstantCtx = copyrpc::Context<loopback::InstantTransport, uint64_t>;

// Two contexts, each with one endpoint (ea on a, eb on b), connected to each other.
struct InstantPair {
  loopback::InstantFabric fabric;
  loopback::InstantTransport ta{fabric}, tb{fabric};
  InstantCtx a, b;
  uint32_t ea, eb;
  explicit InstantPair(copyrpc::ContextConfig cfg = {}) : InstantPair(cfg, cfg) {}
  InstantPair(copyrpc::ContextConfig cfg_a, copyrpc::ContextConfig cfg_b) : a(ta, cfg_a), b(tb, cfg_b) {
    ea = a.create_endpoint();
    eb = b.create_endpoint();
    a.connect(ea, b.local_info(eb));
    b.connect(eb, a.local_info(ea));
  }
};

}  // namespace bkv::test
