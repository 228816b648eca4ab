// The per-node store and execute() (core/kv/store.hpp).
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "core/kv/store.hpp"

using namespace bkv::kv;

TEST_CASE("owner_of shards keys by key % D", "[kv][store]") {
  CHECK(owner_of(0, 1) == 0);
  CHECK(owner_of(12345, 1) == 0);
  CHECK(owner_of(7, 3) == 1);
  CHECK(owner_of(9, 3) == 0);
  CHECK(owner_of(~0ull, 4) == 3);
  // every daemon owns the same number of keys of a range that is a multiple of D
  std::vector<int> owned(5, 0);
  for (uint64_t k = 0; k < 1000; ++k) ++owned[owner_of(k, 5)];
  for (int n : owned) CHECK(n == 200);
}

TEST_CASE("put then get returns the value - never-written keys are not found", "[kv][store]") {
  Store store(/*rank=*/2, /*key_range=*/16);
  CHECK(execute(store, Request::meta_get(2, 3)) == Response::get_not_found());
  CHECK(execute(store, Request::meta_put(2, 3, 99)) == Response::put_ok());
  CHECK(execute(store, Request::meta_get(2, 3)) == Response::get_ok(99));
  CHECK(execute(store, Request::meta_get(2, 4)) == Response::get_not_found());
  CHECK(execute(store, Request::meta_put(2, 3, 0)) == Response::put_ok());  // 0 is an ordinary value
  CHECK(execute(store, Request::meta_get(2, 3)) == Response::get_ok(0));
  CHECK(store.get(3) == 0u);
  CHECK_FALSE(store.get(4).has_value());
  store.put(15, 7);
  CHECK(execute(store, Request::meta_get(2, 15)) == Response::get_ok(7));
}

TEST_CASE("out-of-range keys, other ranks and garbage are error responses", "[kv][store]") {
  Store store(1, 8);
  CHECK(execute(store, Request::meta_put(1, 8, 5)) == Response::failure(ErrorCode::kKeyOutOfRange, 8));
  CHECK(execute(store, Request::meta_get(1, ~0ull)) == Response::failure(ErrorCode::kKeyOutOfRange, ~0ull));
  CHECK(execute(store, Request::meta_get(0, 1)) == Response::failure(ErrorCode::kWrongRank, 1));
  Request garbage = Request::meta_get(1, 1);
  garbage.kind = static_cast<RequestKind>(9);
  CHECK(execute(store, garbage) == Response::failure(ErrorCode::kMalformedRequest));
  CHECK(execute(store, Request::meta_put(1, 1, kAbsentValue)) == Response::failure(ErrorCode::kMalformedRequest));
  for (const Response r : {execute(store, Request::meta_put(1, 8, 5)), execute(store, garbage)}) {
    CHECK(r.valid());
    CHECK(r.is_error());
  }
  // nothing was written by the rejected requests
  for (uint64_t k = 0; k < 8; ++k) CHECK_FALSE(store.get(k).has_value());
  CHECK_THROWS_AS(store.get(8), std::out_of_range);
  CHECK_THROWS_AS(store.put(8, 1), std::out_of_range);
  CHECK_THROWS_AS(store.put(0, kAbsentValue), std::invalid_argument);
  CHECK_THROWS_AS(Store(0, 0), std::invalid_argument);
}

TEST_CASE("daemons share the store: disjoint shards written concurrently are all visible", "[kv][store]") {
  constexpr uint32_t kDaemons = 4;
  constexpr uint64_t kKeys = 4096;
  Store store(0, kKeys);
  std::vector<std::thread> threads;
  for (uint32_t d = 0; d < kDaemons; ++d) {
    threads.emplace_back([&store, d] {
      for (uint64_t k = 0; k < kKeys; ++k) {
        if (owner_of(k, kDaemons) == d) execute(store, Request::meta_put(0, k, k * 3 + 1));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (uint64_t k = 0; k < kKeys; ++k) REQUIRE(store.get(k) == k * 3 + 1);
}
