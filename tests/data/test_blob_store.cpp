// kv::BlobStore (docs/data.md §Store) and the data wire messages (core/kv/data_wire.hpp).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "core/kv/blob_store.hpp"
#include "core/kv/data_wire.hpp"

using namespace bkv;
using kv::BlobStore;

namespace {
void fill(BlobStore& s, uint32_t block, uint32_t len, uint8_t v) { std::memset(s.block_data(block), v, len); }
}  // namespace

TEST_CASE("BlobStore: a committed value is read back with its own length and absent keys are absent") {
  BlobStore s(0, 4, 64, 2);
  CHECK_FALSE(s.pin(1).has_value());
  const auto b = s.acquire();
  REQUIRE(b);
  fill(s, *b, 10, 0xab);
  s.commit(1, *b, 10);
  const auto v = s.peek(1);
  REQUIRE(v);
  CHECK(v->size() == 10);
  for (std::byte x : *v) CHECK(x == std::byte{0xab});
  CHECK_FALSE(s.peek(0).has_value());
}

TEST_CASE("BlobStore: a pinned block survives a later commit to its key until unpinned") {
  BlobStore s(0, 1, 16, 2);  // 3 blocks
  const uint32_t a = *s.acquire();
  fill(s, a, 16, 1);
  s.commit(0, a, 16);
  const auto pinned = s.pin(0);
  REQUIRE(pinned);
  CHECK(pinned->block == a);
  const uint32_t b = *s.acquire();
  fill(s, b, 16, 2);
  s.commit(0, b, 16);
  // a is still pinned: not free, and its bytes are intact.
  CHECK(s.free_blocks() == 1);
  CHECK(std::to_integer<int>(s.block_data(a)[15]) == 1);
  const uint32_t c = *s.acquire();
  CHECK(c != a);
  CHECK_FALSE(s.acquire().has_value());  // all three held: key 0 (b), pin (a), c
  s.unpin(a);
  CHECK(s.acquire() == a);
}

TEST_CASE("BlobStore: abandoning an acquired block frees it and bad keys or lengths or blocks are refused") {
  BlobStore s(3, 2, 8, 1);
  const uint32_t b = *s.acquire();
  s.abandon(b);
  CHECK(s.free_blocks() == 3);
  CHECK_THROWS_AS(s.commit(2, *s.acquire(), 4), std::out_of_range);
  const uint32_t c = *s.acquire();
  CHECK_THROWS_AS(s.commit(0, c, 9), std::invalid_argument);
  CHECK_THROWS_AS(s.commit(0, c, 0), std::invalid_argument);
  CHECK_THROWS_AS(s.unpin(1000), std::logic_error);
  CHECK_THROWS_AS(BlobStore(0, 0, 8, 1), std::invalid_argument);
  CHECK_THROWS_AS(BlobStore(0, 1, 0, 1), std::invalid_argument);
}

TEST_CASE("data wire: decoding rejects wrong sizes or kinds or reserved bytes or empty ranges") {
  const kv::DataRequest put = kv::DataRequest::put(1, 7, 64, 128);
  CHECK(kv::decode_data<kv::DataRequest>(kv::data_bytes(put)) == put);
  std::vector<std::byte> bytes(kv::data_bytes(put).begin(), kv::data_bytes(put).end());
  CHECK_FALSE(kv::decode_data<kv::DataRequest>(std::span<const std::byte>(bytes).first(39)));
  bytes[1] = std::byte{1};  // reserved
  CHECK_FALSE(kv::decode_data<kv::DataRequest>(bytes));
  bytes[1] = std::byte{0};
  bytes[0] = std::byte{9};  // kind
  CHECK_FALSE(kv::decode_data<kv::DataRequest>(bytes));
  CHECK_FALSE(kv::DataRequest::get(0, 0, 0, 0).valid());
  kv::RegionAnnouncement a;
  a.addr = 4096, a.slice_bytes = 100, a.slices = 3, a.rkey = 5;
  CHECK(a.valid());
  a.addr = ~uint64_t{0} - 250;  // 3 x 100 bytes do not fit above it
  CHECK_FALSE(a.valid());
  CHECK(kv::DataResponse::failure(kv::DataError::kOutsideBuffer, 3).valid());
  CHECK_FALSE(kv::DataResponse::make(kv::DataResponseKind::kGetOk, 3, 0).valid());
}
