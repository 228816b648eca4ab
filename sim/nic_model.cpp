#include "sim/nic_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cache_hint.hpp"
#include "sim/sim_thread.hpp"
#include "transports/software_nic/responder.hpp"

namespace bkv::sim {

namespace {

uint64_t to_ps(double ns) { return static_cast<uint64_t>(std::llround(ns * 1000.0)); }
uint64_t to_ns(double ns) { return static_cast<uint64_t>(std::llround(ns)); }

bool is_write(WcOpcode op) noexcept { return op != WcOpcode::kRdmaRead; }

// Cache prefetch hints (core/cache_hint.hpp) for the first kPrefetchMaxBytes of
// [p, p + len): the payload a WRITE copies when it lands, requested when its Rx stage
// runs (the landing event comes a PCIe write latency later, dozens of events on). Hints
// change nothing the model reads.
constexpr uint32_t kCacheLineBytes = 64;
constexpr uint32_t kPrefetchMaxBytes = 2048;
void prefetch_payload(const void* p, uint32_t len) noexcept {
  const auto* b = static_cast<const char*>(p);
  const uint32_t n = std::min(len, kPrefetchMaxBytes);
  for (uint32_t off = 0; off < n; off += kCacheLineBytes) prefetch_line(b + off);
  if (n > 0) prefetch_line(b + n - 1);  // the last line when p is not line-aligned
}

}  // namespace

Network::Network(Engine& engine, uint64_t seed) : engine_(engine), seed_(seed) {
  target_ = engine_.add_target(&Network::on_event, this, &Network::prefetch_event);
}

uint32_t Network::add_node(const NicConfig& cfg) {
  const uint32_t node = static_cast<uint32_t>(nics_.size());
  Nic& n = nics_.emplace_back();
  n.node = node;
  n.cfg = cfg;
  n.doorbell_ns = to_ns(cfg.doorbell_ns);
  n.send_wqe_ps = to_ps(cfg.send.per_wqe_ns);
  n.send_byte_ps = cfg.send.per_byte_ns * 1000.0;
  n.recv_pkt_ps = to_ps(cfg.recv.per_packet_ns);
  n.recv_byte_ps = cfg.recv.per_byte_ns * 1000.0;
  n.ack_ps = to_ps(cfg.recv.ack_ns);
  n.ack_turnaround_ns = to_ns(cfg.ack_turnaround_ns);
  n.base_latency_ns = to_ns(cfg.latency.base_ns);
  n.loopback_latency_ns = to_ns(cfg.latency.loopback_ns);
  n.rnr_delay_ns = std::max<uint64_t>(1, to_ns(cfg.rnr.delay_ns));
  n.qp_miss_ps = to_ps(cfg.qp_cache.miss_ns);
  n.mtt_miss_ps = to_ps(cfg.mtt_cache.miss_ns);
  n.pcie_down = Channel(cfg.pcie.bandwidth_gbps, to_ps(cfg.pcie.read_latency_ns), cfg.pcie.max_payload_bytes,
                        cfg.pcie.tlp_overhead_bytes);
  n.pcie_up = Channel(cfg.pcie.bandwidth_gbps, to_ps(cfg.pcie.write_latency_ns), cfg.pcie.max_payload_bytes,
                      cfg.pcie.tlp_overhead_bytes);
  n.read_tags = TokenPool(cfg.pcie.read_tags);
  n.send_engines = ServerPool(cfg.send.engines);
  n.recv_engines = ServerPool(cfg.recv.engines);
  n.tx_port = Channel(cfg.link.bandwidth_gbps, 0, cfg.link.mtu_bytes, cfg.link.packet_overhead_bytes);
  n.rx_port = Channel(cfg.link.bandwidth_gbps, 0, cfg.link.mtu_bytes, cfg.link.packet_overhead_bytes);
  n.qp_cache = SetAssocCache(cfg.qp_cache.entries, cfg.qp_cache.ways);
  n.mtt_cache = SetAssocCache(cfg.mtt_cache.entries, cfg.mtt_cache.ways);
  n.rng = Rng(derive_seed(seed_, {node, 0x4E4943 /* "NIC" */}));
  if (cfg.fetch_max_wqes == 0 || cfg.fetch_max_wqes > 64)
    throw std::invalid_argument("nic.fetch_max_wqes must be in [1, 64]");
  if (cfg.send.qp_window == 0) throw std::invalid_argument("nic.send.qp_window must be >= 1");
  if (cfg.latency.jitter.lower_bound() < 0.0)
    throw std::invalid_argument("nic.latency.jitter must not produce negative delays");
  if (cfg.send.max_outstanding_reads == 0) throw std::invalid_argument("nic.send.max_outstanding_reads must be >= 1");
  return node;
}

uint32_t Network::create_context(uint32_t node, SimThread* thread, const DeviceContextConfig& cfg) {
  if (node >= nics_.size()) throw std::invalid_argument("create_context: no node " + std::to_string(node));
  if (cfg.sq_depth == 0) throw std::invalid_argument("create_context: sq_depth must be >= 1");
  if (cfg.srq_capacity == 0) throw std::invalid_argument("create_context: srq_capacity must be >= 1");
  DeviceContext& c = ctxs_.emplace_back();
  c.index = static_cast<uint32_t>(ctxs_.size() - 1);
  c.node = node;
  c.thread = thread;
  c.cfg = cfg;
  c.srq = software_nic::SharedReceiveQueue(cfg.srq_capacity);
  c.recv_cq.bound_at_least(cfg.recv_cq_depth != 0 ? cfg.recv_cq_depth : 2ull * cfg.srq_capacity);
  c.send_cq.bound_at_least(cfg.sq_depth);
  return c.index;
}

uint32_t Network::create_qp(uint32_t ctx) {
  if (ctx >= ctxs_.size()) throw std::invalid_argument("create_qp: no context " + std::to_string(ctx));
  const uint32_t index = static_cast<uint32_t>(qps_.size());
  if (index >= kMaxQps || index + kQpnBase > kMaxQpn) throw std::length_error("create_qp: too many queue pairs");
  DeviceContext& c = ctxs_[ctx];
  QpState& q = qps_.emplace_back();
  inline_.emplace_back();
  q.index = index;
  q.node = c.node;
  q.ctx = ctx;
  q.qp_num = index + kQpnBase;
  q.slots = software_nic::SendQueueSlots(c.cfg.sq_depth);
  q.ring.resize(std::min<uint64_t>(kInitialWqeSlots, std::bit_ceil(q.slots.depth())));
  q.mask = q.ring.size() - 1;
  c.qps.push_back(index);
  // Every SQ slot can hold one unpolled completion: the send CQ never overruns.
  c.send_cq.bound_at_least(uint64_t{c.cfg.sq_depth} * c.qps.size());
  return index;
}

void Network::connect(uint32_t qp, uint32_t remote_node, uint32_t remote_qp_num) {
  if (qp >= qps_.size()) throw std::invalid_argument("connect: no local QP " + std::to_string(qp));
  if (remote_qp_num < kQpnBase || remote_qp_num - kQpnBase >= qps_.size())
    throw std::invalid_argument("connect: no QP number " + std::to_string(remote_qp_num));
  const uint32_t r = remote_qp_num - kQpnBase;
  if (qps_[r].node != remote_node)
    throw std::invalid_argument("connect: QP number " + std::to_string(remote_qp_num) + " is on node " +
                                std::to_string(qps_[r].node) + ", not node " + std::to_string(remote_node));
  if (qps_[qp].connected()) throw std::logic_error("connect: QP " + std::to_string(qps_[qp].qp_num) + " is already connected");
  qps_[qp].peer = r;
}

void Network::post_receives(uint32_t ctx, uint32_t n) {
  ctxs_[ctx].srq.post(n, "post_receives");
}

PostResult Network::post(uint32_t qpi, const software_nic::WorkRequest& wr, Time now) {
  QpState& q = qps_[qpi];
  if (q.slots.full()) return PostResult::kSendQueueFull;
  // WQEs before the completion cursor are done: the live ones fit in a ring twice as
  // large as the span [cursor, posted], and never need more than the send-queue depth.
  if (q.slots.posted() - q.cursor[kStComplete] >= q.ring.size()) grow_wqe_ring(q);
  const uint64_t seq = q.slots.take();
  Wqe& w = q.ring[seq & q.mask];
  static_cast<software_nic::WorkRequest&>(w) = wr;
  const uint32_t len = wr.length;
  w.remote_host = nullptr;
  w.posted_at = now;
  w.due = now;
  w.flags = static_cast<uint8_t>(is_write(wr.opcode) && len <= nic_of(q).cfg.inline_max_bytes ? kWqeInline : 0);
  w.status = WcStatus::kSuccess;
  w.rnr_tries = 0;
  w.transport_retries = 0;
  w.resend = kResendNone;
  // An inline payload is part of the WQE: taken now. A gathered one is read by DMA after
  // the doorbell; changing it before the completion is a race with that read on
  // hardware, and the model reads it when the WRITE lands.
  if ((w.flags & kWqeInline) && len > 0) {
    InlineStore& st = inline_[qpi];
    // WQEs before the completion cursor are done: the live ones, this one included, need
    // distinct slots. (An empty store has stride 0 < len.)
    if (len > st.stride || seq - q.cursor[kStComplete] > st.mask) [[unlikely]] grow_inline_store(q, seq, len);
    std::memcpy(st.data.data() + (seq & st.mask) * st.stride, wr.local, len);
  }
  ++nic_of(q).n.wqes_posted;
  if (q.error || !q.connected()) {
    // Posting to a QP in the error state (or one never connected, still in RESET/INIT):
    // the WQE is flushed with an error completion.
    w.status = WcStatus::kWrFlushError;
    w.stage = kStComplete;
    ++nic_of(q).n.flushed;
    q.rung = q.slots.posted();
    if (q.cursor[kStComplete] == seq) {
      // Nothing ahead of it: the flush completion is visible at once.
      process(q, seq, w, kStComplete, now);
      ++q.cursor[kStComplete];
    } else {
      schedule_stage(q, kStComplete, now);
    }
  } else {
    w.stage = kStPosted;
  }
  return PostResult::kOk;
}

void Network::grow_wqe_ring(QpState& q) {
  const uint64_t cap = q.ring.size() * 2;
  std::vector<Wqe> nb(cap);
  for (uint64_t s = q.cursor[kStComplete]; s < q.slots.posted(); ++s) nb[s & (cap - 1)] = q.ring[s & q.mask];
  q.ring = std::move(nb);
  q.mask = cap - 1;
}

void Network::grow_inline_store(QpState& q, uint64_t seq, uint32_t len) {
  const InlineStore& st = inline_[q.index];
  const uint64_t span = seq - q.cursor[kStComplete] + 1;
  const uint64_t slots = st.stride == 0 ? 0 : st.mask + 1;
  constexpr uint64_t kLine = 64;
  auto round_up = [](uint64_t n) { return (n + kLine - 1) / kLine * kLine; };
  const uint64_t max_stride = round_up(nic_of(q).cfg.inline_max_bytes);
  const uint64_t stride = len > st.stride ? std::min(std::max(round_up(len), 2 * st.stride), max_stride) : st.stride;
  relayout_inline(q, seq, std::max(slots, std::bit_ceil(span)), stride);
}

void Network::relayout_inline(QpState& q, uint64_t end, uint64_t slots, uint64_t stride) {
  InlineStore& st = inline_[q.index];
  std::vector<std::byte> nb(slots * stride);
  for (uint64_t s = q.cursor[kStComplete]; s < end && st.stride != 0; ++s) {
    const Wqe& w = q.ring[s & q.mask];
    if ((w.flags & kWqeInline) && w.length > 0)
      std::memcpy(nb.data() + (s & (slots - 1)) * stride, inline_payload(q, s), w.length);
  }
  st.data = std::move(nb);
  st.stride = stride;
  st.mask = slots - 1;
}

void Network::ring_doorbell(uint32_t qpi, Time now) {
  QpState& q = qps_[qpi];
  if (q.rung == q.slots.posted()) return;
  Nic& nic = nic_of(q);
  const Time due = now + nic.doorbell_ns;
  const uint64_t count = q.slots.posted() - q.rung;
  const bool bf = count <= nic.cfg.blueflame_max_wqes;
  bool any = false;
  for (uint64_t s = q.rung; s < q.slots.posted(); ++s) {
    Wqe& w = q.ring[s & q.mask];
    if (w.stage != kStPosted) continue;  // flushed already
    w.stage = kStDoorbell;
    w.due = due;
    if (bf) w.flags |= kWqeBlueFlame;
    any = true;
  }
  q.rung = q.slots.posted();
  ++nic.n.doorbells;
  if (any) schedule_stage(q, kStDoorbell, due);
}

void Network::schedule_stage(QpState& q, uint8_t stage, Time due) {
  // One event per (QP, stage, time) is enough: it drains every WQE due by then. The
  // shortcut is only taken for future times (an event at `now` may have run already).
  if (due > engine_.now() && q.last_sched[stage] == due) return;
  q.last_sched[stage] = due;
  engine_.schedule(due, target_, (q.index << kStageBits) | stage);
}

void Network::on_event(void* ctx, uint32_t arg) {
  auto* self = static_cast<Network*>(ctx);
  self->drain(arg >> kStageBits, static_cast<uint8_t>(arg & ((1u << kStageBits) - 1)));
}

void Network::prefetch_event(void* ctx, uint32_t arg) {
  auto* self = static_cast<Network*>(ctx);
  const QpState& q = self->qps_[arg >> kStageBits];
  const uint8_t stage = static_cast<uint8_t>(arg & ((1u << kStageBits) - 1));
  __builtin_prefetch(&q.ring);
  __builtin_prefetch(&q.cursor[stage]);
  __builtin_prefetch(&q.cursor[kStComplete]);
  __builtin_prefetch(&q.rung);
}

void Network::drain(uint32_t qpi, uint8_t stage) {
  QpState& q = qps_[qpi];
  const Time now = engine_.now();
  uint64_t& cur = q.cursor[stage];
  // WQEs before the completion cursor are all done (their slots may be reused).
  if (stage != kStComplete && cur < q.cursor[kStComplete]) cur = q.cursor[kStComplete];
  need_complete_drain_ = false;
  bool admit = stage == kStDoorbell || stage == kStTx;
  bool processed = false;
  while (cur < q.rung) {
    Wqe& w = q.ring[cur & q.mask];
    if (w.stage < stage) break;
    if (w.stage > stage) {
      ++cur;
      continue;
    }
    if (w.due > now) break;
    if (stage == kStComplete && w.opcode == WcOpcode::kRdmaRead) admit = true;
    if (!process(q, cur, w, stage, now)) break;
    processed = true;
    ++cur;
  }
  const bool complete_now = need_complete_drain_;
  need_complete_drain_ = false;
  if (admit && !q.error) try_admit(q, now);
  if (complete_now && stage != kStComplete) drain(qpi, kStComplete);
  if (processed) {
    // Stages after a branch of the pipeline can be blocked by an earlier WQE on the
    // other branch (a READ at ReadTx waits for an earlier WRITE to land; an ACK waits
    // for an earlier READ's response). Their events may have fired while blocked, so
    // once the blocker moved on, drain them again.
    if (stage == kStLand) {
      drain(qpi, kStReadTx);
      drain(qpi, kStAck);
    } else if (stage == kStReadTx || stage == kStReadRx) {
      drain(qpi, kStAck);
    }
  }
}

void Network::try_admit(QpState& q, Time now) {
  Nic& nic = nic_of(q);
  uint64_t& cur = q.cursor[kStAdmit];
  if (cur < q.cursor[kStComplete]) cur = q.cursor[kStComplete];
  std::array<uint64_t, 64> fetch;  // WQEs sharing the current fetch DMA read (filled before read)
  uint32_t nfetch = 0;
  auto issue_fetch = [&]() {
    if (nfetch == 0) return;
    const uint64_t done_ps = dma_read(nic, ns_to_ps(now), uint64_t{nfetch} * nic.cfg.wqe_bytes);
    const Time due = ps_to_ns_ceil(done_ps);
    for (uint32_t i = 0; i < nfetch; ++i) q.ring[fetch[i] & q.mask].due = due;
    ++nic.n.fetches;
    schedule_stage(q, kStEngine, due);
    nfetch = 0;
  };
  while (cur < q.rung && q.in_window < nic.cfg.send.qp_window) {
    Wqe& w = q.ring[cur & q.mask];
    if (w.stage < kStAdmit) break;
    if (w.stage > kStAdmit) {
      ++cur;
      continue;
    }
    if (w.opcode == WcOpcode::kRdmaRead) {
      if (q.reads_out >= nic.cfg.send.max_outstanding_reads) break;
      ++q.reads_out;
    }
    ++q.in_window;
    ++nic.n.admitted;
    nic.n.admit_wait_ps += ns_to_ps(now - w.due);
    --nic.n.admit_depth;
    w.stage = kStEngine;
    if (w.flags & kWqeBlueFlame) {
      w.due = now;
      schedule_stage(q, kStEngine, now);
    } else {
      fetch[nfetch++] = cur;
      if (nfetch == nic.cfg.fetch_max_wqes) issue_fetch();
    }
    ++cur;
  }
  issue_fetch();
}

uint64_t Network::dma_read(Nic& nic, uint64_t arrive_ps, uint64_t bytes) {
  const uint64_t tag_start = nic.read_tags.start_time(arrive_ps);
  const uint64_t done = nic.pcie_down.send(tag_start, bytes);
  nic.read_tags.hold(arrive_ps, tag_start, done);
  return done;
}

uint64_t Network::mtt_misses(Nic& nic, uint32_t key, uint64_t addr, uint32_t len) {
  if (!nic.mtt_cache.enabled() || len == 0) return 0;
  // Pages are counted from the region's start, not from address 0: host addresses follow
  // the allocator and ASLR, region offsets follow the program (nic_model.hpp, "On-NIC caches").
  // A key this node does not own, or a range outside its region, translates nothing: the
  // access check refuses it.
  const software_nic::MemoryTable::Region* r = memory_.lookup(key);
  if (r == nullptr || r->owner != nic.node) return 0;
  const uint64_t base = reinterpret_cast<uint64_t>(r->base);
  if (addr < base || addr - base > r->length || len > r->length - (addr - base)) return 0;
  const uint64_t page = nic.cfg.mtt_cache.page_bytes;
  const uint64_t first = (addr - base) / page, last = (addr - base + len - 1) / page;
  if (key >= kMttKeyLimit || last >= kMttPageLimit) [[unlikely]] mtt_tag_out_of_range(key, last);
  uint64_t misses = 0;
  for (uint64_t p = first; p <= last; ++p)
    if (!nic.mtt_cache.access(uint64_t{key} << kMttPageBits | p)) ++misses;
  return misses;
}

void Network::mtt_tag_out_of_range(uint32_t key, uint64_t page) {
  throw std::runtime_error("nic.mtt_cache: key " + std::to_string(key) + ", page " + std::to_string(page) +
                           " of its region: a translation tag holds a key below 2^" +
                           std::to_string(63 - kMttPageBits) + " and a page index below 2^" +
                           std::to_string(kMttPageBits) + " (raise nic.mtt_cache.page_bytes)");
}

Time Network::wire_latency(Nic& from, uint32_t to_node, Time at) {
  uint64_t base = from.node == to_node ? from.loopback_latency_ns : from.base_latency_ns;
  if (link_delay_ != nullptr) [[unlikely]] base += link_delay_(link_delay_ctx_, from.node, to_node, at);
  if (from.cfg.latency.jitter.is_zero()) return base;
  const double j = from.cfg.latency.jitter.sample(from.rng);
  if (!(j <= kMaxModelNs)) [[unlikely]] jitter_out_of_range(from.node, j);
  return base + static_cast<uint64_t>(std::llround(j));
}

void Network::jitter_out_of_range(uint32_t node, double sample) {
  const std::string drawn = std::isfinite(sample) ? nlohmann::json(sample).dump() + " ns" : "a non-finite delay";
  throw std::runtime_error("nic.latency.jitter: node " + std::to_string(node) + " drew " + drawn +
                           " (more than an hour of virtual time, kMaxModelNs): the distribution's tail is too "
                           "heavy for a wire latency");
}

void Network::enable_connection_faults(PacketLoss fn, void* ctx) {
  if (!connection_faults_) failure_target_ = engine_.add_target(&Network::on_connection_failure, this);
  connection_faults_ = true;
  packet_loss_ = fn;
  packet_loss_ctx_ = ctx;
}

void Network::set_rnr_storm(RnrStorm fn, void* ctx) {
  if (!connection_faults_) throw std::logic_error("set_rnr_storm: connection faults are not enabled");
  rnr_storm_ = fn;
  rnr_storm_ctx_ = ctx;
}

void Network::fail_connection(uint32_t qpi) {
  if (!connection_faults_) throw std::logic_error("fail_connection: connection faults are not enabled");
  fail_qp(qps_.at(qpi), engine_.now());
}

void Network::on_connection_failure(void* ctx, uint32_t qpi) {
  auto* self = static_cast<Network*>(ctx);
  self->fail_qp(self->qps_[qpi], self->engine_.now());
}

void Network::fail_qp(QpState& q, Time now) {
  if (q.failed) return;
  q.failed = true;
  Nic& nic = nic_of(q);
  ++nic.n.connection_failures;
  if (connection_failed_ != nullptr) connection_failed_(connection_failed_ctx_, q.node, q.connected() ? qps_[q.peer].node : q.node);
  if (!q.error)
    enter_error(q, q.cursor[kStComplete], now);
  else
    schedule_stage(q, kStComplete, now);  // WQEs dropped at a failed responder complete now
  // The owner learns it from an error completion on its receive CQ (see "Faults").
  DeviceContext& c = ctxs_[q.ctx];
  if (c.recv_cq.full()) [[unlikely]]
    throw std::runtime_error("receive CQ overrun on node " + std::to_string(c.node) + " (depth " +
                             std::to_string(c.recv_cq.bound()) + "): completions are not polled");
  if (!c.srq.empty()) c.srq.consume();
  c.recv_cq.push(RecvCompletion{q.qp_num, 0, 0, WcStatus::kWrFlushError});
  ++c.recv_cqes;
  ++nic.n.recv_cqes;
  if (c.thread != nullptr) c.thread->wake(now);
  if (q.connected() && !qps_[q.peer].failed) {
    const QpState& b = qps_[q.peer];
    engine_.schedule(now + wire_latency(nic, b.node, now), failure_target_, b.index);
  }
}

bool Network::lose(QpState& q, uint64_t seq, Wqe& w, Time out, const Retransmission& rt) {
  Nic& nic = nic_of(q);
  ++nic.n.packets_lost;
  notify(WqeEvent::kLost, q, seq, w, out);
  const Time timer = out + rt.timeout_ns;  // the local ACK timer expires
  if (w.transport_retries >= rt.retry_cnt) {
    // Retries exhausted: when the timer expires the connection fails (the QP goes to
    // error) and the WQE completes with RETRY_EXC_ERR. Until then it holds the QP's later
    // WQEs at Tx, never due again.
    ++nic.n.retry_exceeded;
    w.flags |= kWqeRetriesExhausted;
    w.due = kTimeNever;
    engine_.schedule(timer, failure_target_, q.index);
    return false;
  }
  ++w.transport_retries;
  ++nic.n.retransmissions;
  w.due = timer;
  schedule_stage(q, kStTx, timer);
  return false;  // stays at Tx: the QP's later WQEs wait behind it
}

void Network::ack_lost(QpState& q, uint64_t seq, Wqe& w, Time at, const Retransmission& rt, Nic& responder) {
  ++responder.n.acks_lost;
  notify(WqeEvent::kAckLost, q, seq, w, at);
  // The requester's timer started at the request's last transmission; a timer shorter
  // than the round trip is taken to expire when the lost packet leaves.
  await_ack_timer(q, w, std::max<Time>(w.sent_at + rt.timeout_ns, at), rt.retry_cnt);
}

void Network::await_ack_timer(QpState& q, Wqe& w, Time timer, uint32_t retry_cnt) {
  Nic& nic = nic_of(q);
  w.stage = kStAck;
  w.resend = kResendTimer;
  if (w.transport_retries >= retry_cnt) {
    // Retries exhausted: the connection fails when the timer expires (as in lose()).
    ++nic.n.retry_exceeded;
    w.flags |= kWqeRetriesExhausted;
    w.due = kTimeNever;
    engine_.schedule(timer, failure_target_, q.index);
    return;
  }
  ++w.transport_retries;
  ++nic.n.retransmissions;
  w.due = timer;
  schedule_stage(q, kStAck, timer);
}

Time Network::read_response_in(QpState& q, Wqe& w, Time now) {
  Nic& nic = nic_of(q);
  const uint64_t in_ps = nic.rx_port.send(ns_to_ps(now), w.length);
  const uint64_t packets = std::max<uint64_t>(1, (w.length + nic.cfg.link.mtu_bytes - 1) / nic.cfg.link.mtu_bytes);
  const uint64_t service = nic.recv_pkt_ps * packets + static_cast<uint64_t>(w.length * nic.recv_byte_ps + 0.5);
  const ServerPool::Slot slot = nic.recv_engines.reserve(in_ps, 0, service);
  w.stage = kStComplete;
  w.due = ps_to_ns_ceil(nic.pcie_up.send(slot.finish_ps, uint64_t{w.length} + nic.cfg.cqe_bytes));
  schedule_stage(q, kStComplete, w.due);
  return w.due;
}

[[gnu::always_inline]] inline void Network::take_receive(DeviceContext& rc) {
  if (rc.recv_cq.full()) [[unlikely]]
    throw std::runtime_error("receive CQ overrun on node " + std::to_string(rc.node) + " (depth " +
                             std::to_string(rc.recv_cq.bound()) + "): completions are not polled");
  rc.srq.consume();
}

[[gnu::always_inline]] inline void Network::land_payload(const QpState& q, uint64_t seq, const Wqe& w, Nic& responder) {
  if (w.length > 0) std::memcpy(w.remote_host, write_source(q, seq, w), w.length);
  ++responder.n.writes_landed;
}

[[gnu::always_inline]] inline void Network::complete_receive(DeviceContext& rc, Nic& responder, const QpState& b,
                                                             const Wqe& w, Time now) {
  rc.recv_cq.push(RecvCompletion{b.qp_num, w.imm, w.length, WcStatus::kSuccess});
  ++rc.recv_cqes;
  ++responder.n.recv_cqes;
  if (rc.thread != nullptr) rc.thread->wake(now);
}

bool Network::resend_step(QpState& q, uint64_t seq, Wqe& w, Time now) {
  Nic& nic = nic_of(q);
  QpState& b = qps_[q.peer];
  Nic& rn = nic_of(b);
  // Stays at the Ack stage, due again at `due` (false: the QP's later ACKs wait behind it).
  auto next = [&](uint8_t phase, Time due) {
    w.resend = phase;
    w.due = due;
    schedule_stage(q, kStAck, due);
    return false;
  };
  // The responder's ACK (WRITE) leaving at `at`: lost, or on its way to the Ack stage.
  auto ack_at = [&](Time at) {
    Retransmission rt;
    if (response_lost(q, rn, at, rt)) {
      ack_lost(q, seq, w, at, rt, rn);
      return false;
    }
    return next(kResendNone, at + wire_latency(rn, q.node, at));
  };
  // A packet reaching a responder whose connection failed (or that NAKed an earlier WQE)
  // is dropped; the WQE flushes with the QP (as at Rx).
  const bool flushed =
      (w.resend == kResendFlight || w.resend == kResendLand || w.resend == kResendReadTx) && (b.failed || discarded(b, seq));
  if (flushed) {
    w.resend = kResendNone;
    w.status = WcStatus::kWrFlushError;
    w.stage = kStComplete;
    ++nic.n.flushed;
    return true;
  }
  switch (w.resend) {
    case kResendTimer: {
      // The timer expired: the request goes out again (it may be lost again).
      const uint64_t payload = is_write(w.opcode) ? w.length : 0;
      w.sent_at = ps_to_ns_ceil(nic.tx_port.send(ns_to_ps(now), payload));
      Retransmission rt;
      if (packet_loss_ != nullptr && packet_loss_(packet_loss_ctx_, nic.node, rn.node, w.sent_at, rt)) {
        ++nic.n.packets_lost;
        notify(WqeEvent::kLost, q, seq, w, w.sent_at);
        await_ack_timer(q, w, w.sent_at + rt.timeout_ns, rt.retry_cnt);
        return false;
      }
      return next(kResendFlight, w.sent_at + wire_latency(nic, rn.node, w.sent_at));
    }
    case kResendFlight: {
      // The resent request reaches the responder, which executed it already: a duplicate.
      ++rn.n.packets_in;
      ++rn.n.duplicates;
      notify(WqeEvent::kDuplicate, q, seq, w, now);
      const uint64_t payload = is_write(w.opcode) ? w.length : 0;
      const uint64_t in_ps = rn.rx_port.send(ns_to_ps(now), payload);
      const uint64_t packets = std::max<uint64_t>(1, (payload + rn.cfg.link.mtu_bytes - 1) / rn.cfg.link.mtu_bytes);
      const uint64_t service = rn.recv_pkt_ps * packets + static_cast<uint64_t>(payload * rn.recv_byte_ps + 0.5);
      const ServerPool::Slot slot = rn.recv_engines.reserve(in_ps, rn.cfg.recv.qp_serial ? b.rx_free_ps : 0, service);
      b.rx_free_ps = slot.finish_ps;
      if (w.opcode == WcOpcode::kRdmaRead)  // a duplicate READ is read again (IB), the data as of then
        return next(kResendReadTx, ps_to_ns_ceil(w.length > 0 ? dma_read(rn, slot.finish_ps, w.length) : slot.finish_ps));
      if (!duplicate_detection_) {  // executed again (the planted bug): lands once more
        const uint64_t bytes = w.length + (w.opcode == WcOpcode::kRdmaWriteImm ? rn.cfg.cqe_bytes : 0);
        return next(kResendLand, ps_to_ns_ceil(rn.pcie_up.send(slot.finish_ps, bytes)));
      }
      // Detected by its PSN: not executed, only ACKed.
      return ack_at(ps_to_ns_ceil(slot.finish_ps) + rn.ack_turnaround_ns);
    }
    case kResendLand: {
      // Duplicate detection off: the WRITE lands again, a WRITE+IMM completes again.
      DeviceContext& rc = ctxs_[b.ctx];
      if (w.opcode == WcOpcode::kRdmaWriteImm) {
        if (rc.srq.empty()) {  // RNR NAK: resent after the RNR timer (no transport retry counted)
          ++rn.n.rnr_naks;
          notify(WqeEvent::kRnrNak, q, seq, w, now);
          const Time nak_back = now + rn.ack_turnaround_ns;  // the timer starts at the requester
          return next(kResendTimer, nak_back + wire_latency(rn, q.node, nak_back) + rn.rnr_delay_ns);
        }
        take_receive(rc);
      }
      land_payload(q, seq, w, rn);
      ++rn.n.duplicates_executed;
      notify(WqeEvent::kLanded, q, seq, w, now);
      if (w.opcode == WcOpcode::kRdmaWriteImm) complete_receive(rc, rn, b, w, now);
      return ack_at(now + rn.ack_turnaround_ns);
    }
    case kResendReadTx: {
      if (w.length > 0) std::memcpy(w.local, w.remote_host, w.length);
      ++rn.n.reads_served;
      const Time out = ps_to_ns_ceil(rn.tx_port.send(ns_to_ps(now), w.length));
      Retransmission rt;
      if (response_lost(q, rn, out, rt)) {
        ack_lost(q, seq, w, out, rt, rn);
        return false;
      }
      return next(kResendReadRx, out + wire_latency(rn, q.node, out));
    }
    case kResendReadRx:
      w.resend = kResendNone;
      read_response_in(q, w, now);
      return true;
    default: break;
  }
  throw std::logic_error("Network: a resend in an unknown phase (" + std::to_string(w.resend) + ")");
}

Time Network::rnr_resend_lands(QpState& q, Nic& responder, Time nak_at) {
  const Time nak_back = nak_at + responder.ack_turnaround_ns;
  const Time resend = nak_back + wire_latency(responder, q.node, nak_back) + responder.rnr_delay_ns;
  return resend + wire_latency(nic_of(q), responder.node, resend);
}

void Network::nak(QpState& q, Wqe& w, uint64_t at_ps, Nic& responder) {
  w.stage = kStAck;
  w.due = ps_to_ns_ceil(at_ps) + responder.ack_turnaround_ns +
          wire_latency(responder, q.node, ps_to_ns_ceil(at_ps) + responder.ack_turnaround_ns);
  schedule_stage(q, kStAck, w.due);
}

void Network::responder_error(QpState& b, uint64_t seq, Time now) {
  // The responder NAKs with a remote access error and its QP moves to the error state
  // too (IB: an invalid R_Key or range is a responder-class error for RC); what it had
  // posted itself is flushed.
  if (!b.resp_error) b.resp_error_seq = seq;
  b.resp_error = true;
  if (!b.error) enter_error(b, b.cursor[kStComplete], now);
}

void Network::enter_error(QpState& q, uint64_t first, Time complete_due) {
  q.error = true;
  Nic& nic = nic_of(q);
  for (uint64_t s = first; s < q.slots.posted(); ++s) {
    Wqe& x = q.ring[s & q.mask];
    if (x.stage >= kStComplete) continue;
    if (x.stage == kStAdmit) --nic.n.admit_depth;
    if (x.flags & kWqeRetriesExhausted) {
      x.status = WcStatus::kRetryExceeded;
    } else {
      x.status = WcStatus::kWrFlushError;
      ++nic.n.flushed;
    }
    x.stage = kStComplete;
    x.due = complete_due;
  }
  q.rung = q.slots.posted();
  schedule_stage(q, kStComplete, complete_due);
}

[[gnu::always_inline]] inline bool Network::target_discards(QpState& q, Wqe& w, Time now, Nic& responder) {
  w.status = WcStatus::kRetryExceeded;
  ++responder.n.remote_errors;
  nak(q, w, ns_to_ps(now), responder);
  return true;
}

// The stage functions (nic_model.hpp: process). Inlined into process, so that the split
// costs no call per WQE and stage.
[[gnu::always_inline]] inline bool Network::flush_at_responder(QpState& q, Wqe& w) {
  w.status = WcStatus::kWrFlushError;
  w.stage = kStComplete;
  ++nic_of(q).n.flushed;
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_doorbell(QpState& q, Wqe& w) {
  Nic& nic = nic_of(q);
  w.stage = kStAdmit;
  nic.n.admit_max_depth = std::max(nic.n.admit_max_depth, ++nic.n.admit_depth);
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_engine(QpState& q, uint64_t seq, Wqe& w, Time now) {
  Nic& nic = nic_of(q);
  uint64_t service = nic.send_wqe_ps;
  if (is_write(w.opcode)) service += static_cast<uint64_t>(w.length * nic.send_byte_ps + 0.5);
  if (!nic.qp_cache.access(q.index)) service += nic.qp_miss_ps;
  // An inline payload travels in the WQE: the NIC translates no source address for
  // it. (The lkey is still checked below: every transport reports a bad lkey as a
  // local protection error, inline or not, tests/transport/conformance.hpp.)
  const bool inline_payload = (w.flags & kWqeInline) != 0;
  if (!inline_payload)
    service += mtt_misses(nic, w.lkey, reinterpret_cast<uint64_t>(w.local), w.length) * nic.mtt_miss_ps;
  const ServerPool::Slot slot =
      nic.send_engines.reserve(ns_to_ps(now), nic.cfg.send.qp_serial ? q.eng_free_ps : 0, service);
  q.eng_free_ps = slot.finish_ps;
  if (!software_nic::check_local_access(memory_, q.node, w.opcode, w.local, w.length, w.lkey).ok) {
    // Local protection error: the WQE completes in error, the QP goes to error.
    w.status = WcStatus::kLocalProtectionError;
    ++nic.n.local_errors;
    notify(WqeEvent::kLocalError, q, seq, w, now);
    const Time due = ps_to_ns_ceil(nic.pcie_up.send(slot.finish_ps, nic.cfg.cqe_bytes));
    w.stage = kStComplete;
    w.due = due;
    enter_error(q, seq + 1, due);
    return true;
  }
  uint64_t done = slot.finish_ps;
  if (is_write(w.opcode) && !inline_payload && w.length > 0) done = dma_read(nic, done, w.length);
  w.stage = kStTx;
  w.due = ps_to_ns_ceil(done);
  schedule_stage(q, kStTx, w.due);
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_tx(QpState& q, uint64_t seq, Wqe& w, Time now) {
  Nic& nic = nic_of(q);
  const uint64_t payload = is_write(w.opcode) ? w.length : 0;
  const uint64_t out_ps = nic.tx_port.send(ns_to_ps(now), payload);
  ++nic.n.wqes_sent;
  const uint32_t to_node = qps_[q.peer].node;
  if (packet_loss_ != nullptr) [[unlikely]] {
    Retransmission rt;
    w.sent_at = ps_to_ns_ceil(out_ps);  // the ACK timer starts here
    if (packet_loss_(packet_loss_ctx_, nic.node, to_node, w.sent_at, rt)) return lose(q, seq, w, w.sent_at, rt);
  }
  --q.in_window;
  w.stage = kStRx;
  w.due = ps_to_ns_ceil(out_ps) + wire_latency(nic, to_node, ps_to_ns_ceil(out_ps));
  schedule_stage(q, kStRx, w.due);
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_rx(QpState& q, uint64_t seq, Wqe& w, Time now) {
  QpState& b = qps_[q.peer];
  Nic& rn = nic_of(b);
  ++rn.n.packets_in;
  // Its connection failed: the packet is dropped; the requester fails too (told one
  // wire latency after b) and flushes the WQE.
  if (b.failed) [[unlikely]] return flush_at_responder(q, w);
  // The responder NAKed an earlier WQE of this QP and discards what follows; the
  // requester flushes it when the NAK arrives.
  if (discarded(b, seq)) return flush_at_responder(q, w);
  const uint64_t payload = is_write(w.opcode) ? w.length : 0;
  const uint64_t in_ps = rn.rx_port.send(ns_to_ps(now), payload);
  const uint64_t packets = std::max<uint64_t>(1, (payload + rn.cfg.link.mtu_bytes - 1) / rn.cfg.link.mtu_bytes);
  uint64_t service = rn.recv_pkt_ps * packets + static_cast<uint64_t>(payload * rn.recv_byte_ps + 0.5);
  if (!rn.qp_cache.access(b.index)) service += rn.qp_miss_ps;
  service += mtt_misses(rn, w.rkey, w.remote_addr, w.length) * rn.mtt_miss_ps;
  const ServerPool::Slot slot =
      rn.recv_engines.reserve(in_ps, rn.cfg.recv.qp_serial ? b.rx_free_ps : 0, service);
  b.rx_free_ps = slot.finish_ps;
  if (b.peer != q.index || b.error) {
    // The target QP is not connected back to us, or is in the error state: it discards
    // the packet and a real requester retransmits until its retry counter is exhausted
    // (as target_discards, with the receive engine's time spent).
    w.status = WcStatus::kRetryExceeded;
    ++rn.n.remote_errors;
    nak(q, w, slot.finish_ps, rn);
    return true;
  }
  const software_nic::Access target =
      software_nic::check_remote_access(memory_, b.node, w.opcode, w.remote_addr, w.length, w.rkey);
  if (!target.ok) {
    w.status = WcStatus::kRemoteAccessError;
    responder_error(b, seq, now);
    ++rn.n.remote_errors;
    notify(WqeEvent::kRemoteError, q, seq, w, now);
    nak(q, w, slot.finish_ps, rn);
    return true;
  }
  w.remote_host = target.host;
  if (is_write(w.opcode)) {
    prefetch_payload(write_source(q, seq, w), w.length);
    prefetch_payload(target.host, w.length);
    const uint64_t bytes = w.length + (w.opcode == WcOpcode::kRdmaWriteImm ? rn.cfg.cqe_bytes : 0);
    w.stage = kStLand;
    w.due = ps_to_ns_ceil(rn.pcie_up.send(slot.finish_ps, bytes));
    schedule_stage(q, kStLand, w.due);
  } else {
    w.stage = kStReadTx;
    w.due = ps_to_ns_ceil(w.length > 0 ? dma_read(rn, slot.finish_ps, w.length) : slot.finish_ps);
    schedule_stage(q, kStReadTx, w.due);
  }
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_land(QpState& q, uint64_t seq, Wqe& w, Time now) {
  QpState& b = qps_[q.peer];
  Nic& rn = nic_of(b);
  DeviceContext& rc = ctxs_[b.ctx];
  if (b.failed || discarded(b, seq)) return flush_at_responder(q, w);
  if (b.error && w.rnr_tries > 0) [[unlikely]] return target_discards(q, w, now, rn);
  if (w.opcode == WcOpcode::kRdmaWriteImm) {
    uint32_t storm_retry = 0;
    const bool storm = rnr_storm_ != nullptr && rnr_storm_(rnr_storm_ctx_, rn.node, now, storm_retry);
    if (storm || rc.srq.empty()) {
      ++w.rnr_tries;
      ++rn.n.rnr_naks;
      notify(WqeEvent::kRnrNak, q, seq, w, now);
      if (storm) [[unlikely]] {
        if (storm_retry != 7 && w.rnr_tries > storm_retry) {
          // RNR retries exhausted in a storm: when the NAK is back at the requester its
          // connection fails (the WQE completes with a retry-exceeded error). Until
          // then it holds the QP's later WQEs here, never due again.
          ++nic_of(q).n.retry_exceeded;
          w.flags |= kWqeRetriesExhausted;
          w.due = kTimeNever;
          engine_.schedule(now + wire_latency(rn, q.node, now), failure_target_, q.index);
          return false;
        }
      } else if (const uint32_t limit = nic_of(q).cfg.rnr.retry_limit;  // rnr_retry: the requester's
                 limit != 7 && w.rnr_tries > limit) {
        w.status = WcStatus::kRetryExceeded;
        if (!b.resp_error) b.resp_error_seq = seq;
        b.resp_error = true;
        nak(q, w, ns_to_ps(now), rn);
        return true;
      }
      // RNR NAK: it travels back to the requester, which waits out the RNR timer and
      // resends; the resend lands here again. Later WQEs of the QP wait behind this one.
      w.due = rnr_resend_lands(q, rn, now);
      schedule_stage(q, kStLand, w.due);
      return false;
    }
    take_receive(rc);
  }
  land_payload(q, seq, w, rn);
  Nic& nic = nic_of(q);
  const Time lat = now - w.posted_at;
  ++nic.n.land_count;
  nic.n.land_latency_ns += lat;
  nic.n.land_latency_max_ns = std::max(nic.n.land_latency_max_ns, lat);
  notify(WqeEvent::kLanded, q, seq, w, now);
  if (w.opcode == WcOpcode::kRdmaWriteImm) complete_receive(rc, rn, b, w, now);
  if (packet_loss_ != nullptr) [[unlikely]] {
    // The ACK covering this WRITE (signaled or not: "Faults" in the header) may be lost.
    Retransmission rt;
    const Time at = now + rn.ack_turnaround_ns;
    if (response_lost(q, rn, at, rt)) {
      ack_lost(q, seq, w, at, rt, rn);
      return true;
    }
  }
  if (w.signaled) {
    w.stage = kStAck;
    w.due = now + rn.ack_turnaround_ns + wire_latency(rn, q.node, now + rn.ack_turnaround_ns);
    schedule_stage(q, kStAck, w.due);
  } else {
    w.stage = kStComplete;
    w.due = now;
    need_complete_drain_ = true;
  }
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_read_tx(QpState& q, uint64_t seq, Wqe& w, Time now) {
  QpState& b = qps_[q.peer];
  Nic& rn = nic_of(b);
  if (b.failed || discarded(b, seq)) return flush_at_responder(q, w);
  // The responder's DMA read has completed: the data as of now goes out.
  if (w.length > 0) std::memcpy(w.local, w.remote_host, w.length);
  ++rn.n.reads_served;
  const uint64_t out_ps = rn.tx_port.send(ns_to_ps(now), w.length);
  if (packet_loss_ != nullptr) [[unlikely]] {
    Retransmission rt;
    if (response_lost(q, rn, ps_to_ns_ceil(out_ps), rt)) {
      ack_lost(q, seq, w, ps_to_ns_ceil(out_ps), rt, rn);
      return true;
    }
  }
  w.stage = kStReadRx;
  w.due = ps_to_ns_ceil(out_ps) + wire_latency(rn, q.node, ps_to_ns_ceil(out_ps));
  schedule_stage(q, kStReadRx, w.due);
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_read_rx(QpState& q, Wqe& w, Time now) {
  read_response_in(q, w, now);
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_ack(QpState& q, uint64_t seq, Wqe& w, Time now) {
  if (w.resend != kResendNone) [[unlikely]] return resend_step(q, seq, w, now);
  Nic& nic = nic_of(q);
  const uint64_t in_ps = nic.rx_port.send(ns_to_ps(now), 0);
  const ServerPool::Slot slot = nic.recv_engines.reserve(in_ps, 0, nic.ack_ps);
  w.stage = kStComplete;
  // An unsignaled WRITE reaches the Ack stage only after a resend (its ACK was lost):
  // it has no CQE to write.
  w.due = ps_to_ns_ceil(w.signaled ? nic.pcie_up.send(slot.finish_ps, nic.cfg.cqe_bytes)
                                                      : slot.finish_ps);
  if (w.status != WcStatus::kSuccess) {
    enter_error(q, seq + 1, w.due);
  } else {
    schedule_stage(q, kStComplete, w.due);
  }
  return true;
}

[[gnu::always_inline]] inline bool Network::stage_complete(QpState& q, uint64_t seq, Wqe& w, Time now) {
  Nic& nic = nic_of(q);
  if (w.opcode == WcOpcode::kRdmaRead && q.reads_out > 0) --q.reads_out;
  w.stage = kStDone;
  if (w.signaled || w.status != WcStatus::kSuccess) {
    DeviceContext& c = ctxs_[q.ctx];
    c.send_cq.push(SendCqe{SendCompletion{q.qp_num, w.wr_id, w.opcode, w.status}, q.index, seq});
    ++c.send_cqes;
    ++nic.n.send_cqes;
    ++nic.n.complete_count;
    nic.n.complete_latency_ns += now - w.posted_at;
    if (c.thread != nullptr) c.thread->wake(now);
  }
  notify(WqeEvent::kCompleted, q, seq, w, now);
  return true;
}

bool Network::process(QpState& q, uint64_t seq, Wqe& w, uint8_t stage, Time now) {
  switch (stage) {
    case kStDoorbell: return stage_doorbell(q, w);
    case kStEngine: return stage_engine(q, seq, w, now);
    case kStTx: return stage_tx(q, seq, w, now);
    case kStRx: return stage_rx(q, seq, w, now);
    case kStLand: return stage_land(q, seq, w, now);
    case kStReadTx: return stage_read_tx(q, seq, w, now);
    case kStReadRx: return stage_read_rx(q, w, now);
    case kStAck: return stage_ack(q, seq, w, now);
    case kStComplete: return stage_complete(q, seq, w, now);
    default: break;
  }
  throw std::logic_error("Network: event for a stage without processing (" + std::to_string(stage) + ")");
}

NicLoad Network::load(uint32_t node) const {
  const Nic& n = nics_.at(node);
  NicLoad l;
  l.stations = {n.pcie_down.stats(),    n.read_tags.stats(), n.pcie_up.stats(), n.send_engines.stats(),
                n.recv_engines.stats(), n.tx_port.stats(),   n.rx_port.stats()};
  l.servers = {1, n.read_tags.tokens(), 1, n.send_engines.servers(), n.recv_engines.servers(), 1, 1};
  for (uint32_t& s : l.servers) s = std::max(s, 1u);  // 0 read tags: unlimited, utilization per one
  l.admitted = n.n.admitted;
  l.admit_wait_ps = n.n.admit_wait_ps;
  return l;
}

nlohmann::json Network::load_json(const NicLoad& from, const NicLoad& to, Time window_ns) {
  nlohmann::json stations = nlohmann::json::object();
  for (size_t i = 0; i < NicLoad::kStations; ++i) {
    const StationStats& a = from.stations[i];
    const StationStats& b = to.stations[i];
    StationStats d;
    d.jobs = b.jobs - a.jobs;
    d.busy_ps = b.busy_ps - a.busy_ps;
    d.wait_ps = b.wait_ps - a.wait_ps;
    d.sojourn_ps = b.sojourn_ps - a.sojourn_ps;
    stations[NicLoad::kStationNames[i]] = {{"jobs", d.jobs},
                                           {"busy_ns", static_cast<double>(d.busy_ps) * 1e-3},
                                           {"utilization", d.utilization(window_ns, to.servers[i])},
                                           {"mean_depth", d.mean_depth(window_ns)},
                                           {"mean_wait_ns", d.mean_wait_ns()},
                                           {"mean_sojourn_ns", d.mean_sojourn_ns()}};
  }
  const uint64_t admitted = to.admitted - from.admitted;
  const uint64_t wait_ps = to.admit_wait_ps - from.admit_wait_ps;
  return {{"stations", std::move(stations)},
          {"admission",
           {{"admitted", admitted},
            {"mean_wait_ns", admitted == 0 ? 0.0 : static_cast<double>(wait_ps) * 1e-3 / admitted},
            {"mean_depth", window_ns == 0 ? 0.0 : static_cast<double>(wait_ps) / (window_ns * 1e3)}}}};
}

nlohmann::json Network::report_json(uint32_t node, Time elapsed_ns) const {
  const Nic& n = nics_.at(node);
  const NicLoad now = load(node);
  nlohmann::json whole = load_json(NicLoad{}, now, elapsed_ns);
  whole["elapsed_ns"] = elapsed_ns;
  for (size_t i = 0; i < NicLoad::kStations; ++i)
    whole["stations"][NicLoad::kStationNames[i]]["max_depth"] = now.stations[i].max_depth;
  const NicCounters& c = n.n;
  whole["admission"]["max_depth"] = c.admit_max_depth;
  nlohmann::json j;
  j["node"] = node;
  j["whole_simulation"] = std::move(whole);
  j["counters"] = {{"doorbells", c.doorbells},         {"wqes_posted", c.wqes_posted},
                   {"wqes_sent", c.wqes_sent},         {"packets_in", c.packets_in},
                   {"writes_landed", c.writes_landed}, {"reads_served", c.reads_served},
                   {"recv_cqes", c.recv_cqes},         {"send_cqes", c.send_cqes},
                   {"rnr_naks", c.rnr_naks},           {"remote_errors", c.remote_errors},
                   {"local_errors", c.local_errors},   {"flushed", c.flushed},
                   {"fetches", c.fetches}};
  if (connection_faults_) {  // absent without faults: those outputs keep their bytes
    j["counters"]["packets_lost"] = c.packets_lost;
    j["counters"]["acks_lost"] = c.acks_lost;
    j["counters"]["retransmissions"] = c.retransmissions;
    j["counters"]["duplicates"] = c.duplicates;
    j["counters"]["duplicates_executed"] = c.duplicates_executed;
    j["counters"]["retry_exceeded"] = c.retry_exceeded;
    j["counters"]["connection_failures"] = c.connection_failures;
  }
  j["latency"] = {{"land_mean_ns", c.land_count == 0 ? 0.0 : static_cast<double>(c.land_latency_ns) / c.land_count},
                  {"land_max_ns", c.land_latency_max_ns},
                  {"complete_mean_ns",
                   c.complete_count == 0 ? 0.0 : static_cast<double>(c.complete_latency_ns) / c.complete_count}};
  j["caches"] = {{"qp", {{"hits", n.qp_cache.hits()}, {"misses", n.qp_cache.misses()}}},
                 {"mtt", {{"hits", n.mtt_cache.hits()}, {"misses", n.mtt_cache.misses()}}}};
  return j;
}

}  // namespace bkv::sim
