// UCX side of ucx-am data (see ucx_am_data.hpp for the protocol, the wire and the checks).
#include "backends/ucx_am/ucx_am_data.hpp"

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>

#include "backends/ucx_am/held_slots.hpp"
#include "backends/ucx_am/ucp_worker.hpp"
#include "core/kv/blob_store.hpp"
#include "core/random.hpp"

namespace bkv::ucx_am {

namespace {

constexpr uint64_t kMaxReportedErrors = 5;  // dropped messages printed on stderr (all are counted)
constexpr uint32_t kNone = ~0u;

constexpr const char* kOwner = "ucx-am data";  // the prefix of every error message

[[noreturn]] void fail(const std::string& what, ucs_status_t status) { ucx_am::fail(kOwner, what, status); }

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// The data of an arrived AM, kept for the step after progress: a rendezvous descriptor
// or persistent eager data (the handlers ask for UCP_AM_FLAG_PERSISTENT_DATA). A
// rendezvous descriptor is given back by ucp_am_recv_data_nbx (the data lands in the
// buffer it names), eager data by ucp_am_data_release after it was copied (UCX 1.13's
// ucp_am_recv_data_nbx does not return persistent eager buffers to their pool);
// ucp_am_data_release drops either.
struct HeldData {
  void* desc = nullptr;  // nullptr: the message had no data
  size_t length = 0;
  bool rndv = false;
};

// The callback's answer for the AM's data: keep it (UCS_INPROGRESS) when there is any.
// false: data that is neither persistent nor rendezvous (cannot be kept).
bool hold(const ucp_am_recv_param_t* param, void* data, size_t length, HeldData& out, ucs_status_t& ret) {
  out = HeldData{};
  ret = UCS_OK;
  if (length == 0) return true;
  if ((param->recv_attr & (UCP_AM_RECV_ATTR_FLAG_RNDV | UCP_AM_RECV_ATTR_FLAG_DATA)) == 0) return false;
  out = HeldData{data, length, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0};
  ret = UCS_INPROGRESS;
  return true;
}

void drop(ucp_worker_h w, HeldData& d) {
  if (d.desc != nullptr) ucp_am_data_release(w, d.desc);
  d.desc = nullptr;
}

// Receives held data into dst: nullptr when done at once, a request whose callback
// follows, or an error status pointer. The data is given back in every case.
ucs_status_ptr_t receive(ucp_worker_h w, HeldData& d, void* dst, void* user_data, ucp_am_recv_data_nbx_callback_t cb,
                         uint64_t& rendezvous) {
  if (!d.rndv) {
    std::memcpy(dst, d.desc, d.length);
    drop(w, d);
    return nullptr;
  }
  ++rendezvous;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = cb;
  p.user_data = user_data;
  void* desc = d.desc;
  d.desc = nullptr;
  return ucp_am_recv_data_nbx(w, desc, dst, d.length, &p);
}

}  // namespace

struct UcxAmDataNode::Impl {
  using Worker = UcpWorker;  // eps: daemon: by global client id; client: by rank (its daemon #0)

  // ---- daemon #0
  struct Daemon;
  struct Incoming {
    DataAmRequest h;
    HeldData data;
    bool waited = false;  // counted as parked once
  };
  struct PutReceive {  // a put's value being received into a store block
    Daemon* d = nullptr;
    uint32_t client = 0, tag = 0, block = 0, length = 0;
    uint64_t key = 0;
    ucs_status_t status = UCS_OK;
  };
  struct ReplySlot {  // keeps a response (and a get's pinned block) alive until UCX sent it
    Daemon* d = nullptr;
    DataAmResponse msg{};
    uint32_t pinned = kNone;
  };
  struct Daemon {
    Impl* impl = nullptr;
    Worker w;
    std::deque<Incoming> pending;
    HeldSlots<PutReceive> receives;
    std::vector<PutReceive*> received;  // completed by a callback, finished in the step
    HeldSlots<ReplySlot> replies;
    data::DataServerCounters counters;
    uint64_t protocol_errors = 0;
    ucs_status_t send_failure = UCS_OK;
  };

  // ---- clients
  struct Client;
  struct Slot {
    Client* owner = nullptr;
    DataAmRequest msg{};
    bool outstanding = false;  // waiting for the response
    bool sending = false;      // UCX still owns the request (and a put's buffer)
    bool receiving = false;    // a GetOk's value is being received into the buffer
    kv::DataResponse resp{};   // while receiving
    uint64_t issued_ns = 0;
    ucs_status_t recv_status = UCS_OK;
  };
  struct Arrived {
    DataAmResponse h;
    HeldData data;
  };
  struct Client {
    Impl* impl = nullptr;
    uint32_t index = 0;
    Worker w;
    std::vector<Slot> slots;
    std::vector<std::byte> buf;  // queue_depth x max_value_bytes
    Rng rng;
    uint32_t seq = 0;
    uint64_t in_flight = 0;
    bool stopping = false;
    std::deque<Arrived> arrived;
    std::vector<uint32_t> received;  // slots whose value receive completed in a callback
    data::DataClientCounters counters;
    copyrpc::RttHistogram latency;
    uint64_t protocol_errors = 0;
    ucs_status_t send_failure = UCS_OK;
    explicit Client(uint64_t seed) : rng(seed) {}
    std::byte* slot_buf(uint32_t s) { return buf.data() + uint64_t{s} * impl->cfg.max_value_bytes; }
  };

  data::DataNodeConfig cfg;
  kv::BlobStore store;
  ucp_context_h context = nullptr;
  Daemon daemon;
  std::vector<std::unique_ptr<Client>> clients;
  bool connected = false;
  bool closing = false;
  uint64_t reported = 0;
  uint64_t rendezvous = 0;  // values received by the rendezvous protocol (daemon and clients)

  explicit Impl(const data::DataNodeConfig& c)
      : cfg(c), store(c.rank, c.key_range, c.max_value_bytes, c.np * c.clients * c.queue_depth + 1) {}

  void report(const char* what) {
    if (reported++ < kMaxReportedErrors) std::fprintf(stderr, "ucx-am data: dropped a message: %s\n", what);
  }

  // ---- control path (backends/ucx_am/ucp_worker.hpp)
  void init_context(const Config& ucx) { context = create_context(ucx, kOwner); }
  void init_worker(Worker& w, uint32_t am_id, ucp_am_recv_callback_t handler, void* arg) {
    // Whole messages, and eager data that stays valid after the callback: the step
    // receives it into its destination after progress returns.
    open_worker(w, context, am_id, handler, arg, UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA, kOwner);
  }
  ucp_ep_h create_ep(Worker& w, const WorkerAddress& to) { return connect_endpoint(w, to, kOwner); }

  ~Impl() {
    closing = true;
    for (Incoming& in : daemon.pending) drop(daemon.w.worker, in.data);
    for (auto& c : clients)
      for (Arrived& a : c->arrived) drop(c->w.worker, a.data);
    close_worker(daemon.w);
    for (auto& c : clients) close_worker(c->w);
    if (context != nullptr) ucp_cleanup(context);
  }

  // ---- daemon #0
  // What both AM handlers do with a message: a header of exactly the size of Message::h
  // is copied, the data (if any) held for the owner's next step, and the message queued
  // on `queue`; anything else is a protocol error of the owner (`what`: "request" or
  // "response"), dropped.
  template <class Message, class Owner, class Queue>
  static ucs_status_t queue_message(Owner& o, Queue& queue, const char* what, const void* header, size_t header_length,
                                    void* data, size_t length, const ucp_am_recv_param_t* param) {
    if (o.impl->closing) return UCS_OK;
    Message m;
    if (header_length != sizeof m.h) {
      ++o.protocol_errors;
      o.impl->report((std::string(what) + " header of the wrong size").c_str());
      return UCS_OK;  // any data is dropped with the message
    }
    std::memcpy(&m.h, header, sizeof m.h);
    ucs_status_t ret;
    if (!hold(param, data, length, m.data, ret)) {
      ++o.protocol_errors;
      o.impl->report((std::string(what) + " data that is neither persistent nor rendezvous").c_str());
      return UCS_OK;
    }
    queue.push_back(m);
    return ret;
  }

  static ucs_status_t on_request(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param) {
    auto& d = *static_cast<Daemon*>(arg);
    return queue_message<Incoming>(d, d.pending, "request", header, header_length, data, length, param);
  }

  static void on_reply_sent(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<ReplySlot*>(user_data);
    Daemon& d = *slot->d;
    d.impl->release(*slot);
    ucp_request_free(request);
    if (status != UCS_OK && status != UCS_ERR_CANCELED && !d.impl->closing) d.send_failure = status;
  }

  void release(ReplySlot& slot) {
    if (slot.pinned != kNone) store.unpin(slot.pinned);
    slot.pinned = kNone;
    slot.d->replies.give_back(&slot);
  }

  // Sends the answer for (client, tag); a GetOk carries the pinned block's bytes.
  void reply(uint32_t client, uint32_t tag, const kv::DataResponse& resp, uint32_t pinned = kNone) {
    Daemon& d = daemon;
    ReplySlot* slot = d.replies.take();
    slot->d = &d;
    slot->msg = DataAmResponse{tag, 0, resp};
    slot->pinned = pinned;
    const void* value = pinned != kNone ? store.block_data(pinned) : nullptr;
    const size_t value_len = pinned != kNone ? resp.length : 0;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &Impl::on_reply_sent;
    p.user_data = slot;
    // No protocol flag: UCX sends small values eagerly and large ones by rendezvous.
    ucs_status_ptr_t r =
        ucp_am_send_nbx(d.w.eps[client], kDataResponseAmId, &slot->msg, sizeof slot->msg, value, value_len, &p);
    if (r == nullptr) {
      release(*slot);
    } else if (UCS_PTR_IS_ERR(r)) {
      release(*slot);
      fail("sending a response", UCS_PTR_STATUS(r));
    }
  }

  void reject(Incoming& in, kv::DataError e) {
    drop(daemon.w.worker, in.data);
    ++daemon.counters.rejected[static_cast<uint8_t>(e)];
    reply(in.h.client, in.h.tag, kv::DataResponse::failure(e, in.h.req.key));
  }

  static void on_put_received(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* t = static_cast<PutReceive*>(user_data);
    t->status = status;
    t->d->received.push_back(t);
    ucp_request_free(request);
  }

  void finish_put(PutReceive& t) {
    if (t.status == UCS_OK) {
      store.commit(t.key, t.block, t.length);
      ++daemon.counters.puts;
      reply(t.client, t.tag, kv::DataResponse::make(kv::DataResponseKind::kPutOk, t.key));
    } else {
      store.abandon(t.block);
      ++daemon.counters.rejected[static_cast<uint8_t>(kv::DataError::kTransferFailed)];
      reply(t.client, t.tag, kv::DataResponse::failure(kv::DataError::kTransferFailed, t.key));
    }
    daemon.receives.give_back(&t);
  }

  // false: a put waits for a free block (it is retried first at the next step).
  bool start(Incoming& in) {
    const DataAmRequest& h = in.h;
    const kv::DataRequest& r = h.req;
    const DataRequestVerdict verdict = data_request_verdict(h, in.data.length, uint64_t{cfg.np} * cfg.clients, cfg.rank,
                                                            store.key_range(), store.max_value_bytes());
    if (verdict.unknown_client) {  // nobody to answer
      drop(daemon.w.worker, in.data);
      ++daemon.protocol_errors;
      report("request from an unknown client");
      return true;
    }
    if (verdict.error != kv::DataError::kNone) return reject(in, verdict.error), true;
    if (r.is_put()) {
      const auto b = store.acquire();
      if (!b) {
        if (!in.waited) ++daemon.counters.parked;
        in.waited = true;
        return false;
      }
      PutReceive* t = daemon.receives.take();
      *t = PutReceive{&daemon, h.client, h.tag, *b, r.length, r.key, UCS_OK};
      const ucs_status_ptr_t q = receive(daemon.w.worker, in.data, store.block_data(*b), t, &Impl::on_put_received, rendezvous);
      if (q == nullptr) {
        finish_put(*t);
      } else if (UCS_PTR_IS_ERR(q)) {
        t->status = UCS_PTR_STATUS(q);
        finish_put(*t);
      }  // else: on_put_received, then finish_put in a later step
      return true;
    }
    const auto v = store.pin(r.key);
    if (!v) {
      ++daemon.counters.not_found;
      reply(h.client, h.tag, kv::DataResponse::make(kv::DataResponseKind::kGetNotFound, r.key));
      return true;
    }
    if (v->length > r.length) {
      store.unpin(v->block);
      return reject(in, kv::DataError::kBufferTooSmall), true;
    }
    ++daemon.counters.gets;
    reply(h.client, h.tag, kv::DataResponse::make(kv::DataResponseKind::kGetOk, r.key, v->length), v->block);
    return true;
  }

  void step_daemon() {
    Daemon& d = daemon;
    ucp_worker_progress(d.w.worker);
    if (d.send_failure != UCS_OK) fail("sending a response (completion)", d.send_failure);
    for (PutReceive* t : d.received) finish_put(*t);
    d.received.clear();
    while (!d.pending.empty()) {
      if (!start(d.pending.front())) break;
      d.pending.pop_front();
    }
  }

  // ---- clients
  static ucs_status_t on_response(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    auto& c = *static_cast<Client*>(arg);
    return queue_message<Arrived>(c, c.arrived, "response", header, header_length, data, length, param);
  }

  static void on_request_sent(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<Slot*>(user_data);
    slot->sending = false;
    ucp_request_free(request);
    if (status != UCS_OK && status != UCS_ERR_CANCELED && !slot->owner->impl->closing) slot->owner->send_failure = status;
  }

  static void on_value_received(void* request, ucs_status_t status, size_t, void* user_data) {
    auto* slot = static_cast<Slot*>(user_data);
    slot->recv_status = status;
    Client& c = *slot->owner;
    c.received.push_back(static_cast<uint32_t>(slot - c.slots.data()));
    ucp_request_free(request);
  }

  // The slot's request is answered: checks as DataClient::complete (data_node.hpp).
  void complete(Client& c, uint32_t s, const kv::DataResponse& r, bool value_ok) {
    Slot& sl = c.slots[s];
    sl.outstanding = false;
    sl.receiving = false;
    --c.in_flight;
    const kv::DataRequest& req = sl.msg.req;
    bool ok = r.key == req.key && value_ok;
    uint64_t moved = 0;
    if (req.is_put()) {
      ok = ok && r.kind == kv::DataResponseKind::kPutOk;
      moved = cfg.value_bytes;
    } else if (r.kind == kv::DataResponseKind::kGetOk) {
      uint64_t stamped_key;
      std::memcpy(&stamped_key, c.slot_buf(s), 8);
      ok = ok && r.length == cfg.value_bytes && stamped_key == req.key;
      moved = r.length;
    } else if (r.kind == kv::DataResponseKind::kGetNotFound) {
      c.counters.not_found.store(c.counters.not_found.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      ok = false;
    }
    if (!ok) {
      c.counters.errors.store(c.counters.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    c.latency.record(now_ns() - sl.issued_ns);
    c.counters.bytes.store(c.counters.bytes.load(std::memory_order_relaxed) + moved, std::memory_order_relaxed);
    c.counters.completed.store(c.counters.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  void on_arrived(Client& c, Arrived& a) {
    const uint32_t s = a.h.tag;
    if (s >= c.slots.size() || !c.slots[s].outstanding || c.slots[s].receiving || a.h.reserved != 0 ||
        !a.h.resp.valid()) {
      drop(c.w.worker, a.data);
      ++c.protocol_errors;
      report("response to no outstanding request of this client, or malformed");
      return;
    }
    Slot& sl = c.slots[s];
    const kv::DataResponse& r = a.h.resp;
    if (r.kind != kv::DataResponseKind::kGetOk) {
      const bool no_data = a.data.length == 0;
      drop(c.w.worker, a.data);
      complete(c, s, r, no_data);
      return;
    }
    // GetOk: the value comes as the message's data, exactly r.length bytes, into the slot.
    if (sl.msg.req.is_put() || a.data.length != r.length || r.length > sl.msg.req.length) {
      drop(c.w.worker, a.data);
      complete(c, s, r, false);
      return;
    }
    sl.resp = r;
    sl.receiving = true;
    const ucs_status_ptr_t q = receive(c.w.worker, a.data, c.slot_buf(s), &sl, &Impl::on_value_received, rendezvous);
    if (q == nullptr) complete(c, s, r, true);
    else if (UCS_PTR_IS_ERR(q)) complete(c, s, r, false);
    // else: on_value_received, then complete in a later step
  }

  uint32_t next_rank(Client& c) {
    if (!cfg.remote_only) return static_cast<uint32_t>(c.rng.below(cfg.np));
    const uint32_t r = static_cast<uint32_t>(c.rng.below(cfg.np - 1));
    return r >= cfg.rank ? r + 1 : r;
  }

  void step_client(Client& c) {
    ucp_worker_progress(c.w.worker);
    if (c.send_failure != UCS_OK) fail("sending a request (completion)", c.send_failure);
    for (uint32_t s : c.received) complete(c, s, c.slots[s].resp, c.slots[s].recv_status == UCS_OK);
    c.received.clear();
    while (!c.arrived.empty()) {
      Arrived a = c.arrived.front();
      c.arrived.pop_front();
      on_arrived(c, a);
    }
    if (c.stopping) return;
    for (uint32_t s = 0; s < c.slots.size(); ++s) {
      Slot& sl = c.slots[s];
      if (sl.outstanding || sl.sending || sl.receiving) continue;
      const uint32_t rank = next_rank(c);
      const uint64_t key = c.rng.below(cfg.key_range);
      const bool is_put = !c.rng.bernoulli(cfg.read_ratio);
      const kv::DataRequest req =
          is_put ? kv::DataRequest::put(rank, key, 0, cfg.value_bytes) : kv::DataRequest::get(rank, key, 0, cfg.value_bytes);
      sl.msg = DataAmRequest{cfg.rank * cfg.clients + c.index, s, req};
      if (is_put) {  // the stamp: key u64, client u32 (rank << 16 | index), sequence u32
        std::byte* p = c.slot_buf(s);
        const uint32_t who = (cfg.rank << 16) | c.index;
        const uint32_t seq = c.seq++;
        std::memcpy(p, &key, 8);
        std::memcpy(p + 8, &who, 4);
        std::memcpy(p + 12, &seq, 4);
      }
      sl.issued_ns = now_ns();
      sl.outstanding = true;
      sl.sending = true;
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.send = &Impl::on_request_sent;
      p.user_data = &sl;
      ucs_status_ptr_t r = ucp_am_send_nbx(c.w.eps[rank], kDataRequestAmId, &sl.msg, sizeof sl.msg,
                                           is_put ? c.slot_buf(s) : nullptr, is_put ? cfg.value_bytes : 0, &p);
      if (r == nullptr) sl.sending = false;
      else if (UCS_PTR_IS_ERR(r)) fail("sending a request", UCS_PTR_STATUS(r));
      ++c.in_flight;
      c.counters.issued.store(c.counters.issued.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }
};

// ---------------------------------------------------------------------------------------

UcxAmDataNode::UcxAmDataNode(const data::DataNodeConfig& cfg, const Config& ucx) : cfg_(cfg) {
  cfg.validate();
  impl_ = std::make_unique<Impl>(cfg);
  Impl& m = *impl_;
  m.init_context(ucx);
  m.daemon.impl = &m;
  m.init_worker(m.daemon.w, kDataRequestAmId, &Impl::on_request, &m.daemon);
  for (uint32_t c = 0; c < cfg.clients; ++c) {
    m.clients.push_back(std::make_unique<Impl::Client>(derive_seed(cfg.seed, {0x44415441ull, cfg.rank, c})));
    Impl::Client& s = *m.clients.back();
    s.impl = &m;
    s.index = c;
    s.slots.resize(cfg.queue_depth);
    for (auto& sl : s.slots) sl.owner = &s;
    s.buf.assign(uint64_t{cfg.queue_depth} * cfg.max_value_bytes, std::byte{0});
    for (uint32_t k = 0; k < cfg.queue_depth; ++k)  // a recognisable pattern under each stamp
      for (uint64_t i = 0; i < cfg.max_value_bytes; ++i)
        s.slot_buf(k)[i] = std::byte(uint8_t(i * 7 + k + c));
    m.init_worker(s.w, kDataResponseAmId, &Impl::on_response, &s);
  }
}

UcxAmDataNode::~UcxAmDataNode() = default;

std::vector<WorkerAddress> UcxAmDataNode::local_addresses() const {
  std::vector<WorkerAddress> out{impl_->daemon.w.address};
  for (const auto& c : impl_->clients) out.push_back(c->w.address);
  return out;
}

void UcxAmDataNode::connect(std::span<const WorkerAddress> all) {
  Impl& m = *impl_;
  if (m.connected) throw std::logic_error("ucx-am data: the node is already connected");
  const uint32_t C = cfg_.clients, per_rank = 1 + C;
  check_worker_addresses(all, cfg_.np, per_rank, "ucx-am data");
  for (uint32_t r = 0; r < cfg_.np; ++r)
    for (uint32_t c = 0; c < C; ++c) m.daemon.w.eps.push_back(m.create_ep(m.daemon.w, all[size_t{r} * per_rank + 1 + c]));
  for (auto& c : m.clients)
    for (uint32_t r = 0; r < cfg_.np; ++r) c->w.eps.push_back(m.create_ep(c->w, all[size_t{r} * per_rank]));
  m.connected = true;
}

void UcxAmDataNode::step_daemon() { impl_->step_daemon(); }
void UcxAmDataNode::step_client(uint32_t c) { impl_->step_client(*impl_->clients.at(c)); }
void UcxAmDataNode::stop_issuing() noexcept {
  for (auto& c : impl_->clients) c->stopping = true;
}
const data::DataClientCounters& UcxAmDataNode::counters(uint32_t c) const { return impl_->clients.at(c)->counters; }
const copyrpc::RttHistogram& UcxAmDataNode::latency(uint32_t c) const { return impl_->clients.at(c)->latency; }
void UcxAmDataNode::restart_latency_max(uint32_t c) { impl_->clients.at(c)->latency.restart_max(); }
uint64_t UcxAmDataNode::in_flight(uint32_t c) const { return impl_->clients.at(c)->in_flight; }
const data::DataServerCounters& UcxAmDataNode::server_counters() const noexcept { return impl_->daemon.counters; }
uint64_t UcxAmDataNode::protocol_errors() const noexcept {
  uint64_t n = impl_->daemon.protocol_errors;
  for (const auto& c : impl_->clients) n += c->protocol_errors;
  return n;
}
uint64_t UcxAmDataNode::rendezvous_receives() const noexcept { return impl_->rendezvous; }
std::vector<std::string> UcxAmDataNode::endpoint_descriptions() const {
  std::vector<std::string> out = impl_->daemon.w.endpoint_descriptions;
  for (const auto& c : impl_->clients) out.insert(out.end(), c->w.endpoint_descriptions.begin(), c->w.endpoint_descriptions.end());
  return out;
}

}  // namespace bkv::ucx_am
