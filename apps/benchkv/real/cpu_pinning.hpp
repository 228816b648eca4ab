// CPU pinning for real runs (docs/design_benchkv.md §Benchmark plumbing):
//  1. find the NUMA node of the RDMA device (/sys/class/infiniband/<dev>/device/numa_node);
//  2. daemon threads go to that node's cores first, then client threads, as far as
//     they reach; then the other nodes;
//  3. cores 0 and 1 are left to interrupt handling when the machine has cores to spare;
//  4. ranks sharing a node (node-local rank) get disjoint cores.
// On a machine too small for that the plan says so in ONE warning and degrades: first it
// gives up keeping cores 0-1 free, and if there are still fewer CPUs than threads it
// leaves the threads unpinned (busy-polling threads pinned two to a core would starve
// each other). Pinning never fails a run.
//
// The CPUs and their NUMA nodes come from hwloc (read_cpu_topology, which tests feed a
// synthetic machine); the RDMA device's NUMA node is one sysfs file, read from a root
// directory so tests can hand in a fake tree.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bkv::runtime {

inline constexpr int kIrqCores[] = {0, 1};  // left free for interrupts when possible

struct CpuTopology {
  std::vector<int> cpus;     // usable CPUs, ascending
  std::vector<int> node_of;  // NUMA node of cpus[i] (-1 unknown)
  int nic_node = -1;         // NUMA node of the RDMA device (-1 unknown or no device)
  std::string nic_note;      // why nic_node is unknown although a device was named
  std::string cpu_note;      // why node_of is unknown (hwloc failed)
};

// The CPUs this process may run on (sched_getaffinity).
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// The CPUs of this machine and their NUMA nodes, from hwloc (cpu_topology.cpp), restricted
// to `allowed` (normally allowed_cpus(); nullptr = every CPU hwloc lists). `synthetic`
// is an hwloc synthetic description ("node:2 core:4 pu:1", for tests) or "" for this
// machine. An hwloc failure degrades to the allowed CPUs with unknown nodes and says
// why in cpu_note, never to an error (nor with a synthetic description: that throws
// std::invalid_argument naming it, as it is the caller's mistake).
CpuTopology read_cpu_topology(const std::vector<int>* allowed, const std::string& synthetic = "");

// Sets t.nic_node from `sysfs_root`/class/infiniband/<device>/device/numa_node (one
// integer; -1 or a missing file leave it unknown and say why in t.nic_note).
void read_nic_node(const std::filesystem::path& sysfs_root, std::string_view device, CpuTopology& t);

// Both, for this machine: `device` is an RDMA device name ("" = none).
inline CpuTopology read_topology(std::string_view device, const std::vector<int>* allowed) {
  CpuTopology t = read_cpu_topology(allowed);
  if (!device.empty()) read_nic_node("/sys", device, t);
  return t;
}

struct PinRequest {
  uint32_t daemons = 1;     // daemon threads of this rank
  uint32_t clients = 1;     // client threads of this rank
  uint32_t local_rank = 0;  // this rank among the ranks on the node
  uint32_t local_size = 1;  // ranks on the node
};

struct PinPlan {
  std::vector<int> daemon_cpus;  // per daemon thread; -1 = leave unpinned
  std::vector<int> client_cpus;  // per client thread; -1 = leave unpinned
  bool irq_cores_kept_free = false;
  std::string warning;           // empty, or the one message to print
};

// The plan for one rank. Daemons of every local rank take the best cores first (NIC
// node, ascending), then the clients of every local rank; each rank its own slice.
inline PinPlan plan_pinning(const CpuTopology& topo, const PinRequest& req) {
  if (req.local_size == 0 || req.local_rank >= req.local_size)
    throw std::invalid_argument("plan_pinning: local rank " + std::to_string(req.local_rank) + " of " +
                                std::to_string(req.local_size));
  PinPlan plan;
  plan.daemon_cpus.assign(req.daemons, -1);
  plan.client_cpus.assign(req.clients, -1);
  std::vector<std::string> notes;
  if (!topo.cpu_note.empty()) notes.push_back(topo.cpu_note);
  if (!topo.nic_note.empty()) notes.push_back(topo.nic_note + ", so no NUMA preference");

  // Candidates: NIC node first, then the rest, each ascending.
  std::vector<int> near, far;
  for (size_t i = 0; i < topo.cpus.size(); ++i)
    (topo.nic_node >= 0 && topo.node_of[i] == topo.nic_node ? near : far).push_back(topo.cpus[i]);
  const uint64_t needed = uint64_t{req.daemons + req.clients} * req.local_size;
  auto is_irq = [](int c) { return std::find(std::begin(kIrqCores), std::end(kIrqCores), c) != std::end(kIrqCores); };
  const uint64_t irq_present =
      static_cast<uint64_t>(std::count_if(topo.cpus.begin(), topo.cpus.end(), is_irq));
  std::vector<int> order;
  plan.irq_cores_kept_free = topo.cpus.size() - irq_present >= needed;
  for (const auto* list : {&near, &far})
    for (int c : *list)
      if (!plan.irq_cores_kept_free || !is_irq(c)) order.push_back(c);
  if (!plan.irq_cores_kept_free && irq_present > 0)
    notes.push_back(std::to_string(topo.cpus.size()) + " CPUs for " + std::to_string(needed) +
                    " threads on this node: cores 0-1 are not kept free for interrupts");
  if (order.size() < needed) {
    notes.push_back(std::to_string(needed) + " threads on " + std::to_string(order.size()) +
                    " CPUs: threads are left unpinned and share CPUs (expect lower, noisier numbers)");
  } else {
    for (uint32_t d = 0; d < req.daemons; ++d) plan.daemon_cpus[d] = order[req.local_rank * req.daemons + d];
    const uint64_t client_base = uint64_t{req.daemons} * req.local_size + uint64_t{req.local_rank} * req.clients;
    for (uint32_t c = 0; c < req.clients; ++c) plan.client_cpus[c] = order[client_base + c];
  }
  for (size_t i = 0; i < notes.size(); ++i) plan.warning += (i ? "; " : "warning: CPU pinning: ") + notes[i];
  return plan;
}

// Pins the calling thread to `cpu` (-1: does nothing). Returns false if the OS refused;
// that is not an error for a benchmark run (the caller may mention it).
inline bool pin_current_thread(int cpu) noexcept {
  if (cpu < 0) return true;
  if (cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

}  // namespace bkv::runtime
