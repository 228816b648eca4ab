// backends/ucx_am/ucx_am_data.hpp in one process: two ranks' data nodes over UCX shared
// memory, stepped in turn. Every put and get completes with its stamp checked, for a
// value sent eagerly and one large enough for rendezvous, and nothing is rejected; a
// stranger's malformed or out-of-range requests are rejected or dropped and counted.
#include <catch2/catch.hpp>

#include <ucp/api/ucp.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/ucx_am/ucx_am_data.hpp"
#include "tests/transport/raw_ucp_worker.hpp"

using namespace bkv;

namespace {

struct Pair {
  std::vector<std::unique_ptr<ucx_am::UcxAmDataNode>> nodes;
  explicit Pair(data::DataNodeConfig base) {
    base.np = 2;
    for (uint32_t r = 0; r < 2; ++r) {
      data::DataNodeConfig c = base;
      c.rank = r;
      nodes.push_back(std::make_unique<ucx_am::UcxAmDataNode>(c, ucx_am::Config{"sm,self"}));
    }
    std::vector<ucx_am::WorkerAddress> all;
    for (auto& n : nodes)
      for (const auto& a : n->local_addresses()) all.push_back(a);
    for (auto& n : nodes) n->connect(all);
  }
  void step() {
    for (auto& n : nodes) {
      n->step_daemon();
      for (uint32_t c = 0; c < n->clients(); ++c) n->step_client(c);
    }
  }
  uint64_t sum(std::atomic<uint64_t> data::DataClientCounters::*field) const {
    uint64_t s = 0;
    for (auto& n : nodes)
      for (uint32_t c = 0; c < n->clients(); ++c) s += (n->counters(c).*field).load();
    return s;
  }
};

// A UCP worker that belongs to no node: it sends raw requests to a daemon.
class Stranger : public test::RawUcpWorker {
 public:
  Stranger() : RawUcpWorker("sm,self") {}
  void connect(const ucx_am::WorkerAddress& a) { ep_ = RawUcpWorker::connect(a.bytes, UCP_ERR_HANDLING_MODE_NONE); }
  // Sends one request (header, data) and progresses, with `pump` driving the nodes.
  template <class Pump>
  void send(const void* header, size_t header_len, const void* data, size_t len, Pump&& pump) {
    RawUcpWorker::send(ep_, ucx_am::kDataRequestAmId, header, header_len, data, len, pump);
    settle(pump);
  }

 private:
  ucp_ep_h ep_ = nullptr;
};

}  // namespace

TEST_CASE("ucx-am data in one process: every put and get completes, eager and rendezvous", "[ucx-am][data]") {
  const uint32_t size = GENERATE(64u, 256u * 1024u);
  const bool remote_only = GENERATE(true, false);
  INFO("value size " << size << (remote_only ? ", remote only" : ", with local requests"));
  data::DataNodeConfig cfg;
  cfg.clients = 2, cfg.queue_depth = 4, cfg.max_value_bytes = size, cfg.value_bytes = size;
  cfg.key_range = 8, cfg.remote_only = remote_only;
  Pair p(cfg);
  for (int i = 0; i < 3000 && p.sum(&data::DataClientCounters::completed) < 400; ++i) p.step();
  for (auto& n : p.nodes) n->stop_issuing();
  for (int i = 0; i < 20000; ++i) {
    uint64_t in_flight = 0;
    for (auto& n : p.nodes)
      for (uint32_t c = 0; c < n->clients(); ++c) in_flight += n->in_flight(c);
    if (in_flight == 0) break;
    p.step();
  }
  const uint64_t issued = p.sum(&data::DataClientCounters::issued);
  CHECK(issued >= 400);
  CHECK(p.sum(&data::DataClientCounters::completed) == issued);
  CHECK(p.sum(&data::DataClientCounters::errors) == 0);
  CHECK(p.sum(&data::DataClientCounters::bytes) > 0);
  // UCX chose the protocol by size: eager for 64 bytes, rendezvous for 256 KiB.
  uint64_t rendezvous = 0;
  for (auto& n : p.nodes) rendezvous += n->rendezvous_receives();
  if (size == 64) CHECK(rendezvous == 0);
  else CHECK(rendezvous > 0);
  uint64_t served = 0;
  for (auto& n : p.nodes) {
    const data::DataServerCounters& sc = n->server_counters();
    served += sc.puts + sc.gets + sc.not_found;
    CHECK(sc.rejected_total() == 0);
    CHECK(n->protocol_errors() == 0);
  }
  CHECK(served == issued);
}

TEST_CASE("ucx-am data: malformed and out-of-range requests are rejected or dropped and counted", "[ucx-am][data]") {
  data::DataNodeConfig cfg;
  cfg.clients = 2, cfg.queue_depth = 4, cfg.max_value_bytes = 4096, cfg.value_bytes = 4096, cfg.key_range = 8;
  Pair p(cfg);
  for (auto& n : p.nodes) n->stop_issuing();  // only the stranger's requests
  Stranger s;
  s.connect(p.nodes[1]->local_addresses()[0]);  // daemon #0 of rank 1
  auto pump = [&] { p.step(); };
  const ucx_am::UcxAmDataNode& owner = *p.nodes[1];
  auto rejected = [&](kv::DataError e) { return owner.server_counters().rejected[static_cast<uint8_t>(e)]; };
  std::vector<std::byte> value(4097, std::byte{0x33});
  auto request = [](uint32_t client, kv::DataRequest r) { return ucx_am::DataAmRequest{client, 0, r}; };

  // Dropped: no client to answer.
  const uint8_t short_header[10] = {};
  s.send(short_header, sizeof short_header, nullptr, 0, pump);
  const auto stranger = request(2 * 2, kv::DataRequest::get(1, 0, 0, 64));  // np x C = 4 clients
  s.send(&stranger, sizeof stranger, nullptr, 0, pump);
  CHECK(owner.protocol_errors() == 2);
  CHECK(owner.server_counters().rejected_total() == 0);

  // Answered with a DataError (to client 0 of rank 0, which awaits nothing: dropped there).
  const auto wrong_rank = request(0, kv::DataRequest::get(0, 0, 0, 64));
  s.send(&wrong_rank, sizeof wrong_rank, nullptr, 0, pump);
  const auto key = request(0, kv::DataRequest::get(1, 8, 0, 64));
  s.send(&key, sizeof key, nullptr, 0, pump);
  const auto short_put = request(0, kv::DataRequest::put(1, 1, 0, 100));
  s.send(&short_put, sizeof short_put, value.data(), 99, pump);
  const auto get_with_data = request(0, kv::DataRequest::get(1, 1, 0, 100));
  s.send(&get_with_data, sizeof get_with_data, value.data(), 100, pump);
  kv::DataRequest with_rkey = kv::DataRequest::put(1, 1, 0, 100);
  with_rkey.rkey = 7;
  const auto rkey = request(0, with_rkey);
  s.send(&rkey, sizeof rkey, value.data(), 100, pump);
  const auto too_large = request(0, kv::DataRequest::put(1, 1, 0, 4097));
  s.send(&too_large, sizeof too_large, value.data(), 4097, pump);
  CHECK(rejected(kv::DataError::kWrongRank) == 1);
  CHECK(rejected(kv::DataError::kKeyOutOfRange) == 1);
  CHECK(rejected(kv::DataError::kMalformedRequest) == 3);
  CHECK(rejected(kv::DataError::kValueTooLarge) == 1);
  CHECK(owner.server_counters().puts == 0);
  CHECK(p.nodes[0]->protocol_errors() == 6);  // six answers nobody awaited

  // A well-formed put from the stranger is served (its answer is dropped the same way).
  const auto good = request(0, kv::DataRequest::put(1, 1, 0, 100));
  s.send(&good, sizeof good, value.data(), 100, pump);
  CHECK(owner.server_counters().puts == 1);
}
