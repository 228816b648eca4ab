// Portable verbs transport (see verbs_transport.hpp).
#include "transports/mlx5/verbs_transport.hpp"

#include <map>

#include "transports/mlx5/verbs_common.hpp"

namespace bkv::mlx5 {

struct VerbsTransport::Impl {
  Device& dev;
  // In the order they are created: each goes before what it was created on.
  verbs::Pd pd;
  std::vector<verbs::Mr> mrs;
  verbs::Cq recv_cq;
  verbs::Cq send_cq;
  verbs::Srq srq;
  std::vector<verbs::Qp> qps;
  std::map<uint32_t, QueuePair*> by_qpn;
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  std::vector<ibv_recv_wr> rwrs;
  uint64_t sq_depth_sum = 0;
};

namespace {
// wr_id on the wire: QP index (high 32 bits) and slot (low 32 bits).
constexpr uint64_t pack_wr_id(uint32_t qp_index, uint32_t slot) noexcept { return (uint64_t{qp_index} << 32) | slot; }
}  // namespace

VerbsTransport::VerbsTransport(Device& dev, const VerbsOptions& opts)
    : impl_(new Impl{dev, nullptr, {}, nullptr, nullptr, nullptr, {}, {}, {}, {}, {}, 0}), opts_(opts) {
  if (opts_.sq_depth == 0 || opts_.srq_size == 0) throw std::invalid_argument("verbs: sq_depth and srq_size must be positive");
  impl_->pd = verbs::alloc_pd(dev.context());
  impl_->recv_cq = verbs::create_cq(dev, dev.context(), opts_.recv_cq_entries ? opts_.recv_cq_entries : opts_.srq_size, false, 64);
  impl_->send_cq = verbs::create_cq(dev, dev.context(), opts_.send_cq_entries, false, 64);
  impl_->srq = verbs::create_srq(impl_->pd.get(), opts_.srq_size);
  ibv_srq_attr attr{};
  if (ibv_query_srq(impl_->srq.get(), &attr) != 0) verbs::fail("ibv_query_srq");
  srq_capacity_ = std::min<uint32_t>(opts_.srq_size, attr.max_wr);
}

// Impl's members go in reverse order of declaration: QPs, SRQ, CQs, MRs, then the PD.
VerbsTransport::~VerbsTransport() = default;

MemoryRegion VerbsTransport::register_memory(void* ptr, size_t len, uint32_t access) {
  return verbs::register_memory(impl_->pd.get(), impl_->mrs, ptr, len, access);
}

VerbsTransport::QueuePair& VerbsTransport::create_queue_pair() {
  if (impl_->sq_depth_sum + opts_.sq_depth > opts_.send_cq_entries)
    throw std::invalid_argument("verbs: the send CQ (" + std::to_string(opts_.send_cq_entries) +
                                " entries) cannot cover another send queue; raise send_cq_entries");
  verbs::QpOptions o;
  o.max_send_wr = opts_.sq_depth;
  o.max_inline = opts_.max_inline;
  verbs::Qp qp = verbs::create_rc_qp(impl_->dev, impl_->dev.context(), impl_->pd.get(), impl_->send_cq.get(),
                                     impl_->recv_cq.get(), impl_->srq.get(), o);
  QueuePair& q = qps_.emplace_back();
  q.owner_ = this;
  q.qp_ = qp.get();
  q.qpn_ = qp->qp_num;
  q.index_ = static_cast<uint32_t>(qps_.size() - 1);
  q.slots_ = software_nic::SendQueueSlots(opts_.sq_depth);
  q.sent_.resize(opts_.sq_depth);
  q.pending_.reserve(opts_.sq_depth);
  impl_->by_qpn[q.qpn_] = &q;
  impl_->qps.push_back(std::move(qp));
  impl_->sq_depth_sum += opts_.sq_depth;
  return q;
}

ConnectInfo VerbsTransport::QueuePair::local_info() const { return verbs::local_info(owner_->impl_->dev, qpn_); }

void VerbsTransport::QueuePair::connect(const ConnectInfo& remote) {
  verbs::ConnectOptions o;
  o.max_rd_atomic = owner_->opts_.max_rd_atomic;
  verbs::connect_rc(owner_->impl_->dev, qp_, remote, o);
  connected_ = true;
}

void VerbsTransport::QueuePair::ring_doorbell() {
  if (pending_.empty()) return;
  Impl& im = *owner_->impl_;
  const size_t n = pending_.size();
  im.wrs.assign(n, ibv_send_wr{});
  im.sges.assign(n, ibv_sge{});
  for (size_t i = 0; i < n; ++i) {
    const Pending& p = pending_[i];
    const uint64_t seq = sent_seq_ + i;
    const uint32_t slot = static_cast<uint32_t>(seq % slots_.depth());
    sent_[slot] = Sent{p.wr_id, seq, p.kind};
    ibv_send_wr& wr = im.wrs[i];
    ibv_sge& sge = im.sges[i];
    sge.addr = reinterpret_cast<uint64_t>(p.local);
    sge.length = p.len;
    sge.lkey = p.lkey;
    wr.wr_id = pack_wr_id(index_, slot);
    wr.next = i + 1 < n ? &im.wrs[i + 1] : nullptr;
    wr.sg_list = p.len ? &sge : nullptr;
    wr.num_sge = p.len ? 1 : 0;
    wr.opcode = p.kind == kWriteImm ? IBV_WR_RDMA_WRITE_WITH_IMM : p.kind == kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = p.signaled ? IBV_SEND_SIGNALED : 0;
    if (p.kind != kRead && p.len <= owner_->opts_.max_inline) wr.send_flags |= IBV_SEND_INLINE;
    wr.imm_data = htobe32(p.imm);
    wr.wr.rdma.remote_addr = p.raddr;
    wr.wr.rdma.rkey = p.rkey;
  }
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(qp_, im.wrs.data(), &bad); rc != 0) {
    errno = rc;
    verbs::fail("ibv_post_send on QP " + std::to_string(qpn_) + " (" + std::to_string(n) + " requests)");
  }
  sent_seq_ += n;
  pending_.clear();
}

void VerbsTransport::post_receives(uint32_t n) {
  if (uint64_t{srq_posted_} + n > srq_capacity_)
    throw std::logic_error("verbs: posting " + std::to_string(n) + " receives to an SRQ holding " +
                           std::to_string(srq_posted_) + " of " + std::to_string(srq_capacity_));
  if (n == 0) return;
  Impl& im = *impl_;
  im.rwrs.assign(n, ibv_recv_wr{});
  for (uint32_t i = 0; i < n; ++i) {
    im.rwrs[i].wr_id = 0;
    im.rwrs[i].next = i + 1 < n ? &im.rwrs[i + 1] : nullptr;
    im.rwrs[i].sg_list = nullptr;  // zero-length receive: WRITE_IMM data lands by RDMA
    im.rwrs[i].num_sge = 0;
  }
  ibv_recv_wr* bad = nullptr;
  if (const int rc = ibv_post_srq_recv(im.srq.get(), im.rwrs.data(), &bad); rc != 0) {
    errno = rc;
    verbs::fail("ibv_post_srq_recv of " + std::to_string(n) + " receives");
  }
  srq_posted_ += n;
}

uint32_t VerbsTransport::poll_recv_batch(RecvCompletion* out, uint32_t max) {
  ibv_wc wc[kPollChunk];
  const int got = ibv_poll_cq(impl_->recv_cq.get(), static_cast<int>(std::min(max, kPollChunk)), wc);
  if (got < 0) verbs::fail("ibv_poll_cq (receive CQ)");
  for (int i = 0; i < got; ++i) {
    --srq_posted_;
    out[i] = RecvCompletion{wc[i].qp_num, be32toh(wc[i].imm_data), wc[i].byte_len, verbs::status_of(wc[i].status)};
  }
  return static_cast<uint32_t>(got);
}

uint32_t VerbsTransport::poll_send_batch(SendCompletion* out, uint32_t max) {
  ibv_wc wc[kPollChunk];
  const int got = ibv_poll_cq(impl_->send_cq.get(), static_cast<int>(std::min(max, kPollChunk)), wc);
  if (got < 0) verbs::fail("ibv_poll_cq (send CQ)");
  for (int i = 0; i < got; ++i) {
    const auto it = impl_->by_qpn.find(wc[i].qp_num);
    if (it == impl_->by_qpn.end())
      throw std::runtime_error("verbs: send completion for unknown QP " + std::to_string(wc[i].qp_num));
    QueuePair& q = *it->second;
    const uint32_t slot = static_cast<uint32_t>(wc[i].wr_id & 0xFFFFFFFFu);
    if ((wc[i].wr_id >> 32) != q.index_ || slot >= q.slots_.depth())
      throw std::runtime_error("verbs: send completion with foreign wr_id on QP " + std::to_string(q.qpn_));
    const QueuePair::Sent& s = q.sent_[slot];
    q.slots_.free_through(s.seq);  // polling a completion frees this slot and all before it
    const WcStatus st = verbs::status_of(wc[i].status);
    if (st != WcStatus::kSuccess) q.error_ = true;
    const WcOpcode op = s.kind == QueuePair::kWriteImm ? WcOpcode::kRdmaWriteImm
                        : s.kind == QueuePair::kRead   ? WcOpcode::kRdmaRead
                                                       : WcOpcode::kRdmaWrite;
    out[i] = SendCompletion{q.qpn_, s.wr_id, op, st};
  }
  return static_cast<uint32_t>(got);
}

}  // namespace bkv::mlx5
