// copyrpc alone (`benchkv rpc`): the measurement a user runs first on new hardware and
// the one the NIC and copyrpc parameters of the simulator are calibrated on
// (docs/calibration.md C3 and C4).
//
// One thread per rank, one copyrpc Context per thread. Rank 0 is the caller: it holds
// `endpoints` endpoints to every other rank and keeps endpoints x queue_depth calls
// outstanding, calling the endpoints in round-robin order (not necessarily the one that
// just answered), as the original benchmark did. Every other rank is a server: it
// answers each request with a response of the same size. Both loops are the original's:
// poll (drain the receive CQ, then flush every endpoint), then the caller refills and
// the server answers what it received; so calls and replies leave at the next poll.
//
// The caller measures each call's round trip (call() to its response) with the meter's
// clock: virtual time in the simulator, the steady clock on real runs.
//
// Ending a run across processes: a request with an empty payload is a stop request. The
// server answers it (empty) and reports stopped(); the caller sends one to each server
// after its own calls have drained (request_stop) and counts the answers (stops_acked).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "core/meter.hpp"
#include "core/transport.hpp"

namespace bkv::rpc {

struct RpcConfig {
  uint32_t endpoints = 1;      // per server rank, at the caller
  uint32_t queue_depth = 1;    // calls outstanding per endpoint
  uint32_t message_size = 32;  // request and response payload bytes
};

// What the caller remembers about a call: the endpoint it went out on and when.
struct RpcToken {
  uint32_t endpoint = 0;
  uint64_t issued_ns = 0;
  bool stop = false;  // a stop request, not a measured call
};

// Counters a sampler on another thread may read (relaxed; one writer).
struct alignas(64) RpcCounters {
  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<uint64_t> errors{0};  // failed calls and malformed or unexpected responses
};

template <Transport T>
class RpcThread {
 public:
  using Ctx = copyrpc::Context<T, RpcToken>;

  // Throws std::invalid_argument for a configuration copyrpc cannot carry, before the
  // context (and its receives on the transport) exists.
  RpcThread(T& transport, const copyrpc::ContextConfig& ccfg, const RpcConfig& cfg, bool caller)
      : cfg_(validated(cfg, ccfg)), ctx_(transport, ccfg), caller_(caller), payload_(cfg.message_size, std::byte{0x5a}) {}

  Ctx& context() noexcept { return ctx_; }
  uint32_t create_endpoint() {
    const uint32_t ep = ctx_.create_endpoint();
    outstanding_.push_back(0);
    return ep;
  }

  // One loop iteration. Returns the completions drained.
  uint32_t step() {
    auto& meter = ctx_.transport().meter();
    meter.charge(Op::kLoop, 1);
    const uint32_t cqes = ctx_.drain([this](RpcToken&& tok, std::span<const std::byte> resp) { on_response(tok, resp); }, [](RpcToken&&, copyrpc::EndpointError e) {
      throw std::runtime_error(std::string("rpc: a call was failed back: its endpoint stopped (") + copyrpc::to_string(e) + ")");
    });
    ctx_.flush();
    if (caller_) {
      if (issuing_) issue();
    } else {
      serve();
    }
    meter.record(Phase::kCqes, cqes);
    return cqes;
  }

  // The caller stops issuing (the end of a measurement); calls in flight still complete.
  void stop_issuing() noexcept { issuing_ = false; }
  uint64_t in_flight() const noexcept {
    return counters_.issued.load(std::memory_order_relaxed) - counters_.completed.load(std::memory_order_relaxed) -
           counters_.errors.load(std::memory_order_relaxed);
  }
  const RpcCounters& counters() const noexcept { return counters_; }

  // Caller: asks the server behind `endpoint` to stop (after this rank's calls drained).
  void request_stop(uint32_t endpoint) {
    const copyrpc::CallResult r = ctx_.call(endpoint, {}, 0, RpcToken{endpoint, 0, true});
    if (!r.ok()) throw std::runtime_error(std::string("rpc: stop request failed: ") + copyrpc::to_string(r.status));
    ++stops_sent_;
  }
  uint32_t stops_acked() const noexcept { return stops_acked_; }
  // Server: a stop request was answered.
  bool stopped() const noexcept { return stopped_; }
  const copyrpc::RttHistogram& rtt() const noexcept { return rtt_; }
  // Starts a new maximum round trip (at the start of a measured window, on the caller's thread).
  void restart_rtt_max() noexcept { rtt_.restart_max(); }
  bool is_caller() const noexcept { return caller_; }

 private:
  static RpcConfig validated(const RpcConfig& cfg, const copyrpc::ContextConfig& ccfg) {
    if (cfg.endpoints == 0 || cfg.queue_depth == 0)
      throw std::invalid_argument("rpc: endpoints and queue depth must be >= 1");
    const uint64_t max_payload = Ctx::max_payload_for(ccfg);
    if (cfg.message_size > max_payload)
      throw std::invalid_argument("rpc: message size " + std::to_string(cfg.message_size) +
                                  " exceeds the largest copyrpc payload for this ring (" + std::to_string(max_payload) +
                                  " bytes)");
    return cfg;
  }

  // Refills to endpoints x queue_depth calls in flight, the endpoints in round-robin
  // order from where the last refill stopped. An endpoint that refuses (no credit or ring
  // space now) ends this refill; the next loop tries again from it.
  void issue() {
    auto& meter = ctx_.transport().meter();
    const uint64_t target = uint64_t{cfg_.queue_depth} * outstanding_.size();
    while (total_outstanding_ < target) {
      const uint32_t ep = next_ep_;
      const copyrpc::CallResult r = ctx_.call(ep, payload_, cfg_.message_size, RpcToken{ep, meter.now_ns()});
      if (!r.ok()) {
        if (r.status == copyrpc::CallStatus::kEndpointError || r.status == copyrpc::CallStatus::kTooLarge)
          throw std::runtime_error(std::string("rpc: call failed: ") + copyrpc::to_string(r.status));
        break;
      }
      next_ep_ = ep + 1 == outstanding_.size() ? 0 : ep + 1;
      ++outstanding_[ep];
      ++total_outstanding_;
      counters_.issued.store(counters_.issued.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }

  void serve() {
    copyrpc::RecvHandle h;
    while (ctx_.recv(h)) {
      if (h.payload().empty()) {  // a stop request
        if (ctx_.reply(std::move(h), {}) != copyrpc::CallStatus::kOk) throw std::runtime_error("rpc: answering a stop failed");
        ctx_.flush();  // a stopped server polls no more: its last answer leaves now
        stopped_ = true;
        continue;
      }
      if (h.payload().size() != cfg_.message_size) {
        counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        continue;  // a request of the wrong size is not answered; the caller counts it lost
      }
      if (ctx_.reply(std::move(h), payload_) != copyrpc::CallStatus::kOk)
        throw std::runtime_error("rpc: a reply within the caller's allowance failed");
      counters_.completed.store(counters_.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }

  void on_response(const RpcToken& tok, std::span<const std::byte> resp) {
    if (tok.stop) {
      ++stops_acked_;
      return;
    }
    if (tok.endpoint >= outstanding_.size() || outstanding_[tok.endpoint] == 0) {
      counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    --outstanding_[tok.endpoint];
    --total_outstanding_;
    if (resp.size() != cfg_.message_size) {
      counters_.errors.store(counters_.errors.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return;
    }
    rtt_.record(ctx_.transport().meter().now_ns() - tok.issued_ns);
    counters_.completed.store(counters_.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  RpcConfig cfg_;  // before ctx_: validated first
  Ctx ctx_;
  bool caller_;
  bool issuing_ = true;
  bool stopped_ = false;
  uint32_t stops_sent_ = 0, stops_acked_ = 0;
  std::vector<std::byte> payload_;
  std::vector<uint32_t> outstanding_;  // calls in flight, by endpoint
  uint64_t total_outstanding_ = 0;     // their sum
  uint32_t next_ep_ = 0;               // the endpoint the next refill calls first
  RpcCounters counters_;
  copyrpc::RttHistogram rtt_;
};

}  // namespace bkv::rpc
