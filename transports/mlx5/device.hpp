// RDMA device selection (ibverbs control path): by name (--device) or index
// (--device-index), one port, and the port facts a peer needs to connect (LID, GID,
// MTU, link layer). Light header: ibverbs types are only forward-declared.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct ibv_context;

namespace bkv::mlx5 {

// No usable RDMA device, or not the one asked for. The message says which devices exist
// (or that none does) and how to choose one; benchkv's main() exits with status 2.
struct NoDeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct PortInfo {
  uint16_t lid = 0;
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  uint8_t active_mtu = 0;  // enum ibv_mtu
  uint8_t gid_index = 0;   // GID used for RoCE (and for IB when one was asked for)
  bool use_gid = false;    // RoCE, or an explicit GID index on InfiniBand
  uint8_t gid[16] = {};
  uint32_t max_qp_rd_atom = 0;
};

class Device {
 public:
  Device(Device&& o) noexcept;
  Device& operator=(Device&& o) noexcept;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  ibv_context* context() const noexcept { return ctx_; }
  const std::string& name() const noexcept { return name_; }
  uint8_t port() const noexcept { return port_; }
  const PortInfo& port_info() const noexcept { return info_; }
  // True when the mlx5 provider drives the device (direct data path possible).
  bool is_mlx5() const noexcept { return mlx5_; }

 private:
  friend Device open_device(std::string_view, int, uint8_t, int);
  Device(ibv_context* ctx, std::string name, uint8_t port, const PortInfo& info, bool mlx5)
      : ctx_(ctx), name_(std::move(name)), port_(port), info_(info), mlx5_(mlx5) {}
  ibv_context* ctx_ = nullptr;
  std::string name_;
  uint8_t port_ = 1;
  PortInfo info_;
  bool mlx5_ = false;
};

// Names of the RDMA devices present (empty when there are none or the kernel has no
// RDMA support).
std::vector<std::string> list_devices();

// Opens a device: by `name` when non-empty, else by `index` when >= 0, else the first
// device. `gid_index` < 0 picks a RoCE v2 GID automatically on Ethernet ports and uses
// no GRH on InfiniBand. Throws NoDeviceError when no device exists or the requested one
// does not; std::runtime_error when the device or port cannot be used.
Device open_device(std::string_view name = {}, int index = -1, uint8_t port = 1, int gid_index = -1);

}  // namespace bkv::mlx5
