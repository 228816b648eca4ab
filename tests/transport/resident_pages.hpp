// How much of a range the kernel backs with memory now: for the tests of paged ring
// memory (transports/software_nic/paged_memory.hpp), which must give pages back.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bkv::test {

// Pages of [p, p + len) backed by memory now (mincore).
inline uint64_t resident_pages(const std::byte* p, uint64_t len) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((len + page - 1) / page);
  REQUIRE(::mincore(const_cast<std::byte*>(p), len, v.data()) == 0);
  uint64_t n = 0;
  for (unsigned char x : v) n += x & 1;
  return n;
}

}  // namespace bkv::test
