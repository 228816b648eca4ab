// copyrpc batch validation: the rules every batch read from a receive ring must keep
// (docs/design_channels.md §copyrpc receive path), each one named, with the EndpointError that
// breaking it stops the endpoint with. Nothing in a batch is used before the rules
// that cover it hold, and no rule reads outside the batch.
//
// A batch is checked in two steps. Its head, the immediate and the flow metadata, before
// any of it is used (check_batch_head, the rules in the order they are tested):
//
//   rule                         error             holds when
//   length_in_ring               kBadImmediate     0 < length <= ring
//   no_overrun                   kRingOverrun      end - consumed <= ring
//   credit_return_within_sent    kBadCreditReturn  returned + return <= sent (and return <= sent)
//   grant_within_ring            kBadCreditGrant   grant 32-aligned, peer_credit + grant <= ring
//   wrap_marker_ends_ring        kBadWrapMarker    a wrap marker: start offset + length = ring
//   batch_before_ring_end        kBadLength        a batch: start offset + length <= ring
//   message_count_fits           kBadMessageCount  a batch: count <= (length - 32) / 32, and
//                                                  count = 0 only for a bare 32-byte batch
//   write_covers_batch           kBadWriteLength   written = length for a batch, 32 for a wrap
//                                                  marker (its metadata alone is written)
//
// Then each message, as the walk reaches it (Context::process_batch):
//
//   header_in_batch              kBadLength        the cursor is short of the batch end
//   message_in_batch             kBadLength        header + payload, padded, end by the batch end
//   allowance_granted            kBadAllowance     a request: 64 <= allowance and
//                                                  committed + allowance <= R
//   (response to a pending call) kUnknownCallId    a response: its call id is pending
//   response_within_allowance    kBadResponseLength
//                                                  a response: payload length <=
//                                                  max_reply_payload(its call's allowance)
//   batch_filled                 kBadMessageCount  after `count` messages the cursor is at the end
//
// `length` = decode_imm(imm); `written` = the bytes the WRITE placed (the receive
// completion's byte count: a CQE's byte_cnt, ibv_wc::byte_len); `end` = start + length; `sent` = our send producer (bytes
// the peer could have consumed at most); `returned` = the credit returns summed so far;
// `count` = the metadata's message count; R = the response credit granted the peer.
#pragma once

#include <cstdint>

#include "core/copyrpc/endpoint.hpp"
#include "core/copyrpc/wire.hpp"

namespace bkv::copyrpc::batch_rules {

// ---------------------------------------------------------------- head rules
constexpr bool length_in_ring(uint64_t length, uint64_t ring) noexcept { return length != 0 && length <= ring; }
// The batch starts where the last one ended and must not reach bytes not consumed yet
// (the peer's credit accounting forbids it).
constexpr bool no_overrun(uint64_t end, uint64_t consumed, uint64_t ring) noexcept { return end - consumed <= ring; }
// The peer cannot have consumed more than we sent. The first test keeps the sum from
// overflowing.
constexpr bool credit_return_within_sent(uint64_t credit_return, uint64_t returned, uint64_t sent) noexcept {
  return credit_return <= sent && returned + credit_return <= sent;
}
// The grant, and the balance it makes, never exceed the ring. The second test keeps the
// sum from overflowing.
constexpr bool grant_within_ring(uint64_t grant, uint64_t peer_credit, uint64_t ring) noexcept {
  return grant % kAlignment == 0 && grant <= ring && peer_credit + grant <= ring;
}
// A wrap marker covers exactly the bytes to the ring end.
constexpr bool wrap_marker_ends_ring(uint64_t start_off, uint64_t length, uint64_t ring) noexcept {
  return start_off + length == ring;
}
// A batch never crosses the ring end (the sender wraps on a strict `<` test).
constexpr bool batch_before_ring_end(uint64_t start_off, uint64_t length, uint64_t ring) noexcept {
  return start_off + length <= ring;
}
// Every message takes 32 bytes at least; an empty batch is its metadata alone.
constexpr bool message_count_fits(uint32_t count, uint64_t length) noexcept {
  const uint64_t max_msgs = (length - kFlowMetadataSize) / kAlignment;
  return count <= max_msgs && (count != 0 || length == kFlowMetadataSize);
}
// The sender writes a batch with one WRITE of its whole length, a wrap marker with one of
// its 32-byte metadata (Context::post_emit). Past the bytes a WRITE placed, the ring holds
// what an earlier cycle left there: a batch read beyond them would serve old requests
// again. Once this holds, the metadata the other rules read was written by this WRITE.
constexpr bool write_covers_batch(uint64_t written, uint64_t length, bool wrap_marker) noexcept {
  return written == (wrap_marker ? kFlowMetadataSize : length);
}

// The head rules over a batch of `length` bytes (decode_imm(imm)) with flow metadata
// `m`, placed by a WRITE of `written` bytes, arrived on an endpoint whose flow state `f` gives (an Endpoint, or any type with
// the same members):
//   f.recv_ring_size()           the receive ring's size
//   f.recv_producer              where the batch starts: where the last one ended
//   f.consumed()                 our consumed position (bytes the peer may overwrite)
//   f.producer                   our send producer: every byte we have sent the peer
//   f.consumer_by_credit_return  the peer's credit returns summed so far
//   f.peer_credit                credit the peer granted us, not yet spent
// Returns the first rule the batch breaks, or kNone. Once it is kNone, the batch lies in
// the ring between its start and the ring end, and its messages (if it is not a wrap
// marker) can be walked without reading past it. Each number is read where its rule
// needs it (the receive path's instruction count depends on it).
template <class Flow>
[[gnu::always_inline]] constexpr EndpointError check_batch_head(const Flow& f, uint64_t length,
                                                                const FlowMetadata& m, uint64_t written) noexcept {
  const uint64_t ring = f.recv_ring_size();
  if (!length_in_ring(length, ring)) return EndpointError::kBadImmediate;
  const uint64_t start = f.recv_producer;
  if (!no_overrun(start + length, f.consumed(), ring)) return EndpointError::kRingOverrun;
  if (!credit_return_within_sent(m.ring_credit_return, f.consumer_by_credit_return, f.producer))
    return EndpointError::kBadCreditReturn;
  if (!grant_within_ring(m.credit_grant, f.peer_credit, ring)) return EndpointError::kBadCreditGrant;
  const uint64_t start_off = start & (ring - 1);
  if (m.message_count == kWrapMessageCount) {
    if (!wrap_marker_ends_ring(start_off, length, ring)) return EndpointError::kBadWrapMarker;
    return write_covers_batch(written, length, true) ? EndpointError::kNone : EndpointError::kBadWriteLength;
  }
  if (!batch_before_ring_end(start_off, length, ring)) return EndpointError::kBadLength;
  if (!message_count_fits(m.message_count, length)) return EndpointError::kBadMessageCount;
  return write_covers_batch(written, length, false) ? EndpointError::kNone : EndpointError::kBadWriteLength;
}

// ---------------------------------------------------------------- message rules
// The cursor and the batch end are both multiples of 32 from the batch start, so while
// the cursor is short of the end a 12-byte header fits, and "the payload fits" is the
// padded message ending by the end. Computed on addresses: no pointer is formed past the
// batch.
inline bool header_in_batch(const std::byte* cursor, const std::byte* end) noexcept { return cursor < end; }
inline bool message_in_batch(const std::byte* cursor, uint64_t padded, const std::byte* end) noexcept {
  return reinterpret_cast<uintptr_t>(cursor) + padded <= reinterpret_cast<uintptr_t>(end);
}
// A request's allowance is at least the credit of an empty reply, and fits the response
// credit granted (R: `reservation`) beside what earlier requests hold (`committed`).
// R is taken by reference, so that it is loaded only once the first test passes (as a
// value it is loaded before the call: two more instructions per message in
// scripts/callgrind_copyrpc.sh).
constexpr bool allowance_granted(uint64_t allowance, uint64_t committed, const uint64_t& reservation) noexcept {
  return allowance >= internal_allowance(0) && committed + allowance <= reservation;
}
// A response's payload is at most what reply() sends for its call: max_reply_payload of
// the internal allowance the call reserved (kept with the pending call, CallSlab), the
// credit the response was sized from. Unchecked, a response could fill its batch whatever
// its call reserved, and a handler sizing its buffer by the allowance would overflow it.
// Checked once the call id is found pending, before anything of the response is used.
// Every call reserves at least an empty reply's allowance (internal_allowance(0) = 64),
// and from there the bound is allowance - 32 - 12: tested as a sum, 3 instructions fewer
// per response than through max_reply_payload's branch (scripts/callgrind_copyrpc.sh).
// The vectors below hold both forms equal from 64 on.
constexpr bool response_within_allowance(uint64_t payload_len, uint64_t allowance) noexcept {
  return payload_len + kFlowMetadataSize + kHeaderSize <= allowance;
}
// After the batch's count of messages, the cursor is exactly at the batch end.
inline bool batch_filled(const std::byte* cursor, const std::byte* end) noexcept { return cursor == end; }

// ---------------------------------------------------------------- test vectors
// A 4096-byte ring, a batch of 96 bytes (two messages) at stream position 8192 (ring
// offset 0), the consumed position a ring behind its end, 64 bytes sent to the peer:
// each rule exactly at its limit, then one step past.
namespace vectors {
struct Flow {
  uint64_t ring = 4096;
  uint64_t recv_producer = 8192;
  uint64_t consumed_pos = 8192 + 96 - 4096;
  uint64_t producer = 64;
  uint64_t consumer_by_credit_return = 0;
  uint64_t peer_credit = 1024;
  constexpr uint64_t recv_ring_size() const noexcept { return ring; }
  constexpr uint64_t consumed() const noexcept { return consumed_pos; }
};
constexpr Flow kFlow{};
constexpr FlowMetadata kMeta{.ring_credit_return = 64, .credit_grant = 4096 - 1024, .message_count = 2, .zero = {}};
constexpr uint64_t kLength = 96;
// `written`: what the sender's WRITE placed; by default what a correct sender writes.
constexpr uint64_t kAsSent = ~uint64_t{0};
constexpr EndpointError check(Flow f = kFlow, FlowMetadata m = kMeta, uint64_t length = kLength,
                              uint64_t written = kAsSent) noexcept {
  if (written == kAsSent) written = m.message_count == kWrapMessageCount ? kFlowMetadataSize : length;
  return check_batch_head(f, length, m, written);
}
constexpr Flow with(uint64_t Flow::*field, uint64_t v) noexcept {
  Flow f = kFlow;
  f.*field = v;
  return f;
}
constexpr FlowMetadata meta(uint64_t credit_return, uint64_t grant, uint32_t count) noexcept {
  return {.ring_credit_return = credit_return, .credit_grant = grant, .message_count = count, .zero = {}};
}
// The batch moved to ring offset `off`, the consumed position a ring behind its end.
constexpr Flow at_offset(uint64_t off) noexcept {
  Flow f = kFlow;
  f.recv_producer = 8192 + off;
  f.consumed_pos = f.recv_producer + kLength - f.ring;
  return f;
}
static_assert(check() == EndpointError::kNone);
static_assert(check(kFlow, kMeta, 0) == EndpointError::kBadImmediate);
static_assert(check(kFlow, kMeta, 4096 + 32) == EndpointError::kBadImmediate);
static_assert(check(with(&Flow::consumed_pos, 8192 + 96 - 4096 - 32)) == EndpointError::kRingOverrun);
static_assert(check(kFlow, meta(64 + 32, 4096 - 1024, 2)) == EndpointError::kBadCreditReturn);
static_assert(check(with(&Flow::consumer_by_credit_return, 32)) == EndpointError::kBadCreditReturn);
static_assert(check(kFlow, meta(64, 4096 - 1024 + 32, 2)) == EndpointError::kBadCreditGrant);
static_assert(check(kFlow, meta(64, 16, 2)) == EndpointError::kBadCreditGrant);
static_assert(check(kFlow, meta(64, 0, 3)) == EndpointError::kBadMessageCount);
static_assert(check(kFlow, meta(64, 0, 0)) == EndpointError::kBadMessageCount);
static_assert(check(kFlow, meta(64, 0, 0), 32) == EndpointError::kNone);
static_assert(check(at_offset(4096 - 96)) == EndpointError::kNone);
static_assert(check(at_offset(4096 - 64)) == EndpointError::kBadLength);
static_assert(check(kFlow, meta(64, 0, kWrapMessageCount)) == EndpointError::kBadWrapMarker);
static_assert(check(at_offset(4096 - 96), meta(64, 0, kWrapMessageCount)) == EndpointError::kNone);
static_assert(check(kFlow, kMeta, kLength, kLength - 32) == EndpointError::kBadWriteLength);
static_assert(check(kFlow, kMeta, kLength, kLength + 32) == EndpointError::kBadWriteLength);
static_assert(check(at_offset(4096 - 96), meta(64, 0, kWrapMessageCount), kLength, kLength) ==
              EndpointError::kBadWriteLength);
static_assert(allowance_granted(64, 1024 - 64, 1024) && !allowance_granted(32, 0, 1024) &&
              !allowance_granted(96, 1024 - 64, 1024));
// The smallest allowance (an empty reply's, 64 bytes) admits a 20-byte reply (64 - 32 - 12),
// the next one (96) a 52-byte reply: each at its limit and one past it.
static_assert(internal_allowance(0) == 64 && internal_allowance(52) == 96);
static_assert(response_within_allowance(0, 64) && response_within_allowance(20, 64) &&
              !response_within_allowance(21, 64));
static_assert(response_within_allowance(52, 96) && !response_within_allowance(53, 96));
static_assert(!response_within_allowance(0xFFFF'FFFFu, 96));
constexpr bool same_as_reply_bound(uint64_t allowance) noexcept {
  const uint64_t max = max_reply_payload(allowance);
  return response_within_allowance(max, allowance) && !response_within_allowance(max + 1, allowance);
}
static_assert(same_as_reply_bound(internal_allowance(0)) && same_as_reply_bound(96) && same_as_reply_bound(128) &&
              same_as_reply_bound(internal_allowance(uint64_t{1} << 28)));
}  // namespace vectors

}  // namespace bkv::copyrpc::batch_rules
