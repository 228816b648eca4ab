// The hardware control path of the direct mlx5 data path: ibverbs objects (PD, MRs,
// CQs through mlx5dv_create_cq, SRQ, RC QPs) whose queues are handed to the data path
// as plain-memory descriptors from mlx5dv_init_obj. A DirectProvider:
//
//   bkv::mlx5::Device dev = bkv::mlx5::open_device(name, index);   // NoDeviceError -> exit 2
//   bkv::mlx5::HwProvider hw(dev);
//   bkv::mlx5::DirectTransport<bkv::mlx5::HwProvider> transport(hw);
//
// The provider must outlive the transport; the device must outlive the provider.
//
// HwProvider is one of the two DirectProviders; the other is the NIC emulator's node
// (emu::Node, emulator/emulator.hpp), over which the tests run the same DirectTransport.
// Both declare the concept's six control-path calls (the static_asserts check them):
// one makes ibverbs objects on a device, the other hands out plain memory that it then
// reads as a NIC would. The knobs both have carry the same name and meaning (cqe_size,
// compress_send / compress_recv, scatter_to_cqe); the defaults differ where noted.
//
// One provider per thread, one transport per provider. Each provider opens its own
// device context on the Device's ibv_device; its PD, CQs, SRQ, QPs and MRs belong to
// that context. The data path writes BlueFlame registers without a lock, and libmlx5
// makes QPs of one context share registers: with a context per provider, no register
// is written by two threads (QPs of one transport that share a register alternate its
// halves together, direct_transport.hpp BlueFlameReg).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/transport.hpp"
#include "transports/mlx5/descriptors.hpp"
#include "transports/mlx5/device.hpp"

namespace bkv::mlx5 {

struct HwOptions {
  uint32_t cqe_size = 64;       // 64 or 128
  bool compress_send = false;   // ask for CQE compression (mlx5dv_create_cq) on send CQs
  bool compress_recv = false;   // ... and on receive CQs
  // Allow scatter-to-CQE (small signalled READ responses in the CQE): on, as libmlx5's
  // default; the emulator's NodeOptions has it off unless a test turns it on.
  bool scatter_to_cqe = true;
  uint8_t max_rd_atomic = 16;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
};

class HwProvider {
 public:
  // Throws std::runtime_error when the device is not driven by the mlx5 provider.
  explicit HwProvider(Device& dev, const HwOptions& opts = {});
  ~HwProvider();
  HwProvider(const HwProvider&) = delete;
  HwProvider& operator=(const HwProvider&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access);
  CqDescriptor create_cq(uint32_t min_entries, CqRole role);
  SrqDescriptor create_srq(uint32_t min_wr);
  SqDescriptor create_qp(const QpCaps& caps, const CqDescriptor& send_cq, const CqDescriptor& recv_cq,
                         const SrqDescriptor& srq);
  ConnectInfo local_info(uint32_t qpn) const;
  void connect(uint32_t qpn, const ConnectInfo& remote);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

static_assert(DirectProvider<HwProvider>);

}  // namespace bkv::mlx5
