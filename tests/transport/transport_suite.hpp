// Transport-level tests shared by the real-run transports (wall-clock loopback, UCX):
// RC order and data integrity of WRITE+IMM, WRITE, READ, access errors, receiver-not-
// ready, send-queue accounting. copyrpc-free: they talk to the Transport concept only.
//
// A harness H supplies `using T = <transport>; make()` returning a unique_ptr<T> (any
// deleter), and every transport has `progress()`. The tests drive both nodes from one thread.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/transport.hpp"

namespace bkv::test {

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
    a->progress();
    b->progress();
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
  if (want == WcStatus::kRemoteAccessError) CHECK(p.qb->in_error());  // the responder failed too
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

// Send-queue slots: unsignalled requests keep their slots until a later signalled
// completion is polled; a full send queue says so instead of blocking.
template <class H>
void check_send_queue_accounting(H& h) {
  LinkedPair<H> p(h);
  std::vector<std::byte> local(64), remote(64);
  const MemoryRegion lmr = p.a->register_memory(local.data(), local.size(), kAccessLocalWrite);
  const MemoryRegion rmr = p.b->register_memory(remote.data(), remote.size(), kAccessRemoteWrite);
  const uint32_t depth = p.a->send_queue_depth();
  REQUIRE(p.qa->send_queue_free() == depth);
  for (uint32_t i = 0; i < depth; ++i)
    REQUIRE(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), i, false) == PostResult::kOk);
  CHECK(p.qa->send_queue_free() == 0);
  CHECK(p.qa->post_write(local.data(), 8, lmr.lkey, p.remote(rmr), 999, true) == PostResult::kSendQueueFull);
  p.qa->ring_doorbell();
  for (int i = 0; i < 300; ++i) p.pump();
  CHECK(p.sends.empty());
  CHECK(p.qa->send_queue_free() == 0);  // nothing signalled: nothing freed
}

// Posting on a queue pair that was never connected completes with a flush error.
template <class H>
void check_unconnected_post(H& h) {
  auto t = h.make();
  auto& qp = t->create_queue_pair();
  std::vector<std::byte> local(64);
  const MemoryRegion lmr = t->register_memory(local.data(), local.size(), kAccessLocalWrite);
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
// requests, counts a protocol error, and neither its memory nor its receive queue moves.
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
  REQUIRE(pump_until([&] {
    a->progress();
    b->poll_recv([&](const RecvCompletion& r) { recvs.push_back(r); }, 8);
    c->progress();
  }, [&] { return b->protocol_errors() > 0; }));
  for (int i = 0; i < 50; ++i) {
    a->progress();
    b->poll_recv([&](const RecvCompletion& r) { recvs.push_back(r); }, 8);
  }
  CHECK(b->protocol_errors() == 1);
  CHECK(recvs.empty());
  CHECK(b->srq_posted() == 4);
  for (std::byte x : remote) REQUIRE(x == std::byte{0});
}

}  // namespace bkv::test
