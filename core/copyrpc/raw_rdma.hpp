// copyrpc raw RDMA (docs/design_channels.md §copyrpc raw RDMA): plain READs and WRITEs on an
// endpoint's queue pair for bulk data, always signalled, their completions kept apart
// from RPC completions. RawOperations is their bookkeeping: a slot per operation in
// flight (its work-request id is encode_wr_id(WrKind::kRaw, slot)) that holds the
// caller's id, and the completions reaped but not yet handed back by poll_raw().
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/transport.hpp"

namespace bkv::copyrpc {

class RawOperations {
 public:
  // A slot for an operation about to be posted, holding `user_id`.
  uint32_t open(uint64_t user_id) {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      user_ids_[slot] = user_id;
      live_[slot] = 1;
      return slot;
    }
    user_ids_.push_back(user_id);
    live_.push_back(1);
    return static_cast<uint32_t>(user_ids_.size() - 1);
  }
  // The post of `slot`'s operation failed: the slot is free again.
  void cancel(uint32_t slot) {
    live_[slot] = 0;
    free_.push_back(slot);
  }
  // The operation of `slot` was posted: it is pending until its completion.
  void posted() noexcept { ++outstanding_; }
  // A completion with work-request value `slot`: kept for poll_raw() if it names a live
  // slot (any other value is ignored).
  void completed(uint64_t slot, WcStatus status) {
    if (slot >= user_ids_.size() || !live_[slot]) return;
    live_[slot] = 0;
    free_.push_back(static_cast<uint32_t>(slot));
    --outstanding_;
    done_.push_back({user_ids_[slot], status});
  }
  // cb(user_id, WcStatus) for each completion kept so far; returns how many.
  template <class F>
  uint32_t hand_back(F&& cb) {
    const uint32_t n = static_cast<uint32_t>(done_.size());
    for (const auto& d : done_) cb(d.first, d.second);
    done_.clear();
    return n;
  }
  uint64_t pending() const noexcept { return outstanding_; }

 private:
  std::vector<uint64_t> user_ids_;  // by slot
  std::vector<uint8_t> live_;       // by slot: an operation is in flight
  std::vector<uint32_t> free_;
  std::vector<std::pair<uint64_t, WcStatus>> done_;
  uint64_t outstanding_ = 0;
};

}  // namespace bkv::copyrpc
