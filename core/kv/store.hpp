// The per-node key-value store (docs/design.md §KV and workload).
//
// One store per node: `key_range` slots of std::atomic<uint64_t>, shared by every daemon
// thread of the node, accessed with relaxed ordering (a benchmark store must not be the
// bottleneck; no operation needs to order other memory). Sharding is ownership only:
// daemon `owner_of(key, D)` serves key `key` (the array is not split).
//
// "Not found": a slot that no put has reached holds kAbsentValue (all ones); a get of it
// answers GetNotFound. A MetaPut carrying kAbsentValue is invalid (Request::valid), so
// a stored value can never be mistaken for absence.
//
// execute() is what a daemon calls for every request it serves, local or from a peer: it
// validates the request against this node (structure, rank, key < key_range) and answers
// an error Response instead of touching memory out of bounds.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/kv/history_oracle.hpp"
#include "core/kv/types.hpp"

namespace bkv::kv {

// Shard ownership rule: key k on a node with D daemons is served by daemon k % D.
// Precondition: num_daemons >= 1 (server_threads is validated by the options).
constexpr uint32_t owner_of(uint64_t key, uint32_t num_daemons) noexcept {
  return static_cast<uint32_t>(key % num_daemons);
}

class Store {
 public:
  static_assert(std::atomic<uint64_t>::is_always_lock_free);

  Store(uint32_t rank, uint64_t key_range) : rank_(rank), key_range_(key_range) {
    if (key_range == 0) throw std::invalid_argument("kv::Store: key_range must be >= 1");
    slots_ = std::make_unique<std::atomic<uint64_t>[]>(key_range);
    for (uint64_t k = 0; k < key_range; ++k) slots_[k].store(kAbsentValue, std::memory_order_relaxed);
  }

  uint32_t rank() const noexcept { return rank_; }
  uint64_t key_range() const noexcept { return key_range_; }
  bool in_range(uint64_t key) const noexcept { return key < key_range_; }

  // Direct access for local callers that already validated the key; a bad key is a
  // programming error here and throws (peers go through execute(), which never throws).
  void put(uint64_t key, uint64_t value) {
    check(key);
    if (value == kAbsentValue) throw std::invalid_argument("kv::Store::put: value kAbsentValue is reserved");
    slots_[key].store(value, std::memory_order_relaxed);
  }
  std::optional<uint64_t> get(uint64_t key) const {
    check(key);
    const uint64_t v = slots_[key].load(std::memory_order_relaxed);
    if (v == kAbsentValue) return std::nullopt;
    return v;
  }

  // Unchecked slot access for execute(); callers must have checked in_range(key).
  std::atomic<uint64_t>& slot_unchecked(uint64_t key) noexcept { return slots_[key]; }

  // The exactly-once oracle execute() reports every operation to (nullptr: none, the
  // default; core/kv/history_oracle.hpp).
  void set_oracle(HistoryOracle* oracle) noexcept { oracle_ = oracle; }
  HistoryOracle* oracle() const noexcept { return oracle_; }

 private:
  void check(uint64_t key) const {
    if (!in_range(key)) {
      throw std::out_of_range("kv::Store: key " + std::to_string(key) + " >= key_range " +
                              std::to_string(key_range_));
    }
  }

  uint32_t rank_;
  uint64_t key_range_;
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
  HistoryOracle* oracle_ = nullptr;
};

namespace detail {
// The operation of a request execute() validated, on its key's slot.
inline Response apply(std::atomic<uint64_t>& slot, const Request& req) noexcept {
  if (req.is_put()) {
    slot.store(req.value, std::memory_order_relaxed);
    return Response::put_ok();
  }
  const uint64_t v = slot.load(std::memory_order_relaxed);
  return v == kAbsentValue ? Response::get_not_found() : Response::get_ok(v);
}
// The operation and its record as one step of the oracle's order (history_oracle.hpp).
// Out of line: the lock is not set up on the path without an oracle.
[[gnu::noinline]] inline Response apply_recorded(Store& store, std::atomic<uint64_t>& slot, const Request& req,
                                                 HistoryOracle& oracle) noexcept {
  const std::unique_lock<std::mutex> lock = oracle.apply_lock();
  const Response resp = apply(slot, req);
  oracle.applied(store.rank(), req, resp);
  return resp;
}
}  // namespace detail

// Executes one request on this node's store. Never throws, never reads or writes out of
// bounds: an invalid request, a request for another rank or a key >= key_range yields a
// kError response (value = the offending key, when there is one).
inline Response execute(Store& store, const Request& req) noexcept {
  if (!req.valid()) return Response::failure(ErrorCode::kMalformedRequest);
  if (req.rank != store.rank()) return Response::failure(ErrorCode::kWrongRank, req.key);
  if (!store.in_range(req.key)) return Response::failure(ErrorCode::kKeyOutOfRange, req.key);
  auto& slot = store.slot_unchecked(req.key);
  if (HistoryOracle* oracle = store.oracle(); oracle != nullptr) [[unlikely]]
    return detail::apply_recorded(store, slot, req, *oracle);
  return detail::apply(slot, req);
}

}  // namespace bkv::kv
