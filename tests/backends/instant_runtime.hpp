// A node runtime over the instant loopback: every thread that owns a copyrpc context
// gets its own InstantTransport (SRQ of 4096); real-thread shape (no metering, nobody is
// woken: the tests step clients themselves).
#pragma once

#include "apps/benchkv/node_runtime.hpp"
#include "transports/loopback/instant.hpp"

namespace bkv::test {

struct MakeInstantTransport {
  loopback::InstantFabric* fabric;
  app::OwnedTransports<loopback::InstantTransport> owned;
  loopback::InstantTransport& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) {
    return owned.emplace(*fabric, 4096);
  }
};

using InstantRuntime = app::NodeRuntime<app::RealThreads, MakeInstantTransport>;

}  // namespace bkv::test
