// The UCP plumbing both ucx-am nodes share (the KV node, ucx_am.cpp, and the data node,
// ucx_am_data.cpp): one UCP context per node with the AM feature, one single-threaded
// worker per thread with one active-message handler, endpoints to peer workers, and the
// forced close. Errors throw std::runtime_error (or std::invalid_argument for a bad
// transport list) whose text starts with the owner's name ("ucx-am", "ucx-am data").
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/ucx_am/ucx_am.hpp"

namespace bkv::ucx_am {

[[noreturn]] void fail(const std::string& owner, const std::string& what, ucs_status_t status);

// A UCP context with the AM feature, its workers used from different threads
// (mt_workers_shared). `ucx.tls` non-empty replaces UCX_TLS.
ucp_context_h create_context(const Config& ucx, const std::string& owner);

struct UcpWorker {
  ucp_worker_h worker = nullptr;
  std::vector<ucp_ep_h> eps;  // by the peer index its owner chose
  WorkerAddress address{};    // this worker's packed address, for the peers
  std::vector<std::string> endpoint_descriptions;  // ucp_ep_print_info of each endpoint made
};

// Creates a single-threaded worker, packs its address (std::length_error if it does not
// fit a WorkerAddress: restrict UCX_TLS) and installs `handler` for `am_id` with `flags`
// (UCP_AM_FLAG_WHOLE_MSG at least).
void open_worker(UcpWorker& w, ucp_context_h context, uint32_t am_id, ucp_am_recv_callback_t handler, void* arg,
                 uint32_t flags, const std::string& owner);

// An endpoint from `w` to the worker at `to`. Error mode NONE: UCX 1.13 has no
// peer-failure support over shared memory.
ucp_ep_h connect_endpoint(UcpWorker& w, const WorkerAddress& to, const std::string& owner);

// Checks the worker addresses a node connects with: np ranks x per_rank workers, each
// address 1..kWorkerAddressBytes long; std::invalid_argument naming `owner` otherwise.
void check_worker_addresses(std::span<const WorkerAddress> all, uint32_t np, uint32_t per_rank,
                            const std::string& owner);

// Closes every endpoint without a handshake (peers may be gone), drains the worker's
// progress and destroys it. Safe on a worker that was never opened.
void close_worker(UcpWorker& w) noexcept;

}  // namespace bkv::ucx_am
