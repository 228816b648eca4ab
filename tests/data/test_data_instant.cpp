// data_put / data_get over the instant loopback (docs/data.md): the owner's DataServer
// against a hand-driven requester, then whole nodes (daemon #0 and clients) of both
// backends. The case bodies are shared with the mlx5 emulator test (data_cases.hpp).
#include <catch2/catch.hpp>

#include <memory>

#include "tests/data/data_cases.hpp"
#include "transports/loopback/instant.hpp"

using namespace bkv;

namespace {

struct InstantNet {
  using Transport = loopback::InstantTransport;
  struct Options {};
  loopback::InstantFabric fabric;
  explicit InstantNet(const Options&) {}
  std::unique_ptr<Transport> make() { return std::make_unique<Transport>(fabric); }
  void tick() {}
};

}  // namespace

TEST_CASE("data over instant: a get returns exactly the bytes of the completed put, up to 1 MiB") {
  const uint32_t size = GENERATE(1u, 64u, 4095u, 65536u, 1u << 20);
  test::data_case_get_returns_put<InstantNet>({}, size);
}

TEST_CASE("data over instant: buffer offsets wrap around the client's slice and every value stays intact") {
  test::data_case_wrap<InstantNet>({});
}

TEST_CASE("data over instant: concurrent puts to one key and every get sees one whole completed put") {
  test::data_case_concurrent_puts<InstantNet>({});
}

TEST_CASE("data over instant: requests outside the client's buffer or with a foreign rkey are rejected and counted") {
  test::data_case_rejections<InstantNet>({});
}

TEST_CASE("data over instant: a put larger than the store's largest value is rejected") {
  test::data_case_value_too_large<InstantNet>({});
}

TEST_CASE("data over instant: with fewer free blocks than puts in flight the puts park and all complete") {
  test::data_case_parking<InstantNet>({});
}

TEST_CASE("data nodes over instant: every backend completes every remote and local request without errors") {
  const auto backend = GENERATE(data::DataBackend::kDelegation, data::DataBackend::kMeta, data::DataBackend::kDirect);
  const bool remote_only = GENERATE(true, false);
  test::data_case_whole_nodes<InstantNet>({}, backend, remote_only);
}
