// --ring-pages auto (apps/benchkv/simulator/runner.hpp, choose_ring_pages): consumed ring
// pages are kept when the rings, whole, take at most half the memory available, and given
// back otherwise; a choice given on the command line is never overridden.
#include <catch2/catch.hpp>

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
