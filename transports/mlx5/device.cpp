// RDMA device selection (see device.hpp).
#include "transports/mlx5/device.hpp"

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

namespace bkv::mlx5 {

namespace {

struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  int error = 0;
  DeviceList() {
    errno = 0;
    list = ibv_get_device_list(&count);
    error = errno;
    if (list == nullptr) count = 0;
  }
  ~DeviceList() {
    if (list != nullptr) ibv_free_device_list(list);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
};

std::string joined_names(const DeviceList& d) {
  std::string s;
  for (int i = 0; i < d.count; ++i) {
    if (i) s += ", ";
    s += std::to_string(i) + ": " + ibv_get_device_name(d.list[i]);
  }
  return s;
}

constexpr const char* kHowToChoose =
    "choose a device with --device NAME or --device-index N (list them with `ibv_devices`)";

[[noreturn]] void no_device(const DeviceList& d, std::string_view name, int index) {
  std::string msg = "no RDMA device found";
  if (!name.empty()) msg += " (asked for --device " + std::string(name) + ")";
  else if (index >= 0) msg += " (asked for --device-index " + std::to_string(index) + ")";
  if (d.list == nullptr && d.error != 0)
    msg += " (ibv_get_device_list: " + std::string(std::strerror(d.error)) + "; the kernel has no RDMA support)";
  msg += ". The mlx5 and verbs transports need an InfiniBand or RoCE NIC (or SoftRoCE: `rdma link add rxe0 type rxe "
         "netdev ETH`); on a host that has one, ";
  msg += kHowToChoose;
  msg += ". Without RDMA hardware use --transport sim or --transport ucx.";
  throw NoDeviceError(msg);
}

}  // namespace

std::vector<std::string> list_devices() {
  DeviceList d;
  std::vector<std::string> names;
  for (int i = 0; i < d.count; ++i) names.emplace_back(ibv_get_device_name(d.list[i]));
  return names;
}

Device::Device(Device&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)), name_(std::move(o.name_)), port_(o.port_), info_(o.info_), mlx5_(o.mlx5_) {}

Device& Device::operator=(Device&& o) noexcept {
  if (this != &o) {
    if (ctx_ != nullptr) ibv_close_device(ctx_);
    ctx_ = std::exchange(o.ctx_, nullptr);
    name_ = std::move(o.name_);
    port_ = o.port_;
    info_ = o.info_;
    mlx5_ = o.mlx5_;
  }
  return *this;
}

Device::~Device() {
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

Device open_device(std::string_view name, int index, uint8_t port, int gid_index) {
  DeviceList d;
  if (d.count == 0) no_device(d, name, index);
  int chosen = -1;
  if (!name.empty()) {
    for (int i = 0; i < d.count; ++i)
      if (name == ibv_get_device_name(d.list[i])) chosen = i;
    if (chosen < 0)
      throw NoDeviceError("RDMA device '" + std::string(name) + "' not found; devices present: " + joined_names(d) +
                          "; " + kHowToChoose);
    if (index >= 0 && index != chosen)
      throw NoDeviceError("--device " + std::string(name) + " is device index " + std::to_string(chosen) +
                          ", not --device-index " + std::to_string(index) + "; give one of the two");
  } else if (index >= 0) {
    if (index >= d.count)
      throw NoDeviceError("RDMA device index " + std::to_string(index) + " out of range; devices present: " +
                          joined_names(d) + "; " + kHowToChoose);
    chosen = index;
  } else {
    chosen = 0;
  }
  ibv_device* dev = d.list[chosen];
  const std::string dev_name = ibv_get_device_name(dev);
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr)
    throw std::runtime_error("cannot open RDMA device " + dev_name + ": " + std::strerror(errno));
  std::unique_ptr<ibv_context, int (*)(ibv_context*)> guard(ctx, ibv_close_device);

  ibv_device_attr dattr{};
  if (ibv_query_device(ctx, &dattr) != 0)
    throw std::runtime_error("ibv_query_device(" + dev_name + "): " + std::strerror(errno));
  if (port == 0 || port > dattr.phys_port_cnt)
    throw std::runtime_error("RDMA device " + dev_name + " has " + std::to_string(dattr.phys_port_cnt) +
                             " port(s); --port " + std::to_string(port) + " does not exist");
  ibv_port_attr pattr{};
  if (ibv_query_port(ctx, port, &pattr) != 0)
    throw std::runtime_error("ibv_query_port(" + dev_name + ", " + std::to_string(port) + "): " + std::strerror(errno));
  if (pattr.state != IBV_PORT_ACTIVE)
    throw std::runtime_error("port " + std::to_string(port) + " of RDMA device " + dev_name + " is not active (" +
                             ibv_port_state_str(pattr.state) + ")");

  PortInfo info;
  info.lid = pattr.lid;
  info.link_layer = pattr.link_layer;
  info.active_mtu = static_cast<uint8_t>(pattr.active_mtu);
  info.max_qp_rd_atom = static_cast<uint32_t>(dattr.max_qp_rd_atom);
  const bool roce = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (roce && gid_index < 0) {
    // Prefer a RoCE v2 GID, else the first valid one.
    for (int i = 0; i < pattr.gid_tbl_len && gid_index < 0; ++i) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2)
        gid_index = i;
    }
    for (int i = 0; i < pattr.gid_tbl_len && gid_index < 0; ++i) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &e, 0) == 0) gid_index = i;
    }
    if (gid_index < 0) throw std::runtime_error("RoCE port " + std::to_string(port) + " of " + dev_name + " has no valid GID");
  }
  if (gid_index >= 0) {
    if (gid_index >= pattr.gid_tbl_len || gid_index > 255)
      throw std::runtime_error("GID index " + std::to_string(gid_index) + " out of range (table of " +
                               std::to_string(pattr.gid_tbl_len) + " on " + dev_name + ")");
    ibv_gid gid{};
    if (ibv_query_gid(ctx, port, gid_index, &gid) != 0)
      throw std::runtime_error("ibv_query_gid(" + dev_name + ", index " + std::to_string(gid_index) +
                               "): " + std::strerror(errno));
    std::memcpy(info.gid, gid.raw, sizeof info.gid);
    info.gid_index = static_cast<uint8_t>(gid_index);
    info.use_gid = true;
  } else if (info.lid == 0) {
    throw std::runtime_error("InfiniBand port " + std::to_string(port) + " of " + dev_name +
                             " has no LID (is a subnet manager running?)");
  }
  const bool mlx5 = mlx5dv_is_supported(dev);
  guard.release();
  return Device(ctx, dev_name, port, info, mlx5);
}

}  // namespace bkv::mlx5
