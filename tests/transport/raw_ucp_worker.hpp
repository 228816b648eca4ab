// A UCP worker that belongs to no transport or node of ours, for tests that play a
// stranger or a hostile peer: a UCP context with the AM feature over the UCX transports
// `tls`, one single-threaded worker, the endpoints it opens (closed without a handshake
// with it) and a send that waits until UCX is done with the buffers. Errors throw
// std::runtime_error naming the UCP call.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/ucp_basics.hpp"

namespace bkv::test {

class RawUcpWorker {
 public:
  explicit RawUcpWorker(const char* tls) {
    ucp_config_t* cfg = nullptr;
    check(ucp_config_read(nullptr, nullptr, &cfg), "ucp_config_read");
    const ucs_status_t modified = ucp_config_modify(cfg, "TLS", tls);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;
    const ucs_status_t st = modified == UCS_OK ? ucp_init(&params, cfg, &ctx_) : modified;
    ucp_config_release(cfg);
    check(st, modified == UCS_OK ? "ucp_init" : "ucp_config_modify TLS");
    if (const ucs_status_t ws = ucp::create_single_thread_worker(ctx_, &worker_); ws != UCS_OK) {
      ucp_cleanup(ctx_);
      check(ws, "ucp_worker_create");
    }
  }
  ~RawUcpWorker() {
    for (ucp_ep_h ep : eps_) ucp::force_close(ep, worker_);
    ucp_worker_destroy(worker_);
    ucp_cleanup(ctx_);
  }
  RawUcpWorker(const RawUcpWorker&) = delete;
  RawUcpWorker& operator=(const RawUcpWorker&) = delete;

  // The worker's packed address, for a peer to connect to.
  std::vector<std::byte> address() const {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    check(ucp_worker_get_address(worker_, &addr, &len), "ucp_worker_get_address");
    const auto* b = reinterpret_cast<const std::byte*>(addr);
    std::vector<std::byte> out(b, b + len);
    ucp_worker_release_address(worker_, addr);
    return out;
  }
  // Calls `handler(arg, ...)` for every active message `am_id` that arrives whole.
  void on_am(uint32_t am_id, ucp_am_recv_callback_t handler, void* arg) {
    check(ucp::set_am_handler(worker_, am_id, UCP_AM_FLAG_WHOLE_MSG, handler, arg), "ucp_worker_set_am_recv_handler");
  }
  // An endpoint to the worker whose packed address is at `address`, with the error mode
  // the other end has (UCX refuses a connection whose two ends differ in it).
  ucp_ep_h connect(const void* address, ucp_err_handling_mode_t err_mode) {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.address = static_cast<const ucp_address_t*>(address);
    p.err_mode = err_mode;
    ucp_ep_h ep = nullptr;
    check(ucp_ep_create(worker_, &p, &ep), "ucp_ep_create");
    eps_.push_back(ep);
    return ep;
  }
  // Sends one active message on `ep` and progresses, calling `pump` to drive the other
  // side (its worker must progress for the connection to come up), until UCX is done
  // with the buffers; throws after 10 s.
  template <class Pump>
  void send(ucp_ep_h ep, uint32_t am_id, const void* header, size_t header_length, const void* data, size_t length,
            Pump&& pump) {
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, am_id, header, header_length, data, length, &p);
    if (UCS_PTR_IS_ERR(r)) check(UCS_PTR_STATUS(r), "ucp_am_send_nbx");
    if (!UCS_PTR_IS_PTR(r)) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
      if (std::chrono::steady_clock::now() > deadline) {
        ucp_request_free(r);
        throw std::runtime_error("raw UCP worker: a send did not complete in 10 s");
      }
      ucp_worker_progress(worker_);
      pump();
    }
    ucp_request_free(r);
  }
  void progress() { ucp_worker_progress(worker_); }
  // Progresses this worker and `pump` `rounds` times: lets a receiver run its handlers.
  template <class Pump>
  void settle(Pump&& pump, int rounds = 200) {
    for (int i = 0; i < rounds; ++i) {
      progress();
      pump();
    }
  }

 private:
  static void check(ucs_status_t st, const char* what) {
    if (st != UCS_OK) throw std::runtime_error(std::string("raw UCP worker: ") + what + " failed: " + ucs_status_string(st));
  }

  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
};

}  // namespace bkv::test
