// A node runtime over the instant loopback: every thread that owns a copyrpc context
// gets its own InstantTransport; meters are NullMeter; clients poll, nobody is woken.
#pragma once

#include <memory>
#include <vector>

#include "backends/node_config.hpp"
#include "core/meter.hpp"
#include "transports/loopback/instant.hpp"

namespace bkv::test {

struct InstantRuntime {
  using Transport = loopback::InstantTransport;
  using Waker = backend::NullWaker;

  loopback::InstantFabric& fabric;
  std::vector<std::unique_ptr<Transport>> transports;
  NullMeter null_meter;
  Waker null_waker;

  explicit InstantRuntime(loopback::InstantFabric& f) : fabric(f) {}
  Transport& transport(uint32_t /*thread*/) {
    transports.push_back(std::make_unique<Transport>(fabric, 4096));
    return *transports.back();
  }
  NullMeter& meter(uint32_t) { return null_meter; }
  Waker& waker() { return null_waker; }
};

}  // namespace bkv::test
