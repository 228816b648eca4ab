// ucx-am data: data_put / data_get as UCX active messages (docs/data.md §ucx-am), the
// baseline beside the copyrpc data backends, as ucx-am is beside the KV backends. No
// copyrpc and no announced regions: UCX moves the value inside the active message and
// chooses the protocol by size (eager below its rendezvous threshold, rendezvous above:
// the receiver pulls the data with a zero-copy get once it names the destination).
//
//   put: a client sends one AM to daemon #0 of the owner rank: header DataAmRequest, data
//     = the value from the client's buffer slot. The daemon validates the header, takes a
//     free store block and receives the value straight into it (ucp_am_recv_data_nbx on
//     the rendezvous descriptor or the persistent eager data), commits the block when the
//     receive completes and answers PutOk (an AM with a DataAmResponse header, no data).
//   get: the request carries no data; the daemon pins the key's block and answers GetOk
//     with the value as the AM's data (or GetNotFound / an error, without data); the
//     block stays pinned until UCX has completed that send. The client receives the
//     value straight into the request's buffer slot.
//   Local requests go through UCX as well (shared memory or self), as in ucx-am.
//
// Wire (AM headers; native little-endian layout, static_asserts below):
//   DataAmRequest  (48 B) {client u32 (rank * C + c), tag u32 (slot < queue_depth),
//                          kv::DataRequest (offset, slice and rkey 0: unused here)}
//   DataAmResponse (24 B) {tag u32, reserved u32 = 0, kv::DataResponse}
// Checks on the daemon, before anything is received or sent: header size, a known
// client, request structure (kv::DataRequest::valid, unused fields zero), put data
// length == request length, get without data, rank, key range, put length against the
// store, get value against the buffer capacity. A request that fails them is answered
// with a DataError and counted (rejected()); one without a usable client id is dropped
// and counted as a protocol error. The client accepts a response only for an
// outstanding slot, of the right key, with data exactly for GetOk and no longer than
// the slot.
//
// Threads: like real/data.hpp, one thread steps daemon #0 and every client in turn;
// each owns its UCP worker (UCS_THREAD_MODE_SINGLE).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <string>
#include <vector>

#include "backends/data/data_node.hpp"
#include "backends/ucx_am/ucx_am.hpp"
#include "core/copyrpc/context.hpp"
#include "core/kv/data_wire.hpp"

namespace bkv::ucx_am {

inline constexpr uint32_t kDataRequestAmId = 0x51;   // client -> daemon #0
inline constexpr uint32_t kDataResponseAmId = 0x52;  // daemon #0 -> client
static_assert(kDataRequestAmId != kDataResponseAmId && kDataRequestAmId != kRequestAmId &&
              kDataRequestAmId != kResponseAmId && kDataResponseAmId != kRequestAmId &&
              kDataResponseAmId != kResponseAmId);

struct DataAmResponse {
  uint32_t tag = 0;
  uint32_t reserved = 0;
  kv::DataResponse resp{};
};
static_assert(std::is_trivially_copyable_v<DataAmResponse> && sizeof(DataAmResponse) == 8 + sizeof(kv::DataResponse) &&
              offsetof(DataAmResponse, resp) == 8);

using DataAmRequest = ClientRequest<kv::DataRequest>;
static_assert(client_request_layout<kv::DataRequest>(kv::kDataRequestSize));

// What a daemon does with a data request that arrived whole (its header of exactly
// sizeof(DataAmRequest), `data_length` payload bytes), a pure function of the peer's
// bytes and the store's shape (the daemon's step runs it; fuzz/ucx_am_messages.cpp on
// arbitrary bytes): drop it (kUnknownClient: a client outside the job, `clients_total`
// = NP x C), answer an error (`error`), or serve it (neither).
struct DataRequestVerdict {
  bool unknown_client = false;
  kv::DataError error = kv::DataError::kNone;
};
constexpr DataRequestVerdict data_request_verdict(const DataAmRequest& h, size_t data_length, uint64_t clients_total,
                                                  uint32_t rank, uint64_t key_range, uint32_t max_value_bytes) noexcept {
  const kv::DataRequest& r = h.req;
  if (h.client >= clients_total) return {true, kv::DataError::kNone};
  if (!r.valid() || r.offset != 0 || r.slice != 0 || r.rkey != 0 || data_length != (r.is_put() ? r.length : 0))
    return {false, kv::DataError::kMalformedRequest};
  if (r.rank != rank) return {false, kv::DataError::kWrongRank};
  if (r.key >= key_range) return {false, kv::DataError::kKeyOutOfRange};
  if (r.is_put() && r.length > max_value_bytes) return {false, kv::DataError::kValueTooLarge};
  return {};
}

class UcxAmDataNode {
 public:
  // cfg.backend is not read (this is its own backend); cfg.validate() must pass.
  UcxAmDataNode(const data::DataNodeConfig& cfg, const Config& ucx = {});
  ~UcxAmDataNode();
  UcxAmDataNode(const UcxAmDataNode&) = delete;
  UcxAmDataNode& operator=(const UcxAmDataNode&) = delete;

  // ---- wiring: worker addresses of daemon #0, then clients 0..C-1; connect() takes
  // every rank's, rank-major (np * (1 + C)).
  std::vector<WorkerAddress> local_addresses() const;
  void connect(std::span<const WorkerAddress> all);

  // ---- stepping (one thread)
  void step_daemon();
  void step_client(uint32_t c);
  void stop_issuing() noexcept;

  // ---- inspection
  uint32_t clients() const noexcept { return cfg_.clients; }
  const data::DataClientCounters& counters(uint32_t c) const;
  const copyrpc::RttHistogram& latency(uint32_t c) const;
  void restart_latency_max(uint32_t c);  // a new maximum (at a window's start; between steps)
  uint64_t in_flight(uint32_t c) const;
  const data::DataServerCounters& server_counters() const noexcept;
  uint64_t protocol_errors() const noexcept;  // dropped messages, daemon and clients
  uint64_t rendezvous_receives() const noexcept;  // values UCX moved by rendezvous (the rest: eager)
  // ucp_ep_print_info's text for every endpoint (which transports UCX selected).
  std::vector<std::string> endpoint_descriptions() const;

 private:
  struct Impl;
  data::DataNodeConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bkv::ucx_am
