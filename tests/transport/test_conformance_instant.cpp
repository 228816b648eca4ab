// The instant loopback transport against the transport conformance suite.
#include <catch2/catch.hpp>

#include <memory>

#include "tests/transport/conformance.hpp"
#include "transports/loopback/instant.hpp"

namespace {

struct InstantHarness {
  using T = bkv::loopback::InstantTransport;
  bkv::loopback::InstantFabric fabric;
  std::unique_ptr<T> make() { return std::make_unique<T>(fabric, 256, 64); }
};

}  // namespace

BKV_TRANSPORT_CONFORMANCE("instant", "[instant][conformance]", InstantHarness)
