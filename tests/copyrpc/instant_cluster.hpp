// A fully connected cluster of copyrpc contexts over the instant loopback transport.
#pragma once

#include <memory>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "tests/copyrpc/property_driver.hpp"
#include "transports/loopback_sim/instant.hpp"

namespace bkv::test {

struct InstantCluster {
  using T = loopback::InstantTransport;
  using Ctx = copyrpc::Context<T, uint64_t>;
  loopback::InstantFabric fabric;
  std::vector<std::unique_ptr<T>> transports;
  std::vector<std::unique_ptr<Ctx>> ctxs;
  std::vector<std::vector<PropertyDriver<T>::Link>> links;

  InstantCluster(uint32_t nodes, copyrpc::ContextConfig cfg, uint32_t sq_depth = 256) {
    for (uint32_t i = 0; i < nodes; ++i) {
      transports.push_back(std::make_unique<T>(fabric, 4096, sq_depth));
      ctxs.push_back(std::make_unique<Ctx>(*transports.back(), cfg));
    }
    links.resize(nodes);
    for (uint32_t a = 0; a < nodes; ++a)
      for (uint32_t b = a + 1; b < nodes; ++b) {
        const uint32_t ea = ctxs[a]->create_endpoint();
        const uint32_t eb = ctxs[b]->create_endpoint();
        ctxs[a]->connect(ea, ctxs[b]->local_info(eb));
        ctxs[b]->connect(eb, ctxs[a]->local_info(ea));
        links[a].push_back({ea, b});
        links[b].push_back({eb, a});
      }
  }
  std::vector<Ctx*> ctx_ptrs() {
    std::vector<Ctx*> v;
    for (auto& c : ctxs) v.push_back(c.get());
    return v;
  }
};

}  // namespace bkv::test
