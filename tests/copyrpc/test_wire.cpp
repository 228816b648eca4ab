// Wire vectors for the copyrpc format: padding, immediates, header and metadata bytes.
#include <array>
#include <catch2/catch.hpp>

#include "core/copyrpc/wire.hpp"
#include "core/copyrpc/wr_id.hpp"

using namespace bkv::copyrpc;

TEST_CASE("padded message sizes follow the 32-byte rule", "[wire]") {
  CHECK(padded_message_size(0) == 32);
  CHECK(padded_message_size(20) == 32);
  CHECK(padded_message_size(21) == 64);
  CHECK(padded_message_size(52) == 64);
  CHECK(padded_message_size(53) == 96);
  for (uint64_t len = 0; len < 1000; ++len) {
    const uint64_t p = padded_message_size(len);
    REQUIRE(p % 32 == 0);
    REQUIRE(p >= len + kHeaderSize);
    REQUIRE(p < len + kHeaderSize + 32);
  }
}

TEST_CASE("immediate encodes the batch length in 32-byte units", "[wire]") {
  CHECK(encode_imm(32) == 1);
  CHECK(encode_imm(96) == 3);
  CHECK(encode_imm(1ull << 20) == (1u << 15));
  CHECK(decode_imm(0xFFFFFFFFu) == 0xFFFFFFFFull * 32);
  for (uint64_t d = 32; d < (1ull << 24); d = d * 3 + 32) {
    const uint64_t aligned = align_up(d);
    REQUIRE(decode_imm(encode_imm(aligned)) == aligned);
  }
}

TEST_CASE("message header bytes are little-endian call_id, response allowance, length", "[wire]") {
  std::array<std::byte, 12> buf{};
  store_header(buf.data(), MessageHeader{to_response_id(0x01020304u), 0x0A0B0C0Du, 0x11223344u});
  const std::array<uint8_t, 12> expect{0x04, 0x03, 0x02, 0x81, 0x0D, 0x0C, 0x0B, 0x0A,
                                       0x44, 0x33, 0x22, 0x11};
  for (size_t i = 0; i < buf.size(); ++i) CHECK(static_cast<uint8_t>(buf[i]) == expect[i]);
  const MessageHeader h = load_header(buf.data());
  CHECK(is_response(h.call_id));
  CHECK(from_response_id(h.call_id) == 0x01020304u);
  CHECK_FALSE(is_response(0x7FFFFFFFu));
}

TEST_CASE("flow metadata bytes: credit return, grant, count, 12 zero bytes", "[wire]") {
  std::array<std::byte, 32> buf;
  buf.fill(std::byte{0xEE});
  store_metadata(buf.data(), 0x0807060504030201ull, 0x1817161514131211ull, kWrapMessageCount);
  for (int i = 0; i < 8; ++i) CHECK(static_cast<uint8_t>(buf[i]) == i + 1);
  for (int i = 0; i < 8; ++i) CHECK(static_cast<uint8_t>(buf[8 + i]) == 0x11 + i);
  for (int i = 16; i < 20; ++i) CHECK(static_cast<uint8_t>(buf[i]) == 0xFF);
  for (int i = 20; i < 32; ++i) CHECK(static_cast<uint8_t>(buf[i]) == 0);
  const FlowMetadata m = load_metadata(buf.data());
  CHECK(m.ring_credit_return == 0x0807060504030201ull);
  CHECK(m.credit_grant == 0x1817161514131211ull);
  CHECK(m.message_count == kWrapMessageCount);
}

TEST_CASE("internal allowance covers the padded reply plus one metadata block", "[wire]") {
  for (uint64_t a = 0; a < 2048; ++a) {
    const uint64_t ia = internal_allowance(a);
    REQUIRE(ia % 32 == 0);
    REQUIRE(ia >= padded_message_size(a) + kFlowMetadataSize);
    // A reply of max_reply_payload(ia) bytes plus a metadata block fits the allowance,
    // and the caller's declared allowance always fits.
    REQUIRE(padded_message_size(max_reply_payload(ia)) + kFlowMetadataSize <= ia);
    REQUIRE(max_reply_payload(ia) >= a);
  }
}

TEST_CASE("work-request ids decode to the kind and value they were made from", "[wire]") {
  for (const WrKind kind : {WrKind::kBatch, WrKind::kConsumerRead, WrKind::kRaw}) {
    for (const uint32_t value : {0u, 1u, 0x7FFF'FFFFu, 0xFFFF'FFFEu, 0xFFFF'FFFFu}) {
      const uint64_t id = encode_wr_id(kind, value);
      CHECK(wr_kind(id) == kind);
      CHECK(wr_value(id) == value);
      CHECK(id >> kWrValueBits == static_cast<uint64_t>(kind));
    }
  }
  // Distinct kinds never share an id, whatever the values.
  CHECK(encode_wr_id(WrKind::kBatch, 0xFFFF'FFFFu) != encode_wr_id(WrKind::kConsumerRead, 0));
  CHECK(encode_wr_id(WrKind::kConsumerRead, 0xFFFF'FFFFu) != encode_wr_id(WrKind::kRaw, 0));
}
