// copyrpc credits: the flow control that keeps room for every reply (docs/design_channels.md
// §copyrpc credits, §copyrpc consumer-position READ). Per direction, with C the size of
// the peer's receive ring:
//
//     in_flight + 2R <= C          in_flight = producer - remote consumer position
//
// R (Endpoint::resp_reservation) is response credit this side has granted the peer and
// its replies have not used yet; Endpoint::peer_credit is what the peer granted this
// side for its calls. Endpoint holds the numbers; what moves them:
//
//   connect             R = peer_credit = initial_credit(max_R, ring)
//   call()              spends internal_allowance(response allowance) of peer_credit
//   request received    commits its allowance within R (batch_rules::allowance_granted)
//   reply()             releases the allowance from R and from the committed part
//   batch finished      reports the bytes consumed since the last report, and grants
//                       credit_grant(C, in_flight, R, max_R) more R (grant_on_batch)
//   batch received      its credit return moves the remote consumer position, its grant
//                       adds to peer_credit (take_peer_flow)
//   RingFull, repeated  with no batch from the peer and no call in between: READ the
//                       peer's consumed-position word (note_ring_full)
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/copyrpc/wire.hpp"

namespace bkv::copyrpc::credits {

// R and the peer's credit at connect: no handshake, both sides know min(max_R, ring/4).
constexpr uint64_t initial_credit(uint64_t max_resp_reservation, uint64_t ring) noexcept {
  return std::min(max_resp_reservation, ring / 4);
}

// The grant a finished batch carries: min((C - in_flight)/2 - R, max_R - R), aligned down
// to 32, never negative. `in_flight` counts the bytes of the stream up to the end of the
// operation in progress (the batch being closed, and a message that follows a wrap).
constexpr uint64_t credit_grant(uint64_t ring, uint64_t in_flight, uint64_t reservation,
                                uint64_t max_reservation) noexcept {
  if (in_flight > ring) return 0;
  const uint64_t half = (ring - in_flight) / 2;
  if (half <= reservation || max_reservation <= reservation) return 0;
  return align_down(std::min(half - reservation, max_reservation - reservation));
}
// Test vectors (a 4096-byte ring, max_R = 1024): a full grant up to max_R, half the free
// space when that is less, nothing once R reaches either bound.
static_assert(credit_grant(4096, 0, 0, 1024) == 1024);
static_assert(credit_grant(4096, 0, 512, 1024) == 512);
static_assert(credit_grant(4096, 3000, 0, 1024) == 544);  // (4096 - 3000) / 2 = 548, aligned down
static_assert(credit_grant(4096, 3000, 548, 1024) == 0);
static_assert(credit_grant(4096, 4096, 0, 1024) == 0 && credit_grant(4096, 4097, 0, 1024) == 0);
static_assert(credit_grant(4096, 0, 1024, 1024) == 0);
// A grant never breaks the invariant: in_flight + 2(R + grant) <= C.
static_assert(3000 + 2 * (0 + credit_grant(4096, 3000, 0, 1024)) <= 4096);

// A batch (or wrap marker) of `e` is finished with its stream ending at `stream_end`:
// the credit return (bytes consumed since the last report) and the grant it carries. The
// grant is added to R at once. Always inlined into the flush (a call costs about one
// instruction per request/response pair, scripts/callgrind_copyrpc.sh).
struct BatchCredit {
  uint64_t credit_return;
  uint64_t grant;
};
template <class Ep>
[[gnu::always_inline]] inline BatchCredit grant_on_batch(Ep& e, uint64_t stream_end) noexcept {
  const uint64_t consumed = e.consumed();
  const uint64_t credit_return = consumed - e.last_notified;
  e.last_notified = consumed;
  const uint64_t grant =
      credit_grant(e.remote_ring.length, stream_end - e.remote_consumer(), e.resp_reservation, e.max_resp_reservation);
  e.resp_reservation += grant;
  if (grant != 0) e.refresh_call_fast_end();  // R grew: the send limit fell
  return {credit_return, grant};
}

// A received batch's flow metadata, its head rules checked (batch_rules): the peer's
// credit return moves the remote consumer position forward, its grant adds to our
// credit for calls. The consumer moving forward raises send_limit(): call_fast_end may
// stay low (a call at or past it takes the precise tests, which refresh it; so does the
// next flush).
template <class Ep>
void take_peer_flow(Ep& e, uint64_t credit_return, uint64_t grant) noexcept {
  e.consumer_by_credit_return += credit_return;
  e.peer_credit += grant;
}

// RingFull that persists while no batch arrives from the peer (so no piggybacked
// consumer position can refresh ours) and no call succeeds: the peer's consumed position
// is to be read directly (Endpoint::need_read, posted by the next flush). No call
// succeeded since the previous RingFull when neither batches_received nor peer_credit
// moved: a call always spends peer credit (internal_allowance(0) > 0), and only a
// received batch adds to it, so call() itself keeps no streak state.
static_assert(internal_allowance(0) > 0);
template <class Ep>
void note_ring_full(Ep& e) noexcept {
  if (e.ringfull_mark == e.batches_received && e.ringfull_credit == e.peer_credit) {
    if (++e.ringfull_streak >= 2 && !e.read_outstanding) e.need_read = true;
  } else {
    e.ringfull_streak = 1;
    e.ringfull_mark = e.batches_received;
    e.ringfull_credit = e.peer_credit;
  }
}

}  // namespace bkv::copyrpc::credits
