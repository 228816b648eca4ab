// --ring-pages auto (apps/benchkv/simulator/runner.hpp, choose_ring_pages): consumed ring
// pages are kept when the rings, whole, take at most half the memory available, and given
// back otherwise; a choice given on the command line is never overridden.
#include <catch2/catch.hpp>

#include <array>
#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "apps/benchkv/simulator/runner.hpp"
#include "transports/software_nic/paged_memory.hpp"

using bkv::app::choose_ring_pages;
using bkv::app::RingPages;

TEST_CASE("ring pages auto: kept when the whole rings fit in half the available memory", "[unit][ring-pages]") {
  constexpr uint64_t GiB = uint64_t{1} << 30;
  CHECK(choose_ring_pages(RingPages::kAuto, 8 * GiB, 23 * GiB) == RingPages::kKeep);
  CHECK(choose_ring_pages(RingPages::kAuto, 8 * GiB, 16 * GiB) == RingPages::kKeep);       // exactly half
  CHECK(choose_ring_pages(RingPages::kAuto, 8 * GiB + 1, 16 * GiB) == RingPages::kRelease);  // one byte more
  CHECK(choose_ring_pages(RingPages::kAuto, 32 * GiB, 23 * GiB) == RingPages::kRelease);
  CHECK(choose_ring_pages(RingPages::kAuto, 4096, 0) == RingPages::kRelease);  // memory unknown: the safe choice
  // Given choices stay, whatever the memory.
  CHECK(choose_ring_pages(RingPages::kKeep, 32 * GiB, 1 * GiB) == RingPages::kKeep);
  CHECK(choose_ring_pages(RingPages::kRelease, 4096, 23 * GiB) == RingPages::kRelease);
  // The machine this runs on has some memory available.
  CHECK(bkv::app::available_memory_bytes() > 0);
}

TEST_CASE("PagedMemory: allocated_bytes counts what was handed out, page-rounded, reuse once", "[unit][ring-pages]") {
  bkv::software_nic::PagedMemory m;
  const uint64_t page = m.page_bytes();
  CHECK(m.allocated_bytes() == 0);
  std::byte* a = m.allocate(3 * page);
  m.allocate(page + 1);  // rounds up to two pages
  CHECK(m.allocated_bytes() == 5 * page);
  m.free(a, 3 * page);
  m.allocate(3 * page);  // the freed allocation, handed out again
  CHECK(m.allocated_bytes() == 5 * page);
}

// The huge-page hint for the heap (heap_to_huge_pages): it finds the heap, and where the
// kernel collapsed it the heap holds huge pages afterwards (read back from smaps). A
// sanitizer's allocator does not use brk: there the process has no heap to find.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kAllocatorUsesBrk = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kAllocatorUsesBrk = false;
#else
constexpr bool kAllocatorUsesBrk = true;
#endif
#else
constexpr bool kAllocatorUsesBrk = true;
#endif
TEST_CASE("heap to huge pages: the heap is found and, where the kernel agrees, collapsed", "[unit][ring-pages]") {
  // Grow the heap past a few huge pages with small allocations, as a simulation's objects do.
  std::vector<std::unique_ptr<std::array<char, 256>>> objects;
  for (int i = 0; i < 40000; ++i) objects.push_back(std::make_unique<std::array<char, 256>>());
  for (auto& o : objects) (*o)[0] = 1;
  const bkv::app::HeapHugePages h = bkv::app::heap_to_huge_pages();
  if (!kAllocatorUsesBrk) {
    // Whatever small [heap] the loader left is advised like any other; no request fails
    // for a range that is not mapped.
    CHECK(h.hugepage_errno != ENOMEM);
    return;
  }
  REQUIRE(h.heap_bytes >= 8u << 20);
  REQUIRE(h.heap_mappings >= 1);
  // No THP in the kernel answers EINVAL; ENOMEM here means a range that is not mapped,
  // a wrong range. The collapse may also answer EINVAL (a mapping with no whole aligned
  // block), EAGAIN and EBUSY (transient) and ENOMEM (no huge page free just now).
  CHECK((h.hugepage_errno == 0 || h.hugepage_errno == EINVAL));
  CHECK((h.collapse_errno == 0 || h.collapse_errno == EINVAL || h.collapse_errno == EAGAIN ||
         h.collapse_errno == EBUSY || h.collapse_errno == ENOMEM));
  if (h.collapse_errno == 0) {
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool in_heap = false;
    uint64_t huge_kib = 0;
    while (std::getline(smaps, line)) {
      // A mapping's line ("lo-hi perms ... [heap]"), then its "Key: value" lines.
      const std::string first = line.substr(0, line.find(' '));
      if (!first.empty() && first.back() != ':')
        in_heap = line.ends_with("[heap]");
      else if (in_heap && first == "AnonHugePages:")
        huge_kib += std::stoull(line.substr(first.size()));
    }
    CHECK(huge_kib >= 2048);
  }
  const nlohmann::json j = h.to_json();
  CHECK(j.at("heap_bytes") == h.heap_bytes);
  CHECK(j.at("heap_mappings") == h.heap_mappings);
}
