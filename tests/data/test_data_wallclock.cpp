// data_put / data_get on real threads over the wall-clock loopback (docs/data.md): each
// daemon #0 and each client on its own thread, both backends, remote and local requests.
// Run under ThreadSanitizer with the concurrency group. Catch is not thread-safe: threads
// only step; the checks come after they joined.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backends/data/data_node.hpp"
#include "transports/loopback/wallclock.hpp"

using namespace bkv;
using loopback::WallclockFabric;
using loopback::WallclockTransport;

TEST_CASE("data nodes over the wall-clock loopback: every request completes with the stamped bytes on real threads") {
  const auto backend = GENERATE(data::DataBackend::kDelegation, data::DataBackend::kMeta, data::DataBackend::kDirect);
  data::DataNodeConfig base;
  base.np = 3, base.clients = 2, base.queue_depth = 4, base.max_value_bytes = 20000, base.value_bytes = 20000;
  base.key_range = 8, base.backend = backend, base.remote_only = false;
  copyrpc::ContextConfig cc;
  cc.ring_size = 1u << 16;
  cc.srq_size = 256;
  constexpr uint64_t kOpsPerClient = 300;

  WallclockFabric fabric;
  std::vector<std::unique_ptr<WallclockTransport>> transports;
  std::vector<std::unique_ptr<kv::BlobStore>> stores;
  std::vector<std::unique_ptr<data::ClientBuffers>> buffers;
  std::vector<shm::Segment> rings;
  std::vector<std::unique_ptr<data::DataDaemon<WallclockTransport>>> daemons;
  std::vector<std::unique_ptr<data::DataClient<WallclockTransport>>> clients;
  std::vector<std::vector<data::DataClient<WallclockTransport>*>> by_node(base.np);
  for (uint32_t r = 0; r < base.np; ++r) {
    data::DataNodeConfig c = base;
    c.rank = r;
    stores.push_back(std::make_unique<kv::BlobStore>(r, c.key_range, c.max_value_bytes, c.clients * c.queue_depth + 1));
    buffers.push_back(std::make_unique<data::ClientBuffers>(c.clients, c.slice_bytes()));
    rings.push_back(shm::Segment::create_process(data::data_ring_bytes(c.backend, c.clients, c.queue_depth)));
    transports.push_back(std::make_unique<WallclockTransport>(fabric, 4096, 256));
    daemons.push_back(std::make_unique<data::DataDaemon<WallclockTransport>>(*transports.back(), cc, c, *stores.back(),
                                                                            *buffers.back(), rings.back().bytes()));
    for (uint32_t i = 0; i < c.clients; ++i) {
      transports.push_back(std::make_unique<WallclockTransport>(fabric, 4096, 256));
      clients.push_back(std::make_unique<data::DataClient<WallclockTransport>>(*transports.back(), cc, c, i,
                                                                              *buffers.back(), rings.back().bytes()));
      by_node[r].push_back(clients.back().get());
    }
  }
  for (uint32_t a = 0; a < base.np; ++a)
    for (uint32_t b = 0; b < base.np; ++b) {
      if (a == b) continue;
      if (data::daemon_calls_for_clients(backend)) {
        if (a > b) continue;
        const uint32_t ea = daemons[a]->create_endpoint_to(b), eb = daemons[b]->create_endpoint_to(a);
        daemons[a]->context().connect(ea, daemons[b]->context().local_info(eb));
        daemons[b]->context().connect(eb, daemons[a]->context().local_info(ea));
      } else {
        for (auto* cl : by_node[a]) {
          const uint32_t ec = cl->create_endpoint_to(b), ed = daemons[b]->create_serving_endpoint();
          cl->context()->connect(ec, daemons[b]->context().local_info(ed));
          daemons[b]->context().connect(ed, cl->context()->local_info(ec));
        }
      }
    }

  std::atomic<bool> stop{false};
  std::atomic<uint32_t> clients_done{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> threads;
  for (auto& d : daemons)
    threads.emplace_back([&, dp = d.get()] {
      while (!stop.load(std::memory_order_acquire)) dp->step();
    });
  for (auto& c : clients)
    threads.emplace_back([&, cp = c.get()] {
      while (cp->counters().completed.load(std::memory_order_relaxed) +
                 cp->counters().errors.load(std::memory_order_relaxed) <
             kOpsPerClient) {
        cp->step();
        if (std::chrono::steady_clock::now() > deadline) break;
      }
      cp->stop_issuing();
      while (cp->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) cp->step();
      clients_done.fetch_add(1, std::memory_order_release);
      // Keep serving RDMA records aimed at this client's transport until everyone is done.
      while (!stop.load(std::memory_order_acquire)) cp->step();
    });
  while (clients_done.load(std::memory_order_acquire) < clients.size()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();

  uint64_t issued = 0, completed = 0, errors = 0, bytes = 0;
  for (auto& c : clients) {
    issued += c->counters().issued.load();
    completed += c->counters().completed.load();
    errors += c->counters().errors.load() + c->protocol_errors();
    bytes += c->counters().bytes.load();
    CHECK(c->in_flight() == 0);
  }
  CHECK(completed >= kOpsPerClient * clients.size());
  CHECK(completed == issued);
  CHECK(errors == 0);
  CHECK(bytes > 0);
  for (auto& d : daemons) {
    CHECK(d->server_counters().rejected_total() == 0);
    CHECK(d->protocol_errors() == 0);
  }
}
