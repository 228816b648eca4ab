// A node runtime over the instant loopback: every thread that owns a copyrpc context
// gets its own InstantTransport (SRQ of 4096); real-thread shape (no metering, nobody is
// woken: whoever drives it steps the threads itself, as the backend tests and the
// simulator-limit benchmark do).
#pragma once

#include "apps/benchkv/node/node_runtime.hpp"
#include "transports/loopback/instant.hpp"

namespace bkv::app {

struct MakeInstantTransport {
  loopback::InstantFabric* fabric;
  OwnedTransports<loopback::InstantTransport> owned;
  loopback::InstantTransport& operator()(uint32_t /*thread*/, NullMeter& /*meter*/) {
    return owned.emplace(*fabric, 4096);
  }
};

using InstantRuntime = NodeRuntime<RealThreads, MakeInstantTransport>;

}  // namespace bkv::app
