// The UCP calls every UCP user in the tree makes the same way: the UCX transport
// (transports/ucx/ucx_transport.cpp), the ucx-am nodes (backends/ucx_am/ucp_worker.cpp)
// and the tests' raw workers. Each returns UCP's status for its caller to report in its
// own words. Only code built with UCX includes it.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>

namespace bkv::ucp {

// A worker of `context` used by one thread only.
inline ucs_status_t create_single_thread_worker(ucp_context_h context, ucp_worker_h* worker) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  return ucp_worker_create(context, &wp, worker);
}

// Installs cb(arg, ...) as `worker`'s handler of active message `am_id`, with `flags`
// (UCP_AM_FLAG_WHOLE_MSG at least).
inline ucs_status_t set_am_handler(ucp_worker_h worker, uint32_t am_id, uint32_t flags, ucp_am_recv_callback_t cb,
                                   void* arg) {
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = am_id;
  hp.flags = flags;
  hp.cb = cb;
  hp.arg = arg;
  return ucp_worker_set_am_recv_handler(worker, &hp);
}

// Closes `ep` without a handshake (its peer may be gone), progressing `worker` until
// UCX is done with it. Outstanding sends on it complete with UCS_ERR_CANCELED.
inline void force_close(ucp_ep_h ep, ucp_worker_h worker) noexcept {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
    ucp_request_free(r);
  }
}

}  // namespace bkv::ucp
