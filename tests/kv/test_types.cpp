// Request/Response byte layout and the receivers' validity checks (core/kv/types.hpp).
#include <catch2/catch.hpp>

#include <array>
#include <bit>
#include <cstring>

#include "core/kv/types.hpp"

using namespace bkv::kv;

namespace {
template <class T>
std::array<std::byte, sizeof(T)> bytes_of(const T& v) {
  std::array<std::byte, sizeof(T)> b{};
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
}  // namespace

TEST_CASE("Request bytes are little-endian fields at fixed offsets", "[kv][types]") {
  const Request put = Request::meta_put(0x01020304u, 0x1112131415161718ull, 0x2122232425262728ull);
  const auto b = bytes_of(put);
  CHECK(b[0] == std::byte{1});  // kMetaPut
  CHECK(b[1] == std::byte{0});
  CHECK(b[2] == std::byte{0});
  CHECK(b[3] == std::byte{0});
  CHECK(b[4] == std::byte{0x04});
  CHECK(b[7] == std::byte{0x01});
  CHECK(b[8] == std::byte{0x18});
  CHECK(b[15] == std::byte{0x11});
  CHECK(b[16] == std::byte{0x28});
  CHECK(b[23] == std::byte{0x21});
  const Request get = Request::meta_get(7, 9);
  CHECK(bytes_of(get)[0] == std::byte{2});
}

TEST_CASE("decode_request accepts exactly the valid encodings", "[kv][types]") {
  const Request put = Request::meta_put(3, 5, 42);
  auto b = bytes_of(put);
  auto r = decode_request(b);
  REQUIRE(r.has_value());
  CHECK(*r == put);

  SECTION("zeroed bytes (kind 0) are rejected") {
    std::array<std::byte, sizeof(Request)> zero{};
    CHECK_FALSE(decode_request(zero).has_value());
  }
  SECTION("unknown kinds are rejected") {
    for (int k : {3, 4, 0x7f, 0xff}) {
      b[0] = std::byte(k);
      CHECK_FALSE(decode_request(b).has_value());
    }
  }
  SECTION("non-zero reserved bytes are rejected") {
    for (size_t i : {1u, 2u, 3u}) {
      auto c = b;
      c[i] = std::byte{1};
      CHECK_FALSE(decode_request(c).has_value());
    }
  }
  SECTION("a get carrying a value is rejected") {
    auto g = bytes_of(Request::meta_get(3, 5));
    g[16] = std::byte{1};
    CHECK_FALSE(decode_request(g).has_value());
  }
  SECTION("a put of the absent marker is not representable") {
    CHECK_FALSE(decode_request(bytes_of(Request::meta_put(0, 0, kAbsentValue))).has_value());
  }
  SECTION("wrong length is rejected") {
    CHECK_FALSE(decode_request(std::span<const std::byte>(b.data(), b.size() - 1)).has_value());
    std::array<std::byte, sizeof(Request) + 1> longer{};
    std::memcpy(longer.data(), b.data(), b.size());
    CHECK_FALSE(decode_request(longer).has_value());
  }
}

TEST_CASE("decode_response accepts exactly the valid encodings", "[kv][types]") {
  for (const Response ok : {Response::put_ok(), Response::get_ok(77), Response::get_not_found(),
                            Response::failure(ErrorCode::kKeyOutOfRange, 5000)}) {
    const auto r = decode_response(bytes_of(ok));
    REQUIRE(r.has_value());
    CHECK(*r == ok);
  }
  auto b = bytes_of(Response::get_ok(77));
  CHECK(b[0] == std::byte{2});
  CHECK(b[8] == std::byte{77});

  SECTION("kind 0 and unknown kinds") {
    for (int k : {0, 5, 0xff}) {
      b[0] = std::byte(k);
      CHECK_FALSE(decode_response(b).has_value());
    }
  }
  SECTION("an error code on a non-error kind") {
    b[1] = std::byte{2};
    CHECK_FALSE(decode_response(b).has_value());
  }
  SECTION("an error kind without a known code") {
    auto e = bytes_of(Response::failure(ErrorCode::kWrongRank));
    e[1] = std::byte{0};
    CHECK_FALSE(decode_response(e).has_value());
    e[1] = std::byte{kMaxErrorCode + 1};
    CHECK_FALSE(decode_response(e).has_value());
  }
  SECTION("reserved bytes") {
    b[7] = std::byte{1};
    CHECK_FALSE(decode_response(b).has_value());
  }
  SECTION("each reserved byte, each bit") {
    for (size_t i = 2; i < 8; ++i)
      for (int bit = 0; bit < 8; ++bit) {
        auto r = bytes_of(Response::put_ok());
        r[i] = std::byte(1 << bit);
        CHECK_FALSE(decode_response(r).has_value());
      }
  }
  SECTION("PutOk/GetNotFound carrying a value, GetOk carrying the absent marker") {
    auto p = bytes_of(Response::put_ok());
    p[8] = std::byte{1};
    CHECK_FALSE(decode_response(p).has_value());
    auto n = bytes_of(Response::get_not_found());
    n[9] = std::byte{1};
    CHECK_FALSE(decode_response(n).has_value());
    CHECK_FALSE(decode_response(bytes_of(Response::get_ok(kAbsentValue))).has_value());
  }
}

// Request::valid reads the kind and reserved bytes as one word: it accepts exactly what
// the rule says, for every kind byte, each reserved byte set or not, and values.
TEST_CASE("Request::valid accepts exactly the rule's requests, for every kind byte", "[kv][types]") {
  uint64_t accepted = 0;
  for (int kind = 0; kind < 256; ++kind)
    for (int reserved = 0; reserved < 4; ++reserved)  // 0: none set; 1..3: that byte set
      for (const uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{77} << 40, kAbsentValue}) {
        std::array<std::byte, 24> b{};
        b[0] = std::byte(kind);
        if (reserved > 0) b[reserved] = std::byte{0x80};
        b[4] = std::byte{1};  // rank 1, key 2: not part of the structural check
        b[8] = std::byte{2};
        for (size_t i = 0; i < 8; ++i) b[16 + i] = std::byte(value >> (8 * i));
        const bool want = reserved == 0 && ((kind == 1 && value != kAbsentValue) || (kind == 2 && value == 0));
        if (std::bit_cast<Request>(b).valid() != want) FAIL("kind " << kind << " reserved byte " << reserved << " value " << value);
        accepted += want ? 1 : 0;
      }
  CHECK(accepted == 3 + 1);  // MetaPut: three values; MetaGet: value 0
}

// Response::valid compares the first word whole: it accepts exactly what the rule says,
// checked field by field here for every kind and error byte, each reserved byte set or
// not, and values that each kind accepts or refuses.
TEST_CASE("Response::valid accepts exactly the rule's responses, for every kind and error byte", "[kv][types]") {
  auto by_rule = [](const std::array<std::byte, 16>& b, uint64_t value) {
    for (size_t i = 2; i < 8; ++i)
      if (b[i] != std::byte{0}) return false;
    const auto kind = static_cast<uint8_t>(b[0]), error = static_cast<uint8_t>(b[1]);
    if (kind == 1 || kind == 3) return error == 0 && value == 0;     // PutOk, GetNotFound
    if (kind == 2) return error == 0 && value != kAbsentValue;       // GetOk
    if (kind == 4) return error >= 1 && error <= kMaxErrorCode;      // Error: any value
    return false;
  };
  uint64_t accepted = 0;
  for (int kind = 0; kind < 256; ++kind)
    for (int error = 0; error < 256; ++error)
      for (int reserved = 1; reserved < 8; ++reserved)  // 1: none set; 2..7: that byte set
        for (const uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{77} << 40, kAbsentValue}) {
          std::array<std::byte, 16> b{};
          b[0] = std::byte(kind);
          b[1] = std::byte(error);
          if (reserved > 1) b[reserved] = std::byte{0x80};
          for (size_t i = 0; i < 8; ++i) b[8 + i] = std::byte(value >> (8 * i));
          const auto r = std::bit_cast<Response>(b);
          const bool want = by_rule(b, value);
          if (r.valid() != want) FAIL("kind " << kind << " error " << error << " reserved byte " << reserved << " value " << value);
          accepted += want ? 1 : 0;
        }
  CHECK(accepted == 1 + 1 + 3 + 4 * 4);  // PutOk, GetNotFound: value 0; GetOk: 3 values; Error: 4 codes x 4 values
}

TEST_CASE("as_bytes round-trips through decode", "[kv][types]") {
  const Request q = Request::meta_get(1, 2);
  CHECK(decode_request(as_bytes(q)) == q);
  const Response s = Response::get_ok(9);
  CHECK(decode_response(as_bytes(s)) == s);
}
