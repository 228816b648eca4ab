// The shared receive queue (SRQ) of the software NIC: zero-length receives, counted.
// Used by the instant and wall-clock loopback, UCX and the discrete-event NIC model.
//
// Rules:
//  - posting more receives than the SRQ holds is a programming error (std::logic_error
//    naming the numbers), not something to clamp;
//  - every WRITE_IMM that executes at the responder consumes exactly one receive; with
//    none posted it does not execute (receiver not ready) and consumes nothing.
// Invariant: 0 <= posted <= capacity.
#pragma once

#include <cassert>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace bkv::software_nic {

class SharedReceiveQueue {
 public:
  SharedReceiveQueue() = default;
  explicit SharedReceiveQueue(uint32_t capacity) noexcept : capacity_(capacity) {}

  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t posted() const noexcept { return posted_; }
  bool empty() const noexcept { return posted_ == 0; }

  // Adds n receives. `who` names the transport in the error message.
  void post(uint32_t n, const char* who) {
    if (uint64_t{posted_} + n > capacity_)
      throw std::logic_error(std::string(who) + ": posting " + std::to_string(n) + " receives onto " +
                             std::to_string(posted_) + " would exceed the SRQ capacity " +
                             std::to_string(capacity_));
    posted_ += n;
  }
  // One WRITE_IMM executes: it takes a receive the caller saw posted (!empty()).
  void consume() noexcept {
    assert(posted_ > 0);
    --posted_;
  }

 private:
  uint32_t capacity_ = 0;
  uint32_t posted_ = 0;
};

}  // namespace bkv::software_nic
