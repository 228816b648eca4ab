// The transport conformance suite: what every bkv::Transport must do, checked the same
// way on all seven (instant loopback, discrete-event, wall-clock loopback, UCX, the direct
// mlx5 data path on the NIC emulator, and on hardware the verbs transport and the direct
// mlx5 data path): RC order and data integrity of WRITE+IMM with its immediates, WRITE,
// READ, access errors (keys, bounds, permissions, another node's key), requests to a
// queue pair in the error state (discarded: retry-exceeded), receiver not ready,
// send-queue full, slot release by a polled signalled completion, send-queue wrap,
// posting before connect. copyrpc-free: they talk to the Transport concept only.
//
// A harness H supplies `using T = <transport>; make()` returning a unique_ptr<T> (any
// deleter) and, optionally, traits (defaults in Traits<H> below). Transports with a
// progress() are progressed by the pump; the tests drive every node from one thread.
// BKV_TRANSPORT_CONFORMANCE(name, tags, Harness) instantiates the whole suite.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/transport.hpp"

namespace bkv::test {

// What a harness may declare about its transport (all optional):
//  kSlotsAreWqes: send_queue_free() counts WQEs (true) or room for the largest WQE the
//      queue pair builds (false: the direct mlx5 path, whose slots are building blocks);
//  kPostBeforeConnectThrows: a post on an unconnected queue pair is a programming error
//      (std::logic_error) instead of a flushed request;
//  kResponderEntersError: the responder's queue pair enters the error state after it
//      NAKed a remote access error (software NICs); hardware does not report it there.
//  kErroredTargetStopsOneSided: a queue pair in the error state stops a WRITE or READ
//      sent to it (false for UCX, whose WRITE and READ to an announced region are UCX
//      RMA operations the target's software never sees).
template <class H>
struct Traits {
  static constexpr bool kSlotsAreWqes = [] {
    if constexpr (requires { H::kSlotsAreWqes; }) return H::kSlotsAreWqes;
    return true;
  }();
  static constexpr bool kPostBeforeConnectThrows = [] {
    if constexpr (requires { H::kPostBeforeConnectThrows; }) return H::kPostBeforeConnectThrows;
    return false;
  }();
  static constexpr bool kResponderEntersError = [] {
    if constexpr (requires { H::kResponderEntersError; }) return H::kResponderEntersError;
    return true;
  }();
  static constexpr bool kErroredTargetStopsOneSided = [] {
    if constexpr (requires { H::kErroredTargetStopsOneSided; }) return H::kErroredTargetStopsOneSided;
    return true;
  }();
};

// Lets a transport's software NIC run, for transports that have one to run.
template <class T>
void progress(T& t) {
  if constexpr (requires { t.progress(); }) t.progress();
}

// A hang guard, not a timing assertion: gives up after `seconds` of wall time.
template <class Pump, class Pred>
bool pump_until(Pump&& pump, Pred&& done, double seconds = 20.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    pump();
  }
  return true;
}

inline uint8_t pattern_byte(uint64_t msg, uint64_t i) { return static_cast<uint8_t>(msg * 131 + i * 7 + 1); }

template <class H>
struct LinkedPair {
  using T = typename H::T;
  using QP = typename T::QueuePair;
  decltype(std::declval<H&>().make()) a, b;
  QP* qa = nullptr;
  QP* qb = nullptr;
  std::vector<RecvCompletion> recvs;   // at b
  std::vector<SendCompletion> sends;   // at a

  explicit LinkedPair(H& h) : a(h.make()), b(h.make()) {
    qa = &a->create_queue_pair();
    qb = &b->create_queue_pair();
    qa->connect(qb->local_info());
    qb->connect(qa->local_info());
  }
  void pump() {
    a->poll_send([&](const SendCompletion& c) { sends.push_back(c); }, 64);
    b->poll_recv([&](const RecvCompletion& c) { recvs.push_back(c); }, 64);
    progress(*a);
    progress(*b);
  }
  RemoteBuffer remote(const MemoryRegion& mr, uint64_t offset = 0) const {
    return RemoteBuffer{reinterpret_cast<uint64_t>(mr.addr) + offset, mr.rkey, 0, mr.length - offset};
  }
};

// Many WRITE+IMMs of mixed sizes (0 bytes to `max_len`, crossing any eager/rendezvous
// switch of the transport), posted in doorbell batches while respecting the send queue:
// completions at the target come in post order with the right imm and length, and
// every byte landed where it was written.
template <class H>
void check_write_imm_order_and_integrity(H& h, uint32_t messages, uint32_t max_len) {
  LinkedPair<H> p(h);
  std::vector<uint32_t> lens(messages);
  std::vector<uint64_t> offs(messages);
  uint64_t total = 0;
  for (uint32_t i = 0; i < messages; ++i) {
    lens[i] = (i % 7 == 3) ? 0 : static_cast<uint32_t>((uint64_t{i} * 2654435761u) % (max_len + 1));
    if (i % 97 == 5) lens[i] = max_len;
    offs[i] = total;
    total += lens[i];
  }
  std::vector<std::byte> src(total + 1), dst(total + 1, std::byte{0});
  for (uint32_t i = 0; i < messages; ++i)
    for (uint32_t k = 0; k < lens[i]; ++k) src[offs[i] + k] = std::byte{pattern_byte(i, k)};
  const MemoryRegion smr = p.a->register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion dmr = p.b->register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
  p.b->post_receives(p.b->srq_capacity());

  uint32_t posted = 0;
  uint32_t reposted = 0;
  const bool ok = pump_until([&] {
    // Doorbell batches of up to 5 requests, one in 8 signalled.
    uint32_t batch = 0;
    while (posted < messages && batch < 5 && p.qa->send_queue_free() > 0) {
      const bool sig = (posted % 8 == 7) || posted + 1 == messages;
      REQUIRE(p.qa->post_write_imm(src.data() + offs[posted], lens[posted], smr.lkey, p.remote(dmr, offs[posted]),
                                   0x1000 + posted, posted, sig) == PostResult::kOk);
      ++posted;
      ++batch;
    }
    if (batch > 0) p.qa->ring_doorbell();
    p.pump();
    const uint32_t want = static_cast<uint32_t>(p.recvs.size()) - reposted;
    if (want > 0 && p.b->srq_posted() + want <= p.b->srq_capacity()) {
      p.b->post_receives(want);
      reposted += want;
    }
  }, [&] { return p.recvs.size() == messages && !p.sends.empty() && p.sends.back().wr_id == messages - 1; });
  REQUIRE(ok);
  for (uint32_t i = 0; i < messages; ++i) {
    INFO("message " << i);
    REQUIRE(p.recvs[i].imm == 0x1000 + i);
    REQUIRE(p.recvs[i].byte_len == lens[i]);
    REQUIRE(p.recvs[i].qp_num == p.qb->qp_num());
    REQUIRE(p.recvs[i].status == WcStatus::kSuccess);
  }
  REQUIRE(std::memcmp(src.data(), dst.data(), total) == 0);
  REQUIRE(dst[total] == std::byte{0});
  // Signalled completions: in order, successful, exactly the signalled ones.
  int64_t prev = -1;
  for (const SendCompletion& c : p.sends) {
    REQUIRE(c.status == WcStatus::kSuccess);
    REQUIRE(c.opcode == WcOpcode::kRdmaWriteImm);
    REQUIRE((c.wr_id % 8 == 7 || c.wr_id == messages - 1));
    REQUIRE(static_cast<int64_t>(c.wr_id) > prev);
    prev = static_cast<int64_t>(c.wr_id);
  }
  REQUIRE(p.sends.size() == (messages / 8) + (messages % 8 == 0 ? 0 : 1));
}

// WRITE (no receive completion at the target), then READ back what was written, with
// a READ into a buffer the requester registered: data round-trips exactly.
template <class H>
void check_write_and_read(H& h) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(4096), remote(4096, std::byte{0}), back(4096, std::byte{0});
  for (size_t i = 0; i < local.size(); ++i) local[i] = std::byte{pattern_byte(3, i)};
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion bmr = p.a->register_memory(back.data(), back.size(), kAccessLocalWrite);
  const MemoryRegion rmr =
      p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  REQUIRE(p.qa->post_write(local.data() + 100, 1000, lmr.lkey, p.remote(rmr, 200), 1, false) == PostResult::kOk);
  REQUIRE(p.qa->post_read(back.data() + 8, 1000, bmr.lkey, p.remote(rmr, 200), 2, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  REQUIRE(p.sends.size() == 1);  // the unsignalled WRITE completes silently
  CHECK(p.sends[0].wr_id == 2);
  CHECK(p.sends[0].opcode == WcOpcode::kRdmaRead);
  CHECK(p.sends[0].status == WcStatus::kSuccess);
  CHECK(p.sends[0].qp_num == p.qa->qp_num());
  CHECK(p.recvs.empty());
  CHECK(std::memcmp(remote.data() + 200, local.data() + 100, 1000) == 0);
  CHECK(std::memcmp(back.data() + 8, local.data() + 100, 1000) == 0);
  CHECK(back[7] == std::byte{0});
  CHECK(back[1008] == std::byte{0});
  CHECK(remote[199] == std::byte{0});
  CHECK(remote[1200] == std::byte{0});
  CHECK(p.b->srq_posted() == 0);  // a plain WRITE consumes no receive
}

enum class Violation { kBadRkey, kPastEnd, kBeforeStart, kNoRemoteWrite, kNoRemoteRead, kBadLkey, kReadIntoReadOnly };

// One access violation: the failing request completes with the right error even though
// it is unsignalled, the next one is flushed, the target's memory is untouched and no
// receive completion appears there; the queue pair ends in the error state.
template <class H>
void check_violation(H& h, Violation v) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(256, std::byte{0x5A}), remote(256, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(),
                                                v == Violation::kReadIntoReadOnly ? 0u : kAccessLocalWrite);
  const uint32_t remote_access = v == Violation::kNoRemoteWrite ? kAccessRemoteRead
                                 : v == Violation::kNoRemoteRead ? kAccessRemoteWrite
                                                                 : (kAccessRemoteWrite | kAccessRemoteRead);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | remote_access);
  p.b->post_receives(4);
  RemoteBuffer dst = p.remote(rmr);
  uint32_t lkey = lmr.lkey;
  uint32_t len = 64;
  bool read = false;
  WcStatus want = WcStatus::kRemoteAccessError;
  switch (v) {
    case Violation::kBadRkey: dst.rkey ^= 0x5555; break;
    case Violation::kPastEnd: dst.addr += 200; break;  // 200 + 64 > 256
    case Violation::kBeforeStart: dst.addr -= 1; break;
    case Violation::kNoRemoteWrite: break;
    case Violation::kNoRemoteRead: read = true; break;
    case Violation::kBadLkey: lkey ^= 0x7777; want = WcStatus::kLocalProtectionError; break;
    case Violation::kReadIntoReadOnly: read = true; want = WcStatus::kLocalProtectionError; break;
  }
  const PostResult r1 = read ? p.qa->post_read(local.data(), len, lkey, dst, 10, false)
                             : p.qa->post_write_imm(local.data(), len, lkey, dst, 77, 10, false);
  REQUIRE(r1 == PostResult::kOk);
  REQUIRE(p.qa->post_write_imm(local.data(), 8, lmr.lkey, p.remote(rmr), 78, 11, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= 2; }));
  for (int i = 0; i < 50; ++i) p.pump();
  REQUIRE(p.sends.size() == 2);
  CHECK(p.sends[0].wr_id == 10);
  CHECK(p.sends[0].status == want);
  CHECK(p.sends[1].wr_id == 11);
  CHECK(p.sends[1].status == WcStatus::kWrFlushError);
  CHECK(p.qa->in_error());
  if (want == WcStatus::kRemoteAccessError && Traits<H>::kResponderEntersError)
    CHECK(p.qb->in_error());  // the responder failed too
  CHECK(p.recvs.empty());
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
  if (read && v != Violation::kReadIntoReadOnly)
    for (std::byte x : local) REQUIRE(x == std::byte{0x5A});
  // Later posts complete with a flush error too.
  REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 12, false) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= 3; }));
  CHECK(p.sends[2].wr_id == 12);
  CHECK(p.sends[2].status == WcStatus::kWrFlushError);
}

// Puts b's queue pair in the error state by a request of its own with a bad lkey (a
// local error, which involves nobody else) and waits for b's error completion.
template <class H>
void put_target_in_error(LinkedPair<H>& p) {
  std::vector<std::byte> own(64, std::byte{1}), at_a(64, std::byte{0});
  const MemoryRegion omr = p.b->register_memory(own.data(), own.size(), kAccessLocalWrite);
  const MemoryRegion amr = p.a->register_memory(at_a.data(), at_a.size(), kAccessRemoteWrite);
  REQUIRE(p.qb->post_write(own.data(), 8, omr.lkey ^ 0x7777, p.remote(amr), 90, false) == PostResult::kOk);
  p.qb->ring_doorbell();
  std::vector<SendCompletion> b_sends;
  REQUIRE(pump_until([&] {
    p.pump();
    p.b->poll_send([&](const SendCompletion& c) { b_sends.push_back(c); }, 8);
  }, [&] { return !b_sends.empty(); }));
  REQUIRE(b_sends[0].wr_id == 90);
  REQUIRE(b_sends[0].status == WcStatus::kLocalProtectionError);
  REQUIRE(p.qb->in_error());
}

// A queue pair in the error state discards inbound requests (RC): nothing answers, so a
// WRITE+IMM, WRITE or READ sent to it completes with kRetryExceeded once the requester's
// retries run out, and puts the requester in the error state; nothing lands at the
// target, no receive is taken or completed there, and a READ brings nothing back.
template <class H>
void check_request_to_errored_target(H& h, WcOpcode op) {
  if (op != WcOpcode::kRdmaWriteImm && !Traits<H>::kErroredTargetStopsOneSided) return;
  LinkedPair<H> p(h);
  std::vector<std::byte> local(256, std::byte{0x5A}), remote(256, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr =
      p.b->register_memory(remote.data(), remote.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  p.b->post_receives(4);
  put_target_in_error(p);
  const PostResult r = op == WcOpcode::kRdmaRead    ? p.qa->post_read(local.data(), 64, lmr.lkey, p.remote(rmr), 1, true)
                       : op == WcOpcode::kRdmaWrite ? p.qa->post_write(local.data(), 64, lmr.lkey, p.remote(rmr), 1, true)
                                                    : p.qa->post_write_imm(local.data(), 64, lmr.lkey, p.remote(rmr), 9, 1, true);
  REQUIRE(r == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  for (int i = 0; i < 50; ++i) p.pump();
  REQUIRE(p.sends.size() == 1);
  CHECK(p.sends[0].wr_id == 1);
  CHECK(p.sends[0].status == WcStatus::kRetryExceeded);
  CHECK(p.qa->in_error());
  CHECK(p.recvs.empty());
  CHECK(p.b->srq_posted() == 4);
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
  for (std::byte x : local) REQUIRE(x == std::byte{0x5A});
  // The requester's later requests are flushed.
  REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 2, false) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= 2; }));
  CHECK(p.sends[1].wr_id == 2);
  CHECK(p.sends[1].status == WcStatus::kWrFlushError);
}

// A WRITE+IMM that waits for a receive (receiver not ready) at a queue pair which then
// enters the error state completes in error like any request to it; no receive
// completion appears. (Its bytes may have landed: a NIC may place a message's data
// before it finds no receive for it.)
template <class H>
void check_waiting_request_meets_errored_target(H& h) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(64, std::byte{2}), remote(64, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  REQUIRE(p.qa->post_write_imm(local.data(), 8, lmr.lkey, p.remote(rmr), 7, 1, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  for (int i = 0; i < 100; ++i) p.pump();
  REQUIRE(p.sends.empty());  // receiver not ready: it waits
  put_target_in_error(p);
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  CHECK(p.sends[0].wr_id == 1);
  CHECK(p.sends[0].status == WcStatus::kRetryExceeded);
  CHECK(p.qa->in_error());
  CHECK(p.recvs.empty());
}

// Receiver not ready: a WRITE+IMM with no receive posted waits (its data may land, the
// completion does not appear); posting receives releases it, and the ones behind it,
// in order.
template <class H>
void check_receiver_not_ready(H& h) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(64, std::byte{1}), remote(64);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  for (uint32_t i = 0; i < 3; ++i)
    REQUIRE(p.qa->post_write_imm(local.data(), 8, lmr.lkey, p.remote(rmr, 8 * i), 500 + i, i, i == 2) ==
            PostResult::kOk);
  p.qa->ring_doorbell();
  for (int i = 0; i < 200; ++i) p.pump();
  CHECK(p.recvs.empty());
  CHECK(p.sends.empty());
  p.b->post_receives(1);
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.recvs.size() >= 1; }));
  for (int i = 0; i < 100; ++i) p.pump();
  REQUIRE(p.recvs.size() == 1);
  CHECK(p.recvs[0].imm == 500);
  p.b->post_receives(5);
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.recvs.size() == 3 && p.sends.size() == 1; }));
  CHECK(p.recvs[1].imm == 501);
  CHECK(p.recvs[2].imm == 502);
  CHECK(p.b->srq_posted() == 3);
  CHECK(p.sends[0].wr_id == 2);
  CHECK(p.sends[0].status == WcStatus::kSuccess);
}

// Send queue full: unsignalled requests keep their slots however long the queue pair
// runs; a full send queue says so (kSendQueueFull) instead of blocking, and holds at
// least send_queue_depth() small requests (exactly that many where slots are WQEs).
template <class H>
void check_send_queue_full(H& h) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(64), remote(64);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  const uint32_t depth = p.a->send_queue_depth();
  REQUIRE(depth > 0);
  if (Traits<H>::kSlotsAreWqes) REQUIRE(p.qa->send_queue_free() == depth);
  uint32_t accepted = 0;
  while (accepted < 64 * depth &&
         p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), accepted, false) == PostResult::kOk)
    ++accepted;
  REQUIRE(accepted < 64 * depth);  // the queue did fill up
  CHECK(accepted >= depth);
  if (Traits<H>::kSlotsAreWqes) CHECK(accepted == depth);
  CHECK(p.qa->send_queue_free() == 0);
  CHECK(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 999, true) == PostResult::kSendQueueFull);
  p.qa->ring_doorbell();
  for (int i = 0; i < 300; ++i) p.pump();
  CHECK(p.sends.empty());
  CHECK(p.qa->send_queue_free() == 0);  // nothing signalled: nothing freed
  CHECK(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 999, true) == PostResult::kSendQueueFull);
}

// Slot release: polling a signalled completion frees its slot and every earlier one of
// the queue pair, and none after it. Rounds of (k unsignalled WRITEs + 1 signalled) wrap
// the send queue many times; every WRITE's bytes land where they were aimed.
template <class H>
void check_signalled_completion_frees_slots(H& h) {
  LinkedPair<H> p(h);
  const uint32_t depth = p.a->send_queue_depth();
  const uint32_t unsignalled = depth / 2 > 1 ? depth / 2 - 1 : 0;
  const uint32_t per_round = unsignalled + 1;
  const uint32_t rounds = 4 * depth / per_round + 3;  // > 4 passes over the queue
  std::vector<std::byte> local(uint64_t{rounds} * per_round * 8), remote(local.size() + 8, std::byte{0});
  for (size_t i = 0; i < local.size(); ++i) local[i] = std::byte{pattern_byte(i / 8, i)};
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  const uint32_t idle_free = p.qa->send_queue_free();
  REQUIRE(idle_free > 0);
  uint64_t next = 0;
  for (uint32_t r = 0; r < rounds; ++r) {
    INFO("round " << r);
    for (uint32_t k = 0; k <= unsignalled; ++k, ++next)
      REQUIRE(p.qa->post_write(local.data() + 8 * next, 8, lmr.lkey, p.remote(rmr, 8 * next), next,
                               k == unsignalled) == PostResult::kOk);
    // One more unsignalled WRITE, posted after the signalled one: its slot stays taken.
    const bool tail = r + 1 == rounds;
    if (tail) {
      REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr, remote.size() - 8), 1u << 30, false) ==
              PostResult::kOk);
    }
    const uint32_t busy_free = p.qa->send_queue_free();
    CHECK(busy_free < idle_free);
    p.qa->ring_doorbell();
    const size_t want = r + 1;
    REQUIRE(pump_until([&] { p.pump(); }, [&] { return p.sends.size() >= want; }));
    REQUIRE(p.sends.size() == want);
    CHECK(p.sends.back().wr_id == next - 1);
    CHECK(p.sends.back().status == WcStatus::kSuccess);
    if (!tail) {
      CHECK(p.qa->send_queue_free() == idle_free);  // the whole round's slots are free again
    } else {
      CHECK(p.qa->send_queue_free() < idle_free);   // ... but not the one posted after it
      if (Traits<H>::kSlotsAreWqes) CHECK(p.qa->send_queue_free() == idle_free - 1);
    }
  }
  CHECK(std::memcmp(remote.data(), local.data(), local.size()) == 0);
}

// Posting on a queue pair that was never connected completes with a flush error (or,
// where the transport says so, is refused with std::logic_error).
template <class H>
void check_unconnected_post(H& h) {
  auto t = h.make();
  auto& qp = t->create_queue_pair();
  std::vector<std::byte> local(64);
  const MemoryRegion lmr = t->register_memory(local.data(), local.size(), kAccessLocalWrite);
  if constexpr (Traits<H>::kPostBeforeConnectThrows) {
    CHECK_THROWS_AS(qp.post_write(local.data(), 8, lmr.lkey, RemoteBuffer{1, 1, 0, 8}, 5, false), std::logic_error);
    return;
  }
  REQUIRE(qp.post_write(local.data(), 8, lmr.lkey, RemoteBuffer{1, 1, 0, 8}, 5, false) == PostResult::kOk);
  qp.ring_doorbell();
  std::vector<SendCompletion> sends;
  REQUIRE(pump_until([&] { t->poll_send([&](const SendCompletion& c) { sends.push_back(c); }, 8); },
                     [&] { return !sends.empty(); }));
  CHECK(sends[0].wr_id == 5);
  CHECK(sends[0].status == WcStatus::kWrFlushError);
}

// Validation of incoming messages: a queue pair that connected to b's queue pair
// without b connecting back (b's is connected to c instead) is a stranger: b drops its
// requests, and neither its memory nor its receive queue moves. A transport that counts
// protocol errors (wall-clock, UCX) counts one; the others (mlx5 emulator,
// discrete-event) answer as an RC queue pair does, with silence: the request completes with kRetryExceeded and the stranger's
// queue pair enters the error state, b's does not.
template <class H>
void check_stranger_dropped(H& h) {
  auto a = h.make();
  auto b = h.make();
  auto c = h.make();
  auto& qa = a->create_queue_pair();
  auto& qb = b->create_queue_pair();
  auto& qc = c->create_queue_pair();
  qb.connect(qc.local_info());
  qc.connect(qb.local_info());
  qa.connect(qb.local_info());  // one-sided: b's queue pair belongs to c
  std::vector<std::byte> local(64, std::byte{7}), remote(64, std::byte{0});
  const MemoryRegion lmr = a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  b->post_receives(4);
  REQUIRE(qa.post_write_imm(local.data(), 16, lmr.lkey, RemoteBuffer{reinterpret_cast<uint64_t>(remote.data()), rmr.rkey, 0, 64},
                            1, 1, true) == PostResult::kOk);
  qa.ring_doorbell();
  std::vector<RecvCompletion> recvs;
  std::vector<SendCompletion> sends;
  constexpr bool kCounts = requires { b->protocol_errors(); };
  auto pump = [&] {
    progress(*a);
    a->poll_send([&](const SendCompletion& x) { sends.push_back(x); }, 8);
    b->poll_recv([&](const RecvCompletion& r) { recvs.push_back(r); }, 8);
    progress(*c);
  };
  if constexpr (kCounts) {
    REQUIRE(pump_until(pump, [&] { return b->protocol_errors() > 0; }));
  } else {
    REQUIRE(pump_until(pump, [&] { return !sends.empty(); }));
  }
  for (int i = 0; i < 50; ++i) pump();
  if constexpr (kCounts) {
    CHECK(b->protocol_errors() == 1);
  } else {
    REQUIRE(sends.size() == 1);
    CHECK(sends[0].status == WcStatus::kRetryExceeded);
    CHECK(qa.in_error());
    CHECK_FALSE(qb.in_error());
  }
  CHECK(recvs.empty());
  CHECK(b->srq_posted() == 4);
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
}

// Keys are per node: a WRITE to b through a key that node c registered is a remote
// access error, and c's memory is untouched.
template <class H>
void check_key_of_another_node(H& h) {
  LinkedPair<H> p(h);
  auto c = h.make();
  std::vector<std::byte> local(64, std::byte{3}), theirs(64, std::byte{0});
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion cmr = c->register_memory(theirs.data(), theirs.size(), kAccessRemoteWrite);
  REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(cmr), 1, true) == PostResult::kOk);
  p.qa->ring_doorbell();
  REQUIRE(pump_until([&] { p.pump(); }, [&] { return !p.sends.empty(); }));
  CHECK(p.sends[0].status == WcStatus::kRemoteAccessError);
  for (std::byte x : theirs) REQUIRE(x == std::byte{0});
}

}  // namespace bkv::test

// The whole suite for one transport: NAME prefixes every test name, TAGS is a Catch tag
// string, HARNESS a harness type constructible without arguments.
#define BKV_TRANSPORT_CONFORMANCE(NAME, TAGS, HARNESS)                                                     \
  TEST_CASE(NAME " conformance: WRITE+IMM order, immediates and integrity", TAGS) {                       \
    HARNESS h;                                                                                              \
    ::bkv::test::check_write_imm_order_and_integrity(h, 1000, 4096);                                       \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: WRITE then READ round trip", TAGS) {                                       \
    HARNESS h;                                                                                              \
    ::bkv::test::check_write_and_read(h);                                                                   \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: access violations complete with errors and flush the queue pair", TAGS) { \
    using ::bkv::test::Violation;                                                                           \
    const Violation v = GENERATE(Violation::kBadRkey, Violation::kPastEnd, Violation::kBeforeStart,        \
                                 Violation::kNoRemoteWrite, Violation::kNoRemoteRead, Violation::kBadLkey, \
                                 Violation::kReadIntoReadOnly);                                            \
    INFO("violation " << static_cast<int>(v));                                                              \
    HARNESS h;                                                                                              \
    ::bkv::test::check_violation(h, v);                                                                     \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: a queue pair in the error state discards inbound requests", TAGS) {       \
    const ::bkv::WcOpcode op =                                                                              \
        GENERATE(::bkv::WcOpcode::kRdmaWriteImm, ::bkv::WcOpcode::kRdmaWrite, ::bkv::WcOpcode::kRdmaRead);  \
    INFO("opcode " << static_cast<int>(op));                                                                \
    HARNESS h;                                                                                              \
    ::bkv::test::check_request_to_errored_target(h, op);                                                    \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: a request waiting for a receive meets a target gone to error", TAGS) {      \
    HARNESS h;                                                                                              \
    ::bkv::test::check_waiting_request_meets_errored_target(h);                                             \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: a key of another node is a remote access error", TAGS) {                  \
    HARNESS h;                                                                                              \
    ::bkv::test::check_key_of_another_node(h);                                                              \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: receiver not ready holds WRITE+IMM until receives are posted", TAGS) {     \
    HARNESS h;                                                                                              \
    ::bkv::test::check_receiver_not_ready(h);                                                               \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: a full send queue says so and unsignalled requests free nothing", TAGS) {  \
    HARNESS h;                                                                                              \
    ::bkv::test::check_send_queue_full(h);                                                                  \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: a polled signalled completion frees its slot and all before it", TAGS) {   \
    HARNESS h;                                                                                              \
    ::bkv::test::check_signalled_completion_frees_slots(h);                                                 \
  }                                                                                                         \
  TEST_CASE(NAME " conformance: posting on an unconnected queue pair", TAGS) {                              \
    HARNESS h;                                                                                              \
    ::bkv::test::check_unconnected_post(h);                                                                 \
  }
