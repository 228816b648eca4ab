// benchkv's runtime pieces: CPU-list parsing, the pinning plan over fake topologies and a
// fake sysfs tree, and the thread group (init before start, stop, exceptions).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include "apps/benchkv/real/cpu_pinning.hpp"
#include "apps/benchkv/real/thread_group.hpp"

using namespace bkv::runtime;

namespace {
CpuTopology two_nodes(int cpus_per_node, int nic_node) {
  CpuTopology t;
  for (int c = 0; c < 2 * cpus_per_node; ++c) {
    t.cpus.push_back(c);
    t.node_of.push_back(c / cpus_per_node);
  }
  t.nic_node = nic_node;
  return t;
}
}  // namespace

TEST_CASE("runtime: pinning prefers the NIC's NUMA node and keeps cores 0-1 free", "[runtime]") {
  SECTION("NIC on node 1: daemons then clients on node 1, spilling to node 0 without 0-1") {
    const PinPlan p = plan_pinning(two_nodes(8, 1), PinRequest{2, 8, 0, 1});
    CHECK(p.daemon_cpus == std::vector<int>{8, 9});
    CHECK(p.client_cpus == std::vector<int>{10, 11, 12, 13, 14, 15, 2, 3});
    CHECK(p.irq_cores_kept_free);
    CHECK(p.warning.empty());
  }
  SECTION("NIC on node 0: cores 0-1 skipped although on the NIC node") {
    const PinPlan p = plan_pinning(two_nodes(4, 0), PinRequest{1, 2, 0, 1});
    CHECK(p.daemon_cpus == std::vector<int>{2});
    CHECK(p.client_cpus == std::vector<int>{3, 4});
  }
  SECTION("two ranks on a node get disjoint cores, daemons of both first") {
    const CpuTopology t = two_nodes(8, 0);
    const PinPlan r0 = plan_pinning(t, PinRequest{1, 3, 0, 2});
    const PinPlan r1 = plan_pinning(t, PinRequest{1, 3, 1, 2});
    CHECK(r0.daemon_cpus == std::vector<int>{2});
    CHECK(r1.daemon_cpus == std::vector<int>{3});
    std::set<int> all;
    for (const PinPlan* p : {&r0, &r1}) {
      for (int c : p->daemon_cpus) CHECK(all.insert(c).second);
      for (int c : p->client_cpus) CHECK(all.insert(c).second);
    }
    CHECK(all.size() == 8);
    CHECK(all.count(0) == 0);
    CHECK(all.count(1) == 0);
  }
  SECTION("no NUMA information: ascending order") {
    CpuTopology t;
    t.cpus = {0, 1, 2, 3, 4, 5};
    t.node_of.assign(6, -1);
    const PinPlan p = plan_pinning(t, PinRequest{1, 1, 0, 1});
    CHECK(p.daemon_cpus == std::vector<int>{2});
    CHECK(p.client_cpus == std::vector<int>{3});
  }
}

TEST_CASE("runtime: pinning on a small machine degrades with one warning", "[runtime]") {
  CpuTopology t;
  t.cpus = {0, 1};
  t.node_of = {0, 0};
  SECTION("threads fit only with cores 0-1: they are used, and it is said") {
    const PinPlan p = plan_pinning(t, PinRequest{1, 1, 0, 1});
    CHECK(p.daemon_cpus == std::vector<int>{0});
    CHECK(p.client_cpus == std::vector<int>{1});
    CHECK_FALSE(p.irq_cores_kept_free);
    CHECK_THAT(p.warning, Catch::StartsWith("warning: CPU pinning: ") && Catch::Contains("cores 0-1"));
  }
  SECTION("more threads than CPUs: unpinned, and it is said") {
    const PinPlan p = plan_pinning(t, PinRequest{1, 4, 0, 1});
    for (int c : p.daemon_cpus) CHECK(c == -1);
    for (int c : p.client_cpus) CHECK(c == -1);
    CHECK_THAT(p.warning, Catch::Contains("left unpinned"));
    CHECK(std::count(p.warning.begin(), p.warning.end(), '\n') == 0);
  }
  CHECK_THROWS_WITH(plan_pinning(t, PinRequest{1, 1, 2, 2}), Catch::Contains("local rank"));
}

TEST_CASE("runtime: CPUs and NUMA nodes from hwloc, the NIC node from sysfs", "[runtime]") {
  namespace fs = std::filesystem;
  // Two NUMA nodes of four CPUs, numbered across the nodes: node 0 holds 0, 4, 1, 5.
  const std::string machine = "node:2 core:2 pu:2(indexes=0,4,1,5,2,6,3,7)";
  CpuTopology t = read_cpu_topology(nullptr, machine);
  CHECK(t.cpus == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(t.node_of == std::vector<int>{0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(t.cpu_note.empty());

  const fs::path root = fs::temp_directory_path() / ("bkv_sysfs_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [&](const fs::path& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  write("class/infiniband/mlx5_0/device/numa_node", "1\n");
  write("class/infiniband/mlx5_1/device/numa_node", "-1\n");
  write("class/infiniband/mlx5_2/device/numa_node", "1x\n");
  read_nic_node(root, "mlx5_0", t);
  CHECK(t.nic_node == 1);
  CHECK(t.nic_note.empty());
  const PinPlan p = plan_pinning(t, PinRequest{1, 2, 0, 1});
  CHECK(p.daemon_cpus == std::vector<int>{2});  // the NIC's node first, cores 0-1 kept free
  CHECK(p.client_cpus == std::vector<int>{3, 6});

  const std::vector<int> allowed = {1, 2, 5};
  const CpuTopology restricted = read_cpu_topology(&allowed, machine);
  CHECK(restricted.cpus == allowed);
  CHECK(restricted.node_of == std::vector<int>{0, 1, 0});
  CHECK(restricted.nic_node == -1);

  CpuTopology unknown = read_cpu_topology(nullptr, machine);
  read_nic_node(root, "mlx5_1", unknown);
  CHECK(unknown.nic_node == -1);
  CHECK_THAT(unknown.nic_note, Catch::Contains("no NUMA node"));
  CpuTopology garbled = read_cpu_topology(nullptr, machine);
  read_nic_node(root, "mlx5_2", garbled);
  CHECK(garbled.nic_node == -1);
  CHECK_THAT(garbled.nic_note, Catch::Contains("no NUMA node"));
  CpuTopology missing = read_cpu_topology(nullptr, machine);
  read_nic_node(root, "mlx5_9", missing);
  CHECK_THAT(missing.nic_note, Catch::Contains("mlx5_9"));
  CHECK_THAT(plan_pinning(missing, PinRequest{1, 1, 0, 1}).warning, Catch::Contains("no NUMA preference"));
  fs::remove_all(root);

  CHECK_THROWS_WITH(read_cpu_topology(nullptr, "node:2 bogus:3"), Catch::Contains("node:2 bogus:3"));
}

TEST_CASE("runtime: this machine's topology reads and pins without failing", "[runtime]") {
  const std::vector<int> allowed = allowed_cpus();
  REQUIRE_FALSE(allowed.empty());
  const CpuTopology t = read_topology("", &allowed);
  REQUIRE_FALSE(t.cpus.empty());
  CHECK(t.cpu_note.empty());  // hwloc read this machine
  CHECK(t.cpus == allowed);   // every CPU this process may use is one hwloc lists
  CHECK(t.node_of.size() == t.cpus.size());
  CHECK(std::count(t.node_of.begin(), t.node_of.end(), -1) == 0);  // each on a NUMA node
  const PinPlan p = plan_pinning(t, PinRequest{1, 1, 0, 1});
  bool pinned = false;
  std::thread th([&] { pinned = pin_current_thread(p.daemon_cpus[0]); });
  th.join();
  CHECK(pinned);
}

TEST_CASE("runtime: thread group runs init, waits for start, steps until stop", "[runtime][threads]") {
  constexpr int kThreads = 3;
  struct alignas(64) PerThread {
    std::atomic<bool> inited{false};
    std::atomic<uint64_t> steps{0};
    std::atomic<bool> step_before_init{false};
  };
  std::vector<PerThread> st(kThreads);
  ThreadGroup g;
  for (int i = 0; i < kThreads; ++i)
    g.spawn(
        "t" + std::to_string(i), -1, [&st, i] { st[i].inited.store(true, std::memory_order_relaxed); },
        [&st, i] {
          if (!st[i].inited.load(std::memory_order_relaxed)) st[i].step_before_init.store(true);
          st[i].steps.fetch_add(1, std::memory_order_relaxed);
        });
  g.wait_ready();
  for (auto& s : st) CHECK(s.inited.load());
  // The gate is closed: no step may run before start().
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& s : st) CHECK(s.steps.load() == 0);
  g.start();
  for (auto& s : st)
    while (s.steps.load(std::memory_order_relaxed) < 100) std::this_thread::yield();
  g.request_stop();
  g.join();
  std::vector<uint64_t> after;
  for (auto& s : st) {
    CHECK_FALSE(s.step_before_init.load());
    after.push_back(s.steps.load());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int i = 0; i < kThreads; ++i) CHECK(st[i].steps.load() == after[i]);  // really stopped
  CHECK(g.notes().empty());
}

TEST_CASE("runtime: an exception in a step stops the group and reaches join()", "[runtime][threads]") {
  std::atomic<uint64_t> other_steps{0};
  ThreadGroup g;
  g.spawn("ok", -1, [&] { other_steps.fetch_add(1, std::memory_order_relaxed); });
  std::atomic<int> n{0};
  g.spawn("bad", -1, [&] {
    if (n.fetch_add(1) == 50) throw std::runtime_error("step 50 failed");
  });
  g.wait_ready();
  g.start();
  CHECK_THROWS_WITH(g.join(), "step 50 failed");  // returns: the failure stopped "ok" too
  CHECK(g.stop_requested());
}

TEST_CASE("runtime: an exception in init is reported by wait_ready()", "[runtime][threads]") {
  ThreadGroup g;
  g.spawn("fine", -1, [] {}, [] {});
  g.spawn("broken", -1, [] { throw std::invalid_argument("no such device"); }, [] {});
  CHECK_THROWS_WITH(g.wait_ready(), "no such device");
  g.request_stop();
  CHECK_THROWS_WITH(g.join(), "no such device");
}
