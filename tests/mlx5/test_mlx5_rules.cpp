// ConnectX programming rules that real hardware enforces (or silently misreads) and
// that the software NIC emulator must therefore check, each tested both ways: the
// emulator rejects a violation written by hand, and the direct data path obeys the rule
// under the traffic that would break it. The rules and their sources are listed in
// docs/design_transports.md §mlx5 rules the emulator checks.
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "tests/mlx5/emulated_pair.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;
using namespace bkv::mlx5::emu;

namespace {

DirectOptions small_opts(uint32_t sq_depth = 4, uint32_t send_cq = 1024) {
  return test::direct_options(sq_depth, 256, send_cq);
}

struct Pair : test::EmulatedPair {
  explicit Pair(const DirectOptions& o = small_opts(), const NodeOptions& n = {},
                DeliveryMode mode = DeliveryMode::kEager)
      : EmulatedPair(n, n, o, mode, 4096, kAccessLocalWrite | kAccessRemoteWrite) {}
  uint32_t drain_send() {
    uint32_t n = 0, k;
    while ((k = a.poll_send([](const SendCompletion&) {}, 64)) > 0) n += k;
    return n;
  }
};

// A raw emulated NIC with one QP (16 blocks: 4 WQEs of 4 blocks) for hand-written WQEs.
struct Raw {
  emu::Fabric f;
  emu::Node& n;
  CqDescriptor cq, rcq;
  SrqDescriptor srq;
  SqDescriptor sq;
  uint32_t half = 0;
  Raw()
      : n(f.add_node()),
        cq(n.create_cq(64, CqRole::kSend)),
        rcq(n.create_cq(64, CqRole::kRecv)),
        srq(n.create_srq(16)),
        sq(n.create_qp(QpCaps{4, 220}, cq, rcq, srq)) {}
  // A one-block NOP at counter `idx`.
  void nop(uint16_t idx) {
    mlx5_wqe_ctrl_seg c{};
    c.opmod_idx_opcode = htobe32((uint32_t{idx} << 8) | MLX5_OPCODE_NOP);
    c.qpn_ds = htobe32((sq.qpn << 8) | 1);
    std::memcpy(sq.buf + 64 * (idx & (sq.wqe_cnt - 1)), &c, sizeof c);
  }
  // Doorbell record = `counter`, then the 8-byte doorbell of the WQE at `last`.
  void doorbell8(uint32_t counter, uint16_t last) {
    sq.dbrec[MLX5_SND_DBR] = htobe32(counter);
    std::memcpy(sq.bf_reg + half * sq.bf_size, sq.buf + 64 * (last & (sq.wqe_cnt - 1)), 8);
    half ^= 1;
  }
};

}  // namespace

TEST_CASE("mlx5 rule: a BlueFlame write carries one WQE - the emulator rejects a batch copy") {
  Raw r;
  r.nop(0);
  r.nop(1);
  r.sq.dbrec[MLX5_SND_DBR] = htobe32(2);
  std::memcpy(r.sq.bf_reg, r.sq.buf, 128);  // both WQEs in one BlueFlame write
  CHECK_THROWS_WITH(r.n.process_doorbells(), Catch::Contains("more than one WQE"));
}

TEST_CASE("mlx5 rule: several WQEs under one doorbell go out as the 8-byte doorbell of the last") {
  for (uint32_t bf_size : {256u, 64u}) {  // 64: a half smaller than the largest WQE (general path)
    NodeOptions n;
    n.bf_size = bf_size;
    Pair p(small_opts(), n);
    p.b.post_receives(16);
    for (int i = 0; i < 3; ++i)
      REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    p.qa.ring_doorbell();  // three one-block WQEs: not one BlueFlame copy
    CHECK(p.fabric.stats().bf_copies == 0);
    CHECK(p.fabric.stats().doorbells8 == 1);
    REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    p.qa.ring_doorbell();  // one WQE that fits the half: BlueFlame
    CHECK(p.fabric.stats().bf_copies == 1);
    CHECK(p.fabric.stats().bf_copy_wqes == 1);
    CHECK(p.fabric.stats().wqes == 4);
  }
}

TEST_CASE("mlx5 rule: the doorbell records' reserved bits are 0 - the emulator rejects them set") {
  SECTION("send doorbell record: 16-bit counter") {
    Raw r;
    r.nop(0);
    r.doorbell8(0x10001, 0);
    CHECK_THROWS_WITH(r.n.process_doorbells(), Catch::Contains("reserved bits 31:16"));
  }
  SECTION("SRQ doorbell record: 16-bit counter") {
    Raw r;
    r.srq.dbrec[0] = htobe32(0x10004);
    CHECK_THROWS_WITH(r.n.srq_available(), Catch::Contains("bits 31:16 are reserved"));
  }
  SECTION("CQ doorbell record: 24-bit consumer counter") {
    Pair p;
    p.b.post_receives(4);
    p.b.inner().recv_cq_state().dbrec[kCqSetCiIndex] = htobe32(1u << 24);
    REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 1, false) == PostResult::kOk);
    CHECK_THROWS_WITH(p.qa.ring_doorbell(), Catch::Contains("bits 31:24 are reserved"));
  }
}

TEST_CASE("mlx5 rule: the data path writes 16-bit send and SRQ counters across their wrap") {
  // 70000 one-block WRITE_IMMs: the send producer counter and the SRQ receive counter
  // both pass 65536; the doorbell records must carry their low 16 bits only.
  Pair p;
  p.b.post_receives(256);
  uint32_t recv = 0;
  for (uint32_t i = 0; i < 70000; ++i) {
    REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), i, i, true) == PostResult::kOk);
    p.qa.ring_doorbell();
    recv += p.b.poll_recv([](const RecvCompletion&) {}, 64);
    p.b.post_receives(p.b.srq_capacity() - p.b.srq_posted());
    p.drain_send();
  }
  CHECK(recv == 70000);
}

TEST_CASE("mlx5 rule: never more outstanding blocks than the send queue holds - the emulator checks it") {
  SECTION("emulator: a doorbell past the ring with nothing completed") {
    Raw r;  // 16 blocks, one-block NOPs that never complete
    for (uint16_t i = 0; i < 16; ++i) {
      r.nop(i);
      r.doorbell8(i + 1u, i);
      r.n.process_doorbells();
    }
    r.nop(16);  // overwrites block 0, which no CQE has freed
    r.doorbell8(17, 16);
    CHECK_THROWS_WITH(r.n.process_doorbells(), Catch::Contains("send queue overflow"));
  }
  SECTION("data path: WQEs without a CQE keep their blocks") {
    Pair p(small_opts(), {}, DeliveryMode::kManual);  // the NIC fetches at doorbells, executes only when told
    p.b.post_receives(256);
    const uint32_t blocks = p.qa.inner().wqe_cnt();
    uint32_t posted = 0;
    while (p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, posted, true) == PostResult::kOk) {
      p.qa.ring_doorbell();  // the emulator checks the doorbell record against the CQEs written
      ++posted;
    }
    CHECK(posted == blocks);  // one-block WQEs: exactly the ring
    p.fabric.deliver();
    CHECK(p.drain_send() == posted);
    CHECK(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 1, 0, true) == PostResult::kOk);
  }
}

TEST_CASE("mlx5 rule: the send CQ holds a CQE for every WQE the send queues can hold - a flush completes them all") {
  // A send queue of 16 blocks holds 16 one-block WQEs. When the QP fails, the NIC
  // completes every one of them, signalled or not, with an error or flush CQE: the send
  // CQ must hold one CQE per block of every send queue on it, not one per WQE of the
  // largest size (sq_depth), or the NIC overruns it (on hardware: a CQ error that takes
  // every QP on the CQ down).
  SECTION("a send CQ smaller than the send queues' blocks is refused") {
    emu::Fabric f;
    EmulatedTransport t(f, {}, small_opts(4, 8));  // 4 WQEs of 4 blocks = 16 blocks; CQ of 8
    CHECK_THROWS_WITH(t.create_queue_pair(), Catch::Contains("send_cq_entries"));
  }
  SECTION("with the CQ the transport accepts, a flush of a full queue of one-block WQEs fits") {
    Pair p(small_opts(4, 16), {}, DeliveryMode::kManual);
    p.b.post_receives(256);
    const uint32_t blocks = p.qa.inner().wqe_cnt();
    RemoteBuffer bad = p.at(0);
    bad.rkey ^= 0x100;
    uint32_t posted = 0;
    while (p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, posted == 0 ? bad : p.at(0), 1, posted, false) ==
           PostResult::kOk)
      ++posted;
    REQUIRE(posted == blocks);
    p.qa.ring_doorbell();
    REQUIRE_NOTHROW(p.fabric.deliver());
    std::vector<WcStatus> st;
    while (p.a.poll_send([&](const SendCompletion& c) { st.push_back(c.status); }, 64) > 0) {
    }
    REQUIRE(st.size() == blocks);
    CHECK(st[0] == WcStatus::kRemoteAccessError);
    CHECK(st[blocks - 1] == WcStatus::kWrFlushError);
  }
}

TEST_CASE("mlx5 rule: QPs sharing a BlueFlame register alternate its halves together - the emulator checks it") {
  // libmlx5 gives QPs beyond the first few of a context a shared register; consecutive
  // writes to a register alternate halves whichever QP makes them. bf_registers = 1:
  // every QP of the node on one register.
  NodeOptions o;
  o.bf_registers = 1;
  emu::Fabric f;
  emu::Node& n = f.add_node(o);
  const CqDescriptor cq = n.create_cq(64, CqRole::kSend), rcq = n.create_cq(64, CqRole::kRecv);
  const SrqDescriptor srq = n.create_srq(16);
  const SqDescriptor a = n.create_qp(QpCaps{4, 220}, cq, rcq, srq);
  const SqDescriptor b = n.create_qp(QpCaps{4, 220}, cq, rcq, srq);
  REQUIRE(a.bf_reg == b.bf_reg);
  // A one-block NOP at counter 0 on `sq`, announced by its 8-byte doorbell in `half`.
  auto nop_doorbell = [](const SqDescriptor& sq, uint32_t half) {
    mlx5_wqe_ctrl_seg c{};
    c.opmod_idx_opcode = htobe32(MLX5_OPCODE_NOP);
    c.qpn_ds = htobe32((sq.qpn << 8) | 1);
    std::memcpy(sq.buf, &c, sizeof c);
    sq.dbrec[MLX5_SND_DBR] = htobe32(1);
    std::memcpy(sq.bf_reg + half * sq.bf_size, sq.buf, 8);
  };
  nop_doorbell(a, 0);
  n.process_doorbells();
  SECTION("the other QP's write to the same half is rejected") {
    nop_doorbell(b, 0);  // b's first write, but the register's second
    CHECK_THROWS_WITH(n.process_doorbells(), Catch::Contains("alternate halves, whichever QP"));
  }
  SECTION("the other half is accepted and the write is taken as the QP it names") {
    nop_doorbell(b, 1);
    n.process_doorbells();
    CHECK(f.stats().doorbells == 2);
    CHECK(f.stats().nops == 2);
  }
}

TEST_CASE("mlx5 rule: the data path alternates BlueFlame halves per register, not per queue pair") {
  // 4 queue pairs per side on 2 shared registers (QPs 0 and 2 on one, 1 and 3 on the
  // other), doorbells round robin over the QPs: with a half per QP, QP 2's first write
  // would hit the half QP 0 just wrote. All three doorbell paths: one block, one
  // multi-block inline WQE, several WQEs (the 8-byte doorbell); and a half smaller than
  // the largest WQE (every doorbell on the general path).
  for (uint32_t bf_size : {256u, 64u}) {
    CAPTURE(bf_size);
    NodeOptions n;
    n.bf_size = bf_size;
    n.bf_registers = 2;
    emu::Fabric fabric;
    EmulatedTransport a(fabric, n, small_opts()), b(fabric, n, small_opts());
    std::vector<EmulatedTransport::QueuePair*> qa, qb;
    for (int i = 0; i < 4; ++i) {
      qa.push_back(&a.create_queue_pair());
      qb.push_back(&b.create_queue_pair());
      qa.back()->connect(qb.back()->local_info());
      qb.back()->connect(qa.back()->local_info());
    }
    std::vector<std::byte> src(4096), dst(4096);
    const MemoryRegion smr = a.register_memory(src.data(), src.size(), kAccessLocalWrite);
    const MemoryRegion dmr = b.register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
    const RemoteBuffer to{reinterpret_cast<uint64_t>(dst.data()), dmr.rkey, 0, dst.size()};
    b.post_receives(256);
    uint32_t recv = 0, posted = 0;
    for (uint32_t round = 0; round < 6; ++round) {
      for (auto* q : qa) {
        const uint32_t len = round % 3 == 1 ? 200 : 8;         // 200: a 4-block inline WQE
        const uint32_t wqes = round % 3 == 2 ? 2 : 1;           // 2: the 8-byte doorbell
        for (uint32_t w = 0; w < wqes; ++w, ++posted)
          REQUIRE(q->post_write_imm(src.data(), len, smr.lkey, to, 1, 1, true) == PostResult::kOk);
        q->ring_doorbell();  // the emulator checks the register's half
      }
      CHECK(qa[0]->inner().bf_offset() == qa[2]->inner().bf_offset());
      CHECK(qa[1]->inner().bf_offset() == qa[3]->inner().bf_offset());
      recv += b.poll_recv([](const RecvCompletion&) {}, 64);
      b.post_receives(b.srq_capacity() - b.srq_posted());
      while (a.poll_send([](const SendCompletion&) {}, 64) > 0) {
      }
    }
    CHECK(recv == posted);
    CHECK(fabric.stats().doorbells == 24);
  }
}

TEST_CASE("mlx5 rule: the NIC writes a CQE only into an entry the CQ doorbell record has freed - the emulator checks it",
          "[mlx5]") {
  // A receive CQ of 4 entries under an SRQ of 4 (the default geometry: recv_cq_entries 0
  // = srq_size). The NIC's view of the CQ's occupancy is its producer minus the consumer
  // counter in the CQ doorbell record, not software's counter.
  Pair p(test::direct_options(64, 4, 1024));
  REQUIRE(p.b.inner().recv_cq_state().cqe_cnt() == 4);
  auto write_imm = [&](uint32_t k) {
    REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), k, k, true) == PostResult::kOk);
    p.qa.ring_doorbell();
  };
  p.b.post_receives(4);
  for (uint32_t k = 0; k < 4; ++k) write_imm(k);
  REQUIRE(p.b.poll_recv([](const RecvCompletion&) {}, 4) == 4);
  p.drain_send();
  SECTION("emulator: a consumer counter left behind in the doorbell record is an overrun") {
    p.b.post_receives(4);  // (publishes the consumer counter, 4)
    p.b.inner().recv_cq_state().dbrec[kCqSetCiIndex] = htobe32(0);  // as if nothing were polled
    CHECK_THROWS_WITH(write_imm(4), Catch::Contains("CQ") && Catch::Contains("overflow"));
  }
  SECTION("data path: the published counter frees the entries") {
    p.b.post_receives(4);
    for (uint32_t k = 4; k < 8; ++k) REQUIRE_NOTHROW(write_imm(k));
    CHECK(p.b.poll_recv([](const RecvCompletion&) {}, 8) == 4);
  }
}

TEST_CASE("mlx5 rule: a compressed session split across polls keeps its CQ entries - its receives count until it ends",
          "[mlx5]") {
  // One compressed session of 16 on a receive CQ of 16 (SRQ 16, the default geometry).
  // The data path hands the session's entries back to the NIC (consumer counter in the
  // CQ doorbell record past it) only when its last mini CQE is read, so while half of it
  // is read the NIC still sees all 16 entries occupied: the SRQ may not take a receive
  // more than the CQ can absorb (srq_posted() counts the session's receives until then).
  NodeOptions n;
  n.compress_recv = true;
  n.max_session = 16;
  Pair p(test::direct_options(64, 16, 1024), n, DeliveryMode::kManual);
  REQUIRE(p.b.inner().recv_cq_state().cqe_cnt() == 16);
  uint32_t sent = 0;
  auto write_imms = [&](uint32_t k) {
    for (uint32_t i = 0; i < k; ++i, ++sent) {
      REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), 7, sent, sent % 8 == 7) ==
              PostResult::kOk);
      p.qa.ring_doorbell();
    }
  };
  p.b.post_receives(16);
  write_imms(16);
  p.fabric.deliver();
  REQUIRE(p.fabric.stats().sessions == 1);
  uint32_t got = p.b.poll_recv([](const RecvCompletion&) {}, 8);  // half the session
  REQUIRE(got == 8);
  CHECK(p.b.srq_posted() == 16);  // the session's entries are not handed back yet
  p.b.post_receives(p.b.srq_capacity() - p.b.srq_posted());  // refill as far as the transport allows
  write_imms(8);
  REQUIRE_NOTHROW(p.fabric.deliver());  // the 8 wait for receives (RNR), none lands in the session
  got += p.b.poll_recv([](const RecvCompletion&) {}, 64);
  CHECK(got == 16);
  CHECK(p.b.srq_posted() == 0);
  p.b.post_receives(16);
  REQUIRE_NOTHROW(p.fabric.deliver());
  got += p.b.poll_recv([](const RecvCompletion&) {}, 64);
  CHECK(got == 24);
  CHECK(p.drain_send() == 3);
}

TEST_CASE("mlx5 rule: receives posted from a receive callback reach the NIC after the consumer counter", "[mlx5]") {
  // SRQ 4, receive CQ 4: 8 WRITE_IMMs, 4 complete and 4 wait for receives (RNR). Each
  // receive callback posts one receive, and the NIC (eager) takes it at once: the entry of
  // the CQE just read must be free in the CQ doorbell record before the SRQ doorbell
  // record offers the receive, or the NIC overruns the CQ with the waiting WRITE_IMM.
  Pair p(test::direct_options(64, 4, 1024));
  REQUIRE(p.b.inner().recv_cq_state().cqe_cnt() == 4);
  p.b.post_receives(4);
  for (uint32_t k = 0; k < 8; ++k) {
    REQUIRE(p.qa.post_write_imm(p.src.data(), 8, p.src_mr.lkey, p.at(0), k, k, true) == PostResult::kOk);
    p.qa.ring_doorbell();
  }
  REQUIRE(p.fabric.stats().rnr_waits > 0);
  std::vector<uint32_t> imms;
  uint32_t got = 0;
  REQUIRE_NOTHROW(got = p.b.poll_recv(
                      [&](const RecvCompletion& c) {
                        imms.push_back(c.imm);
                        p.b.post_receives(1);
                      },
                      8));
  CHECK(got == 8);
  CHECK(imms == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(p.b.srq_posted() == 4);
  CHECK(p.drain_send() == 8);
}
