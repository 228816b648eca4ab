// CPUs and NUMA nodes for the pinning plan (cpu_pinning.hpp): hwloc for the CPUs, one
// sysfs integer for the RDMA device's node.
#include <hwloc.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>

#include "apps/benchkv/real/cpu_pinning.hpp"

namespace bkv::runtime {

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// The loaded topology, or null with `why` set.
Topology load(const std::string& synthetic, std::string& why) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    why = "hwloc could not start";
    return nullptr;
  }
  Topology t(raw);
  if (!synthetic.empty() && hwloc_topology_set_synthetic(raw, synthetic.c_str()) != 0)
    throw std::invalid_argument("hwloc rejects the synthetic topology '" + synthetic + "'");
  if (hwloc_topology_load(raw) != 0) {
    why = "hwloc could not read this machine's topology";
    return nullptr;
  }
  return t;
}

}  // namespace

CpuTopology read_cpu_topology(const std::vector<int>* allowed, const std::string& synthetic) {
  CpuTopology t;
  std::set<int> allow;
  if (allowed != nullptr) allow.insert(allowed->begin(), allowed->end());
  const Topology topo = load(synthetic, t.cpu_note);
  if (!topo) {
    if (allowed != nullptr) t.cpus.assign(allow.begin(), allow.end());
    t.node_of.assign(t.cpus.size(), -1);
    t.cpu_note += ": NUMA nodes unknown";
    return t;
  }
  hwloc_topology_t h = topo.get();
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_PU, pu)) != nullptr;) {
    const int cpu = static_cast<int>(pu->os_index);
    if (allowed == nullptr || allow.count(cpu) != 0) t.cpus.push_back(cpu);
  }
  std::sort(t.cpus.begin(), t.cpus.end());
  t.node_of.assign(t.cpus.size(), -1);
  for (hwloc_obj_t node = nullptr; (node = hwloc_get_next_obj_by_type(h, HWLOC_OBJ_NUMANODE, node)) != nullptr;) {
    for (size_t i = 0; i < t.cpus.size(); ++i)
      if (hwloc_bitmap_isset(node->cpuset, static_cast<unsigned>(t.cpus[i]))) t.node_of[i] = static_cast<int>(node->os_index);
  }
  return t;
}

void read_nic_node(const std::filesystem::path& sysfs_root, std::string_view device, CpuTopology& t) {
  const std::filesystem::path p = sysfs_root / "class/infiniband" / std::string(device) / "device/numa_node";
  std::ifstream f(p);
  if (!f) {
    t.nic_note = "RDMA device '" + std::string(device) + "' has no " + p.string();
    return;
  }
  std::string text(std::istreambuf_iterator<char>(f), {});
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  int node = -1;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), node);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || node < 0)
    t.nic_note = "RDMA device '" + std::string(device) + "' reports no NUMA node";
  else
    t.nic_node = node;
}

}  // namespace bkv::runtime
