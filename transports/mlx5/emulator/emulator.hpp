// Software NIC emulator for the direct mlx5 data path (tests and benchmarks only; the
// transport itself never uses it).
//
// A Fabric holds emulated NICs (Nodes). A Node is a DirectProvider, the emulated
// counterpart of HwProvider (hw_provider.hpp: the same six control-path calls, and the
// knobs both have under the same names in NodeOptions and HwOptions): it hands out plain
// memory for send queues, doorbell records, BlueFlame registers, CQs and an SRQ, and
// registers memory regions. On the NIC side it does what an mlx5 device does with that
// memory, decoding everything with the rdma-core structure definitions
// (<infiniband/mlx5dv.h>) and never with the transport's encoder:
//
//  - process_doorbells(): reads each BlueFlame register's halves (a write names its QP;
//    NodeOptions::bf_registers lets QPs share registers) and each send doorbell record;
//    an 8-byte doorbell must equal the first 8 bytes of the last new WQE, a BlueFlame
//    copy must hold the one new WQE byte for byte as in the send queue (one WQE per
//    BlueFlame write); consecutive writes to one register alternate halves, whichever
//    QP makes them; the reserved bits of the doorbell records (send and SRQ counters:
//    31:16, CQ consumer counter: 31:24) must be 0; the doorbell
//    record must never announce more blocks than the ring holds beyond the last WQE a
//    CQE has freed (send-queue overflow). New WQEs are decoded (ctrl, raddr, inline and
//    data segments, NOP) and queued per QP;
//  - Fabric::deliver(): executes queued work requests in RC order per QP: lkey and
//    rkey lookups with bounds and permission checks, WRITE / WRITE_IMM / READ into
//    registered memory, one SRQ receive per WRITE_IMM (walking next_wqe_index; a
//    request waits, receiver-not-ready, while the SRQ is empty), then CQEs with the
//    right owner bit on every pass, wqe_counter, immediate, byte count and QP number;
//  - compressed CQEs: consecutive compressible completions of one QP (and, on the
//    receive side, one immediate) become a title + mini-CQE arrays session (prm.hpp
//    layout) of up to max_session entries;
//  - scatter-to-CQE: small signalled READ responses are placed in the CQE;
//  - errors: a bad rkey gives a REQ_ERR CQE (remote access error) and puts the
//    responder's QP in the error state too, a bad lkey a local protection error; a
//    request to a QP in the error state, or to one not connected to the requester, is
//    discarded there (nothing placed, no receive taken) and completes with a
//    transport-retry-exceeded error (syndrome 0x15) at once, since no time passes here;
//    a QP in error flushes every later WQE with WR_FLUSH_ERR CQEs.
//
// Protocol violations by the software under test (bad WQE, missing or misplaced
// doorbell, CQ overflow, ...) throw emu::Violation with a message naming the rule.
// The emulator is single-threaded: the test steps it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "transports/mlx5/descriptors.hpp"

namespace bkv::mlx5::emu {

struct Violation : std::logic_error {
  using std::logic_error::logic_error;
};

struct NodeOptions {
  uint32_t cqe_size = 64;        // 64 or 128
  uint32_t bf_size = 256;        // bytes per BlueFlame half; 0 = no BlueFlame
  // 0: every QP has a BlueFlame register of its own. N > 0: the node has N registers and
  // its i-th QP gets register i mod N, so QPs share registers as libmlx5's QPs beyond
  // the dedicated ones do; a write then names its QP by the QP number in its first 8
  // bytes, and the halves must alternate per register, whichever QP writes.
  uint32_t bf_registers = 0;
  bool compress_send = false;    // compress requester CQEs
  bool compress_recv = false;    // compress responder CQEs
  uint32_t max_session = 64;     // completions per compressed session (>= 2)
  bool scatter_to_cqe = false;   // small signalled READ responses go into the CQE
};

struct Stats {
  uint64_t doorbells = 0;
  uint64_t bf_copies = 0;       // BlueFlame writes carrying whole WQEs
  uint64_t bf_copy_wqes = 0;    // WQEs taken from BlueFlame copies
  uint64_t doorbells8 = 0;      // 8-byte doorbells
  uint64_t wqes = 0;            // WQEs decoded (NOPs included)
  uint64_t nops = 0;
  uint64_t wrapped_wqes = 0;    // WQEs crossing the send-queue end (legal, never built by the transport)
  uint64_t inline_bytes = 0;
  uint64_t gather_bytes = 0;
  uint64_t cqes = 0;            // CQ entries written (sessions count their entries)
  uint64_t sessions = 0;        // compressed sessions written
  uint64_t mini_cqes = 0;
  uint64_t scattered = 0;       // CQEs carrying READ data
  uint64_t rnr_waits = 0;
  uint64_t error_cqes = 0;
  uint64_t cq_passes = 0;       // CQ ring wraps (owner-bit flips)
};

class Fabric;

class Node {
 public:
  Node(Fabric& fabric, uint32_t id, const NodeOptions& opts);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // --- DirectProvider (control path) ---
  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access);
  CqDescriptor create_cq(uint32_t min_entries, CqRole role);
  SrqDescriptor create_srq(uint32_t min_wr);
  SqDescriptor create_qp(const QpCaps& caps, const CqDescriptor& send_cq, const CqDescriptor& recv_cq,
                         const SrqDescriptor& srq);
  ConnectInfo local_info(uint32_t qpn) const;
  void connect(uint32_t qpn, const ConnectInfo& remote);

  // --- NIC side ---
  // Reads BlueFlame registers and doorbell records of every QP; fetches new WQEs.
  void process_doorbells();
  // Writes an error CQE directly (tests of error decoding): opcode MLX5_CQE_REQ_ERR or
  // MLX5_CQE_RESP_ERR on the send or receive CQ.
  void inject_error_cqe(CqRole cq, uint8_t opcode, uint8_t syndrome, uint32_t qpn, uint16_t wqe_counter);

  uint32_t id() const noexcept { return id_; }
  NodeOptions& options() noexcept { return opts_; }
  const NodeOptions& options() const noexcept { return opts_; }
  bool qp_in_error(uint32_t qpn) const;
  // Free receives in the SRQ as the NIC sees them.
  uint32_t srq_available() const;

 private:
  friend class Fabric;
  struct Impl;
  Fabric& fabric_;
  uint32_t id_;
  NodeOptions opts_;
  std::unique_ptr<Impl> impl_;
};

class Fabric {
 public:
  Fabric();
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  Node& add_node(const NodeOptions& opts = {});
  // Executes fetched work requests until none can progress, then writes out pending
  // compressed sessions. Returns the number of work requests executed.
  uint64_t deliver();
  // Work requests fetched and not yet executed (receiver-not-ready ones included).
  uint64_t pending() const;
  Stats& stats() noexcept { return stats_; }

 private:
  friend class Node;
  struct Region {
    std::byte* base;
    uint64_t length;
    uint32_t access;
    uint32_t node;
  };
  // nullptr unless [addr, addr+len) lies in the key's region, owned by `node`, with `access`.
  std::byte* check(uint32_t key, uint64_t addr, uint64_t len, uint32_t access, uint32_t node) const noexcept;

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Region> regions_;
  std::map<uint32_t, std::pair<Node*, uint32_t>> qps_;  // qpn -> (node, index in node)
  uint32_t next_qpn_;
  uint32_t next_cqn_ = 0x40;
  uint32_t next_srqn_ = 0x80;
  Stats stats_;
};

}  // namespace bkv::mlx5::emu
