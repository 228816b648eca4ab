// The direct mlx5 data path (DirectTransport) against the software NIC emulator: data
// lands where the WQEs say, completions carry the right fields, queues wrap, CQEs come
// compressed or scattered, errors surface. The emulator decodes WQEs with the rdma-core
// structures on its own, so these tests do not check the encoder against itself.
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/random.hpp"
#include "tests/mlx5/emulated_pair.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;
using namespace bkv::mlx5::emu;

namespace {

DirectOptions opts(uint32_t sq_depth = 16, uint32_t srq = 256) { return test::direct_options(sq_depth, srq, 1024); }

// Two emulated NICs, one connected QP pair, a registered source buffer at A and a
// registered target buffer at B.
struct Pair : test::EmulatedPair {
  explicit Pair(const NodeOptions& na = {}, const NodeOptions& nb = {}, const DirectOptions& o = opts(),
                DeliveryMode mode = DeliveryMode::kEager, size_t bytes = 1 << 16,
                uint32_t dst_access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead)
      : EmulatedPair(na, nb, o, mode, bytes, dst_access) {}
  std::vector<RecvCompletion> recv_all(uint32_t budget = 64) {
    std::vector<RecvCompletion> v;
    while (b.poll_recv([&](const RecvCompletion& c) { v.push_back(c); }, budget) > 0) {
    }
    return v;
  }
  std::vector<SendCompletion> send_all(uint32_t budget = 64) {
    std::vector<SendCompletion> v;
    while (a.poll_send([&](const SendCompletion& c) { v.push_back(c); }, budget) > 0) {
    }
    return v;
  }
};

}  // namespace

static_assert(Transport<EmulatedTransport>);

TEST_CASE("WRITE_IMM of every size class lands in registered memory with one receive completion") {
  for (const bool inline_on : {true, false}) {
    DirectOptions o = opts();
    if (!inline_on) o.max_inline = o.inline_head = 0;
    Pair p({}, {}, o);
    p.b.post_receives(64);
    uint64_t off = 0, wr = 0, expect_inline = 0, expect_gather = 0;
    for (uint32_t len : {0u, 1u, 12u, 13u, 100u, 219u, 220u, 221u, 1000u, 5000u}) {
      REQUIRE(p.qa.post_write_imm(p.src.data() + off, len, p.src_mr.lkey, p.at(off), 0x5000 + len, ++wr, true) ==
              PostResult::kOk);
      p.qa.ring_doorbell();
      if (inline_on && len <= 220) expect_inline += len;
      else if (inline_on) expect_inline += 204, expect_gather += len - 204;
      else expect_gather += len;
      const auto rc = p.recv_all();
      REQUIRE(rc.size() == 1);
      CHECK(rc[0].qp_num == p.qb.qp_num());
      CHECK(rc[0].imm == 0x5000 + len);
      CHECK(rc[0].byte_len == len);
      CHECK(rc[0].status == WcStatus::kSuccess);
      CHECK(std::memcmp(p.dst.data() + off, p.src.data() + off, len) == 0);
      const auto sc = p.send_all();
      REQUIRE(sc.size() == 1);
      CHECK(sc[0].wr_id == wr);
      CHECK(sc[0].qp_num == p.qa.qp_num());
      CHECK(sc[0].opcode == WcOpcode::kRdmaWriteImm);
      CHECK(sc[0].status == WcStatus::kSuccess);
      off += len + 64;
    }
    CHECK(p.fabric.stats().inline_bytes == expect_inline);
    CHECK(p.fabric.stats().gather_bytes == expect_gather);
    CHECK(p.b.srq_posted() == 64 - 10);
    CHECK(p.b.node().srq_available() == 64 - 10);
  }
}

TEST_CASE("RDMA WRITE produces no receive completion - READ brings remote bytes back") {
  Pair p;
  p.b.post_receives(4);
  REQUIRE(p.qa.post_write(p.src.data(), 300, p.src_mr.lkey, p.at(128), 1, false) == PostResult::kOk);
  p.qa.ring_doorbell();
  CHECK(p.recv_all().empty());
  CHECK(std::memcmp(p.dst.data() + 128, p.src.data(), 300) == 0);
  std::vector<std::byte> back(300);
  const MemoryRegion back_mr = p.a.register_memory(back.data(), back.size(), kAccessLocalWrite);
  REQUIRE(p.qa.post_read(back.data(), 300, back_mr.lkey, p.at(128), 2, true) == PostResult::kOk);
  p.qa.ring_doorbell();
  const auto sc = p.send_all();
  REQUIRE(sc.size() == 1);  // the unsignaled WRITE reports nothing
  CHECK(sc[0].wr_id == 2);
  CHECK(sc[0].opcode == WcOpcode::kRdmaRead);
  CHECK(std::memcmp(back.data(), p.src.data(), 300) == 0);
  CHECK(p.b.srq_posted() == 4);
}

TEST_CASE("A send-completion callback that throws has consumed its CQE - the next poll goes on after it") {
  Pair p;
  for (uint64_t wr = 1; wr <= 4; ++wr) {
    REQUIRE(p.qa.post_write(p.src.data(), 64, p.src_mr.lkey, p.at(0), wr, true) == PostResult::kOk);
    p.qa.ring_doorbell();
  }
  std::vector<uint64_t> seen;
  auto throw_at_2 = [&](const SendCompletion& c) {
    seen.push_back(c.wr_id);
    if (c.wr_id == 2) throw std::runtime_error("callback gives up");
  };
  CHECK_THROWS_AS(p.a.poll_send(throw_at_2, 64), std::runtime_error);
  CHECK(seen == std::vector<uint64_t>{1, 2});
  for (const SendCompletion& c : p.send_all()) seen.push_back(c.wr_id);
  CHECK(seen == std::vector<uint64_t>{1, 2, 3, 4});  // 2 is not reported twice, none is lost
}

TEST_CASE("A tiny send queue wraps thousands of times with NOP fill - every write stays exact") {
  for (uint32_t blocks : {4u, 8u}) {
    // 4 blocks: WQEs of at most 2 blocks (60 bytes inline, else one gather entry);
    // 8 blocks: two WQEs of the largest size (4 blocks: 220 inline, 204 + gather).
    DirectOptions o = opts(2, 512);
    if (blocks == 4) o.max_inline = 60, o.inline_head = 0;
    Pair p({}, {}, o, DeliveryMode::kEager, 1 << 20);
    REQUIRE(p.qa.inner().wqe_cnt() == blocks);
    p.b.post_receives(512);
    Rng rng(blocks);
    uint64_t off = 0;
    uint32_t sent = 0, full = 0;
    std::vector<uint32_t> imms;
    for (uint32_t i = 0; i < 3000; ++i) {
      const uint32_t len = static_cast<uint32_t>(rng.below(700));
      if (off + len > p.dst.size()) off = 0;
      // Signal when the queue could not take another WQE of the largest size.
      const bool sig = p.qa.send_queue_free() <= 1 || rng.below(4) == 0;
      PostResult r = p.qa.post_write_imm(p.src.data() + off, len, p.src_mr.lkey, p.at(off), i, i, sig);
      while (r == PostResult::kSendQueueFull) {
        ++full;
        p.qa.ring_doorbell();
        const auto drained = p.send_all();
        if (drained.empty())
          FAIL("full send queue with nothing to complete: i=" << i << " pi=" << p.qa.inner().producer_counter()
               << " ci=" << p.qa.inner().consumer_counter() << " pending=" << p.fabric.pending()
               << " srq=" << p.b.srq_posted() << " len=" << len);
        r = p.qa.post_write_imm(p.src.data() + off, len, p.src_mr.lkey, p.at(off), i, i, sig);
      }
      if (rng.below(3) == 0 || sig) p.qa.ring_doorbell();
      for (const RecvCompletion& c : p.recv_all()) {
        imms.push_back(c.imm);
        ++sent;
      }
      if (p.b.srq_posted() < 256) p.b.post_receives(256);
      if (i % 97 == 0) {
        p.qa.ring_doorbell();
        for (const RecvCompletion& c : p.recv_all()) imms.push_back(c.imm), ++sent;
        CHECK(std::memcmp(p.dst.data() + off, p.src.data() + off, len) == 0);
      }
      off += len;
    }
    p.qa.ring_doorbell();
    for (const RecvCompletion& c : p.recv_all()) imms.push_back(c.imm), ++sent;
    REQUIRE(imms.size() == 3000);
    for (uint32_t i = 0; i < 3000; ++i) CHECK(imms[i] == i);
    const emu::Stats& st = p.fabric.stats();
    CHECK(st.nops > 20);               // the queue end was met with a NOP many times
    CHECK(st.wrapped_wqes == 0);       // and no WQE ever crossed it
    CHECK(full > 0);                   // the queue ran full and recovered
  }
}

TEST_CASE("CQ rings of 4 entries wrap thousands of times: owner bits, order, exactly once") {
  for (uint32_t cqe_size : {64u, 128u}) {
    NodeOptions n;
    n.cqe_size = cqe_size;
    DirectOptions o = opts(2, 4);
    o.recv_cq_entries = 4;
    o.send_cq_entries = 4;
    // One-block WQEs only (16 bytes through a gather entry): a 4-block send queue, which
    // a 4-entry send CQ covers (one CQE per block).
    o.max_inline = 12;
    o.inline_head = 0;
    Pair p(n, n, o);
    p.b.post_receives(4);
    std::vector<uint32_t> imms;
    uint32_t send_done = 0;
    Rng rng(cqe_size);
    for (uint32_t i = 0; i < 4000; ++i) {
      PostResult r = p.qa.post_write_imm(p.src.data(), 16, p.src_mr.lkey, p.at(0), i, i, true);
      if (r == PostResult::kSendQueueFull) {
        send_done += static_cast<uint32_t>(p.send_all(1 + static_cast<uint32_t>(rng.below(3))).size());
        r = p.qa.post_write_imm(p.src.data(), 16, p.src_mr.lkey, p.at(0), i, i, true);
      }
      REQUIRE(r == PostResult::kOk);
      p.qa.ring_doorbell();
      const uint32_t budget = 1 + static_cast<uint32_t>(rng.below(3));
      const auto rc = p.recv_all(budget);
      for (const RecvCompletion& c : rc) imms.push_back(c.imm);
      if (!rc.empty()) p.b.post_receives(static_cast<uint32_t>(rc.size()));
      send_done += static_cast<uint32_t>(p.send_all(1 + static_cast<uint32_t>(rng.below(3))).size());
    }
    REQUIRE(imms.size() == 4000);
    for (uint32_t i = 0; i < 4000; ++i) CHECK(imms[i] == i);
    CHECK(send_done == 4000);
    CHECK(p.fabric.stats().cq_passes >= 2 * 4000 / 4 - 2);
  }
}

TEST_CASE("Compressed CQE sessions of every size on both CQs, across polls and ring wraps") {
  for (uint32_t max_session : {2u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 24u, 25u, 64u}) {
    NodeOptions n;
    n.compress_recv = n.compress_send = true;
    n.max_session = max_session;
    DirectOptions o = opts(64, 128);
    o.send_cq_entries = 256;  // one CQE per block: 64 WQEs of 4 blocks
    Pair p(n, n, o, DeliveryMode::kManual);
    p.b.post_receives(128);
    Rng rng(max_session);
    uint32_t next = 0;
    while (next < 400) {
      // A burst of N completions with one immediate (the compressible case), varying lengths.
      const uint32_t count = 2 * max_session + 1 + static_cast<uint32_t>(rng.below(max_session));
      const uint32_t burst = std::min<uint32_t>(count, 64);
      std::vector<uint32_t> lens;
      const uint64_t sessions_before = p.fabric.stats().sessions;
      for (uint32_t k = 0; k < burst; ++k) {
        const uint32_t len = 32 * (1 + static_cast<uint32_t>(rng.below(8)));
        lens.push_back(len);
        REQUIRE(p.qa.post_write_imm(p.src.data(), len, p.src_mr.lkey, p.at(0), 99, next + k, true) == PostResult::kOk);
        p.qa.ring_doorbell();
      }
      CHECK(p.fabric.deliver() == burst);
      const uint64_t full = burst / max_session, rest = burst % max_session;
      CHECK(p.fabric.stats().sessions - sessions_before == 2 * (full + (rest >= 2 ? 1 : 0)));
      const auto rc = p.recv_all(1 + static_cast<uint32_t>(rng.below(5)));
      REQUIRE(rc.size() == burst);
      for (uint32_t k = 0; k < burst; ++k) {
        CHECK(rc[k].imm == 99);
        CHECK(rc[k].byte_len == lens[k]);
        CHECK(rc[k].qp_num == p.qb.qp_num());
      }
      const auto sc = p.send_all(1 + static_cast<uint32_t>(rng.below(5)));
      REQUIRE(sc.size() == burst);
      for (uint32_t k = 0; k < burst; ++k) {
        CHECK(sc[k].wr_id == next + k);
        CHECK(sc[k].opcode == WcOpcode::kRdmaWriteImm);
      }
      next += burst;
      p.b.post_receives(burst);
    }
    CHECK(p.fabric.stats().cq_passes >= 2);
  }
  SECTION("different immediates are never merged on the receive side") {
    NodeOptions n;
    n.compress_recv = true;
    Pair p(n, n, opts(), DeliveryMode::kManual);
    p.b.post_receives(32);
    for (uint32_t k = 0; k < 10; ++k) {
      REQUIRE(p.qa.post_write_imm(p.src.data(), 32, p.src_mr.lkey, p.at(0), k, k, false) == PostResult::kOk);
      p.qa.ring_doorbell();
    }
    p.fabric.deliver();
    CHECK(p.fabric.stats().sessions == 0);
    const auto rc = p.recv_all();
    REQUIRE(rc.size() == 10);
    for (uint32_t k = 0; k < 10; ++k) CHECK(rc[k].imm == k);
  }
}

TEST_CASE("A bad rkey surfaces as a remote access error - later WQEs are flushed") {
  Pair p;
  p.b.post_receives(8);
  const std::vector<std::byte> before = p.dst;
  RemoteBuffer bad = p.at(0);
  bad.rkey ^= 0x100;
  REQUIRE(p.qa.post_write_imm(p.src.data(), 100, p.src_mr.lkey, bad, 1, 11, false) == PostResult::kOk);
  REQUIRE(p.qa.post_write_imm(p.src.data(), 100, p.src_mr.lkey, p.at(0), 2, 12, false) == PostResult::kOk);
  REQUIRE(p.qa.post_write(p.src.data(), 100, p.src_mr.lkey, p.at(0), 13, true) == PostResult::kOk);
  p.qa.ring_doorbell();
  const auto sc = p.send_all();
  REQUIRE(sc.size() == 3);
  CHECK(sc[0].wr_id == 11);
  CHECK(sc[0].status == WcStatus::kRemoteAccessError);
  CHECK(sc[1].wr_id == 12);
  CHECK(sc[1].status == WcStatus::kWrFlushError);
  CHECK(sc[2].wr_id == 13);
  CHECK(sc[2].opcode == WcOpcode::kRdmaWrite);
  CHECK(sc[2].status == WcStatus::kWrFlushError);
  CHECK(p.qa.in_error());
  CHECK(p.recv_all().empty());
  CHECK(p.dst == before);
  CHECK(p.fabric.stats().error_cqes == 3);
  // Out of bounds of a valid rkey is a remote access error too.
  Pair q;
  q.b.post_receives(1);
  REQUIRE(q.qa.post_write_imm(q.src.data(), 64, q.src_mr.lkey, q.at(q.dst.size() - 32), 1, 1, false) ==
          PostResult::kOk);
  q.qa.ring_doorbell();
  const auto sq = q.send_all();
  REQUIRE(sq.size() == 1);
  CHECK(sq[0].status == WcStatus::kRemoteAccessError);
}

TEST_CASE("The responder that NAKed a bad rkey is in error - nothing it sends back lands") {
  // A's WRITE with a bad rkey: A completes with a remote access error, and B's QP, which
  // NAKed it, is in error on the NIC too (B's transport does not know: no CQE tells it).
  // B's next WRITE_IMM to A is flushed, and nothing reaches A (in error as well).
  Pair p;
  p.a.post_receives(4);
  std::vector<std::byte> at_a(256, std::byte{0}), from_b(64, std::byte{0x33});
  const MemoryRegion amr = p.a.register_memory(at_a.data(), at_a.size(), kAccessLocalWrite | kAccessRemoteWrite);
  const MemoryRegion bmr = p.b.register_memory(from_b.data(), from_b.size(), kAccessLocalWrite);
  RemoteBuffer bad = p.at(0);
  bad.rkey ^= 0x100;
  REQUIRE(p.qa.post_write(p.src.data(), 64, p.src_mr.lkey, bad, 1, true) == PostResult::kOk);
  p.qa.ring_doorbell();
  const auto sa = p.send_all();
  REQUIRE(sa.size() == 1);
  CHECK(sa[0].status == WcStatus::kRemoteAccessError);
  CHECK(p.a.node().qp_in_error(p.qa.qp_num()));
  CHECK(p.b.node().qp_in_error(p.qb.qp_num()));
  const RemoteBuffer to_a{reinterpret_cast<uint64_t>(at_a.data()), amr.rkey, 0, at_a.size()};
  REQUIRE(p.qb.post_write_imm(from_b.data(), 64, bmr.lkey, to_a, 9, 2, true) == PostResult::kOk);
  p.qb.ring_doorbell();
  std::vector<SendCompletion> sb;
  while (p.b.poll_send([&](const SendCompletion& c) { sb.push_back(c); }, 8) > 0) {
  }
  REQUIRE(sb.size() == 1);
  CHECK(sb[0].status == WcStatus::kWrFlushError);
  CHECK(p.qb.in_error());
  std::vector<RecvCompletion> ra;
  while (p.a.poll_recv([&](const RecvCompletion& c) { ra.push_back(c); }, 8) > 0) {
  }
  CHECK(ra.empty());
  for (std::byte x : at_a) REQUIRE(x == std::byte{0});
}

TEST_CASE("A bad lkey on a gather entry is a local protection error - READ needs remote-read access") {
  Pair p;
  p.b.post_receives(2);
  REQUIRE(p.qa.post_write_imm(p.src.data(), 1000, p.src_mr.lkey + 0x100, p.at(0), 1, 1, false) == PostResult::kOk);
  p.qa.ring_doorbell();
  auto sc = p.send_all();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kLocalProtectionError);

  Pair q({}, {}, opts(), DeliveryMode::kEager, 4096, kAccessLocalWrite | kAccessRemoteWrite);
  std::vector<std::byte> back(64);
  const MemoryRegion mr = q.a.register_memory(back.data(), back.size(), kAccessLocalWrite);
  REQUIRE(q.qa.post_read(back.data(), 64, mr.lkey, q.at(0), 5, true) == PostResult::kOk);
  q.qa.ring_doorbell();
  sc = q.send_all();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemoteAccessError);
  CHECK(sc[0].opcode == WcOpcode::kRdmaRead);
}

TEST_CASE("A WRITE or READ of 2 GiB or more is rejected - 2^31 - 1 bytes is one gather entry") {
  // Both gather layouts: a gather entry alone (no inline head) and inline head + gather.
  // (byte_count 2^31 would carry the inline-segment bit, 0 would mean 2 GiB.)
  for (const uint32_t head : {0u, kMaxInlineHead}) {
    INFO("inline_head " << head);
    DirectOptions o = opts();
    o.max_inline = head ? kMaxInline : 0;
    o.inline_head = head;
    Pair p({}, {}, o);
    p.b.post_receives(4);
    for (const uint32_t len : {1u << 31, (1u << 31) + 1, ~0u}) {
      CHECK_THROWS_AS(p.qa.post_write_imm(p.src.data(), len, p.src_mr.lkey, p.at(0), 1, 1, true), std::invalid_argument);
      CHECK_THROWS_AS(p.qa.post_read(p.dst.data(), len, p.src_mr.lkey, p.at(0), 1, true), std::invalid_argument);
    }
    CHECK(p.qa.inner().producer_counter() == 0);
    // The longest accepted length: the NIC reads a gather entry of the rest after the
    // inline head, beyond the registered source (a local protection error).
    const uint64_t gathered_before = p.fabric.stats().gather_bytes;
    REQUIRE(p.qa.post_write_imm(p.src.data(), (1u << 31) - 1, p.src_mr.lkey, p.at(0), 1, 7, true) == PostResult::kOk);
    CHECK(p.qa.inner().producer_counter() == (head ? 4 : 1));
    p.qa.ring_doorbell();
    CHECK(p.fabric.stats().gather_bytes - gathered_before == (1u << 31) - 1 - head);
    const auto sc = p.send_all();
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].wr_id == 7);
    CHECK(sc[0].status == WcStatus::kLocalProtectionError);
  }
}

TEST_CASE("Injected responder and requester error CQEs decode to error completions") {
  Pair p;
  p.b.post_receives(2);
  p.b.node().inject_error_cqe(CqRole::kRecv, MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_REMOTE_OP_ERR, p.qb.qp_num(), 0);
  const auto rc = p.recv_all();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].status == WcStatus::kRemoteOperationError);
  CHECK(rc[0].qp_num == p.qb.qp_num());
  CHECK(p.b.srq_posted() == 1);
}

TEST_CASE("Scatter-to-CQE: small signalled READ responses arrive inside the CQE") {
  for (uint32_t cqe_size : {64u, 128u}) {
    NodeOptions n;
    n.scatter_to_cqe = true;
    n.cqe_size = cqe_size;
    Pair p(n, n);
    for (size_t i = 0; i < 256; ++i) p.dst[i] = std::byte(static_cast<uint8_t>(0xA0 ^ i));
    std::vector<std::byte> back(256);
    const MemoryRegion mr = p.a.register_memory(back.data(), back.size(), kAccessLocalWrite);
    uint64_t scattered = 0;
    for (uint32_t len : {1u, 8u, 32u, 33u, 64u, 65u}) {
      std::fill(back.begin(), back.end(), std::byte{0});
      REQUIRE(p.qa.post_read(back.data(), len, mr.lkey, p.at(len), len, true) == PostResult::kOk);
      p.qa.ring_doorbell();
      const auto sc = p.send_all();
      REQUIRE(sc.size() == 1);
      CHECK(sc[0].status == WcStatus::kSuccess);
      CHECK(std::memcmp(back.data(), p.dst.data() + len, len) == 0);
      CHECK(back[len] == std::byte{0});
      if (len <= (cqe_size == 128 ? 64u : 32u)) ++scattered;
      CHECK(p.fabric.stats().scattered == scattered);
    }
    // An unsignaled READ has no CQE to carry its data: the NIC writes the buffer.
    std::fill(back.begin(), back.end(), std::byte{0});
    REQUIRE(p.qa.post_read(back.data(), 8, mr.lkey, p.at(8), 9, false) == PostResult::kOk);
    p.qa.ring_doorbell();
    CHECK(std::memcmp(back.data(), p.dst.data() + 8, 8) == 0);
    CHECK(p.fabric.stats().scattered == scattered);
  }
}

TEST_CASE("A WRITE_IMM waits for a receive (receiver not ready) and completes when one is posted") {
  Pair p;
  REQUIRE(p.qa.post_write_imm(p.src.data(), 64, p.src_mr.lkey, p.at(0), 7, 1, true) == PostResult::kOk);
  REQUIRE(p.qa.post_write_imm(p.src.data(), 64, p.src_mr.lkey, p.at(64), 8, 2, true) == PostResult::kOk);
  p.qa.ring_doorbell();
  CHECK(p.recv_all().empty());
  CHECK(p.send_all().empty());
  CHECK(p.fabric.pending() == 2);
  CHECK(p.fabric.stats().rnr_waits > 0);
  p.b.post_receives(1);
  auto rc = p.recv_all();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].imm == 7);
  p.b.post_receives(1);
  rc = p.recv_all();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].imm == 8);
  CHECK(p.send_all().size() == 2);
  CHECK(p.b.node().srq_available() == 0);
}

TEST_CASE("Doorbells: BlueFlame copies of one WQE, 8-byte doorbells for several, doorbell-only mode, no BlueFlame") {
  SECTION("BlueFlame") {
    Pair p;
    p.b.post_receives(64);
    for (int i = 0; i < 3; ++i) REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    p.qa.ring_doorbell();  // several WQEs (fitting the half together): the 8-byte doorbell
    CHECK(p.fabric.stats().bf_copies == 0);
    CHECK(p.fabric.stats().doorbells8 == 1);
    for (int i = 0; i < 5; ++i) REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    p.qa.ring_doorbell();
    CHECK(p.fabric.stats().doorbells8 == 2);
    REQUIRE(p.qa.post_write_imm(p.src.data(), 220, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    p.qa.ring_doorbell();  // one WQE of 4 blocks: one BlueFlame copy
    CHECK(p.fabric.stats().bf_copies == 1);
    CHECK(p.fabric.stats().bf_copy_wqes == 1);
    CHECK(p.recv_all().size() == 9);
  }
  SECTION("doorbell-only mode and a NIC without BlueFlame") {
    for (int variant = 0; variant < 2; ++variant) {
      DirectOptions o = opts();
      NodeOptions n;
      if (variant == 0) o.doorbell = DoorbellMode::kDoorbellOnly;
      else n.bf_size = 0;
      Pair p(n, n, o);
      p.b.post_receives(16);
      for (int i = 0; i < 6; ++i) {
        REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
        p.qa.ring_doorbell();
      }
      CHECK(p.fabric.stats().doorbells8 == 6);
      CHECK(p.fabric.stats().bf_copies == 0);
      CHECK(p.recv_all().size() == 6);
    }
  }
}

TEST_CASE("The emulator rejects what a NIC would not accept") {
  emu::Fabric f;
  emu::Node& n = f.add_node();
  const CqDescriptor cq = n.create_cq(16, CqRole::kSend);
  const CqDescriptor rcq = n.create_cq(16, CqRole::kRecv);
  const SrqDescriptor srq = n.create_srq(16);
  const SqDescriptor sq = n.create_qp(QpCaps{4, 220}, cq, rcq, srq);
  emu::Node& m = f.add_node();
  m.create_cq(16, CqRole::kSend);
  m.create_cq(16, CqRole::kRecv);
  m.create_srq(16);
  auto write_ctrl = [&](uint32_t slot, uint16_t idx, uint8_t opcode, uint32_t qpn, uint8_t ds) {
    mlx5_wqe_ctrl_seg c{};
    c.opmod_idx_opcode = htobe32((uint32_t{idx} << 8) | opcode);
    c.qpn_ds = htobe32((qpn << 8) | ds);
    std::memcpy(sq.buf + 64 * slot, &c, sizeof c);
  };
  auto doorbell8 = [&](uint32_t counter, uint32_t slot, uint32_t half) {
    sq.dbrec[MLX5_SND_DBR] = htobe32(counter);
    std::memcpy(sq.bf_reg + half * sq.bf_size, sq.buf + 64 * slot, 8);
  };
  SECTION("wrong WQE index in the control segment") {
    write_ctrl(0, 5, MLX5_OPCODE_NOP, sq.qpn, 1);
    doorbell8(1, 0, 0);
    CHECK_THROWS_AS(n.process_doorbells(), emu::Violation);
  }
  SECTION("wrong QP number") {
    write_ctrl(0, 0, MLX5_OPCODE_NOP, sq.qpn + 1, 1);
    doorbell8(1, 0, 0);
    CHECK_THROWS_AS(n.process_doorbells(), emu::Violation);
  }
  SECTION("doorbell record advanced without a doorbell write") {
    write_ctrl(0, 0, MLX5_OPCODE_NOP, sq.qpn, 1);
    sq.dbrec[MLX5_SND_DBR] = htobe32(1);
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("without a doorbell"));
  }
  SECTION("halves must alternate") {
    write_ctrl(0, 0, MLX5_OPCODE_NOP, sq.qpn, 1);
    doorbell8(1, 0, 0);
    n.process_doorbells();
    write_ctrl(1, 1, MLX5_OPCODE_NOP, sq.qpn, 1);
    doorbell8(2, 1, 0);  // half 0 again
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("alternate"));
  }
  SECTION("an 8-byte doorbell must match the last WQE") {
    write_ctrl(0, 0, MLX5_OPCODE_NOP, sq.qpn, 1);
    write_ctrl(1, 1, MLX5_OPCODE_NOP, sq.qpn, 1);
    doorbell8(2, 0, 0);  // first WQE's bytes, not the last one's
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("last WQE"));
  }
  SECTION("a WQE whose DS runs past the doorbell record") {
    write_ctrl(0, 0, MLX5_OPCODE_NOP, sq.qpn, 8);  // 2 blocks
    doorbell8(1, 0, 0);
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("runs past"));
  }
  SECTION("a BlueFlame copy that differs from the send queue") {
    write_ctrl(0, 0, MLX5_OPCODE_RDMA_WRITE, sq.qpn, 2);
    mlx5_wqe_raddr_seg r{};
    r.raddr = htobe64(0x1000);
    std::memcpy(sq.buf + 16, &r, sizeof r);
    sq.dbrec[MLX5_SND_DBR] = htobe32(1);
    std::memcpy(sq.bf_reg, sq.buf, 64);
    sq.bf_reg[20] = std::byte{0x77};
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("differs from the send queue"));
  }
  SECTION("unsupported opcode") {
    write_ctrl(0, 0, MLX5_OPCODE_SEND, sq.qpn, 2);
    doorbell8(1, 0, 0);
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("unsupported opcode"));
  }
}
