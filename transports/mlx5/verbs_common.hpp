// ibverbs control-path pieces shared by the direct mlx5 provider and the portable verbs
// transport. Internal: included by .cpp files only (it pulls in <infiniband/verbs.h>).
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "transports/mlx5/descriptors.hpp"
#include "transports/mlx5/device.hpp"

namespace bkv::mlx5::verbs {

[[noreturn]] inline void fail(const std::string& what) {
  throw std::runtime_error("ibverbs: " + what + ": " + std::strerror(errno));
}

struct PdDeleter {
  void operator()(ibv_pd* p) const noexcept { ibv_dealloc_pd(p); }
};
struct MrDeleter {
  void operator()(ibv_mr* p) const noexcept { ibv_dereg_mr(p); }
};
struct CqDeleter {
  void operator()(ibv_cq* p) const noexcept { ibv_destroy_cq(p); }
};
struct SrqDeleter {
  void operator()(ibv_srq* p) const noexcept { ibv_destroy_srq(p); }
};
struct QpDeleter {
  void operator()(ibv_qp* p) const noexcept { ibv_destroy_qp(p); }
};
using Pd = std::unique_ptr<ibv_pd, PdDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Srq = std::unique_ptr<ibv_srq, SrqDeleter>;
using Qp = std::unique_ptr<ibv_qp, QpDeleter>;

inline Pd alloc_pd(ibv_context* ctx) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) fail("ibv_alloc_pd");
  return Pd(pd);
}

inline int ibv_access_of(uint32_t access) noexcept {
  int a = 0;
  if (access & kAccessLocalWrite) a |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteWrite) a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteRead) a |= IBV_ACCESS_REMOTE_READ;
  return a;
}

inline Mr reg_mr(ibv_pd* pd, void* ptr, size_t len, uint32_t access) {
  if (ptr == nullptr || len == 0) throw std::invalid_argument("register_memory: empty region");
  ibv_mr* mr = ibv_reg_mr(pd, ptr, len, ibv_access_of(access));
  if (mr == nullptr) fail("ibv_reg_mr of " + std::to_string(len) + " bytes");
  return Mr(mr);
}

// Registers [ptr, ptr + len) with `pd` and keeps the registration in `mrs` (released
// with it): the region as the Transport API names it.
inline MemoryRegion register_memory(ibv_pd* pd, std::vector<Mr>& mrs, void* ptr, size_t len, uint32_t access) {
  Mr mr = reg_mr(pd, ptr, len, access);
  const MemoryRegion r{static_cast<std::byte*>(ptr), len, mr->lkey, mr->rkey};
  mrs.push_back(std::move(mr));
  return r;
}

// A CQ on context `ctx` (of `dev`'s device); through mlx5dv_create_cq when the device is
// mlx5 (for compressed CQEs and 128-byte CQEs), else ibv_create_cq.
inline Cq create_cq(const Device& dev, ibv_context* ctx, uint32_t entries, bool compressed, uint32_t cqe_size) {
  if (dev.is_mlx5()) {
    ibv_cq_init_attr_ex attr{};
    attr.cqe = entries;
    attr.wc_flags = IBV_WC_STANDARD_FLAGS;
    mlx5dv_cq_init_attr dv{};
    if (compressed) {
      dv.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE;
      dv.cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH;
    }
    if (cqe_size != 64) {
      dv.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
      dv.cqe_size = static_cast<uint16_t>(cqe_size);
    }
    ibv_cq_ex* cq = mlx5dv_create_cq(ctx, &attr, &dv);
    if (cq == nullptr) fail("mlx5dv_create_cq of " + std::to_string(entries) + " entries");
    return Cq(ibv_cq_ex_to_cq(cq));
  }
  ibv_cq* cq = ibv_create_cq(ctx, static_cast<int>(entries), nullptr, nullptr, 0);
  if (cq == nullptr) fail("ibv_create_cq of " + std::to_string(entries) + " entries");
  return Cq(cq);
}

inline Srq create_srq(ibv_pd* pd, uint32_t max_wr) {
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = max_wr;
  attr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &attr);
  if (srq == nullptr) fail("ibv_create_srq of " + std::to_string(max_wr) + " receives");
  return Srq(srq);
}

struct QpOptions {
  uint32_t max_send_wr = 256;
  uint32_t max_inline = 0;
  bool scatter_to_cqe = true;  // mlx5 only: allow or disable requester scatter-to-CQE
};

// An RC QP on the shared SRQ, on context `ctx` (of `dev`'s device; the PD, CQs and SRQ
// belong to it), moved to INIT.
inline Qp create_rc_qp(const Device& dev, ibv_context* ctx, ibv_pd* pd, ibv_cq* send_cq, ibv_cq* recv_cq, ibv_srq* srq,
                       const QpOptions& o) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = send_cq;
  a.recv_cq = recv_cq;
  a.srq = srq;
  a.cap.max_send_wr = o.max_send_wr;
  a.cap.max_send_sge = 1;
  a.cap.max_inline_data = o.max_inline;
  a.sq_sig_all = 0;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  ibv_qp* qp = nullptr;
  if (dev.is_mlx5()) {
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
    dv.create_flags = o.scatter_to_cqe ? MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE : MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
    qp = mlx5dv_create_qp(ctx, &a, &dv);
  } else {
    qp = ibv_create_qp_ex(ctx, &a);
  }
  if (qp == nullptr) fail("create RC QP (" + std::to_string(o.max_send_wr) + " send WRs)");
  Qp guard(qp);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = dev.port();
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    fail("QP " + std::to_string(qp->qp_num) + " RESET -> INIT");
  return guard;
}

// PSN of a QP: any 24-bit value works; derived from the QP number so runs repeat.
inline uint32_t initial_psn(uint32_t qpn) noexcept { return (qpn * 2654435761u) & 0xFFFFFF; }

inline ConnectInfo local_info(const Device& dev, uint32_t qpn) {
  const PortInfo& p = dev.port_info();
  ConnectInfo ci{};
  ci.qpn = qpn;
  ci.psn = initial_psn(qpn);
  ci.lid = p.lid;
  ci.port = dev.port();
  ci.mtu = p.active_mtu;
  ci.link_layer = p.link_layer;
  ci.gid_index = p.gid_index;
  std::memcpy(ci.gid, p.gid, sizeof ci.gid);
  return ci;
}

struct ConnectOptions {
  uint8_t max_rd_atomic = 16;  // READs in flight per QP (clamped to the device limit)
  uint8_t min_rnr_timer = 12;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = retry forever on receiver-not-ready
};

// The peer's connection blob comes from another process (over MPI): every field the
// RTR transition uses is checked against its range before it reaches the device. QP
// numbers and PSNs are 24-bit on the wire (InfiniBand BTH); ibv_modify_qp would
// otherwise truncate a larger PSN silently and the two ends would disagree on it.
inline void check_remote_info(const PortInfo& p, uint32_t local_qpn, const ConnectInfo& remote) {
  const std::string who = "QP " + std::to_string(local_qpn) + " -> remote QP " + std::to_string(remote.qpn);
  if (remote.qpn == 0 || remote.qpn > 0xFFFFFF) throw std::invalid_argument(who + ": invalid remote QP number");
  if (remote.psn > 0xFFFFFF)
    throw std::invalid_argument(who + ": remote PSN " + std::to_string(remote.psn) + " is not a 24-bit value");
  if (remote.link_layer != p.link_layer)
    throw std::invalid_argument(who + ": remote link layer " + std::to_string(remote.link_layer) +
                                " differs from the local one " + std::to_string(p.link_layer));
  if (remote.mtu < IBV_MTU_256 || remote.mtu > IBV_MTU_4096)
    throw std::invalid_argument(who + ": invalid remote MTU code " + std::to_string(remote.mtu));
  const bool roce = p.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (!roce && remote.lid == 0 && !p.use_gid) throw std::invalid_argument(who + ": remote LID is 0");
}

// INIT -> RTR -> RTS against the peer described by `remote`.
inline void connect_rc(const Device& dev, ibv_qp* qp, const ConnectInfo& remote, const ConnectOptions& o) {
  const PortInfo& p = dev.port_info();
  const std::string who = "QP " + std::to_string(qp->qp_num) + " -> remote QP " + std::to_string(remote.qpn);
  check_remote_info(p, qp->qp_num, remote);
  const bool roce = p.link_layer == IBV_LINK_LAYER_ETHERNET;
  const uint8_t rd_atomic =
      static_cast<uint8_t>(std::min<uint32_t>(o.max_rd_atomic, p.max_qp_rd_atom ? p.max_qp_rd_atom : 1));

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(p.active_mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.sl = 0;
  a.ah_attr.src_path_bits = 0;
  a.ah_attr.port_num = dev.port();
  if (roce || p.use_gid) {
    // RoCE (and InfiniBand with an explicit GID): a global route header to the peer's GID.
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
    a.ah_attr.grh.sgid_index = p.gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    fail(who + ": INIT -> RTR");

  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = o.timeout;
  s.retry_cnt = o.retry_cnt;
  s.rnr_retry = o.rnr_retry;
  s.sq_psn = initial_psn(qp->qp_num);
  s.max_rd_atomic = rd_atomic;
  if (ibv_modify_qp(qp, &s,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    fail(who + ": RTR -> RTS");
}

inline WcStatus status_of(ibv_wc_status s) noexcept {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::kLocalLengthError;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR: return WcStatus::kLocalProtectionError;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::kRemoteAccessError;
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_ABORT_ERR: return WcStatus::kRemoteOperationError;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::kWrFlushError;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::kRetryExceeded;
    default: return WcStatus::kGeneralError;
  }
}

}  // namespace bkv::mlx5::verbs
