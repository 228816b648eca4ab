// CPU pinning for real runs (docs/design.md §Benchmark plumbing):
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
// sysfs is read from a root directory so tests can hand in a fake tree.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bkv::runtime {

inline constexpr int kIrqCores[] = {0, 1};  // left free for interrupts when possible

// Parses a Linux CPU list such as "0-3,8,10-11\n". Throws std::invalid_argument naming
// the text when it is malformed.
inline std::vector<int> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  auto bad = [&] { return std::invalid_argument("malformed CPU list '" + std::string(text) + "'"); };
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    auto parse = [&](std::string_view s, int& v) {
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) throw bad();
    };
    if (dash == std::string_view::npos) {
      parse(item, lo);
      hi = lo;
    } else {
      parse(item.substr(0, dash), lo);
      parse(item.substr(dash + 1), hi);
      if (hi < lo) throw bad();
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct CpuTopology {
  std::vector<int> cpus;     // usable CPUs, ascending
  std::vector<int> node_of;  // NUMA node of cpus[i] (-1 unknown)
  int nic_node = -1;         // NUMA node of the RDMA device (-1 unknown or no device)
  std::string nic_note;      // why nic_node is unknown although a device was named
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

namespace detail {
inline bool read_text(const std::filesystem::path& p, std::string& out) {
  std::ifstream f(p);
  if (!f) return false;
  out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}
}  // namespace detail

// Reads the topology from `sysfs_root` (normally "/sys"). `device` is an RDMA device
// name ("" = none). `allowed` restricts the CPUs (normally allowed_cpus()); nullptr = all
// online CPUs. Missing or unreadable files degrade to "unknown", never to an error.
inline CpuTopology read_topology(const std::filesystem::path& sysfs_root, std::string_view device,
                                 const std::vector<int>* allowed) {
  namespace fs = std::filesystem;
  CpuTopology t;
  std::string text;
  std::vector<int> online;
  if (detail::read_text(sysfs_root / "devices/system/cpu/online", text)) {
    try {
      online = parse_cpu_list(text);
    } catch (const std::invalid_argument&) {
      online.clear();
    }
  }
  if (online.empty() && allowed != nullptr) online = *allowed;
  std::set<int> allow;
  if (allowed != nullptr) allow.insert(allowed->begin(), allowed->end());
  for (int c : online)
    if (allowed == nullptr || allow.count(c) != 0) t.cpus.push_back(c);
  t.node_of.assign(t.cpus.size(), -1);
  std::error_code ec;
  const fs::path nodes = sysfs_root / "devices/system/node";
  if (fs::is_directory(nodes, ec)) {
    for (const auto& entry : fs::directory_iterator(nodes, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("node", 0) != 0) continue;
      int node = -1;
      const auto r = std::from_chars(name.data() + 4, name.data() + name.size(), node);
      if (r.ec != std::errc() || r.ptr != name.data() + name.size()) continue;
      if (!detail::read_text(entry.path() / "cpulist", text)) continue;
      std::vector<int> list;
      try {
        list = parse_cpu_list(text);
      } catch (const std::invalid_argument&) {
        continue;
      }
      for (int c : list) {
        const auto it = std::lower_bound(t.cpus.begin(), t.cpus.end(), c);
        if (it != t.cpus.end() && *it == c) t.node_of[static_cast<size_t>(it - t.cpus.begin())] = node;
      }
    }
  }
  if (!device.empty()) {
    const fs::path p = sysfs_root / "class/infiniband" / std::string(device) / "device/numa_node";
    if (!detail::read_text(p, text)) {
      t.nic_note = "RDMA device '" + std::string(device) + "' has no " + p.string();
    } else {
      int node = -1;
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      const auto r = std::from_chars(text.data(), text.data() + text.size(), node);
      if (r.ec != std::errc() || node < 0)
        t.nic_note = "RDMA device '" + std::string(device) + "' reports no NUMA node";
      else
        t.nic_node = node;
    }
  }
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
