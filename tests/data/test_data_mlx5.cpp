// data_put / data_get over the direct mlx5 data path (DirectTransport) and the software
// NIC emulator (docs/data.md): the cases of test_data_instant (data_cases.hpp) over
// several NIC configurations, then what only a NIC checks: the memory region's access
// rights behind an rkey the owner accepted.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/data/data_cases.hpp"
#include "tests/mlx5/emulated_pair.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;

namespace {

struct EmuNet {
  using Transport = emu::EmulatedTransport;
  struct Options {
    const char* name = "eager";
    emu::NodeOptions nic{};
    DirectOptions dp = base_options();
    emu::DeliveryMode mode = emu::DeliveryMode::kEager;
  };
  static DirectOptions base_options() {
    DirectOptions d;
    d.sq_depth = 128;  // copyrpc signals one WQE in 64: two intervals
    d.srq_size = 256;  // data_small_ring()'s receives
    d.send_cq_entries = 2048;
    return d;
  }
  Options opts;
  emu::Fabric fabric;
  explicit EmuNet(const Options& o) : opts(o) {}
  std::unique_ptr<Transport> make() { return std::make_unique<Transport>(fabric, opts.nic, opts.dp, opts.mode); }
  // kManual: the NIC runs only here; the other modes run it at doorbells or empty polls.
  void tick() {
    if (opts.mode == emu::DeliveryMode::kManual) fabric.deliver();
  }
};

std::vector<EmuNet::Options> variants() {
  std::vector<EmuNet::Options> v;
  v.push_back({});
  {
    EmuNet::Options x;
    x.name = "lazy NIC, compressed CQEs on both CQs";
    x.mode = emu::DeliveryMode::kLazy;
    x.nic.compress_send = x.nic.compress_recv = true;
    x.nic.max_session = 16;
    v.push_back(x);
  }
  {
    EmuNet::Options x;
    x.name = "NIC runs at each pump, 128-byte CQEs, small READs scattered into the CQE";
    x.mode = emu::DeliveryMode::kManual;
    x.nic.cqe_size = 128;
    x.nic.scatter_to_cqe = true;
    v.push_back(x);
  }
  {
    EmuNet::Options x;
    x.name = "doorbell only, no inline, no BlueFlame";
    test::doorbell_only_no_inline(x.nic, x.dp);
    v.push_back(x);
  }
  return v;
}

// Runs f(v) for each NIC variant v, named in the failure messages.
template <class F>
void for_each_variant(F&& f) {
  for (const auto& v : variants()) {
    INFO("NIC: " << v.name);
    f(v);
  }
}

uint64_t transfer_failures(const test::DataPair<EmuNet>& p) { return p.rejected(kv::DataError::kTransferFailed); }

}  // namespace

TEST_CASE("data over mlx5 and the NIC emulator: a get returns exactly the bytes of the completed put, up to 1 MiB") {
  for_each_variant([&](const EmuNet::Options& v) {
    for (uint32_t size : {1u, 32u, 64u, 65u, 4095u, 65536u, 1u << 20}) {
      INFO("value size " << size);
      test::data_case_get_returns_put<EmuNet>(v, size);
    }
  });
}

TEST_CASE("data over mlx5 and the NIC emulator: buffer offsets wrap around the client's slice") {
  for_each_variant([&](const EmuNet::Options& v) {
    test::data_case_wrap<EmuNet>(v);
  });
}

TEST_CASE("data over mlx5 and the NIC emulator: concurrent puts to one key and every get sees one whole put") {
  for_each_variant([&](const EmuNet::Options& v) {
    test::data_case_concurrent_puts<EmuNet>(v);
  });
}

TEST_CASE("data over mlx5 and the NIC emulator: out-of-range requests and a foreign rkey are rejected and counted") {
  for_each_variant([&](const EmuNet::Options& v) {
    test::data_case_rejections<EmuNet>(v);
    test::data_case_value_too_large<EmuNet>(v);
  });
}

TEST_CASE("data over mlx5 and the NIC emulator: puts park for blocks and all complete") {
  for_each_variant([&](const EmuNet::Options& v) {
    test::data_case_parking<EmuNet>(v);
  });
}

TEST_CASE("data over mlx5 and the NIC emulator: the value moves by RDMA READ and WRITE, not in the messages") {
  test::DataPair<EmuNet> p(EmuNet::Options{}, 1u << 17, 1, 1u << 16, 2);
  p.send(p.announcement(1));
  const uint64_t gather_before = p.net.fabric.stats().gather_bytes;
  p.fill(0, 0, 1u << 16, 9);
  const uint64_t put = p.put(2, 0, 0, 1u << 16);
  p.pump();
  REQUIRE(p.answers.at(put).kind == kv::DataResponseKind::kPutOk);
  const uint64_t get = p.get(2, 0, 1u << 16, 1u << 16);
  p.pump();
  REQUIRE(p.answers.at(get).kind == kv::DataResponseKind::kGetOk);
  CHECK(p.holds(0, 1u << 16, 1u << 16, 9));
  // The READ's scatter entry (64 KiB) and the WRITE's gather entry (64 KiB less the
  // inline head) went through data segments; the copyrpc messages are inline.
  CHECK(p.net.fabric.stats().gather_bytes - gather_before >= 2 * (1u << 16) - kMaxInlineHead);
  CHECK(p.net.fabric.stats().error_cqes == 0);
}

TEST_CASE("data over mlx5 and the NIC emulator: an announced rkey without remote read or write fails at the NIC") {
  // The client announces its buffer, fills its first 4 KiB and puts them; the put's id.
  const auto announce_and_put = [](test::DataPair<EmuNet>& p) {
    p.send(p.announcement(1));
    p.fill(0, 0, 4096, 1);
    const uint64_t put = p.put(1, 0, 0, 4096);
    p.pump();
    return put;
  };
  SECTION("put: the READ of a buffer registered without remote read") {
    test::DataPair<EmuNet> p(EmuNet::Options{}, 8192, 1, 4096, 2, kAccessLocalWrite | kAccessRemoteWrite);
    const uint64_t put = announce_and_put(p);
    // The owner accepted the request (the rkey is the announced one); the NIC refused
    // the READ with a remote access error, which puts the owner's queue pair in error
    // (RC): the failure is counted, the store keeps nothing, and no PutOk arrives.
    CHECK(transfer_failures(p) == 1);
    CHECK(p.server.counters().puts == 0);
    CHECK(p.answers.count(put) == 0);
    CHECK(p.net.fabric.stats().error_cqes >= 1);
    CHECK(p.store.free_blocks() == 8 + 2);
    CHECK(p.srv.error(0) == copyrpc::EndpointError::kCompletionError);
  }
  SECTION("get: the WRITE into a buffer registered without remote write") {
    test::DataPair<EmuNet> p(EmuNet::Options{}, 8192, 1, 4096, 2, kAccessLocalWrite | kAccessRemoteRead);
    const uint64_t put = announce_and_put(p);
    REQUIRE(p.answers.at(put).kind == kv::DataResponseKind::kPutOk);
    std::memset(p.at(0, 4096), 0x5C, 4096);
    const uint64_t get = p.get(1, 0, 4096, 4096);
    p.pump();
    // GetOk follows the WRITE on the same queue pair, so the WRITE's failure flushes it:
    // the requester never sees an answer for bytes that did not arrive.
    CHECK(transfer_failures(p) == 1);
    CHECK(p.answers.count(get) == 0);
    CHECK(p.at(0, 4096)[0] == std::byte{0x5C});
    CHECK(p.at(0, 8191)[0] == std::byte{0x5C});
    CHECK(p.srv.error(0) == copyrpc::EndpointError::kCompletionError);
    // The pinned block was released when the failed WRITE completed.
    CHECK(p.server.transfers_in_flight() == 0);
  }
}

TEST_CASE("data nodes over mlx5 and the NIC emulator: every backend completes every remote and local request") {
  const auto backend = GENERATE(data::DataBackend::kDelegation, data::DataBackend::kMeta, data::DataBackend::kDirect);
  const bool remote_only = GENERATE(true, false);
  for_each_variant([&](const EmuNet::Options& v) {
    test::data_case_whole_nodes<EmuNet>(v, backend, remote_only);
  });
}
