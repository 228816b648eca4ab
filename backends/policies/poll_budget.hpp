// Poll budget (docs/design_backends.md §Loop policies): the poll phase of Delegation daemon #0
// polls copyrpc up to N times, stopping once N responses came. N = 1 is one poll.
#pragma once

#include <cstdint>
#include <stdexcept>

namespace bkv::backend {

class PollBudget {
 public:
  explicit PollBudget(uint32_t polls) : n_(polls) {
    if (polls == 0) throw std::invalid_argument("poll budget: must be >= 1");
  }

  uint32_t polls() const noexcept { return n_; }
  // After `polls` polls that returned `cqes` completions and `responses` responses.
  bool poll_again(uint32_t polls, uint32_t /*cqes*/, uint32_t responses) const noexcept {
    return polls < n_ && responses < n_;
  }

 private:
  uint32_t n_;
};

}  // namespace bkv::backend
