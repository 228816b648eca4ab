#include "backends/ucx_am/ucp_worker.hpp"

#include <cstdio>
#include <cstdlib>

#include <cstring>
#include <stdexcept>
#include <string>

#include "core/ucp_basics.hpp"

namespace bkv::ucx_am {

void fail(const std::string& owner, const std::string& what, ucs_status_t status) {
  throw std::runtime_error(owner + ": " + what + " failed: " + ucs_status_string(status));
}

ucp_context_h create_context(const Config& ucx, const std::string& owner) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) fail(owner, "ucp_config_read", st);
  if (!ucx.tls.empty()) {
    st = ucp_config_modify(config, "TLS", ucx.tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      throw std::invalid_argument(owner + ": bad transport list '" + ucx.tls + "': " + ucs_status_string(st));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM;
  params.mt_workers_shared = 1;  // the workers run on different threads
  ucp_context_h context = nullptr;
  st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) fail(owner, "ucp_init", st);
  return context;
}

void open_worker(UcpWorker& w, ucp_context_h context, uint32_t am_id, ucp_am_recv_callback_t handler, void* arg,
                 uint32_t flags, const std::string& owner) {
  ucs_status_t st = ucp::create_single_thread_worker(context, &w.worker);
  if (st != UCS_OK) fail(owner, "ucp_worker_create", st);
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  st = ucp_worker_query(w.worker, &attr);
  if (st != UCS_OK) fail(owner, "ucp_worker_query", st);
  const size_t len = attr.address_length;
  if (len == 0 || len > kWorkerAddressBytes) {
    ucp_worker_release_address(w.worker, attr.address);
    throw std::length_error(owner + ": the worker address is " + std::to_string(len) + " bytes; at most " +
                            std::to_string(kWorkerAddressBytes) + " fit (restrict UCX_TLS)");
  }
  w.address.length = static_cast<uint32_t>(len);
  std::memcpy(w.address.bytes, attr.address, len);
  ucp_worker_release_address(w.worker, attr.address);
  st = ucp::set_am_handler(w.worker, am_id, flags, handler, arg);
  if (st != UCS_OK) fail(owner, "ucp_worker_set_am_recv_handler", st);
}

ucp_ep_h connect_endpoint(UcpWorker& w, const WorkerAddress& to, const std::string& owner) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.address = reinterpret_cast<const ucp_address_t*>(to.bytes);
  p.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h ep = nullptr;
  const ucs_status_t st = ucp_ep_create(w.worker, &p, &ep);
  if (st != UCS_OK) fail(owner, "ucp_ep_create", st);
  // What UCX selected for it (ucp_ep_print_info's text), for the run's provenance.
  char* text = nullptr;
  size_t length = 0;
  if (FILE* f = open_memstream(&text, &length)) {
    ucp_ep_print_info(ep, f);
    std::fclose(f);
    w.endpoint_descriptions.emplace_back(text, length);
    std::free(text);
  }
  return ep;
}

void check_worker_addresses(std::span<const WorkerAddress> all, uint32_t np, uint32_t per_rank,
                            const std::string& owner) {
  if (all.size() != size_t{np} * per_rank)
    throw std::invalid_argument(owner + ": connect: " + std::to_string(all.size()) + " worker addresses, expected " +
                                std::to_string(np) + " ranks x " + std::to_string(per_rank));
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].length == 0 || all[i].length > kWorkerAddressBytes)
      throw std::invalid_argument(owner + ": connect: worker address " + std::to_string(i) + " (rank " +
                                  std::to_string(i / per_rank) + ") has length " + std::to_string(all[i].length) +
                                  ", outside 1.." + std::to_string(kWorkerAddressBytes));
}

void close_worker(UcpWorker& w) noexcept {
  for (ucp_ep_h ep : w.eps) {
    if (ep != nullptr) ucp::force_close(ep, w.worker);  // no handshake with peers that may be gone
  }
  w.eps.clear();
  if (w.worker != nullptr) {
    while (ucp_worker_progress(w.worker) != 0) {
    }
    ucp_worker_destroy(w.worker);
    w.worker = nullptr;
  }
}

}  // namespace bkv::ucx_am
