// The software NIC's paged memory (transports/software_nic/paged_memory.hpp): allocations
// read as zero and cost pages only once written; discard gives whole pages back (they
// read as zero again); memory it does not own is refused; freed memory is reused.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "tests/transport/resident_pages.hpp"
#include "transports/software_nic/paged_memory.hpp"

using bkv::software_nic::PagedMemory;

using bkv::test::resident_pages;

TEST_CASE("PagedMemory: pages materialize on write and go back on discard", "[unit][paged-memory]") {
  PagedMemory m;
  const uint64_t page = m.page_bytes();
  const uint64_t size = 64 * page;
  std::byte* p = m.allocate(size);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % page == 0);
  CHECK(resident_pages(p, size) == 0);  // nothing written, nothing resident
  for (uint64_t i = 0; i < size; i += 97) CHECK(p[i] == std::byte{0});
  m.discard(p, size);  // reading mapped the shared zero page, which mincore counts
  CHECK(resident_pages(p, size) == 0);
  std::memset(p + 3 * page + 10, 0xAB, 2 * page);  // touches pages 3, 4, 5
  CHECK(resident_pages(p, size) == 3);

  // The whole pages inside the range only: page 3 is partly outside, so it stays.
  m.discard(p + 3 * page + 5, 3 * page - 5);
  CHECK(p[3 * page + 10] == std::byte{0xAB});
  CHECK(resident_pages(p + 4 * page, 2 * page) == 0);  // pages 4 and 5 went back...
  CHECK(p[4 * page] == std::byte{0});                  // ...and read as zero
  CHECK(p[5 * page] == std::byte{0});
  m.discard(p, size);
  CHECK(resident_pages(p, size) == 0);
  CHECK(p[3 * page + 10] == std::byte{0});

  std::vector<std::byte> heap(4 * page);
  CHECK_THROWS_AS(m.discard(heap.data(), heap.size()), std::logic_error);
  CHECK_THROWS_AS(m.discard(p, size + page), std::logic_error);  // beyond what was handed out

  // Freed memory is discarded and handed out again for the same size, reading as zero.
  p[0] = std::byte{1};
  m.free(p, size);
  std::byte* q = m.allocate(size);
  CHECK(q == p);
  CHECK(q[0] == std::byte{0});
  std::byte* r = m.allocate(size);
  CHECK(r != q);
}

TEST_CASE("PagedMemory: keep discard leaves the pages resident with their bytes", "[unit][paged-memory]") {
  PagedMemory m;
  m.set_discard_mode(bkv::software_nic::DiscardMode::kKeep);
  const uint64_t page = m.page_bytes();
  const uint64_t size = 16 * page;
  std::byte* p = m.allocate(size);
  std::memset(p + 3 * page + 10, 0xAB, 2 * page);  // touches pages 3, 4, 5
  REQUIRE(resident_pages(p, size) == 3);

  // Nothing is written (the caller writes a discarded byte before it reads it again) and
  // nothing is given back.
  m.discard(p + 3 * page + 5, 3 * page - 5);
  CHECK(p[3 * page + 10] == std::byte{0xAB});
  CHECK(p[4 * page] == std::byte{0xAB});
  CHECK(p[5 * page + 9] == std::byte{0xAB});
  CHECK(resident_pages(p, size) == 3);

  std::vector<std::byte> heap(4 * page);
  CHECK_THROWS_AS(m.discard(heap.data(), heap.size()), std::logic_error);
  CHECK_THROWS_AS(m.discard(p, size + page), std::logic_error);

  // free() releases whatever the mode: nothing stays resident, the memory reads as zero.
  m.free(p, size);
  CHECK(resident_pages(p, size) == 0);
  std::byte* q = m.allocate(size);
  CHECK(q == p);
  CHECK(q[3 * page + 10] == std::byte{0});
}

TEST_CASE("PagedMemory: prefault makes whole pages resident without changing a byte", "[unit][paged-memory]") {
  PagedMemory m;
  const uint64_t page = m.page_bytes();
  const uint64_t size = 32 * page;
  std::byte* p = m.allocate(size);
  std::memset(p + 2 * page, 0x5C, page);  // page 2 holds bytes
  CHECK(resident_pages(p, size) == 1);
  // Pages 1..5 are wholly inside; page 0 and page 6 only partly, so they stay out.
  m.prefault(p + page - 1, 5 * page + 2);
  CHECK(resident_pages(p, size) == 5);
  CHECK(resident_pages(p, page) == 0);
  CHECK(resident_pages(p + 6 * page, page) == 0);
  CHECK(p[2 * page] == std::byte{0x5C});  // the written page keeps its bytes...
  CHECK(p[2 * page + page - 1] == std::byte{0x5C});
  for (uint64_t i = page; i < 6 * page; i += 61)  // ...and the others read as zero
    if (i < 2 * page || i >= 3 * page) CHECK(p[i] == std::byte{0});
  std::vector<std::byte> heap(4 * page);
  CHECK_THROWS_AS(m.prefault(heap.data(), heap.size()), std::logic_error);

  // The give-back batch: 1 page by default, in [1, kMaxGiveBackPages].
  CHECK(m.give_back_pages() == 1);
  m.set_give_back_pages(16);
  CHECK(m.give_back_pages() == 16);
  CHECK_THROWS_AS(m.set_give_back_pages(0), std::invalid_argument);
  CHECK_THROWS_AS(m.set_give_back_pages(PagedMemory::kMaxGiveBackPages + 1), std::invalid_argument);
  CHECK(m.give_back_pages() == 16);
}
