// The store of bulk values (docs/data.md §Store): a variable-size value per key, kept in
// one arena of equal blocks that a daemon registers once, so the NIC reads a value out
// of it (data_get: RDMA WRITE) and writes a new value into it (data_put: RDMA READ)
// without a copy.
//
//   arena = blocks x max_value_bytes, blocks = key_range + spare_blocks
//
// A put acquires a free block, fills it (RDMA READ or a local copy), and commits it: the
// key now names that block and its length, atomically for anyone who looks afterwards,
// and the key's previous block is released. A get pins the key's current block for the
// duration of its transfer; a commit during the transfer does not free a pinned block.
// So a get always delivers exactly the bytes of one completed put. Blocks are
// reference-counted: one reference for the key that names it, one for an acquired
// block not yet committed, one per pin.
//
// Enough blocks: every key holds at most one block, and every operation in flight holds
// at most one more (its acquired block, or the superseded block it pinned), so
// spare_blocks >= operations in flight means acquire() never fails for long; when it
// does fail, the caller parks the request until a transfer completes.
//
// One thread owns a BlobStore (the daemon serving its keys); nothing here is atomic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bkv::kv {

class BlobStore {
 public:
  static constexpr uint32_t kNoBlock = ~0u;

  struct Value {
    uint32_t block = kNoBlock;
    uint32_t length = 0;
  };

  BlobStore(uint32_t rank, uint64_t key_range, uint32_t max_value_bytes, uint32_t spare_blocks)
      : rank_(rank), key_range_(key_range), max_value_bytes_(max_value_bytes) {
    if (key_range == 0) throw std::invalid_argument("kv::BlobStore: key_range must be >= 1");
    if (max_value_bytes == 0) throw std::invalid_argument("kv::BlobStore: max_value_bytes must be >= 1");
    if (spare_blocks == 0) throw std::invalid_argument("kv::BlobStore: spare_blocks must be >= 1");
    const uint64_t blocks = key_range + spare_blocks;
    if (blocks >= kNoBlock) throw std::invalid_argument("kv::BlobStore: too many blocks");
    arena_bytes_ = blocks * max_value_bytes;
    // Pages are touched only when a value lands in them.
    arena_ = std::make_unique_for_overwrite<std::byte[]>(arena_bytes_);
    refs_.assign(blocks, 0);
    values_.assign(key_range, Value{});
    free_.reserve(blocks);
    for (uint64_t b = blocks; b-- > 0;) free_.push_back(static_cast<uint32_t>(b));
  }

  uint32_t rank() const noexcept { return rank_; }
  uint64_t key_range() const noexcept { return key_range_; }
  bool in_range(uint64_t key) const noexcept { return key < key_range_; }
  uint32_t max_value_bytes() const noexcept { return max_value_bytes_; }
  std::span<std::byte> arena() noexcept { return {arena_.get(), arena_bytes_}; }
  std::byte* block_data(uint32_t block) noexcept { return arena_.get() + uint64_t{block} * max_value_bytes_; }
  uint64_t block_offset(uint32_t block) const noexcept { return uint64_t{block} * max_value_bytes_; }
  size_t free_blocks() const noexcept { return free_.size(); }

  // A free block for an incoming value (one reference, the caller's), or nullopt.
  std::optional<uint32_t> acquire() noexcept {
    if (free_.empty()) return std::nullopt;
    const uint32_t b = free_.back();
    free_.pop_back();
    refs_[b] = 1;
    return b;
  }
  // Gives back an acquired block that will not be committed (a failed transfer).
  void abandon(uint32_t block) { unref(block); }

  // The key now holds `length` bytes of `block` (acquired, filled); the caller's
  // reference passes to the key and the key's previous block loses one.
  void commit(uint64_t key, uint32_t block, uint32_t length) {
    check_key(key);
    if (length == 0 || length > max_value_bytes_)
      throw std::invalid_argument("kv::BlobStore::commit: length " + std::to_string(length) + " not in [1, " +
                                  std::to_string(max_value_bytes_) + "]");
    check_block(block);
    const Value old = values_[key];
    values_[key] = Value{block, length};
    if (old.block != kNoBlock) unref(old.block);
  }

  // The key's current value, pinned until unpin(block); nullopt when never put.
  std::optional<Value> pin(uint64_t key) {
    check_key(key);
    const Value v = values_[key];
    if (v.block == kNoBlock) return std::nullopt;
    ++refs_[v.block];
    return v;
  }
  void unpin(uint32_t block) { unref(block); }

  // The key's current value, unpinned (tests, inspection).
  std::optional<std::span<const std::byte>> peek(uint64_t key) {
    check_key(key);
    const Value v = values_[key];
    if (v.block == kNoBlock) return std::nullopt;
    return std::span<const std::byte>(block_data(v.block), v.length);
  }

 private:
  void check_key(uint64_t key) const {
    if (!in_range(key))
      throw std::out_of_range("kv::BlobStore: key " + std::to_string(key) + " >= key_range " +
                              std::to_string(key_range_));
  }
  void check_block(uint32_t block) const {
    if (block >= refs_.size() || refs_[block] == 0)
      throw std::logic_error("kv::BlobStore: block " + std::to_string(block) + " is not held");
  }
  void unref(uint32_t block) {
    check_block(block);
    if (--refs_[block] == 0) free_.push_back(block);
  }

  uint32_t rank_;
  uint64_t key_range_;
  uint32_t max_value_bytes_;
  uint64_t arena_bytes_ = 0;
  std::unique_ptr<std::byte[]> arena_;
  std::vector<uint32_t> refs_;
  std::vector<Value> values_;
  std::vector<uint32_t> free_;
};

}  // namespace bkv::kv
