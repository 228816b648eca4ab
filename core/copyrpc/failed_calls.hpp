// copyrpc failed calls: the calls of a stopped endpoint, failed back to their callers
// (docs/design_channels.md §copyrpc). Every call() that returned kOk ends exactly once: by its
// response, or, when its endpoint stops first, here. Stopping an endpoint takes every call
// still pending on it out of its pending table at once (so nothing the peer sends later
// can complete one a second time); the Context hands them back at the end of a drain(),
// each with the reason the endpoint stopped, in call-id order per endpoint.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/copyrpc/endpoint.hpp"

namespace bkv::copyrpc {

template <class Token>
class FailedCalls {
 public:
  // Takes every call pending in `pending` out, to be failed back with `reason`; returns
  // how many.
  template <bool kTimed>
  uint32_t take_all(CallSlab<Token, kTimed>& pending, EndpointError reason) {
    return pending.take_all([&](Token&& t) { calls_.push_back(Call{std::move(t), reason}); });
  }

  bool empty() const noexcept { return calls_.empty(); }

  // on_failed_call(Token&&, EndpointError) for each call taken so far, oldest first. The
  // callback may stop another endpoint, adding to the list: the list is taken out first,
  // so every failure is handed back once (a call added meanwhile waits for the next one).
  template <class OnFailedCall>
  [[gnu::noinline]] void hand_back(OnFailedCall& on_failed_call) {
    std::vector<Call> calls;
    calls.swap(calls_);
    for (Call& c : calls) on_failed_call(std::move(c.token), c.reason);
  }

 private:
  struct Call {
    Token token;
    EndpointError reason;
  };
  std::vector<Call> calls_;
};

}  // namespace bkv::copyrpc
