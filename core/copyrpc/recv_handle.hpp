// copyrpc RecvHandle: a received request as the Context's user holds it, from recv() to
// reply() (docs/design_channels.md §copyrpc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/transport.hpp"

namespace bkv::copyrpc {

template <Transport T, class Token>
class Context;

// A received request, answered at most once. recv() fills a handle, reply() spends it.
// A handle cannot be copied, and a move spends its source, so no two live handles ever
// name the same request: a second reply, through the same handle or one it was moved
// from, finds a spent handle and is refused (kInvalidHandle), whatever else is held.
// A handle also names the Context that filled it, and another Context refuses it
// (kInvalidHandle, the handle stays live): its endpoint number and call id mean nothing
// there.
// A default-constructed handle is spent. Spent is endpoint() == kSpent, which reply()'s
// test of the endpoint number refuses as it refuses any number of no endpoint, so
// spending costs one store and no test.
//
// payload() points into the receive ring and stays valid until the next flush()/poll()
// after recv() returned the handle (that flush publishes the consumed position the peer
// may READ; recv() and drain() never move it past a taken request); copy what must live
// longer (drop_payload() clears it on a handle kept past that).
class RecvHandle {
 public:
  static constexpr uint32_t kSpent = UINT32_MAX;  // the endpoint of a spent handle

  RecvHandle() noexcept = default;
  RecvHandle(const RecvHandle&) = delete;
  RecvHandle& operator=(const RecvHandle&) = delete;
  RecvHandle(RecvHandle&& o) noexcept : f_(o.f_), owner_(o.owner_) { o.f_.endpoint = kSpent; }
  RecvHandle& operator=(RecvHandle&& o) noexcept {
    if (this != &o) {
      f_ = o.f_;
      owner_ = o.owner_;
      o.f_.endpoint = kSpent;
    }
    return *this;
  }

  bool spent() const noexcept { return f_.endpoint == kSpent; }
  uint32_t endpoint() const noexcept { return f_.endpoint; }
  uint32_t call_id() const noexcept { return f_.call_id; }
  // Bytes of response credit the caller reserved for the reply (its internal allowance).
  // reply() sends at most max_reply_payload(allowance()) payload bytes; the caller's
  // receive path refuses a longer response to this call (it stops the endpoint with
  // kBadResponseLength), whatever the batch around it would hold.
  uint32_t allowance() const noexcept { return f_.allowance; }
  std::span<const std::byte> payload() const noexcept { return {f_.data, f_.len}; }
  void drop_payload() noexcept {
    f_.data = nullptr;
    f_.len = 0;
  }

 private:
  template <Transport, class>
  friend class Context;
  struct Fields {
    uint32_t endpoint = kSpent;
    uint32_t call_id = 0;
    const std::byte* data = nullptr;
    uint32_t len = 0;
    uint32_t allowance = 0;
  };
  Fields f_;
  const void* owner_ = nullptr;  // the Context whose recv() filled it
};

}  // namespace bkv::copyrpc
