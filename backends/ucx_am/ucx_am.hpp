// ucx-am: the pure UCX active-message baseline (docs/design_backends.md §ucx-am backend). No
// copyrpc, no shared
// memory channels: every client thread owns a UCP worker with an endpoint to every
// daemon of every rank, and sends each request as one active message to the daemon that
// owns the key (rank `req.rank`, daemon key % D); the daemon executes it on its node's
// store and answers with one active message on its own endpoint to that client. Clients
// keep queue_depth requests in flight (closed loop over the same pre-generated pattern as
// the other backends).
//
// Design choices (documented here because the baseline is defined by them):
//  - Local requests go through UCX as well (UCX picks shared memory or self between the
//    workers of one process): the baseline is "everything is a UCX AM", so the
//    comparison with the copyrpc backends measures their whole stack against UCX alone.
//  - Daemons answer over endpoints they created themselves from the exchanged worker
//    addresses (not UCX reply endpoints): every worker's address is exchanged once
//    (MPI or in process), daemons connect to every client and clients to every daemon.
//  - One UCP context per node (shared by its workers, mt_workers_shared), one worker per
//    thread in UCS_THREAD_MODE_SINGLE, used only by its thread once the threads run.
//  - Small messages are forced eager (UCP_AM_SEND_FLAG_EAGER); the AM handlers only
//    queue or mark, the daemon executes and replies after ucp_worker_progress returns.
//
// Wire format: the AM payload is the message below (no AM user header), native
// little-endian layout, validated field by field on arrival: a message of the wrong size,
// from an unknown client, or answering a request that is not outstanding is dropped and
// counted as a protocol error (one line on stderr for the first few).
//
// Daemon metrics (backend::DaemonMetrics, as the other backends): per loop, the "CQEs"
// of the histogram are the request messages the loop served; replies and local_ops count
// the answers and KV operations; calls stay 0 (a daemon calls no one). "Calls in flight":
// daemon #0 samples, at the end of each of its loops, the requests its node's clients
// have in flight to other ranks (what daemon #0's copyrpc calls are in the Delegation
// backend); the other daemons record 0. Clients record every request's issue-to-answer
// latency (backend::Client's classes and clock, one clock read per step at most).
//
// Threads: step_daemon(d) only on daemon d's thread, step_client(c) only on client c's;
// everything else before the threads start or after they stopped (stop_issuing() with
// the client threads paused, as real/driver.hpp's Driver does). counters() are atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/client.hpp"
#include "backends/metrics.hpp"
#include "backends/node_config.hpp"
#include "core/kv/types.hpp"
#include "core/kv/workload.hpp"
#include "core/metrics/latency_histogram.hpp"

namespace bkv::ucx_am {

inline constexpr uint32_t kRequestAmId = 0x41;   // client -> daemon
inline constexpr uint32_t kResponseAmId = 0x42;  // daemon -> client
static_assert(kRequestAmId != kResponseAmId);

// A packed UCP worker address, exchanged out of band (fixed size for MPI all-to-all).
inline constexpr size_t kWorkerAddressBytes = 2040;
struct WorkerAddress {
  uint32_t length = 0;  // bytes used in `bytes`, 1..kWorkerAddressBytes
  uint32_t reserved = 0;
  std::byte bytes[kWorkerAddressBytes] = {};
};
static_assert(std::is_trivially_copyable_v<WorkerAddress> && sizeof(WorkerAddress) == 2048);
static_assert(offsetof(WorkerAddress, bytes) == 8);

// Client -> daemon: one request (kv::Request here, kv::DataRequest in the data benchmark:
// ucx_am_data.hpp). `client` = the client's global id (rank * C + c), the daemon's
// endpoint index towards it; `tag` = the client's slot (< queue_depth).
template <class Request>
struct ClientRequest {
  uint32_t client = 0;
  uint32_t tag = 0;
  Request req{};
};
// The layout on the wire: the client and tag words, then a request of `request_size`
// bytes at offset 8.
template <class Request>
constexpr bool client_request_layout(size_t request_size) noexcept {
  using M = ClientRequest<Request>;
  return std::is_trivially_copyable_v<M> && sizeof(M) == 8 + request_size && offsetof(M, tag) == 4 &&
         offsetof(M, req) == 8;
}
using RequestMsg = ClientRequest<kv::Request>;
static_assert(client_request_layout<kv::Request>(kv::kRequestSize));

// Daemon -> client: the answer to the request in slot `tag`. `daemon` = the daemon's
// global id (rank * D + d), checked against the daemon the request went to.
struct ResponseMsg {
  uint32_t daemon = 0;
  uint32_t tag = 0;
  kv::Response resp{};
};
static_assert(std::is_trivially_copyable_v<ResponseMsg> && sizeof(ResponseMsg) == 8 + kv::kResponseSize);
static_assert(offsetof(ResponseMsg, tag) == 4 && offsetof(ResponseMsg, resp) == 8);

// The checks of an arriving ucx-am message that need nothing but the job's shape, as
// pure functions of the peer's bytes (the AM handlers and the daemon's step run them;
// fuzz/ucx_am_messages.cpp runs them on arbitrary bytes).
// A message is accepted only whole, eager and of its exact size, without an AM header.
constexpr bool message_well_formed(size_t header_length, size_t length, size_t expected, bool rndv) noexcept {
  return header_length == 0 && length == expected && !rndv;
}
// What a daemon does with a well-formed request: serve it; drop it (a client outside the
// job, `clients_total` = NP x C: nobody to answer); or answer kMalformedRequest (request
// bytes kv::Request::valid() refuses). kv::execute checks the rank and key range after.
enum class RequestVerdict : uint8_t { kServe, kUnknownClient, kMalformed };
constexpr RequestVerdict request_verdict(const RequestMsg& m, uint64_t clients_total) noexcept {
  if (m.client >= clients_total) return RequestVerdict::kUnknownClient;
  return m.req.valid() ? RequestVerdict::kServe : RequestVerdict::kMalformed;
}

// The daemon a request goes to (global id): its target rank's shard owner (key % D).
constexpr uint32_t target_daemon(const kv::Request& r, uint32_t daemons) noexcept {
  return r.rank * daemons + kv::owner_of(r.key, daemons);
}

struct Config {
  std::string tls;  // UCX_TLS override ("sm,self", "tcp"); empty = the environment's
};

class UcxAmNode {
 public:
  // Creates the node's UCP context, one worker per daemon and per client, the store and
  // the clients' patterns. Throws std::runtime_error naming the UCX call that failed.
  UcxAmNode(const backend::NodeConfig& cfg, const kv::WorkloadConfig& wl, const Config& ucx = {});
  ~UcxAmNode();
  UcxAmNode(const UcxAmNode&) = delete;
  UcxAmNode& operator=(const UcxAmNode&) = delete;

  // ---- wiring
  // This node's worker addresses: daemons 0..D-1, then clients 0..C-1.
  std::vector<WorkerAddress> local_addresses() const;
  // Every rank's local_addresses(), rank-major (np * (D + C) entries). Validates sizes
  // and lengths (std::invalid_argument naming the entry), then creates the endpoints.
  void connect(std::span<const WorkerAddress> all);
  void start() noexcept {}  // nothing left to build (kept for symmetry with backend::Node)

  // ---- threads
  uint32_t threads() const noexcept { return cfg_.daemons + cfg_.clients; }
  bool step_daemon(uint32_t d);
  backend::ClientStepResult step_client(uint32_t c);
  void stop_issuing() noexcept;
  uint64_t in_flight() const noexcept;

  // ---- inspection
  const backend::ClientCounters& counters(uint32_t c) const noexcept { return counters_[c]; }
  const backend::DaemonMetrics& daemon_metrics(uint32_t d) const;
  // Client c's issue-to-answer latency by class (local: to a daemon of its own rank,
  // still through UCX); read on the client's thread, or while it is parked.
  const metrics::RequestLatency& client_latency(uint32_t c) const;
  void restart_client_latency_max(uint32_t c);  // at a snapshot, on the client's thread
  uint64_t client_protocol_errors() const noexcept;
  const backend::NodeConfig& config() const noexcept { return cfg_; }
  // ucp_ep_print_info's text for every endpoint of every worker (which transports UCX
  // selected), daemons' then clients'.
  std::vector<std::string> endpoint_descriptions() const;

 private:
  struct Impl;  // the UCX-facing part (ucx_am.cpp)
  backend::NodeConfig cfg_;
  std::unique_ptr<backend::ClientCounters[]> counters_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bkv::ucx_am
