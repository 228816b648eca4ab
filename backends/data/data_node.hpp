// The threads of `benchkv data` (docs/data.md): per node, daemon #0 (owner of the node's
// values, server of data requests) and the client threads, for three backends:
//
//   Delegation: a client writes its data_put / data_get into daemon #0's delegation ring
//     (one MPSC ring shared by the node's clients); a request for another node is sent
//     by daemon #0 over its copyrpc endpoint to that node's daemon #0, naming the
//     client's slice of the node's buffer region, which daemon #0 registered once and
//     announced on every endpoint.
//   Meta: as Delegation, but each client talks to daemon #0 over its own pair of SPSC
//     rings (the ipc channel, core/shm/ipc.hpp), which daemon #0 scans client by client.
//     With one serving daemon (the data benchmark's only shape) the daemon that owns
//     the endpoint of every rank is daemon #0, so nothing is forwarded between daemons.
//   direct: a client owns a copyrpc context with an endpoint to daemon #0 of every other
//     node, registers its own slice and announces it on each endpoint, and calls the
//     owner itself.
//
// In all three, a request for the client's own node goes through the client's channel
// to daemon #0 (the delegation ring; Meta: the ipc rings), which copies between the
// client's slice and the store (shared memory, no RDMA).
//
// Buffers: the node's region is `clients` slices of `queue_depth x max_value_bytes`; a
// client's request in flight k uses bytes [k x max_value_bytes, + value size) of its
// slice. A put writes a 16-byte stamp (key, client, sequence number) at the start of
// the value; a get checks that the value it received is as long as the response says
// and stamped with the key it asked for. The full byte-for-byte check is in the tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/data/data_server.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/blob_store.hpp"
#include "core/kv/data_wire.hpp"
#include "core/meter.hpp"
#include "core/random.hpp"
#include "core/shm/delegationrpc.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "core/transport.hpp"

namespace bkv::data {

// kUcxAm names the UCX active-message baseline (backends/ucx_am/ucx_am_data.hpp), which
// has its own node; DataDaemon and DataClient refuse it.
enum class DataBackend : uint8_t { kDelegation = 0, kDirect, kMeta, kUcxAm };

constexpr const char* to_string(DataBackend b) noexcept {
  switch (b) {
    case DataBackend::kDelegation: return "delegation";
    case DataBackend::kDirect: return "direct";
    case DataBackend::kMeta: return "meta";
    case DataBackend::kUcxAm: return "ucx-am";
  }
  return "?";
}
// Daemon #0 registers the node's buffer region and calls the owners for the clients
// (Delegation, Meta); direct clients do both themselves.
constexpr bool daemon_calls_for_clients(DataBackend b) noexcept {
  return b == DataBackend::kDelegation || b == DataBackend::kMeta;
}
// The channel between the clients and daemon #0: the delegation ring (Delegation,
// direct) or the ipc rings (Meta).
constexpr bool uses_ipc(DataBackend b) noexcept { return b == DataBackend::kMeta; }

struct DataNodeConfig {
  uint32_t rank = 0;
  uint32_t np = 2;
  uint32_t clients = 1;           // client threads per node
  uint32_t queue_depth = 1;       // requests in flight per client
  uint32_t max_value_bytes = 4096;  // buffer slot and store block size
  uint32_t value_bytes = 4096;    // size of every value put, and buffer of every get
  uint64_t key_range = 64;        // keys per node
  double read_ratio = 0.5;        // share of gets
  bool remote_only = true;        // requests only for other nodes
  uint64_t seed = 1;
  DataBackend backend = DataBackend::kDelegation;

  uint64_t slice_bytes() const noexcept { return uint64_t{queue_depth} * max_value_bytes; }
  void validate() const {
    if (np == 0 || rank >= np) throw std::invalid_argument("data: rank must be < np");
    if (clients == 0 || queue_depth == 0) throw std::invalid_argument("data: clients and queue depth must be >= 1");
    if (value_bytes == 0 || value_bytes > max_value_bytes)
      throw std::invalid_argument("data: value size must be in [1, max_value_bytes]");
    if (value_bytes < kStampBytes) throw std::invalid_argument("data: value size must be >= 16 bytes (the stamp)");
    if (remote_only && np < 2) throw std::invalid_argument("data: remote requests need np >= 2");
    if (uses_ipc(backend) && (queue_depth & (queue_depth - 1)) != 0)
      throw std::invalid_argument("data: the Meta backend's ipc rings need a power-of-two queue depth (got " +
                                  std::to_string(queue_depth) + ")");
  }
  static constexpr uint32_t kStampBytes = 16;
};

using DataRing = shm::DelegationServer<kv::DataRequest, kv::DataResponse>;
using DataRingClient = shm::DelegationClient<kv::DataRequest, kv::DataResponse>;
using DataIpc = shm::IpcServer<kv::DataRequest, kv::DataResponse>;
using DataIpcClient = shm::IpcClient<kv::DataRequest, kv::DataResponse>;

// What waits in a copyrpc call slab for a data response.
struct DataToken {
  uint32_t client = 0;  // Delegation, Meta: the channel's client; direct: unused
  uint32_t slot = 0;    // the ring's response slot (Delegation), the ipc token (Meta) or
                        // the request in flight (direct)
  bool announce = false;
};

// The node's client buffers: one region, one slice per client, seen by every client
// and by daemon #0 (process memory shared by the node's threads).
class ClientBuffers {
 public:
  ClientBuffers(uint32_t clients, uint64_t slice_bytes)
      : clients_(clients), slice_bytes_(slice_bytes), seg_(shm::Segment::create_process(clients * slice_bytes)) {}
  std::span<std::byte> region() noexcept { return seg_.bytes(); }
  std::byte* slice(uint32_t client) noexcept { return seg_.bytes().data() + uint64_t{client} * slice_bytes_; }
  uint64_t slice_bytes() const noexcept { return slice_bytes_; }
  uint32_t clients() const noexcept { return clients_; }

 private:
  uint32_t clients_;
  uint64_t slice_bytes_;
  shm::Segment seg_;
};

inline void refuse_non_copyrpc(DataBackend b) {
  if (b == DataBackend::kUcxAm)
    throw std::invalid_argument("data: the ucx-am data backend has its own node (backends/ucx_am/ucx_am_data.hpp)");
}

// Bytes of the segment of the channel between the clients and daemon #0.
inline size_t data_ring_bytes(DataBackend backend, uint32_t clients, uint32_t queue_depth) {
  if (uses_ipc(backend)) return DataIpc::Layout::segment_size(shm::IpcConfig{clients, queue_depth});
  return DataRing::Layout::segment_size(shm::DelegationConfig{clients, 1024, queue_depth});
}

// Daemon #0 of a node.
template <Transport T>
class DataDaemon {
 public:
  using Ctx = copyrpc::Context<T, DataToken>;

  DataDaemon(T& t, const copyrpc::ContextConfig& cc, const DataNodeConfig& cfg, kv::BlobStore& store,
             ClientBuffers& buffers, std::span<std::byte> ring_mem)
      : cfg_(cfg), ctx_(t, cc), store_(store), server_(ctx_, store), buffers_(buffers), endpoint_of_rank_(cfg.np, kNone) {
    refuse_non_copyrpc(cfg.backend);
    if (uses_ipc(cfg.backend))
      ipc_.emplace(ring_mem, shm::IpcConfig{cfg.clients, cfg.queue_depth});
    else
      ring_.emplace(ring_mem, shm::DelegationConfig{cfg.clients, 1024, cfg.queue_depth});
    // Registered here, while the node is being built: a transport's memory table may be
    // read by other threads once they run (the wall-clock loopback's is).
    if (daemon_calls_for_clients(cfg.backend)) {
      const auto region = buffers_.region();
      region_mr_ = t.register_memory(region.data(), region.size(),
                                     kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite);
    }
  }

  Ctx& context() noexcept { return ctx_; }
  // An endpoint this daemon calls through (Delegation, Meta) to daemon #0 of `rank`.
  uint32_t create_endpoint_to(uint32_t rank) {
    const uint32_t ep = ctx_.create_endpoint();
    if (rank >= cfg_.np) throw std::invalid_argument("data: endpoint to a rank >= np");
    endpoint_of_rank_[rank] = ep;
    return ep;
  }
  // An endpoint a remote client calls this daemon through (direct).
  uint32_t create_serving_endpoint() { return ctx_.create_endpoint(); }

  // After every endpoint is connected. Delegation, Meta: announces the buffer region on
  // every calling endpoint.
  void start() {
    started_ = true;
    if (!daemon_calls_for_clients(cfg_.backend)) return;
    const auto region = buffers_.region();
    kv::RegionAnnouncement a;
    a.rkey = region_mr_.rkey;
    a.addr = reinterpret_cast<uint64_t>(region.data());
    a.slice_bytes = buffers_.slice_bytes();
    a.slices = buffers_.clients();
    for (uint32_t r = 0; r < cfg_.np; ++r) {
      if (endpoint_of_rank_[r] == kNone) continue;
      if (!ctx_.call(endpoint_of_rank_[r], kv::data_bytes(a), sizeof(kv::DataResponse), DataToken{0, 0, true}).ok())
        throw std::runtime_error("data: announcing the buffer region failed");
      ++announcements_sent_;
    }
    ctx_.flush();
  }
  bool announced() const noexcept { return started_ && announcements_acked_ == announcements_sent_; }

  // Called with the client's index after its answer was written into the ring (the
  // simulator steps the client then; real clients poll).
  void set_client_waker(void (*wake)(void*, uint32_t), void* arg) noexcept {
    wake_ = wake;
    wake_arg_ = arg;
  }

  // One loop iteration (the first one starts the daemon). Returns the work it found:
  // receive completions, RDMA completions and ring entries (0: an idle loop).
  uint32_t step() {
    if (!started_) start();
    auto& meter = ctx_.transport().meter();
    meter.charge(Op::kLoop, 1);
    const uint32_t cqes = ctx_.drain([this](DataToken&& tok, std::span<const std::byte> resp) { on_response(tok, resp); }, [](DataToken&&, copyrpc::EndpointError e) {
      throw std::runtime_error(std::string("data: a call was failed back: its endpoint stopped (") + copyrpc::to_string(e) + ")");
    });
    copyrpc::RecvHandle h;
    while (ctx_.recv(h)) {
      meter.charge(Op::kKvOp, 1);
      server_.on_request(std::move(h));
    }
    uint32_t work = cqes;
    work += ctx_.poll_raw([this](uint64_t id, WcStatus s) { server_.on_raw_completion(id, s); });
    server_.retry_parked();
    retry_backlog();
    if (announced()) {  // clients' requests wait in the channel until the peers know the region
      auto take = [&](uint32_t client, uint32_t slot, const kv::DataRequest& req) {
        meter.charge(Op::kRingOp, 1);
        ++work;
        if (!backlog_.empty() || !start_client_request(client, slot, req)) backlog_.push_back(Waiting{client, slot, req});
      };
      if (ipc_) {
        const uint64_t scanned = ipc_->clients_scanned();
        ipc_->poll_with_skip();
        meter.charge(Op::kPollSlot, static_cast<uint32_t>(ipc_->clients_scanned() - scanned));
        while (auto e = ipc_->recv()) take(e->handle.client, e->handle.token, e->payload);
      } else {
        ring_->poll();
        while (auto e = ring_->recv()) take(e->client_id, e->resp_slot_idx, e->payload);
        ring_->advance_tail();
      }
    }
    ctx_.flush();
    meter.record(Phase::kCqes, cqes);
    return work;
  }

  const DataServerCounters& server_counters() const noexcept { return server_.counters(); }
  // Answers that could not be delivered or decoded, and (Meta) requests the ipc rings
  // dropped for a token out of range.
  uint64_t protocol_errors() const noexcept { return protocol_errors_ + (ipc_ ? ipc_->bad_requests() : 0); }
  bool idle() const noexcept {
    return ctx_.calls_in_flight() == 0 && server_.transfers_in_flight() == 0 && server_.parked() == 0 &&
           backlog_.empty();
  }

 private:
  static constexpr uint32_t kNone = ~0u;
  struct Waiting {
    uint32_t client, slot;
    kv::DataRequest req;
  };

  // false: must wait (no free block for a local put, or copyrpc refused the call).
  bool start_client_request(uint32_t client, uint32_t slot, kv::DataRequest req) {
    if (req.rank == cfg_.rank) {
      const auto resp = server_.serve_local(req, buffers_.slice(client), buffers_.slice_bytes());
      if (!resp) return false;
      ctx_.transport().meter().charge(Op::kKvOp, 1);
      reply_to_client(client, slot, *resp);
      return true;
    }
    if (!daemon_calls_for_clients(cfg_.backend) || req.rank >= cfg_.np || endpoint_of_rank_[req.rank] == kNone) {
      reply_to_client(client, slot, kv::DataResponse::failure(kv::DataError::kWrongRank, req.key));
      return true;
    }
    req.slice = client;  // the ring (or ipc) checked client < clients
    req.rkey = region_mr_.rkey;
    const copyrpc::CallResult r =
        ctx_.call(endpoint_of_rank_[req.rank], kv::data_bytes(req), sizeof(kv::DataResponse), DataToken{client, slot, false});
    if (r.ok()) return true;
    if (copyrpc::retry_after_poll(r.status)) return false;
    throw std::runtime_error(std::string("data: call failed: ") + copyrpc::to_string(r.status));
  }

  void retry_backlog() {
    while (!backlog_.empty()) {
      const Waiting& w = backlog_.front();
      if (!start_client_request(w.client, w.slot, w.req)) return;
      backlog_.pop_front();
    }
  }

  void on_response(const DataToken& tok, std::span<const std::byte> bytes) {
    const auto resp = kv::decode_data<kv::DataResponse>(bytes);
    if (tok.announce) {
      if (!resp || resp->kind != kv::DataResponseKind::kAnnounceOk)
        throw std::runtime_error("data: a peer refused the buffer region announcement");
      ++announcements_acked_;
      return;
    }
    if (!resp) {
      ++protocol_errors_;
      reply_to_client(tok.client, tok.slot, kv::DataResponse::failure(kv::DataError::kMalformedRequest, 0));
      return;
    }
    reply_to_client(tok.client, tok.slot, *resp);
  }

  void reply_to_client(uint32_t client, uint32_t slot, const kv::DataResponse& resp) {
    const bool ok = ipc_ ? ipc_->reply(shm::IpcHandle{client, slot}, resp) == shm::IpcReplyStatus::kOk
                         : ring_->reply(client, slot, resp) == shm::DelegationReplyStatus::kOk;
    if (!ok) {
      ++protocol_errors_;
      return;
    }
    if (wake_) wake_(wake_arg_, client);
  }

  DataNodeConfig cfg_;
  Ctx ctx_;
  kv::BlobStore& store_;
  DataServer<T, DataToken> server_;
  ClientBuffers& buffers_;
  std::optional<DataRing> ring_;  // Delegation, direct
  std::optional<DataIpc> ipc_;    // Meta
  std::vector<uint32_t> endpoint_of_rank_;
  MemoryRegion region_mr_{};
  std::deque<Waiting> backlog_;
  uint32_t announcements_sent_ = 0, announcements_acked_ = 0;
  bool started_ = false;
  uint64_t protocol_errors_ = 0;
  void (*wake_)(void*, uint32_t) = nullptr;
  void* wake_arg_ = nullptr;
};

// Counters a sampler on another thread may read (relaxed; one writer).
struct alignas(64) DataClientCounters {
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> errors{0};  // error answers and values that failed the stamp check
  std::atomic<uint64_t> not_found{0};
  std::atomic<uint64_t> bytes{0};   // value bytes moved by completed puts and found gets
};

// One client thread. T is the transport of its own context (direct) and supplies the
// meter (the clock of latencies) in both backends.
template <Transport T>
class DataClient {
 public:
  using Ctx = copyrpc::Context<T, DataToken>;
  using Meter = typename T::Meter;

  // Delegation, Meta: `transport` gives only the meter; direct: the client's own context.
  DataClient(T& transport, const copyrpc::ContextConfig& cc, const DataNodeConfig& cfg, uint32_t index,
             ClientBuffers& buffers, std::span<std::byte> ring_mem)
      : cfg_(cfg), index_(index), t_(transport), slice_(buffers.slice(index)),
        rng_(derive_seed(cfg.seed, {0x44415441ull, cfg.rank, index})), slots_(cfg.queue_depth),
        endpoint_of_rank_(cfg.np, kNone) {
    refuse_non_copyrpc(cfg.backend);
    if (uses_ipc(cfg.backend)) {
      ipc_.emplace(DataIpcClient::connect(ring_mem, index));
    } else {
      ring_.emplace(DataRingClient::connect(ring_mem));
      if (ring_->client_id() != index) throw std::logic_error("data: clients must connect to the ring in index order");
    }
    if (cfg.backend == DataBackend::kDirect) {
      ctx_ = std::make_unique<Ctx>(transport, cc);
      mr_ = transport.register_memory(slice_, cfg.slice_bytes(),
                                      kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite);
    }
    for (uint32_t s = 0; s < cfg.queue_depth; ++s)  // a recognisable pattern under each stamp
      for (uint64_t i = 0; i < cfg.max_value_bytes; ++i)
        slice_[uint64_t{s} * cfg.max_value_bytes + i] = std::byte(uint8_t(i * 7 + s + index));
  }

  Ctx* context() noexcept { return ctx_.get(); }
  uint32_t create_endpoint_to(uint32_t rank) {
    const uint32_t ep = ctx_->create_endpoint();
    endpoint_of_rank_.at(rank) = ep;
    return ep;
  }
  // direct: announces the slice (registered at construction) on every endpoint.
  void start() {
    started_ = true;
    if (!ctx_) return;
    kv::RegionAnnouncement a;
    a.rkey = mr_.rkey;
    a.addr = reinterpret_cast<uint64_t>(slice_);
    a.slice_bytes = cfg_.slice_bytes();
    a.slices = 1;
    for (uint32_t ep = 0; ep < ctx_->endpoint_count(); ++ep) {
      if (!ctx_->call(ep, kv::data_bytes(a), sizeof(kv::DataResponse), DataToken{index_, 0, true}).ok())
        throw std::runtime_error("data: announcing the client buffer failed");
      ++announcements_sent_;
    }
    ctx_->flush();
  }
  bool announced() const noexcept { return started_ && announcements_acked_ == announcements_sent_; }

  void stop_issuing() noexcept { issuing_ = false; }
  uint64_t in_flight() const noexcept { return in_flight_; }

  // One activation (the first one starts the client): collect answers, issue into free
  // slots. Returns true when a request is waiting for room on its path (the caller
  // steps again soon); false when only answers can make progress.
  bool step() {
    if (!started_) start();
    auto& meter = t_.meter();
    meter.charge(Op::kLoop, 1);
    auto on_answer = [this](uint64_t slot, const kv::DataResponse& r) { complete(static_cast<uint32_t>(slot), r); };
    if (ipc_)
      ipc_->poll(on_answer);
    else
      ring_->poll(on_answer, [](uint64_t) {
        throw std::runtime_error("data: a delegation ring response carried another call's tag (a forged or misdirected request)");
      });
    if (ctx_) ctx_->drain([this](DataToken&& tok, std::span<const std::byte> bytes) { on_response(tok, bytes); }, [](DataToken&&, copyrpc::EndpointError e) {
      throw std::runtime_error(std::string("data: a call was failed back: its endpoint stopped (") + copyrpc::to_string(e) + ")");
    });
    bool waiting = false;
    if (issuing_ && announced()) waiting = !issue();
    if (ctx_) ctx_->flush();
    return waiting;
  }

  const DataClientCounters& counters() const noexcept { return counters_; }
  const copyrpc::RttHistogram& latency() const noexcept { return latency_; }
  // Starts a new maximum latency (at the start of a measured window, by the thread that steps the client).
  void restart_latency_max() noexcept { latency_.restart_max(); }
  // Answers that matched no request, and (Meta) answers the ipc rings dropped for a bad token.
  uint64_t protocol_errors() const noexcept { return protocol_errors_ + (ipc_ ? ipc_->protocol_errors() : 0); }

 private:
  static constexpr uint32_t kNone = ~0u;
  struct Slot {
    bool busy = false;
    bool is_put = false;
    bool waiting = false;  // request made but not yet accepted by the ring or copyrpc
    uint64_t key = 0;
    uint32_t rank = 0;
    uint64_t issued_ns = 0;
  };

  // false: a request could not be handed to its path (full); it is retried first.
  bool issue() {
    auto& meter = t_.meter();
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      Slot& sl = slots_[s];
      if (sl.busy && !sl.waiting) continue;
      if (!sl.busy) {
        sl.busy = sl.waiting = true;
        sl.rank = next_rank();
        sl.key = rng_.below(cfg_.key_range);
        sl.is_put = !rng_.bernoulli(cfg_.read_ratio);
        sl.issued_ns = meter.now_ns();
        if (sl.is_put) stamp(s, sl.key);
      }
      const uint64_t offset = uint64_t{s} * cfg_.max_value_bytes;
      kv::DataRequest req = sl.is_put ? kv::DataRequest::put(sl.rank, sl.key, offset, cfg_.value_bytes)
                                      : kv::DataRequest::get(sl.rank, sl.key, offset, cfg_.value_bytes);
      meter.charge(Op::kClientRequest, 1);
      if (!send(s, req)) return false;  // the path is full: try again next step, in order
      sl.waiting = false;
      ++in_flight_;
      counters_.issued.store(counters_.issued.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    return true;
  }

  bool send(uint32_t s, kv::DataRequest req) {
    if (ctx_ && req.rank != cfg_.rank) {
      req.slice = 0;
      req.rkey = mr_.rkey;
      const copyrpc::CallResult r =
          ctx_->call(endpoint_of_rank_.at(req.rank), kv::data_bytes(req), sizeof(kv::DataResponse), DataToken{index_, s, false});
      if (r.ok()) return true;
      if (copyrpc::retry_after_poll(r.status)) return false;
      throw std::runtime_error(std::string("data: call failed: ") + copyrpc::to_string(r.status));
    }
    if (ipc_) {
      const shm::IpcCallStatus st = ipc_->call(req, s);
      if (st == shm::IpcCallStatus::kOk) return true;
      if (st == shm::IpcCallStatus::kFull) return false;
      throw std::runtime_error("data: daemon #0 has shut down its ipc rings");
    }
    const auto r = ring_->try_call(req, s);
    if (r.status == shm::DelegationCallStatus::kOk) return true;
    if (r.status == shm::DelegationCallStatus::kFull) return false;
    throw std::runtime_error("data: the delegation ring refused a request");
  }

  uint32_t next_rank() {
    if (!cfg_.remote_only) return static_cast<uint32_t>(rng_.below(cfg_.np));
    const uint32_t r = static_cast<uint32_t>(rng_.below(cfg_.np - 1));
    return r >= cfg_.rank ? r + 1 : r;
  }

  // The value's first 16 bytes: key u64, client u32 (rank << 16 | index), sequence u32.
  void stamp(uint32_t s, uint64_t key) {
    std::byte* p = slice_ + uint64_t{s} * cfg_.max_value_bytes;
    const uint32_t who = (cfg_.rank << 16) | index_;
    const uint32_t seq = seq_++;
    std::memcpy(p, &key, 8);
    std::memcpy(p + 8, &who, 4);
    std::memcpy(p + 12, &seq, 4);
  }

  void on_response(const DataToken& tok, std::span<const std::byte> bytes) {
    if (tok.announce) {
      const auto r = kv::decode_data<kv::DataResponse>(bytes);
      if (!r || r->kind != kv::DataResponseKind::kAnnounceOk)
        throw std::runtime_error("data: a peer refused the client buffer announcement");
      ++announcements_acked_;
      return;
    }
    const auto r = kv::decode_data<kv::DataResponse>(bytes);
    if (!r) {
      ++protocol_errors_;
      complete(tok.slot, kv::DataResponse::failure(kv::DataError::kMalformedRequest, 0));
      return;
    }
    complete(tok.slot, *r);
  }

  void complete(uint32_t s, const kv::DataResponse& r) {
    if (s >= slots_.size() || !slots_[s].busy || slots_[s].waiting) {
      ++protocol_errors_;
      return;
    }
    Slot& sl = slots_[s];
    sl.busy = false;
    --in_flight_;
    bool ok = r.key == sl.key;
    uint64_t moved = 0;
    if (sl.is_put) {
      ok = ok && r.kind == kv::DataResponseKind::kPutOk;
      moved = cfg_.value_bytes;
    } else if (r.kind == kv::DataResponseKind::kGetOk) {
      uint64_t stamped_key;
      std::memcpy(&stamped_key, slice_ + uint64_t{s} * cfg_.max_value_bytes, 8);
      ok = ok && r.length == cfg_.value_bytes && stamped_key == sl.key;
      moved = r.length;
    } else if (r.kind == kv::DataResponseKind::kGetNotFound) {
      counters_.not_found.store(counters_.not_found.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      ok = false;
    }
    if (!ok) {
      counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    latency_.record(t_.meter().now_ns() - sl.issued_ns);
    counters_.bytes.store(counters_.bytes.load(std::memory_order_relaxed) + moved, std::memory_order_relaxed);
    counters_.completed.store(counters_.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  DataNodeConfig cfg_;
  uint32_t index_;
  T& t_;
  std::byte* slice_;
  std::optional<DataRingClient> ring_;  // Delegation, direct
  std::optional<DataIpcClient> ipc_;    // Meta
  Rng rng_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> endpoint_of_rank_;
  std::unique_ptr<Ctx> ctx_;
  MemoryRegion mr_{};
  uint32_t announcements_sent_ = 0, announcements_acked_ = 0;
  uint32_t seq_ = 0;
  bool started_ = false;
  uint64_t in_flight_ = 0;
  bool issuing_ = true;
  uint64_t protocol_errors_ = 0;
  DataClientCounters counters_;
  copyrpc::RttHistogram latency_;
};

}  // namespace bkv::data
