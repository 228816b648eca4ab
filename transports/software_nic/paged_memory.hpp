// Paged memory of a software NIC: ring buffers that cost host memory only for the pages
// that hold bytes, used by the discrete-event transport (sim/des_transport.hpp) so that
// a simulation of thousands of copyrpc endpoints with MiB-sized rings fits in memory.
//
// Rules:
//  - an allocation is page-aligned and reads as zero (anonymous memory, materialized by
//    the kernel on first write, one page at a time), as copyrpc's zero-filled rings do;
//  - discard(p, len) gives back the whole pages inside [p, p+len): the caller vouches
//    that no live byte is in them and that it writes a byte of them before it reads it
//    again (copyrpc reads only the live bytes of its rings); in release mode they read
//    as zero afterwards and are materialized again by the next write, in keep mode they
//    stay resident with their old bytes;
//  - address space is reserved in large chunks (MAP_NORESERVE, no transparent huge
//    pages: one touched byte must cost one small page, not 2 MiB), so a hundred
//    thousand rings are a few mappings, not one each (the kernel caps mappings per
//    process);
//  - freed allocations are discarded and reused for allocations of the same size.
// How discard gives pages back is a speed/memory trade (DiscardMode): kRelease returns
// them to the kernel (madvise: a system call now, a page fault and a zeroed page at the
// next write), kKeep leaves them as they are (no system call, no fault, no write; the
// memory stays resident). Since the caller writes every byte it reads after a discard,
// what it reads is the same byte for byte either way; free() always releases, so an
// allocation always starts reading as zero.
// Give-back batch (set_give_back_pages): the caller (copyrpc, core/copyrpc/context.hpp
// give_back_passed_pages) gives dead pages back once at least this many have passed, in
// one call, and then asks prefault() for as many pages ahead of where its rings are
// written next. prefault(p, len) materializes the whole pages inside [p, p+len) that are
// not there yet, in one system call (madvise(MADV_POPULATE_WRITE)), instead of one page
// fault per page at their first write; it never changes a byte. 1 page (no prefault) is
// the page-at-a-time give-back.
// Not thread-safe: one simulation (one thread) owns one PagedMemory.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace bkv::software_nic {

enum class DiscardMode : uint8_t { kRelease = 0, kKeep };

class PagedMemory {
 public:
  static constexpr uint64_t kChunkBytes = uint64_t{64} << 30;  // address space reserved at a time

  PagedMemory() : page_(static_cast<uint64_t>(::sysconf(_SC_PAGESIZE))) {}
  PagedMemory(const PagedMemory&) = delete;
  PagedMemory& operator=(const PagedMemory&) = delete;
  ~PagedMemory() {
    for (const Chunk& c : chunks_) ::munmap(c.base, c.length);
  }

  // Batches of more pages than this cost more memory than they save in system calls.
  static constexpr uint64_t kMaxGiveBackPages = 1024;

  uint64_t page_bytes() const noexcept { return page_; }
  uint64_t give_back_pages() const noexcept { return give_back_pages_; }
  void set_give_back_pages(uint64_t n) {
    if (n == 0 || n > kMaxGiveBackPages)
      throw std::invalid_argument("PagedMemory: give-back batch of " + std::to_string(n) + " pages, not in [1, " +
                                  std::to_string(kMaxGiveBackPages) + "]");
    give_back_pages_ = n;
  }
  DiscardMode discard_mode() const noexcept { return mode_; }
  void set_discard_mode(DiscardMode m) noexcept { mode_ = m; }

  // `size` bytes, page-aligned, reading as zero.
  std::byte* allocate(uint64_t size) {
    if (size == 0) throw std::invalid_argument("PagedMemory: empty allocation");
    size = round_up(size);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      return p;
    }
    if (chunks_.empty() || chunks_.back().length - chunks_.back().used < size) reserve_chunk(size);
    Chunk& c = chunks_.back();
    std::byte* p = c.base + c.used;
    c.used += size;
    return p;
  }

  void free(std::byte* p, uint64_t size) {
    size = round_up(size);
    release(p, size);
    free_[size].push_back(p);
  }

  // Gives back the whole pages inside [p, p+len) as the discard mode says (keep: they
  // stay as they are). The range must lie in this memory.
  void discard(std::byte* p, uint64_t len) {
    if (mode_ == DiscardMode::kRelease) {
      release(p, len);
      return;
    }
    whole_pages(p, len);  // checks the range only
  }

  // Materializes the whole pages inside [p, p+len) (the range must lie in this memory);
  // their bytes are unchanged.
  void prefault(std::byte* p, uint64_t len) {
    const auto [first, last] = whole_pages(p, len);
    if (first >= last) return;
    if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE) != 0)
      throw std::runtime_error("PagedMemory: madvise(MADV_POPULATE_WRITE) failed (it needs Linux 5.14 or later; "
                               "a give-back batch of 1 page does not use it)");
  }

  // Bytes handed out by allocate() so far (freed allocations kept for reuse count): what
  // every allocation would hold resident if all its pages were touched and kept.
  uint64_t allocated_bytes() const noexcept {
    uint64_t n = 0;
    for (const Chunk& c : chunks_) n += c.used;
    return n;
  }

  bool contains(const std::byte* p, uint64_t len) const noexcept {
    for (const Chunk& c : chunks_)
      if (p >= c.base && p <= c.base + c.used && len <= static_cast<uint64_t>(c.base + c.used - p)) return true;
    return false;
  }

 private:
  struct Chunk {
    std::byte* base;
    uint64_t length;
    uint64_t used;
  };

  uint64_t round_up(uint64_t n) const noexcept { return (n + page_ - 1) & ~(page_ - 1); }

  // The whole pages inside [p, p+len) as [first, last) addresses; first >= last if none.
  // The range must lie in this memory.
  std::pair<uint64_t, uint64_t> whole_pages(std::byte* p, uint64_t len) const {
    if (len == 0) return {0, 0};
    if (!contains(p, len)) throw std::logic_error("PagedMemory: discard of memory it does not own");
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    return {(a + page_ - 1) & ~(page_ - 1), (a + len) & ~(page_ - 1)};
  }

  // Returns the whole pages inside [p, p+len) to the kernel.
  void release(std::byte* p, uint64_t len) {
    const auto [first, last] = whole_pages(p, len);
    if (first >= last) return;
    if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0)
      throw std::runtime_error("PagedMemory: madvise(MADV_DONTNEED) failed");
  }

  void reserve_chunk(uint64_t at_least) {
    uint64_t len = at_least > kChunkBytes ? at_least : kChunkBytes;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    // Where a whole chunk of address space is refused (a limit on it, or valgrind, which
    // manages a smaller one), smaller chunks, down to what is asked for, do the same job.
    while (p == MAP_FAILED && len / 2 >= at_least && len / 2 >= page_) {
      len /= 2;
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED)
      throw std::runtime_error("PagedMemory: cannot reserve " + std::to_string(len >> 20) +
                               " MiB of address space for simulated ring buffers");
    ::madvise(p, len, MADV_NOHUGEPAGE);  // best effort: without it a touched byte may cost 2 MiB
    chunks_.push_back(Chunk{static_cast<std::byte*>(p), len, 0});
  }

  uint64_t page_;
  DiscardMode mode_ = DiscardMode::kRelease;
  uint64_t give_back_pages_ = 1;
  std::vector<Chunk> chunks_;
  std::map<uint64_t, std::vector<std::byte*>> free_;  // by size
};

}  // namespace bkv::software_nic
