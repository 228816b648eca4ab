// UCX side of the ucx-am baseline (see ucx_am.hpp for the design and the wire format).
#include "backends/ucx_am/ucx_am.hpp"

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/ucx_am/held_slots.hpp"
#include "backends/ucx_am/ucp_worker.hpp"
#include "core/kv/store.hpp"
#include "core/tsc_clock.hpp"

namespace bkv::ucx_am {

namespace {

constexpr uint64_t kMaxReportedErrors = 5;  // protocol errors printed on stderr (all are counted)

constexpr const char* kOwner = "ucx-am";  // the prefix of every error message

[[noreturn]] void fail(const std::string& what, ucs_status_t status) { ucx_am::fail(kOwner, what, status); }

// A message is accepted only whole, eager and of its exact size, without an AM header.
bool well_formed(size_t header_length, size_t length, size_t expected, const ucp_am_recv_param_t* param) noexcept {
  return message_well_formed(header_length, length, expected, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0);
}

}  // namespace

struct UcxAmNode::Impl {
  using Worker = UcpWorker;  // eps: daemons: by global client id; clients: by global daemon id

  struct DaemonState;
  struct ReplySlot {  // keeps a response alive until UCX completes its send
    DaemonState* owner = nullptr;
    ResponseMsg msg{};
  };
  struct DaemonState {
    Impl* impl = nullptr;
    uint32_t global = 0;  // rank * D + d
    Worker w;
    std::vector<RequestMsg> pending;  // queued by the AM handler, served after progress
    HeldSlots<ReplySlot> replies;
    backend::DaemonMetrics m;
    ucs_status_t send_failure = UCS_OK;  // set by a send callback (no exception through UCX)
  };

  struct ClientState;
  struct RequestSlot {
    ClientState* owner = nullptr;
    RequestMsg msg{};
    uint32_t daemon = 0;       // global id of the daemon the request went to
    bool outstanding = false;  // waiting for the response
    bool sending = false;      // UCX still owns msg (send not completed)
    bool remote = false;       // to another rank (counted in remote_in_flight)
    metrics::LatencyClass cls = metrics::LatencyClass::kGetLocal;
    uint64_t issued_ns = 0;    // the step clock when it was issued
  };
  struct ClientState {
    Impl* impl = nullptr;
    uint32_t index = 0;
    Worker w;
    kv::Pattern pattern;
    std::vector<RequestSlot> slots;  // queue_depth, fixed (UCX holds pointers into it)
    std::vector<uint32_t> free;      // slots neither outstanding nor sending
    uint32_t in_flight = 0;
    bool stopping = false;
    uint64_t protocol_errors = 0;
    uint32_t completed_now = 0, errors_now = 0;  // this step
    ucs_status_t send_failure = UCS_OK;  // set by a send callback (no exception through UCX)
    // Issue-to-answer latency (as backend::Client: one clock read per step at most).
    metrics::RequestLatency latency;
    uint64_t step_now = 0;
    bool have_now = false;
    uint64_t now() {
      if (!have_now) {
        step_now = tsc_clock::now_ns();
        have_now = true;
      }
      return step_now;
    }
    // Requests to other ranks awaiting an answer: counted by the client, published once
    // per step for daemon #0 to sample (the node's "calls in flight").
    uint64_t remote_outstanding = 0;
    alignas(64) std::atomic<uint64_t> remote_in_flight{0};
    explicit ClientState(kv::Pattern p) : pattern(std::move(p)) {}
  };

  backend::NodeConfig cfg;
  backend::ClientCounters* counters;
  kv::Store store;
  ucp_context_h context = nullptr;
  std::vector<std::unique_ptr<DaemonState>> daemons;
  std::vector<std::unique_ptr<ClientState>> clients;
  bool connected = false;
  bool closing = false;
  uint64_t reported = 0;

  Impl(const backend::NodeConfig& c, backend::ClientCounters* ctr) : cfg(c), counters(ctr), store(c.rank, c.key_range) {}

  void report(const char* what) {
    if (reported++ < kMaxReportedErrors) std::fprintf(stderr, "ucx-am: dropped a message: %s\n", what);
  }

  // ---- control path (backends/ucx_am/ucp_worker.hpp)
  void init_context(const Config& ucx) { context = create_context(ucx, kOwner); }
  void init_worker(Worker& w, uint32_t am_id, ucp_am_recv_callback_t handler, void* arg) {
    open_worker(w, context, am_id, handler, arg, UCP_AM_FLAG_WHOLE_MSG, kOwner);
  }
  ucp_ep_h create_ep(Worker& w, const WorkerAddress& to) { return connect_endpoint(w, to, kOwner); }

  ~Impl() {
    closing = true;
    for (auto& d : daemons) close_worker(d->w);
    for (auto& c : clients) close_worker(c->w);
    if (context != nullptr) ucp_cleanup(context);
  }

  // ---- daemon
  static ucs_status_t on_request(void* arg, const void*, size_t header_length, void* data, size_t length,
                                 const ucp_am_recv_param_t* param) {
    auto& d = *static_cast<DaemonState*>(arg);
    if (d.impl->closing) return UCS_OK;
    if (!well_formed(header_length, length, sizeof(RequestMsg), param)) {
      ++d.m.protocol_errors;
      d.impl->report("request of the wrong size or not eager");
      return UCS_OK;
    }
    RequestMsg msg;
    std::memcpy(&msg, data, sizeof msg);
    d.pending.push_back(msg);
    return UCS_OK;
  }

  static void on_reply_sent(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<ReplySlot*>(user_data);
    DaemonState& d = *slot->owner;
    d.replies.give_back(slot);
    ucp_request_free(request);
    if (status != UCS_OK && status != UCS_ERR_CANCELED && !d.impl->closing) d.send_failure = status;
  }

  void reply(DaemonState& d, uint32_t client, const ResponseMsg& msg) {
    ReplySlot* slot = d.replies.take();
    slot->owner = &d;
    slot->msg = msg;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &Impl::on_reply_sent;
    p.user_data = slot;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t r = ucp_am_send_nbx(d.w.eps[client], kResponseAmId, nullptr, 0, &slot->msg, sizeof slot->msg, &p);
    if (r == nullptr) {
      d.replies.give_back(slot);
    } else if (UCS_PTR_IS_ERR(r)) {
      d.replies.give_back(slot);
      fail("sending a response", UCS_PTR_STATUS(r));
    }
  }

  bool step_daemon(DaemonState& d) {
    ucp_worker_progress(d.w.worker);
    if (d.send_failure != UCS_OK) fail("sending a response (completion)", d.send_failure);
    const size_t n = d.pending.size();
    const uint64_t clients_total = uint64_t{cfg.np} * cfg.clients;
    for (const RequestMsg& msg : d.pending) {
      const RequestVerdict verdict = request_verdict(msg, clients_total);
      if (verdict == RequestVerdict::kUnknownClient) {  // nobody to answer
        ++d.m.protocol_errors;
        report("request from an unknown client");
        continue;
      }
      ResponseMsg out;
      out.daemon = d.global;
      out.tag = msg.tag;
      if (verdict == RequestVerdict::kServe) {
        out.resp = kv::execute(store, msg.req);  // checks rank and key range
        ++d.m.local_ops;
      } else {
        ++d.m.protocol_errors;
        report("malformed request (answered with an error)");
        out.resp = kv::Response::failure(kv::ErrorCode::kMalformedRequest);
      }
      reply(d, msg.client, out);
      ++d.m.replies;
    }
    d.pending.clear();
    // The server answers, it has no calls; daemon #0 samples the node's requests in flight
    // to other ranks instead (what daemon #0's copyrpc calls are in the Delegation backend).
    uint64_t in_flight = 0;
    if (d.global % cfg.daemons == 0)
      for (const auto& c : clients) in_flight += c->remote_in_flight.load(std::memory_order_relaxed);
    d.m.record_loop(static_cast<uint32_t>(n), 0, in_flight);
    if (n) ++d.m.busy_loops;
    return true;
  }

  // ---- client
  static ucs_status_t on_response(void* arg, const void*, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
    auto& c = *static_cast<ClientState*>(arg);
    if (c.impl->closing) return UCS_OK;
    if (!well_formed(header_length, length, sizeof(ResponseMsg), param)) {
      ++c.protocol_errors;
      c.impl->report("response of the wrong size or not eager");
      return UCS_OK;
    }
    ResponseMsg msg;
    std::memcpy(&msg, data, sizeof msg);
    if (msg.tag >= c.slots.size() || !c.slots[msg.tag].outstanding || c.slots[msg.tag].daemon != msg.daemon) {
      ++c.protocol_errors;
      c.impl->report("response to no outstanding request of this client");
      return UCS_OK;
    }
    RequestSlot& slot = c.slots[msg.tag];
    slot.outstanding = false;
    c.latency[slot.cls].record(c.now() - slot.issued_ns);
    c.remote_outstanding -= slot.remote ? 1 : 0;
    --c.in_flight;
    ++c.completed_now;
    if (!msg.resp.valid() || msg.resp.is_error()) ++c.errors_now;
    if (!slot.sending) c.free.push_back(msg.tag);
    return UCS_OK;
  }

  static void on_request_sent(void* request, ucs_status_t status, void* user_data) {
    auto* slot = static_cast<RequestSlot*>(user_data);
    ClientState& c = *slot->owner;
    slot->sending = false;
    if (!slot->outstanding) c.free.push_back(static_cast<uint32_t>(slot - c.slots.data()));
    ucp_request_free(request);
    if (status != UCS_OK && status != UCS_ERR_CANCELED && !c.impl->closing) c.send_failure = status;
  }

  backend::ClientStepResult step_client(ClientState& c) {
    backend::ClientStepResult res;
    c.completed_now = c.errors_now = 0;
    c.have_now = false;
    ucp_worker_progress(c.w.worker);
    if (c.send_failure != UCS_OK) fail("sending a request (completion)", c.send_failure);
    backend::ClientCounters& ctr = counters[c.index];
    if (c.completed_now) {
      res.completed = c.completed_now;
      ctr.add_completed(c.completed_now);
      if (c.errors_now)
        ctr.errors.store(ctr.errors.load(std::memory_order_relaxed) + c.errors_now, std::memory_order_relaxed);
    }
    while (!c.stopping && c.in_flight < cfg.queue_depth) {
      if (c.free.empty()) {  // every slot's send still owned by UCX
        res.blocked = true;
        break;
      }
      const kv::Request req = c.pattern.peek();
      const uint32_t target = target_daemon(req, cfg.daemons);
      if (req.rank >= cfg.np) throw std::logic_error("ucx-am: the pattern names rank " + std::to_string(req.rank));
      const uint32_t tag = c.free.back();
      c.free.pop_back();
      RequestSlot& slot = c.slots[tag];
      slot.msg = RequestMsg{cfg.rank * cfg.clients + c.index, tag, req};
      slot.daemon = target;
      slot.outstanding = true;
      slot.sending = true;
      slot.remote = req.rank != cfg.rank;
      slot.cls = metrics::latency_class(req.is_get(), !slot.remote);
      slot.issued_ns = c.now();
      c.remote_outstanding += slot.remote ? 1 : 0;
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
      p.cb.send = &Impl::on_request_sent;
      p.user_data = &slot;
      p.flags = UCP_AM_SEND_FLAG_EAGER;
      ucs_status_ptr_t r = ucp_am_send_nbx(c.w.eps[target], kRequestAmId, nullptr, 0, &slot.msg, sizeof slot.msg, &p);
      if (r == nullptr) {
        slot.sending = false;
      } else if (UCS_PTR_IS_ERR(r)) {
        fail("sending a request", UCS_PTR_STATUS(r));
      }
      c.pattern.advance();
      ++c.in_flight;
      ++res.issued;
    }
    if (res.issued) ctr.add_issued(res.issued);
    c.remote_in_flight.store(c.remote_outstanding, std::memory_order_relaxed);
    return res;
  }
};

// ---------------------------------------------------------------------------------------

UcxAmNode::UcxAmNode(const backend::NodeConfig& cfg, const kv::WorkloadConfig& wl, const Config& ucx)
    : cfg_(cfg), counters_(std::make_unique<backend::ClientCounters[]>(cfg.clients)) {
  if (cfg.daemons == 0 || cfg.clients == 0) throw std::invalid_argument("ucx-am: need >= 1 daemon and >= 1 client");
  if (cfg.queue_depth == 0) throw std::invalid_argument("ucx-am: queue depth must be >= 1");
  if (cfg.rank >= cfg.np) throw std::invalid_argument("ucx-am: rank " + std::to_string(cfg.rank) + " of " +
                                                      std::to_string(cfg.np));
  impl_ = std::make_unique<Impl>(cfg, counters_.get());
  Impl& m = *impl_;
  m.init_context(ucx);
  for (uint32_t d = 0; d < cfg.daemons; ++d) {
    m.daemons.push_back(std::make_unique<Impl::DaemonState>());
    Impl::DaemonState& s = *m.daemons.back();
    s.impl = &m;
    s.global = cfg.rank * cfg.daemons + d;
    m.init_worker(s.w, kRequestAmId, &Impl::on_request, &s);
  }
  for (uint32_t c = 0; c < cfg.clients; ++c) {
    m.clients.push_back(std::make_unique<Impl::ClientState>(kv::Pattern(wl, cfg.rank, c)));
    Impl::ClientState& s = *m.clients.back();
    s.impl = &m;
    s.index = c;
    s.slots.resize(cfg.queue_depth);
    for (uint32_t t = 0; t < cfg.queue_depth; ++t) {
      s.slots[t].owner = &s;
      s.free.push_back(cfg.queue_depth - 1 - t);
    }
    m.init_worker(s.w, kResponseAmId, &Impl::on_response, &s);
  }
}

UcxAmNode::~UcxAmNode() = default;

std::vector<WorkerAddress> UcxAmNode::local_addresses() const {
  std::vector<WorkerAddress> out;
  for (const auto& d : impl_->daemons) out.push_back(d->w.address);
  for (const auto& c : impl_->clients) out.push_back(c->w.address);
  return out;
}

void UcxAmNode::connect(std::span<const WorkerAddress> all) {
  Impl& m = *impl_;
  if (m.connected) throw std::logic_error("ucx-am: the node is already connected");
  const uint32_t D = cfg_.daemons, C = cfg_.clients, per_rank = D + C;
  check_worker_addresses(all, cfg_.np, per_rank, "ucx-am");
  for (auto& d : m.daemons)
    for (uint32_t r = 0; r < cfg_.np; ++r)
      for (uint32_t c = 0; c < C; ++c) d->w.eps.push_back(m.create_ep(d->w, all[size_t{r} * per_rank + D + c]));
  for (auto& c : m.clients)
    for (uint32_t r = 0; r < cfg_.np; ++r)
      for (uint32_t d = 0; d < D; ++d) c->w.eps.push_back(m.create_ep(c->w, all[size_t{r} * per_rank + d]));
  m.connected = true;
}

bool UcxAmNode::step_daemon(uint32_t d) { return impl_->step_daemon(*impl_->daemons[d]); }

backend::ClientStepResult UcxAmNode::step_client(uint32_t c) { return impl_->step_client(*impl_->clients[c]); }

void UcxAmNode::stop_issuing() noexcept {
  for (auto& c : impl_->clients) c->stopping = true;
}

uint64_t UcxAmNode::in_flight() const noexcept {
  uint64_t n = 0;
  for (const auto& c : impl_->clients) n += c->in_flight;
  return n;
}

const backend::DaemonMetrics& UcxAmNode::daemon_metrics(uint32_t d) const { return impl_->daemons.at(d)->m; }

const metrics::RequestLatency& UcxAmNode::client_latency(uint32_t c) const { return impl_->clients.at(c)->latency; }
void UcxAmNode::restart_client_latency_max(uint32_t c) { impl_->clients.at(c)->latency.restart_max(); }

std::vector<std::string> UcxAmNode::endpoint_descriptions() const {
  std::vector<std::string> out;
  for (const auto& d : impl_->daemons) out.insert(out.end(), d->w.endpoint_descriptions.begin(), d->w.endpoint_descriptions.end());
  for (const auto& c : impl_->clients) out.insert(out.end(), c->w.endpoint_descriptions.begin(), c->w.endpoint_descriptions.end());
  return out;
}

uint64_t UcxAmNode::client_protocol_errors() const noexcept {
  uint64_t n = 0;
  for (const auto& c : impl_->clients) n += c->protocol_errors;
  return n;
}

}  // namespace bkv::ucx_am
