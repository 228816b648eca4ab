// The header-only transports against the transport conformance suite: the instant
// loopback, and a new header-only transport with its harness and one
// BKV_TRANSPORT_CONFORMANCE line here (this file is registered already). A transport with
// a library of its own has its own test file, registered in tests/transport.cmake under
// its library's condition.
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
