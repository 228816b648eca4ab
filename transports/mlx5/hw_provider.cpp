// Hardware control path of the direct mlx5 data path (see hw_provider.hpp).
#include "transports/mlx5/hw_provider.hpp"

#include <cstring>
#include <map>
#include <vector>

#include "transports/mlx5/verbs_common.hpp"

namespace bkv::mlx5 {

struct ContextCloser {
  void operator()(ibv_context* c) const noexcept { ibv_close_device(c); }
};

struct HwProvider::Impl {
  Device& dev;
  HwOptions opts;
  // This provider's own device context (hw_provider.hpp): declared first, so it is
  // closed after everything created on it.
  std::unique_ptr<ibv_context, ContextCloser> ctx;
  verbs::Pd pd;
  std::vector<verbs::Mr> mrs;
  std::vector<verbs::Cq> cqs;
  std::map<uint32_t, ibv_cq*> cq_by_cqn;
  verbs::Srq srq;
  uint32_t srqn = 0;
  std::map<uint32_t, verbs::Qp> qps;  // by QP number

  ibv_cq* cq(const CqDescriptor& d) const {
    const auto it = cq_by_cqn.find(d.cqn);
    if (it == cq_by_cqn.end())
      throw std::invalid_argument("mlx5: CQ descriptor " + std::to_string(d.cqn) + " was not created by this provider");
    return it->second;
  }
  ibv_qp* qp(uint32_t qpn) const {
    const auto it = qps.find(qpn);
    if (it == qps.end()) throw std::invalid_argument("mlx5: unknown QP number " + std::to_string(qpn));
    return it->second.get();
  }
};

HwProvider::HwProvider(Device& dev, const HwOptions& opts)
    : impl_(new Impl{dev, opts, nullptr, nullptr, {}, {}, {}, nullptr, 0, {}}) {
  if (!dev.is_mlx5())
    throw std::runtime_error("RDMA device " + dev.name() +
                             " is not driven by the mlx5 provider; use --transport verbs for it");
  if (opts.cqe_size != 64 && opts.cqe_size != 128)
    throw std::invalid_argument("mlx5: cqe_size must be 64 or 128, not " + std::to_string(opts.cqe_size));
  // The Device's context stays open (it holds the device and its port checks); this
  // provider's objects live on a context of its own.
  errno = 0;
  impl_->ctx.reset(ibv_open_device(dev.context()->device));
  if (!impl_->ctx)
    throw std::runtime_error("cannot open a device context on RDMA device " + dev.name() + ": " + std::strerror(errno));
  impl_->pd = verbs::alloc_pd(impl_->ctx.get());
}

// Impl's members go in reverse order of declaration: QPs, SRQ, CQs, MRs, the PD, then
// the context.
HwProvider::~HwProvider() = default;

MemoryRegion HwProvider::register_memory(void* ptr, size_t len, uint32_t access) {
  return verbs::register_memory(impl_->pd.get(), impl_->mrs, ptr, len, access);
}

CqDescriptor HwProvider::create_cq(uint32_t min_entries, CqRole role) {
  const bool compressed = role == CqRole::kSend ? impl_->opts.compress_send : impl_->opts.compress_recv;
  verbs::Cq cq = verbs::create_cq(impl_->dev, impl_->ctx.get(), min_entries, compressed, impl_->opts.cqe_size);
  mlx5dv_cq out{};
  mlx5dv_obj obj{};
  obj.cq.in = cq.get();
  obj.cq.out = &out;
  if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) != 0) verbs::fail("mlx5dv_init_obj(CQ)");
  const CqDescriptor d{static_cast<std::byte*>(out.buf), out.cqe_cnt, out.cqe_size, reinterpret_cast<uint32_t*>(out.dbrec),
                       out.cqn};
  impl_->cq_by_cqn[out.cqn] = cq.get();
  impl_->cqs.push_back(std::move(cq));
  return d;
}

SrqDescriptor HwProvider::create_srq(uint32_t min_wr) {
  if (impl_->srq) throw std::logic_error("mlx5: one SRQ per provider");
  impl_->srq = verbs::create_srq(impl_->pd.get(), min_wr);
  mlx5dv_srq out{};
  out.comp_mask = MLX5DV_SRQ_MASK_SRQN;
  mlx5dv_obj obj{};
  obj.srq.in = impl_->srq.get();
  obj.srq.out = &out;
  if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ) != 0) verbs::fail("mlx5dv_init_obj(SRQ)");
  ibv_srq_attr attr{};
  if (ibv_query_srq(impl_->srq.get(), &attr) != 0) verbs::fail("ibv_query_srq");
  // Right after creation libmlx5 has head = 0 and tail = wqe_cnt - 1 (its free list).
  const uint32_t wqe_cnt = out.tail + 1;
  impl_->srqn = out.srqn;
  return SrqDescriptor{static_cast<std::byte*>(out.buf), wqe_cnt, out.stride, reinterpret_cast<uint32_t*>(out.dbrec),
                       out.srqn, std::min<uint32_t>(attr.max_wr, wqe_cnt)};
}

SqDescriptor HwProvider::create_qp(const QpCaps& caps, const CqDescriptor& send_cq, const CqDescriptor& recv_cq,
                                   const SrqDescriptor& srq) {
  if (!impl_->srq || srq.srqn != impl_->srqn) throw std::invalid_argument("mlx5: SRQ descriptor not from this provider");
  verbs::QpOptions o;
  o.max_send_wr = caps.max_send_wr;
  o.max_inline = caps.max_inline;
  o.scatter_to_cqe = impl_->opts.scatter_to_cqe;
  verbs::Qp qp = verbs::create_rc_qp(impl_->dev, impl_->ctx.get(), impl_->pd.get(), impl_->cq(send_cq),
                                     impl_->cq(recv_cq), impl_->srq.get(), o);
  mlx5dv_qp out{};
  mlx5dv_obj obj{};
  obj.qp.in = qp.get();
  obj.qp.out = &out;
  if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP) != 0) verbs::fail("mlx5dv_init_obj(QP)");
  const uint32_t qpn = qp->qp_num;
  const SqDescriptor d{static_cast<std::byte*>(out.sq.buf), out.sq.wqe_cnt, out.sq.stride,
                       reinterpret_cast<uint32_t*>(out.dbrec), static_cast<std::byte*>(out.bf.reg), out.bf.size, qpn};
  impl_->qps.emplace(qpn, std::move(qp));
  return d;
}

ConnectInfo HwProvider::local_info(uint32_t qpn) const {
  impl_->qp(qpn);
  return verbs::local_info(impl_->dev, qpn);
}

void HwProvider::connect(uint32_t qpn, const ConnectInfo& remote) {
  verbs::ConnectOptions o;
  o.max_rd_atomic = impl_->opts.max_rd_atomic;
  o.timeout = impl_->opts.timeout;
  o.retry_cnt = impl_->opts.retry_cnt;
  o.rnr_retry = impl_->opts.rnr_retry;
  verbs::connect_rc(impl_->dev, impl_->qp(qpn), remote, o);
}

}  // namespace bkv::mlx5
