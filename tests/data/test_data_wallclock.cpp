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
#include "tests/data/data_cases.hpp"
#include "transports/loopback/wallclock.hpp"

using namespace bkv;
using loopback::WallclockFabric;
using loopback::WallclockTransport;

namespace {

// The wall-clock loopback as data_cases.hpp's Net: its fabric runs on its own.
struct WallclockNet {
  using Transport = WallclockTransport;
  struct Options {};
  WallclockFabric fabric;
  explicit WallclockNet(const Options&) {}
  std::unique_ptr<Transport> make() { return std::make_unique<Transport>(fabric, 4096, 256); }
  void tick() {}
};

}  // namespace

TEST_CASE("data nodes over the wall-clock loopback: every request completes with the stamped bytes on real threads") {
  const auto backend = GENERATE(data::DataBackend::kDelegation, data::DataBackend::kMeta, data::DataBackend::kDirect);
  data::DataNodeConfig base;
  base.np = 3, base.clients = 2, base.queue_depth = 4, base.max_value_bytes = 20000, base.value_bytes = 20000;
  base.key_range = 8, base.backend = backend, base.remote_only = false;
  constexpr uint64_t kOpsPerClient = 300;

  test::DataCluster<WallclockNet> cluster(WallclockNet::Options{}, base);
  auto& daemons = cluster.daemons;
  std::vector<data::DataClient<WallclockTransport>*> clients;
  for (auto& node : cluster.clients)
    for (auto& c : node) clients.push_back(c.get());

  std::atomic<bool> stop{false};
  std::atomic<uint32_t> clients_done{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::vector<std::thread> threads;
  for (auto& d : daemons)
    threads.emplace_back([&, dp = d.get()] {
      while (!stop.load(std::memory_order_acquire)) dp->step();
    });
  for (auto* cp : clients)
    threads.emplace_back([&, cp] {
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
  for (auto* c : clients) {
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
