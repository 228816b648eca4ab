// The direct mlx5 transport over one emulated NIC, packaged as a bkv::Transport that
// steps the emulator the way a NIC runs beside the CPU. For tests and benchmarks: the
// copyrpc end-to-end tests run the real data path (DirectTransport<emu::Node>) through
// this wrapper, unchanged.
//
// Every doorbell is read by the NIC at once (its BlueFlame write must be seen before
// the next one lands in the same half). When work requests execute depends on the mode:
//  - kEager: at every doorbell and every receive post (like the instant loopback);
//  - kLazy: only when a poll finds its CQ empty, so completions pile up across many
//    doorbells and queue pairs (big CQE batches, compressed sessions, CQ wraps);
//  - kManual: only when the test calls fabric().deliver().
#pragma once

#include <deque>

#include "core/transport.hpp"
#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/emulator/emulator.hpp"

namespace bkv::mlx5::emu {

enum class DeliveryMode : uint8_t { kEager = 0, kLazy, kManual };

class EmulatedTransport {
 public:
  using Meter = NullMeter;
  using ConnectInfo = mlx5::ConnectInfo;
  using Inner = DirectTransport<Node>;

  class QueuePair {
   public:
    QueuePair(EmulatedTransport& owner, Inner::QueuePair& inner) : owner_(&owner), inner_(&inner) {}
    uint32_t qp_num() const noexcept { return inner_->qp_num(); }
    ConnectInfo local_info() const { return inner_->local_info(); }
    void connect(const ConnectInfo& remote) { inner_->connect(remote); }
    PostResult post_write_imm(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint32_t imm,
                              uint64_t wr_id, bool signaled) {
      return inner_->post_write_imm(src, len, lkey, dst, imm, wr_id, signaled);
    }
    PostResult post_write(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst, uint64_t wr_id,
                          bool signaled) {
      return inner_->post_write(src, len, lkey, dst, wr_id, signaled);
    }
    PostResult post_read(void* dst, uint32_t len, uint32_t lkey, RemoteBuffer src, uint64_t wr_id, bool signaled) {
      return inner_->post_read(dst, len, lkey, src, wr_id, signaled);
    }
    void ring_doorbell() {
      inner_->ring_doorbell();
      owner_->node_.process_doorbells();
      if (owner_->mode_ == DeliveryMode::kEager) owner_->fabric_.deliver();
    }
    uint32_t send_queue_free() const noexcept { return inner_->send_queue_free(); }
    bool in_error() const noexcept { return inner_->in_error(); }
    Inner::QueuePair& inner() noexcept { return *inner_; }

   private:
    EmulatedTransport* owner_;
    Inner::QueuePair* inner_;
  };

  EmulatedTransport(Fabric& fabric, const NodeOptions& node_opts = {}, const DirectOptions& opts = {},
                    DeliveryMode mode = DeliveryMode::kEager)
      : fabric_(fabric), node_(fabric.add_node(node_opts)), inner_(node_, opts), mode_(mode) {}
  EmulatedTransport(const EmulatedTransport&) = delete;
  EmulatedTransport& operator=(const EmulatedTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    return inner_.register_memory(ptr, len, access);
  }
  QueuePair& create_queue_pair() { return qps_.emplace_back(*this, inner_.create_queue_pair()); }

  template <class F>
  uint32_t poll_recv(F&& cb, uint32_t max) {
    uint32_t n = inner_.poll_recv(cb, max);
    if (n == 0 && mode_ == DeliveryMode::kLazy && fabric_.deliver() > 0) n = inner_.poll_recv(cb, max);
    return n;
  }
  template <class F>
  uint32_t poll_send(F&& cb, uint32_t max) {
    uint32_t n = inner_.poll_send(cb, max);
    if (n == 0 && mode_ == DeliveryMode::kLazy && fabric_.deliver() > 0) n = inner_.poll_send(cb, max);
    return n;
  }
  void post_receives(uint32_t n) {
    inner_.post_receives(n);
    if (mode_ == DeliveryMode::kEager) fabric_.deliver();
  }
  uint32_t srq_capacity() const noexcept { return inner_.srq_capacity(); }
  uint32_t srq_posted() const noexcept { return inner_.srq_posted(); }
  uint32_t send_queue_depth() const noexcept { return inner_.send_queue_depth(); }
  Meter& meter() noexcept { return inner_.meter(); }

  Inner& inner() noexcept { return inner_; }
  Node& node() noexcept { return node_; }
  Fabric& fabric() noexcept { return fabric_; }
  DeliveryMode mode() const noexcept { return mode_; }
  void set_mode(DeliveryMode m) noexcept { mode_ = m; }

 private:
  Fabric& fabric_;
  Node& node_;
  Inner inner_;
  DeliveryMode mode_;
  std::deque<QueuePair> qps_;
};

static_assert(DirectProvider<Node>);
static_assert(Transport<DirectTransport<Node>>);
static_assert(Transport<EmulatedTransport>);

}  // namespace bkv::mlx5::emu
