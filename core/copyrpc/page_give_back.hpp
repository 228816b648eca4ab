// copyrpc page give-back: with paged ring memory (PagedRingMemory in core/transport.hpp),
// the pages that hold no live byte of a connection are given back to the transport, in
// our send ring and in the peer's receive ring (same size, same offsets), as the peer's
// consumed position passes them.
//
// Only the sender knows both ends of the live bytes of that pair of rings: the peer has
// consumed everything below remote_consumer(), and nothing beyond `producer` has been
// written. So a page at stream position [a, a + kRingPage) is dead when
// a + kRingPage <= remote_consumer() and producer <= a + ring size (its next cycle has not
// been written yet); a page that fails the second test holds live bytes of the next cycle
// and is looked at again when the consumer passes it next time.
//
// The transport's give-back batch (give_back_batch(), whole pages): dead pages are given
// back once that many bytes of them have passed, in one call per ring end, and as many
// bytes ahead of the producer are prefaulted on both ends, so that the writes that come
// next find their pages resident (one system call instead of a page fault per page). Up
// to a batch of dead pages stays resident per ring meanwhile; which pages are given back,
// and every byte read, are the same as page by page.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/copyrpc/wire.hpp"
#include "core/transport.hpp"

namespace bkv::copyrpc {

// One endpoint's give-back state: how far whole pages have been given back.
class PageGiveBack {
 public:
  static constexpr uint64_t kRingPage = 4096;

  // The peer's consumed position may have moved: gives back the pages of endpoint `e`
  // (its send ring, its queue pair's remote ring) that it passed, a batch at a time.
  template <PagedRingMemory T, class Ep>
  void consumer_moved(T& t, const Ep& e) {
    const uint64_t upto = align_down(e.remote_consumer(), kRingPage);
    if (upto <= passed_) return;
    const uint64_t size = e.ring_size();
    const uint64_t next_cycle_floor = e.producer > size ? align_up(e.producer - size, kRingPage) : 0;
    const uint64_t from = std::max(passed_, next_cycle_floor);
    const uint64_t batch = t.give_back_batch();
    if (from < upto && upto - from < batch) return;  // not a batch yet: looked at again when more has passed
    passed_ = upto;
    if (from >= upto) return;
    // [from, upto) spans at most one ring (from >= producer - size, upto <= producer).
    for_each_ring_piece(size, from, upto - from, [&](uint64_t off, uint64_t n) {
      t.discard(e.send_ring.data() + off, n);
      e.qp->discard_remote(RemoteBuffer{e.remote_ring.addr + off, e.remote_ring.rkey, 0, n});
    });
    if (batch > kRingPage) {
      for_each_ring_piece(size, align_up(e.producer, kRingPage), std::min(batch, size), [&](uint64_t off, uint64_t n) {
        t.prefault(e.send_ring.data() + off, n);
        e.qp->prefault_remote(RemoteBuffer{e.remote_ring.addr + off, e.remote_ring.rkey, 0, n});
      });
    }
  }

  // Stream position below which whole pages have been given back.
  uint64_t passed() const noexcept { return passed_; }

  // The stream bytes [from, from + len), len <= size, as at most two pieces of a ring of
  // `size` bytes: f(offset in the ring, length).
  template <class F>
  static void for_each_ring_piece(uint64_t size, uint64_t from, uint64_t len, F&& f) {
    uint64_t off = from & (size - 1);
    while (len > 0) {
      const uint64_t n = std::min(len, size - off);
      f(off, n);
      len -= n;
      off = 0;
    }
  }

 private:
  uint64_t passed_ = 0;
};

}  // namespace bkv::copyrpc
