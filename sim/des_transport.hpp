// The discrete-event transport: bkv::Transport over the simulated NICs of
// sim/nic_model.hpp.
//
// One DesTransport per simulated thread that owns an RDMA context. Its Meter is that
// thread (sim::SimThread), so copyrpc's charges advance the thread's virtual clock, and
// every data-path call is timestamped with the thread's now() (mid-step time):
//  - post_* writes a WQE into the QP's send queue at now();
//  - ring_doorbell() hands the WQEs posted since the last doorbell to the node's NIC,
//    arriving there after the NIC's doorbell latency;
//  - poll_recv()/poll_send() return the completions visible at the thread's current
//    step (completions are queued by engine events between steps; see sim_thread.hpp);
//  - a queued completion wakes the owning thread (harmless for polling threads, and how
//    event-driven threads learn of work).
// The transport charges nothing itself: callers charge Op::kCqPoll, kCqe, kFlush,
// kDoorbell ... as they do on real transports.
//
// Send-queue depth has its real meaning: an unsignaled WQE's slot is freed only when a
// later (or its own) signaled completion on that QP is polled, so a user that never
// signals fills the SQ and gets PostResult::kSendQueueFull. The poll loop and that slot
// rule are the software NIC's (transports/software_nic/completion_queue.hpp,
// send_queue.hpp), shared with the real-run software transports; the timing is
// sim/nic_model's.
//
// DesFabric creates nodes (one NIC each), transports and connections; all transports
// share one MemoryTable, whose keys the simulated NICs check, and one PagedMemory
// (transports/software_nic/paged_memory.hpp), from which copyrpc's rings come
// (PagedRingMemory in core/transport.hpp): a ring costs host memory for the pages that
// hold live bytes, not for its size.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/transport.hpp"
#include "sim/nic_model.hpp"
#include "sim/sim_thread.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/paged_memory.hpp"
#include "transports/software_nic/post_verbs.hpp"
#include "transports/software_nic/send_queue.hpp"

namespace bkv::sim {

// What a peer needs to connect: the node and the QP number there.
struct DesConnectInfo {
  uint32_t node = 0;
  uint32_t qp_num = 0;
};
static_assert(sizeof(DesConnectInfo) == 8 && std::is_trivially_copyable_v<DesConnectInfo>);

class DesTransport {
 public:
  using Meter = sim::SimThread;
  using ConnectInfo = DesConnectInfo;
  // Every simulated thread runs on the simulator's one OS thread, in event order: a
  // write is seen by the next step that reads it, with no fence (backends may rely on it,
  // e.g. the Delegation client's reply hints).
  static constexpr bool kOneOsThread = true;

  class QueuePair : public software_nic::PostVerbs<QueuePair> {
   public:
    QueuePair(sim::Network& net, sim::SimThread& thread, software_nic::PagedMemory& pages, uint32_t index) noexcept
        : net_(&net), thread_(&thread), pages_(&pages), index_(index) {}

    uint32_t qp_num() const noexcept { return net_->qp(index_).qp_num; }
    ConnectInfo local_info() const noexcept { return ConnectInfo{net_->qp(index_).node, qp_num()}; }
    void connect(const ConnectInfo& remote) { net_->connect(index_, remote.node, remote.qp_num); }

    void ring_doorbell() { net_->ring_doorbell(index_, thread_->now()); }
    uint32_t send_queue_free() const noexcept { return net_->send_queue_free(index_); }
    // The connected peer's pages inside `b` hold no live byte: they may be given back.
    // b must name paged memory the peer registered for remote writes.
    void discard_remote(RemoteBuffer b) {
      if (std::byte* host = peer_host(b, "discard_remote")) pages_->discard(host, b.length);
    }
    // Materializes the connected peer's pages inside `b` ahead of the writes that will
    // reach them (PagedMemory::prefault); no byte changes. b as for discard_remote.
    void prefault_remote(RemoteBuffer b) {
      if (std::byte* host = peer_host(b, "prefault_remote")) pages_->prefault(host, b.length);
    }

    // Simulator extras.
    uint32_t index() const noexcept { return index_; }
    bool in_error() const noexcept { return net_->qp(index_).error; }

   private:
    friend class software_nic::PostVerbs<QueuePair>;
    PostResult post(WcOpcode op, const void* local, uint32_t len, uint32_t lkey, RemoteBuffer remote, uint32_t imm,
                    uint64_t wr_id, bool signaled) noexcept {
      return net_->post(index_, software_nic::make_work_request(op, local, len, lkey, remote, imm, wr_id, signaled),
                        thread_->now());
    }
    // Where the connected peer holds `b` (memory it registered for remote writes), or
    // null when this QP is not connected or b is empty; `what` names the caller in the
    // error thrown for a range that is not the peer's.
    std::byte* peer_host(RemoteBuffer b, const char* what) const {
      const sim::QpState& q = net_->qp(index_);
      if (!q.connected() || b.length == 0) return nullptr;
      std::byte* host = net_->memory().check_remote_owned(b.addr, b.length, b.rkey, kAccessRemoteWrite,
                                                          net_->qp(q.peer).node);
      if (host == nullptr) throw std::logic_error(std::string(what) + ": the range is not the peer's registered memory");
      return host;
    }

    sim::Network* net_;
    sim::SimThread* thread_;
    software_nic::PagedMemory* pages_;
    uint32_t index_;
  };

  DesTransport(sim::Network& net, software_nic::PagedMemory& pages, uint32_t node, sim::SimThread& thread,
               const sim::DeviceContextConfig& cfg)
      : net_(net), pages_(pages), thread_(thread), node_(node), ctx_(net.create_context(node, &thread, cfg)) {}
  DesTransport(const DesTransport&) = delete;
  DesTransport& operator=(const DesTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    return net_.memory().register_memory(ptr, len, access, node_);
  }

  QueuePair& create_queue_pair() { return qps_.emplace_back(net_, thread_, pages_, net_.create_qp(ctx_)); }

  // Paged ring memory (PagedRingMemory): copyrpc's rings cost only their live pages.
  std::byte* allocate_ring(uint64_t size) { return pages_.allocate(size); }
  void free_ring(std::byte* p, uint64_t size) { pages_.free(p, size); }
  void discard(std::byte* p, uint64_t len) { pages_.discard(p, len); }
  void prefault(std::byte* p, uint64_t len) { pages_.prefault(p, len); }
  uint64_t give_back_batch() const noexcept { return pages_.give_back_pages() * pages_.page_bytes(); }

  // Drains up to `max` receive completions, oldest first.
  template <class F>
  uint32_t poll_recv(F&& on_completion, uint32_t max) {
    return software_nic::poll_recv_queue(net_.context(ctx_).recv_cq, max, on_completion);
  }

  // Drains up to `max` send completions; each frees the SQ slots up to its WQE.
  template <class F>
  uint32_t poll_send(F&& on_completion, uint32_t max) {
    return software_nic::poll_send_queue(
        net_.context(ctx_).send_cq, max,
        [this](const sim::SendCqe& e) -> software_nic::SendQueueSlots& { return net_.qp(e.qp).slots; },
        on_completion);
  }

  void post_receives(uint32_t n) { net_.post_receives(ctx_, n); }
  uint32_t srq_capacity() const noexcept { return net_.context(ctx_).srq.capacity(); }
  uint32_t send_queue_depth() const noexcept { return net_.context(ctx_).cfg.sq_depth; }
  Meter& meter() noexcept { return thread_; }

  // Simulator extras.
  uint32_t node() const noexcept { return node_; }
  uint32_t context_index() const noexcept { return ctx_; }
  uint32_t srq_posted() const noexcept { return net_.context(ctx_).srq.posted(); }
  // For tests that drive transports from outside simulated threads (as the real-run
  // transports are driven): lets simulated time pass up to the next pending instant and
  // runs every event due then. Inside a simulation, the engine's run loop does this.
  void progress() {
    sim::Engine& e = net_.engine();
    if (!e.empty()) e.run_until(e.next_time());
  }
  sim::Network& network() noexcept { return net_; }

 private:
  sim::Network& net_;
  software_nic::PagedMemory& pages_;
  sim::SimThread& thread_;
  uint32_t node_;
  uint32_t ctx_;
  std::deque<QueuePair> qps_;  // stable addresses: create_queue_pair returns references
};

static_assert(bkv::Transport<DesTransport> && bkv::PagedRingMemory<DesTransport>);

// Nodes, NICs, transports and connections of one simulated cluster.
class DesFabric {
 public:
  explicit DesFabric(sim::Engine& engine, uint64_t seed = 1) : net_(engine, seed) {}

  uint32_t add_node(const sim::NicConfig& cfg = {}) { return net_.add_node(cfg); }
  DesTransport& create_transport(uint32_t node, sim::SimThread& owner, const sim::DeviceContextConfig& cfg = {}) {
    return transports_.emplace_back(net_, pages_, node, owner, cfg);
  }
  // Connects two queue pairs to each other (both directions), as an out-of-band
  // exchange of ConnectInfo would.
  static void connect(DesTransport::QueuePair& a, DesTransport::QueuePair& b) {
    a.connect(b.local_info());
    b.connect(a.local_info());
  }

  sim::Network& network() noexcept { return net_; }
  software_nic::MemoryTable& memory() noexcept { return net_.memory(); }
  // The rings' paged memory: its discard mode trades host memory for speed and leaves
  // every byte the simulation reads unchanged.
  software_nic::PagedMemory& pages() noexcept { return pages_; }

 private:
  software_nic::PagedMemory pages_;  // outlives the transports and the rings they handed out
  sim::Network net_;
  std::deque<DesTransport> transports_;
};

}  // namespace bkv::sim
