// backends/ucx_am/ucx_am_data.hpp in one process: two ranks' data nodes over UCX shared
// memory, stepped in turn. Every put and get completes with its stamp checked, for a
// value sent eagerly and one large enough for rendezvous, and nothing is rejected.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/ucx_am/ucx_am_data.hpp"

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
