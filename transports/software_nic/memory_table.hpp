// Registered-memory table of the software NIC (instant and wall-clock loopback, UCX, and
// the discrete-event NIC model): the keys a software NIC hands out and the checks a real
// NIC performs before touching memory on behalf of a work request.
//
// Rules followed (InfiniBand spec, memory protection):
//  - a local gather/scatter entry must lie inside the region its lkey names, and a
//    scatter (READ destination) needs local-write access;
//  - a remote address range must lie inside the region its rkey names, and the region
//    must grant remote-write (WRITE) or remote-read (READ) access;
//  - a violation on the remote side completes the request with a remote access error
//    and moves the requester's QP to the error state; a local violation completes it
//    with a local protection error;
//  - a key is honoured only by the node that registered it (one table may serve several
//    nodes of one fabric): the *_owned checks add that rule.
//
// Keys are never reused while the table lives, so a stale key cannot alias a new region.
// The table is not thread-safe; the wall-clock mode registers memory before its
// threads start and only reads the table afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/transport.hpp"

namespace bkv::software_nic {

class MemoryTable {
 public:
  struct Region {
    std::byte* base = nullptr;
    uint64_t length = 0;
    uint32_t access = 0;
    uint32_t owner = 0;  // node (transport) that registered it: the only one the key is valid on
  };

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access, uint32_t owner) {
    if (ptr == nullptr || len == 0) throw std::invalid_argument("register_memory: empty region");
    regions_.push_back(Region{static_cast<std::byte*>(ptr), len, access, owner});
    region_count_ = regions_.size();
    // lkey and rkey are the same index here, offset so that 0 is never a valid key.
    const uint32_t key = static_cast<uint32_t>(regions_.size()) + kKeyBase - 1;
    return MemoryRegion{static_cast<std::byte*>(ptr), len, key, key};
  }

  // The region a key names, or nullptr.
  const Region* lookup(uint32_t key) const noexcept {
    if (key < kKeyBase) return nullptr;
    const uint64_t idx = uint64_t{key} - kKeyBase;
    return idx < region_count_ ? &regions_[idx] : nullptr;
  }

  // Local side: [addr, addr+len) inside the lkey's region, with the needed access.
  // Returns the host pointer or nullptr.
  std::byte* check_local(const void* addr, uint64_t len, uint32_t lkey, bool needs_write) const noexcept {
    const Region* r = lookup(lkey);
    return r != nullptr ? local_range(*r, addr, len, needs_write) : nullptr;
  }

  // Remote side: the address range inside the rkey's region with remote permission.
  std::byte* check_remote(uint64_t addr, uint64_t len, uint32_t rkey, uint32_t needed_access) const noexcept {
    const Region* r = lookup(rkey);
    return r != nullptr ? remote_range(*r, addr, len, needed_access) : nullptr;
  }

  // The same checks, and the key must belong to `owner` (the node doing the access).
  // One lookup of the key serves all of them (these run once per work request).
  std::byte* check_local_owned(const void* addr, uint64_t len, uint32_t lkey, bool needs_write,
                               uint32_t owner) const noexcept {
    const Region* r = lookup(lkey);
    return r != nullptr && r->owner == owner ? local_range(*r, addr, len, needs_write) : nullptr;
  }
  std::byte* check_remote_owned(uint64_t addr, uint64_t len, uint32_t rkey, uint32_t needed_access,
                                uint32_t owner) const noexcept {
    const Region* r = lookup(rkey);
    return r != nullptr && r->owner == owner ? remote_range(*r, addr, len, needed_access) : nullptr;
  }

 private:
  static constexpr uint32_t kKeyBase = 0x100;

  // The local rule on the region the lkey named: write access if needed, range inside.
  static std::byte* local_range(const Region& r, const void* addr, uint64_t len, bool needs_write) noexcept {
    if (needs_write && (r.access & kAccessLocalWrite) == 0) return nullptr;
    return in_bounds(r, reinterpret_cast<uint64_t>(addr), len);
  }
  // The remote rule on the region the rkey named: every needed access bit, range inside.
  static std::byte* remote_range(const Region& r, uint64_t addr, uint64_t len, uint32_t needed_access) noexcept {
    if ((r.access & needed_access) != needed_access) return nullptr;
    return in_bounds(r, addr, len);
  }

  static std::byte* in_bounds(const Region& r, uint64_t addr, uint64_t len) noexcept {
    const uint64_t base = reinterpret_cast<uint64_t>(r.base);
    if (addr < base) return nullptr;
    const uint64_t off = addr - base;
    if (off > r.length || len > r.length - off) return nullptr;
    return r.base + off;
  }

  std::vector<Region> regions_;
  // regions_.size(), kept: a lookup (one per work request on each side) then compares
  // with it instead of dividing the vector's byte length by sizeof(Region) (24).
  uint64_t region_count_ = 0;
};

}  // namespace bkv::software_nic
