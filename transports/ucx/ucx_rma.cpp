// UCX RMA for the UCX transport: region mapping and announcements, ucp_get_nbx /
// ucp_put_nbx / ucp_ep_flush_nbx. See ucx_rma.hpp for the rules.
#include "transports/ucx/ucx_rma.hpp"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "transports/ucx/ucx_transport.hpp"

namespace bkv::ucx {

namespace {

constexpr uint64_t kMaxReportedRejections = 5;  // rejected announcements printed on stderr (all are counted)
// ucp_ep_rkey_unpack takes no length: a key from the peer is copied into a zero-filled
// buffer larger than anything the UCX 1.13 key format can describe (an md bitmap of 64
// bits, each md's key with a one-byte length, plus the memory type and system devices).
constexpr size_t kUnpackBuffer = 8 + 1 + 64 * (1 + 255) + 64 * 2 + 1024;
static_assert(kUnpackBuffer > kMaxPackedRkey);

[[noreturn]] void fail(const char* what, ucs_status_t status) {
  throw std::runtime_error(std::string("ucx transport (rma): ") + what + " failed: " + ucs_status_string(status));
}

// One remote range [addr, addr + len) inside a region [base, base + length), no overflow.
constexpr bool inside(uint64_t addr, uint64_t len, uint64_t base, uint64_t length) noexcept {
  return addr >= base && len <= length && addr - base <= length - len;
}
constexpr bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) noexcept {
  return a < b + blen && b < a + alen;
}

}  // namespace

struct RmaEngine::Impl {
  struct AnnounceCtx {  // keeps the header alive until UCX completes the send
    UcxTransport* t;
    RegionAnnouncementHeader header;
  };
  struct OpCtx {  // one ucp_get_nbx / ucp_put_nbx
    UcxTransport* t;
    QueuePair* qp;
    uint64_t seq;
    bool is_put;
  };
  struct FlushCtx {  // one ucp_ep_flush_nbx and the WRITEs it completes
    UcxTransport* t;
    QueuePair* qp;
    std::vector<uint64_t> seqs;
  };

  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param) {
    auto& e = *static_cast<RmaEngine*>(arg);
    if (e.owner_.closing_) return UCS_OK;
    e.receive(header, header_length, data, length, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
    return UCS_OK;  // the payload is copied or unpacked here: nothing is kept
  }

  static void on_announce_done(void* request, ucs_status_t, void* user_data) {
    auto* c = static_cast<AnnounceCtx*>(user_data);
    --c->t->inflight_requests_;
    ucp_request_free(request);
    delete c;
  }

  static void on_op_done(void* request, ucs_status_t status, void* user_data) {
    auto* c = static_cast<OpCtx*>(user_data);
    --c->t->inflight_requests_;
    ucp_request_free(request);
    // A WRITE completes with its flush; only its failure is reported here.
    if (!c->is_put || status != UCS_OK) c->t->rma_done(*c->qp, c->seq, status == UCS_OK);
    delete c;
  }

  static void on_flush_done(void* request, ucs_status_t status, void* user_data) {
    auto* c = static_cast<FlushCtx*>(user_data);
    --c->t->inflight_requests_;
    ucp_request_free(request);
    for (uint64_t s : c->seqs) c->t->rma_done(*c->qp, s, status == UCS_OK);
    delete c;
  }
};

RmaEngine::RmaEngine(UcxTransport& owner, ucp_context* context, ucp_worker* worker)
    : owner_(owner), context_(context), worker_(worker) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kRegionAmId;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.cb = &Impl::on_am;
  hp.arg = this;
  const ucs_status_t st = ucp_worker_set_am_recv_handler(worker_, &hp);
  if (st != UCS_OK) fail("ucp_worker_set_am_recv_handler", st);
}

RmaEngine::~RmaEngine() {
  release_remote_keys();
  for (LocalRegion& r : local_) ucp_mem_unmap(context_, r.memh);
}

void RmaEngine::release_remote_keys() {
  for (PeerState& p : peers_) {
    for (auto& [rkey, region] : p.regions) ucp_rkey_destroy(region.key);
    p.regions.clear();
  }
}

RmaEngine::PeerState& RmaEngine::peer(const QueuePair& qp) {
  const size_t idx = qp.qp_num() - kQpNumBase;
  if (peers_.size() <= idx) peers_.resize(idx + 1);
  return peers_[idx];
}

void RmaEngine::on_register(const MemoryRegion& mr, uint32_t access) {
  if ((access & kRemoteAccessBits) == 0) return;  // never a target of a peer's READ or WRITE
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_PROT;
  mp.address = mr.addr;
  mp.length = mr.length;
  mp.prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE |
            ((access & kAccessRemoteRead) != 0 ? UCP_MEM_MAP_PROT_REMOTE_READ : 0) |
            ((access & kAccessRemoteWrite) != 0 ? UCP_MEM_MAP_PROT_REMOTE_WRITE : 0);
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context_, &mp, &memh);
  if (st != UCS_OK) fail("ucp_mem_map", st);
  void* packed = nullptr;
  size_t packed_size = 0;
  st = ucp_rkey_pack(context_, memh, &packed, &packed_size);
  if (st != UCS_OK) {
    ucp_mem_unmap(context_, memh);
    fail("ucp_rkey_pack", st);
  }
  LocalRegion r;
  r.base = reinterpret_cast<uint64_t>(mr.addr);
  r.length = mr.length;
  r.rkey = mr.rkey;
  r.access = access & kRemoteAccessBits;
  r.memh = memh;
  r.packed.assign(static_cast<std::byte*>(packed), static_cast<std::byte*>(packed) + packed_size);
  ucp_rkey_buffer_release(packed);
  if (packed_size == 0 || packed_size > kMaxPackedRkey) {
    ucp_mem_unmap(context_, memh);
    throw std::length_error("ucx transport (rma): a packed remote key of " + std::to_string(packed_size) +
                            " bytes; announcements carry 1.." + std::to_string(kMaxPackedRkey));
  }
  local_.push_back(std::move(r));
  for (auto& qp : owner_.qps_)
    if (qp->connected()) announce(*qp, local_.back());
}

void RmaEngine::announce(QueuePair& qp, const LocalRegion& r) {
  auto* c = new Impl::AnnounceCtx{
      &owner_, {.magic = kRegionMagic, .dst_qp = qp.remote_qp_, .src_qp = qp.qp_num_, .dst_token = qp.remote_token_,
                .src_token = qp.token_, .base = r.base, .length = r.length, .rkey = r.rkey, .access = r.access,
                .packed_length = static_cast<uint32_t>(r.packed.size()), .reserved = 0}};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = &Impl::on_announce_done;
  p.user_data = c;
  ++counters_.announcements_sent;
  ucs_status_ptr_t s = ucp_am_send_nbx(qp.ep_, kRegionAmId, &c->header, sizeof c->header, r.packed.data(),
                                       r.packed.size(), &p);
  if (UCS_PTR_IS_PTR(s)) {
    ++owner_.inflight_requests_;
    return;
  }
  delete c;
  // A failed send leaves the region unannounced on this queue pair: its READs and WRITEs
  // take the AM path (counted as am_not_announced); the endpoint's failure, if any,
  // reaches the queue pair through its requests.
}

void RmaEngine::on_connect(QueuePair& qp) {
  for (const LocalRegion& r : local_) announce(qp, r);
  std::vector<Early> early;
  early.swap(peer(qp).early);
  for (const Early& e : early) accept(qp, e.header, e.packed.data());
}

void RmaEngine::reject(const char* what) {
  if (counters_.announcements_rejected++ < kMaxReportedRejections)
    std::fprintf(stderr, "ucx transport: rejected a region announcement: %s\n", what);
}

void RmaEngine::inject_announcement(const void* header, size_t header_length, const void* payload, size_t length) {
  receive(header, header_length, payload, length, false);
}

void RmaEngine::receive(const void* header, size_t header_length, const void* data, size_t length, bool rndv) {
  RegionAnnouncementHeader h;
  if (const char* error = announcement_header_error(header, header_length, h)) return reject(error);
  QueuePair* qp = owner_.find_queue_pair(h.dst_qp);
  if (qp == nullptr || h.dst_token != qp->token_) return reject("for an unknown queue pair");
  if (const char* error = announcement_payload_error(h, length, rndv)) return reject(error);
  if (!qp->connected()) {  // the peer connected first: checked when this side connects
    PeerState& p = peer(*qp);
    if (p.early.size() >= kMaxEarlyAnnouncements) return reject("too many announcements before connect");
    const auto* b = static_cast<const std::byte*>(data);
    p.early.push_back(Early{h, std::vector<std::byte>(b, b + length)});
    return;
  }
  accept(*qp, h, data);
}

bool RmaEngine::accept(QueuePair& qp, const RegionAnnouncementHeader& h, const void* packed) {
  if (h.src_qp != qp.remote_qp_ || h.src_token != qp.remote_token_) {
    reject("from a stranger (queue pair or token)");
    return false;
  }
  if (const char* error = announcement_region_error(h)) {
    reject(error);
    return false;
  }
  PeerState& p = peer(qp);
  if (p.regions.count(h.rkey) != 0) {
    reject("rkey announced twice on this queue pair");
    return false;
  }
  std::vector<std::byte> buffer(kUnpackBuffer, std::byte{0});
  std::memcpy(buffer.data(), packed, h.packed_length);
  ucp_rkey_h key = nullptr;
  if (ucp_ep_rkey_unpack(qp.ep_, buffer.data(), &key) != UCS_OK) {
    reject("the packed key could not be unpacked");
    return false;
  }
  p.regions.emplace(h.rkey, PeerRegion{h.base, h.length, h.access, key});
  ++counters_.announcements_accepted;
  return true;
}

RmaEngine::Route RmaEngine::route(QueuePair& qp, uint64_t seq) {
  QueuePair::Wqe& w = qp.wqe(seq);
  const bool is_read = w.opcode == WcOpcode::kRdmaRead;
  if (w.length == 0) {
    ++counters_.am_zero_length;
    return Route::kActiveMessage;
  }
  PeerState& p = peer(qp);
  const auto it = p.regions.find(w.rkey);
  if (it == p.regions.end()) {
    ++counters_.am_not_announced;
    return Route::kActiveMessage;
  }
  const PeerRegion& region = it->second;
  const uint32_t needed = is_read ? kAccessRemoteRead : kAccessRemoteWrite;
  if ((region.access & needed) == 0 || !inside(w.remote_addr, w.length, region.base, region.length)) {
    ++counters_.am_outside_region;  // the peer's responder refuses it with a NAK
    return Route::kActiveMessage;
  }
  for (uint64_t s = qp.completed_; s < seq; ++s) {
    const QueuePair::Wqe& e = qp.wqe(s);
    if (e.done || e.rkey != w.rkey) continue;
    if (!e.rma) {
      ++counters_.am_behind_am;
      return Route::kActiveMessage;
    }
    const bool e_read = e.opcode == WcOpcode::kRdmaRead;
    if (!(e_read && is_read) && overlap(e.remote_addr, e.length, w.remote_addr, w.length)) {
      ++counters_.held;  // an earlier RMA operation on the same bytes must finish first
      return Route::kHold;
    }
  }
  return Route::kRma;
}

void RmaEngine::issue(QueuePair& qp, uint64_t seq) {
  QueuePair::Wqe& w = qp.wqe(seq);
  const bool is_read = w.opcode == WcOpcode::kRdmaRead;
  PeerState& p = peer(qp);
  const PeerRegion& region = p.regions.at(w.rkey);
  w.rma = true;
  w.receiving = true;  // UCX owns the local buffer until the operation completes
  ++qp.rma_inflight_;
  auto* c = new Impl::OpCtx{&owner_, &qp, seq, !is_read};
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = &Impl::on_op_done;
  prm.user_data = c;
  ucs_status_ptr_t s;
  if (is_read) {
    ++counters_.gets;
    s = ucp_get_nbx(qp.ep_, w.local, w.length, w.remote_addr, region.key, &prm);
  } else {
    ++counters_.puts;
    s = ucp_put_nbx(qp.ep_, w.local, w.length, w.remote_addr, region.key, &prm);
  }
  if (UCS_PTR_IS_PTR(s)) {
    ++owner_.inflight_requests_;
    if (!is_read) p.unflushed.push_back(seq);
    return;
  }
  delete c;
  const bool ok = UCS_PTR_STATUS(s) == UCS_OK;
  if (is_read || !ok) {
    owner_.rma_done(qp, seq, ok);
  } else {
    p.unflushed.push_back(seq);  // locally complete; remotely complete at the flush
  }
}

void RmaEngine::flush_writes(QueuePair& qp) {
  PeerState& p = peer(qp);
  if (p.unflushed.empty()) return;
  auto* c = new Impl::FlushCtx{&owner_, &qp, {}};
  c->seqs.swap(p.unflushed);
  ++counters_.flushes;
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  prm.cb.send = &Impl::on_flush_done;
  prm.user_data = c;
  ucs_status_ptr_t s = ucp_ep_flush_nbx(qp.ep_, &prm);
  if (UCS_PTR_IS_PTR(s)) {
    ++owner_.inflight_requests_;
    return;
  }
  const bool ok = UCS_PTR_STATUS(s) == UCS_OK;
  for (uint64_t seq : c->seqs) owner_.rma_done(qp, seq, ok);
  delete c;
}

}  // namespace bkv::ucx
