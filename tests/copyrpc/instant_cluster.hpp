// A fully connected cluster of copyrpc contexts over the instant loopback transport.
#pragma once

#include <memory>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "tests/copyrpc/property_driver.hpp"
#include "transports/loopback/instant.hpp"

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
    links = connect_full_mesh(ctxs);
  }
  std::vector<Ctx*> ctx_ptrs() { return raw_pointers(ctxs); }
};

}  // namespace bkv::test
