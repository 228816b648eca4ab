// WQE and CQE byte layouts of the direct mlx5 data path, checked against the rdma-core
// structures of <infiniband/mlx5dv.h>. The transport runs over a bare provider that only
// hands out memory; the test reads the send queue, doorbell record and BlueFlame
// register itself and writes CQEs by hand (independently of the transport's code).
#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/random.hpp"
#include "transports/mlx5/blueflame.hpp"
#include "transports/mlx5/direct_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;

namespace {

struct Aligned {
  std::byte* p;
  explicit Aligned(size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) & ~size_t{4095}))) {
    std::memset(p, 0, (n + 4095) & ~size_t{4095});
  }
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
};

// A provider that only hands out memory: no NIC behind it.
struct BareProvider {
  uint32_t cqe_size = 64;
  uint32_t cq_entries = 16;
  uint32_t bf_size = 256;
  uint32_t sq_dbrec_fill = 0;  // what the send doorbell record holds when the QP is created
  std::vector<std::unique_ptr<Aligned>> mem;
  CqDescriptor send_cq{}, recv_cq{};
  SqDescriptor sq{};

  std::byte* alloc(size_t n) { return mem.emplace_back(std::make_unique<Aligned>(n))->p; }
  MemoryRegion register_memory(void* p, size_t n, uint32_t) { return {static_cast<std::byte*>(p), n, 0x1111, 0x2222}; }
  CqDescriptor create_cq(uint32_t, CqRole role) {
    CqDescriptor d{alloc(size_t{cq_entries} * cqe_size), cq_entries, cqe_size, reinterpret_cast<uint32_t*>(alloc(64)),
                   role == CqRole::kSend ? 1u : 2u};
    for (uint32_t i = 0; i < cq_entries; ++i) d.buf[i * cqe_size + cqe_size - 1] = std::byte{MLX5_CQE_INVALID << 4};
    (role == CqRole::kSend ? send_cq : recv_cq) = d;
    return d;
  }
  SrqDescriptor create_srq(uint32_t n) {
    return SrqDescriptor{alloc(size_t{n} * 32), n, 32, reinterpret_cast<uint32_t*>(alloc(64)), 7, n};
  }
  SqDescriptor create_qp(const QpCaps& caps, const CqDescriptor&, const CqDescriptor&, const SrqDescriptor&) {
    const uint32_t cnt = std::bit_ceil(caps.max_send_wr * 4);
    sq = SqDescriptor{alloc(size_t{cnt} * 64), cnt, 64, reinterpret_cast<uint32_t*>(alloc(64)),
                      alloc(std::max<uint32_t>(2 * bf_size, 64)), bf_size, 0x00ABCD};
    sq.dbrec[MLX5_SND_DBR] = sq_dbrec_fill;
    return sq;
  }
  ConnectInfo local_info(uint32_t qpn) const {
    ConnectInfo c{};
    c.qpn = qpn;
    return c;
  }
  void connect(uint32_t, const ConnectInfo&) {}

  std::byte* wqe(uint32_t slot) const { return sq.buf + size_t{slot} * 64; }
  std::byte* bf_half(uint32_t h) const { return sq.bf_reg + size_t{h} * bf_size; }
  uint32_t sq_dbrec() const { return be32toh(sq.dbrec[MLX5_SND_DBR]); }
};
static_assert(DirectProvider<BareProvider>);

mlx5_wqe_ctrl_seg ctrl_at(const std::byte* p) {
  mlx5_wqe_ctrl_seg c;
  std::memcpy(&c, p, sizeof c);
  return c;
}
mlx5_wqe_raddr_seg raddr_at(const std::byte* p) {
  mlx5_wqe_raddr_seg r;
  std::memcpy(&r, p, sizeof r);
  return r;
}
mlx5_wqe_data_seg data_at(const std::byte* p) {
  mlx5_wqe_data_seg d;
  std::memcpy(&d, p, sizeof d);
  return d;
}
uint32_t inline_hdr_at(const std::byte* p) {
  mlx5_wqe_inl_data_seg s;
  std::memcpy(&s, p, sizeof s);
  return be32toh(s.byte_count);
}

void check_ctrl(const std::byte* p, uint16_t index, uint8_t opcode, uint32_t qpn, uint32_t ds, bool signaled,
                uint32_t imm) {
  const mlx5_wqe_ctrl_seg c = ctrl_at(p);
  CHECK(be32toh(c.opmod_idx_opcode) == ((uint32_t{index} << 8) | opcode));
  CHECK(be32toh(c.qpn_ds) == ((qpn << 8) | ds));
  CHECK(c.signature == 0);
  CHECK(c.fm_ce_se == (signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0));
  CHECK(be32toh(c.imm) == imm);
}

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<uint8_t>(seed + 7 * i));
  return v;
}

struct Rig {
  BareProvider hw;
  DirectTransport<BareProvider> t;
  DirectTransport<BareProvider>::QueuePair& qp;
  explicit Rig(DirectOptions o = small(), uint32_t bf_size = 256, uint32_t cqe_size = 64)
      : hw(make_hw(bf_size, cqe_size)), t(hw, o), qp(t.create_queue_pair()) {
    qp.connect(ConnectInfo{});
  }
  static DirectOptions small() {
    DirectOptions o;
    o.sq_depth = 4;
    o.srq_size = 16;
    o.send_cq_entries = 16;
    return o;
  }
  static BareProvider make_hw(uint32_t bf_size, uint32_t cqe_size) {
    BareProvider p;
    p.bf_size = bf_size;
    p.cqe_size = cqe_size;
    return p;
  }
};

constexpr uint64_t kRaddr = 0x0000'7F12'3456'7890ull;
constexpr uint32_t kRkey = 0xA1B2C3D4u;
constexpr uint32_t kLkey = 0x00C0FFEEu;

}  // namespace

TEST_CASE("WRITE_IMM fully inline: control, remote-address and inline segments for every size class") {
  // (payload bytes, expected DS): 32 bytes of ctrl + raddr, then align16(4 + len).
  const std::pair<uint32_t, uint32_t> cases[] = {{1, 3},  {12, 3},  {13, 4},   {28, 4},   {29, 5},
                                                 {60, 6}, {100, 9}, {204, 15}, {219, 16}, {220, 16}};
  for (const auto& [len, ds] : cases) {
    Rig r;
    const auto src = pattern(len, static_cast<uint8_t>(len));
    const bool sig = len % 2 == 1;
    REQUIRE(r.qp.post_write_imm(src.data(), len, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 4096}, 0xDEADBEEF, 9, sig) ==
            PostResult::kOk);
    const std::byte* w = r.hw.wqe(0);
    check_ctrl(w, 0, MLX5_OPCODE_RDMA_WRITE_IMM, 0x00ABCD, ds, sig, 0xDEADBEEF);
    const mlx5_wqe_raddr_seg ra = raddr_at(w + 16);
    CHECK(be64toh(ra.raddr) == kRaddr);
    CHECK(be32toh(ra.rkey) == kRkey);
    CHECK(ra.reserved == 0);
    CHECK(inline_hdr_at(w + 32) == (len | MLX5_INLINE_SEG));
    CHECK(std::memcmp(w + 36, src.data(), len) == 0);
    for (uint32_t i = 36 + len; i < ds * 16; ++i) CHECK(w[i] == std::byte{0});
    CHECK(r.qp.producer_counter() == (ds * 16 + 63) / 64);
  }
}

TEST_CASE("WRITE_IMM beyond 220 bytes: 204 bytes inline, then one gather entry for the rest") {
  for (uint32_t len : {221u, 1000u, 65536u}) {
    Rig r;
    const auto src = pattern(len, 3);
    REQUIRE(r.qp.post_write_imm(src.data(), len, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 1u << 20}, 77, 1, true) ==
            PostResult::kOk);
    const std::byte* w = r.hw.wqe(0);
    check_ctrl(w, 0, MLX5_OPCODE_RDMA_WRITE_IMM, 0x00ABCD, 16, true, 77);
    CHECK(inline_hdr_at(w + 32) == (204u | MLX5_INLINE_SEG));
    CHECK(std::memcmp(w + 36, src.data(), 204) == 0);
    const mlx5_wqe_data_seg d = data_at(w + 240);
    CHECK(be32toh(d.byte_count) == len - 204);
    CHECK(be32toh(d.lkey) == kLkey);
    CHECK(be64toh(d.addr) == reinterpret_cast<uint64_t>(src.data()) + 204);
    CHECK(r.qp.producer_counter() == 4);
  }
}

TEST_CASE("Data-only WRITE_IMM when inlining is off, and zero-length WRITE_IMM") {
  DirectOptions o = Rig::small();
  o.max_inline = 0;
  o.inline_head = 0;
  Rig r(o);
  const auto src = pattern(64, 1);
  REQUIRE(r.qp.post_write_imm(src.data(), 64, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 5, 1, false) ==
          PostResult::kOk);
  check_ctrl(r.hw.wqe(0), 0, MLX5_OPCODE_RDMA_WRITE_IMM, 0x00ABCD, 3, false, 5);
  const mlx5_wqe_data_seg d = data_at(r.hw.wqe(0) + 32);
  CHECK(be32toh(d.byte_count) == 64);
  CHECK(be32toh(d.lkey) == kLkey);
  CHECK(be64toh(d.addr) == reinterpret_cast<uint64_t>(src.data()));
  // A zero-length gather entry would mean 2 GiB: a zero-length WRITE_IMM has none.
  REQUIRE(r.qp.post_write_imm(nullptr, 0, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 6, 2, true) == PostResult::kOk);
  check_ctrl(r.hw.wqe(1), 1, MLX5_OPCODE_RDMA_WRITE_IMM, 0x00ABCD, 2, true, 6);
  CHECK(r.qp.producer_counter() == 2);
}

TEST_CASE("RDMA WRITE and READ WQEs") {
  Rig r;
  const auto src = pattern(40, 9);
  REQUIRE(r.qp.post_write(src.data(), 40, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 1, false) == PostResult::kOk);
  check_ctrl(r.hw.wqe(0), 0, MLX5_OPCODE_RDMA_WRITE, 0x00ABCD, 2 + 3, false, 0);
  CHECK(inline_hdr_at(r.hw.wqe(0) + 32) == (40u | MLX5_INLINE_SEG));
  uint64_t dst = 0;  // the 40-byte inline WRITE took blocks 0-1
  REQUIRE(r.qp.post_read(&dst, 8, kLkey, RemoteBuffer{kRaddr + 64, kRkey, 0, 8}, 2, true) == PostResult::kOk);
  check_ctrl(r.hw.wqe(2), 2, MLX5_OPCODE_RDMA_READ, 0x00ABCD, 3, true, 0);
  CHECK(be64toh(raddr_at(r.hw.wqe(2) + 16).raddr) == kRaddr + 64);
  const mlx5_wqe_data_seg d = data_at(r.hw.wqe(2) + 32);
  CHECK(be32toh(d.byte_count) == 8);
  CHECK(be32toh(d.lkey) == kLkey);
  CHECK(be64toh(d.addr) == reinterpret_cast<uint64_t>(&dst));
  REQUIRE(r.qp.post_read(&dst, 0, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 8}, 3, true) == PostResult::kOk);
  check_ctrl(r.hw.wqe(3), 3, MLX5_OPCODE_RDMA_READ, 0x00ABCD, 2, true, 0);
}

namespace {
// A requester CQE written by hand, as the NIC would: owner bit of the pass of entry `idx`.
void put_req_cqe(const CqDescriptor& cq, uint32_t idx, uint32_t qpn, uint16_t wqe_counter, uint8_t send_opcode) {
  std::byte* e = cq.buf + size_t{idx % cq.cqe_cnt} * cq.cqe_size + (cq.cqe_size - 64);
  mlx5_cqe64 c{};
  c.sop_drop_qpn = htobe32((uint32_t{send_opcode} << 24) | qpn);
  c.wqe_counter = htobe16(wqe_counter);
  const uint8_t owner = (idx / cq.cqe_cnt) & 1;
  c.op_own = static_cast<uint8_t>((MLX5_CQE_REQ << 4) | owner);
  std::memcpy(e, &c, sizeof c);
}
}  // namespace

TEST_CASE("A WQE that would cross the send-queue end is preceded by a NOP filling the rest") {
  DirectOptions o = Rig::small();
  o.sq_depth = 2;  // 2 WQEs of 4 blocks: an 8-block queue
  Rig r(o);
  REQUIRE(r.hw.sq.wqe_cnt == 8);
  const auto src = pattern(220, 5);
  for (int i = 0; i < 6; ++i)  // six 1-block WQEs (12 bytes inline: DS 3)
    REQUIRE(r.qp.post_write_imm(src.data(), 12, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 1, i, i == 5) ==
            PostResult::kOk);
  // A 4-block WQE needs a 2-block NOP + 4 blocks: 12 > 8 blocks while 6 are in flight.
  CHECK(r.qp.post_write_imm(src.data(), 220, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 256}, 2, 6, false) ==
        PostResult::kSendQueueFull);
  CHECK(r.qp.producer_counter() == 6);
  CHECK(r.qp.send_queue_free() == 0);
  // The signalled WQE 5 completes: blocks 0..5 are free again.
  put_req_cqe(r.hw.send_cq, 0, 0x00ABCD, 5, MLX5_OPCODE_RDMA_WRITE_IMM);
  std::vector<SendCompletion> done;
  CHECK(r.t.poll_send([&](const SendCompletion& c) { done.push_back(c); }, 8) == 1);
  REQUIRE(done.size() == 1);
  CHECK(done[0].wr_id == 5);
  CHECK(done[0].opcode == WcOpcode::kRdmaWriteImm);
  CHECK(r.qp.consumer_counter() == 6);
  CHECK(be32toh(r.hw.send_cq.dbrec[0]) == 1);  // consumer counter published
  CHECK(r.qp.send_queue_free() == 1);           // (8 - 3) / 4
  REQUIRE(r.qp.post_write_imm(src.data(), 220, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 256}, 2, 6, false) ==
          PostResult::kOk);
  // NOP at blocks 6-7 (index 6, DS covering 2 blocks), the WQE at block 0 with index 8.
  check_ctrl(r.hw.wqe(6), 6, MLX5_OPCODE_NOP, 0x00ABCD, 8, false, 0);
  check_ctrl(r.hw.wqe(0), 8, MLX5_OPCODE_RDMA_WRITE_IMM, 0x00ABCD, 16, false, 2);
  CHECK(r.qp.producer_counter() == 12);
  // The range to publish wraps, so the doorbell is the 8-byte one: the last WQE's
  // first 8 control bytes.
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 12);
  CHECK(std::memcmp(r.hw.bf_half(0), r.hw.wqe(0), 8) == 0);
  for (int i = 8; i < 256; ++i) CHECK(r.hw.bf_half(0)[i] == std::byte{0});
}

TEST_CASE("Doorbell record, then BlueFlame: whole WQE, 8-byte doorbell for several, alternating halves") {
  Rig r;  // 16-block queue, 256-byte BlueFlame halves
  const auto src = pattern(64, 2);
  const RemoteBuffer rb{kRaddr, kRkey, 0, 4096};
  r.qp.ring_doorbell();  // nothing posted: nothing written
  CHECK(r.hw.sq_dbrec() == 0);
  CHECK(r.hw.bf_half(0)[0] == std::byte{0});

  REQUIRE(r.qp.post_write_imm(src.data(), 40, kLkey, rb, 1, 1, false) == PostResult::kOk);  // 2 blocks
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 2);
  CHECK(std::memcmp(r.hw.bf_half(0), r.hw.wqe(0), 128) == 0);
  CHECK(r.hw.bf_half(1)[0] == std::byte{0});
  CHECK(r.qp.bf_offset() == 256);

  REQUIRE(r.qp.post_write_imm(src.data(), 8, kLkey, rb, 2, 2, false) == PostResult::kOk);  // 1 block
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 3);
  CHECK(std::memcmp(r.hw.bf_half(1), r.hw.wqe(2), 64) == 0);
  CHECK(r.qp.bf_offset() == 0);

  // Three WQEs (4 blocks, they would fit the half together): never one BlueFlame copy
  // (a BlueFlame write announces its first WQE only), the 8-byte doorbell of the last.
  std::memset(r.hw.bf_half(0), 0, 512);
  for (int i = 0; i < 3; ++i) REQUIRE(r.qp.post_write_imm(src.data(), i == 0 ? 40 : 8, kLkey, rb, 3, 3, false) == PostResult::kOk);
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 7);
  CHECK(std::memcmp(r.hw.bf_half(0), r.hw.wqe(6), 8) == 0);
  for (int i = 8; i < 256; ++i) CHECK(r.hw.bf_half(0)[i] == std::byte{0});

  // Five blocks: the 8-byte doorbell of the last WQE, in half 1.
  std::memset(r.hw.bf_half(0), 0, 512);
  for (int i = 0; i < 5; ++i) REQUIRE(r.qp.post_write_imm(src.data(), 8, kLkey, rb, 4, 4, false) == PostResult::kOk);
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 12);
  CHECK(std::memcmp(r.hw.bf_half(1), r.hw.wqe(11), 8) == 0);
  for (int i = 8; i < 256; ++i) CHECK(r.hw.bf_half(1)[i] == std::byte{0});
}

TEST_CASE("The send doorbell record's reserved high half is 0 whatever the provider left in it") {
  // The doorbells write only the record's low 16 bits; creating the QP clears the word.
  BareProvider hw;
  hw.sq_dbrec_fill = 0xFFFFFFFFu;
  DirectTransport<BareProvider> t(hw, Rig::small());
  auto& qp = t.create_queue_pair();
  qp.connect(ConnectInfo{});
  CHECK(hw.sq.dbrec[MLX5_SND_DBR] == 0);
  const auto src = pattern(64, 3);
  const RemoteBuffer rb{kRaddr, kRkey, 0, 4096};
  // 1 block (the inline doorbell), 2 blocks (one WQE of several blocks), three WQEs (the
  // general doorbell): each leaves the whole big-endian word equal to the counter.
  REQUIRE(qp.post_write_imm(src.data(), 8, kLkey, rb, 1, 1, false) == PostResult::kOk);
  qp.ring_doorbell();
  CHECK(hw.sq.dbrec[MLX5_SND_DBR] == htobe32(1));
  REQUIRE(qp.post_write_imm(src.data(), 40, kLkey, rb, 2, 2, false) == PostResult::kOk);
  qp.ring_doorbell();
  CHECK(hw.sq.dbrec[MLX5_SND_DBR] == htobe32(3));
  for (int i = 0; i < 3; ++i) REQUIRE(qp.post_write_imm(src.data(), 8, kLkey, rb, 3, 3, false) == PostResult::kOk);
  qp.ring_doorbell();
  CHECK(hw.sq.dbrec[MLX5_SND_DBR] == htobe32(6));
}

TEST_CASE("A BlueFlame half smaller than the largest WQE: a WQE that fits is copied, a larger one rings 8 bytes") {
  Rig r(Rig::small(), 64);  // 64-byte halves; this QP builds WQEs of up to 4 blocks
  const auto src = pattern(64, 5);
  const RemoteBuffer rb{kRaddr, kRkey, 0, 4096};
  REQUIRE(r.qp.post_write_imm(src.data(), 8, kLkey, rb, 1, 1, false) == PostResult::kOk);  // 1 block
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 1);
  CHECK(std::memcmp(r.hw.bf_half(0), r.hw.wqe(0), 64) == 0);
  CHECK(r.qp.bf_offset() == 64);
  REQUIRE(r.qp.post_write_imm(src.data(), 40, kLkey, rb, 2, 2, false) == PostResult::kOk);  // 2 blocks
  r.qp.ring_doorbell();
  CHECK(r.hw.sq_dbrec() == 3);
  CHECK(std::memcmp(r.hw.bf_half(1), r.hw.wqe(1), 8) == 0);
  for (int i = 8; i < 64; ++i) CHECK(r.hw.bf_half(1)[i] == std::byte{0});
  CHECK(std::memcmp(r.hw.bf_half(0), r.hw.wqe(0), 64) == 0);  // the other half is untouched
  CHECK(r.qp.bf_offset() == 0);
}

TEST_CASE("Doorbell-only mode and a queue without BlueFlame always write the 8-byte doorbell") {
  for (int variant = 0; variant < 2; ++variant) {
    DirectOptions o = Rig::small();
    if (variant == 0) o.doorbell = DoorbellMode::kDoorbellOnly;
    Rig r(o, variant == 0 ? 256 : 0);
    const auto src = pattern(16, 4);
    for (int k = 0; k < 3; ++k) {
      REQUIRE(r.qp.post_write_imm(src.data(), 16, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 1, 1, false) ==
              PostResult::kOk);
      r.qp.ring_doorbell();
      const uint32_t half = variant == 0 ? static_cast<uint32_t>(k % 2) : 0;  // no BlueFlame: offset stays 0
      std::byte* reg = r.hw.sq.bf_reg + half * r.hw.bf_size;
      CHECK(std::memcmp(reg, r.hw.wqe(static_cast<uint32_t>(k)), 8) == 0);
      CHECK(reg[8] == std::byte{0});
      std::memset(reg, 0, 8);
    }
  }
}

TEST_CASE("BlueFlame copy: the SIMD path writes exactly what the plain fallback writes") {
  Aligned src(256), a(256), b(256);
  Rng rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    for (int i = 0; i < 256; ++i) src.p[i] = std::byte(static_cast<uint8_t>(rng.next()));
    const uint32_t chunks = 1 + static_cast<uint32_t>(rng.below(4));
    std::memset(a.p, 0xEE, 256);
    std::memset(b.p, 0xEE, 256);
    bf_copy(a.p, src.p, chunks);
    bf_copy_plain(b.p, src.p, chunks);
    CHECK(std::memcmp(a.p, b.p, 256) == 0);
    CHECK(std::memcmp(a.p, src.p, 64 * chunks) == 0);
    if (chunks < 4) CHECK(a.p[64 * chunks] == std::byte{0xEE});
  }
}

namespace {
void put_resp_cqe(const CqDescriptor& cq, uint32_t idx, uint32_t qpn, uint32_t imm, uint32_t bytes, uint8_t extra = 0) {
  std::byte* e = cq.buf + size_t{idx % cq.cqe_cnt} * cq.cqe_size + (cq.cqe_size - 64);
  mlx5_cqe64 c{};
  c.sop_drop_qpn = htobe32(qpn);
  c.imm_inval_pkey = htobe32(imm);
  c.byte_cnt = htobe32(bytes);
  const uint8_t owner = (idx / cq.cqe_cnt) & 1;
  c.op_own = static_cast<uint8_t>((MLX5_CQE_RESP_WR_IMM << 4) | extra | owner);
  std::memcpy(e, &c, sizeof c);
}
}  // namespace

TEST_CASE("Receive CQ: owner bit over several passes, fields, consumer counter in the doorbell record") {
  for (uint32_t cqe_size : {64u, 128u}) {
    Rig r(Rig::small(), 256, cqe_size);
    const CqDescriptor& cq = r.hw.recv_cq;
    REQUIRE(cq.cqe_cnt == 16);
    r.t.post_receives(16);
    std::vector<RecvCompletion> got;
    auto sink = [&](const RecvCompletion& c) { got.push_back(c); };
    CHECK(r.t.poll_recv(sink, 4) == 0);  // all entries INVALID: nothing is ours
    uint32_t produced = 0;
    for (uint32_t round = 0; round < 7; ++round) {  // 7 rounds of 9 = 63 entries: 3+ passes
      for (uint32_t k = 0; k < 9; ++k, ++produced)
        put_resp_cqe(cq, produced, 0x100 + produced, 1000 + produced, 32 * produced, k == 3 ? kCqeSeBit : 0);
      got.clear();
      CHECK(r.t.poll_recv(sink, 5) == 5);
      CHECK(r.t.poll_recv(sink, 100) == 4);
      CHECK(r.t.poll_recv(sink, 100) == 0);  // next entry still has the previous pass's owner bit
      REQUIRE(got.size() == 9);
      for (uint32_t k = 0; k < 9; ++k) {
        const uint32_t i = produced - 9 + k;
        CHECK(got[k].qp_num == 0x100 + i);
        CHECK(got[k].imm == 1000 + i);
        CHECK(got[k].byte_len == 32 * i);
        CHECK(got[k].status == WcStatus::kSuccess);
      }
      CHECK(be32toh(cq.dbrec[0]) == produced);
      r.t.post_receives(9);
    }
  }
}

TEST_CASE("Error CQEs surface as completions with an error status and put the QP in error") {
  const std::pair<uint8_t, WcStatus> table[] = {
      {MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, WcStatus::kLocalLengthError},
      {MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, WcStatus::kLocalProtectionError},
      {MLX5_CQE_SYNDROME_WR_FLUSH_ERR, WcStatus::kWrFlushError},
      {MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, WcStatus::kRemoteAccessError},
      {MLX5_CQE_SYNDROME_REMOTE_OP_ERR, WcStatus::kRemoteOperationError},
      {MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR, WcStatus::kRetryExceeded},
      {MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR, WcStatus::kRetryExceeded},
      {MLX5_CQE_SYNDROME_BAD_RESP_ERR, WcStatus::kGeneralError},
  };
  for (const auto& [syndrome, status] : table) {
    Rig r;
    const auto src = pattern(8, 1);
    REQUIRE(r.qp.post_write(src.data(), 8, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 8}, 41, false) == PostResult::kOk);
    REQUIRE(r.qp.post_write(src.data(), 8, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 8}, 42, false) == PostResult::kOk);
    mlx5_err_cqe e{};
    e.syndrome = syndrome;
    e.s_wqe_opcode_qpn = htobe32((uint32_t{MLX5_OPCODE_RDMA_WRITE} << 24) | 0x00ABCD);
    e.wqe_counter = htobe16(1);
    e.op_own = MLX5_CQE_REQ_ERR << 4;
    std::memcpy(r.hw.send_cq.buf, &e, sizeof e);
    std::vector<SendCompletion> got;
    CHECK(r.t.poll_send([&](const SendCompletion& c) { got.push_back(c); }, 4) == 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 42);
    CHECK(got[0].qp_num == 0x00ABCD);
    CHECK(got[0].opcode == WcOpcode::kRdmaWrite);
    CHECK(got[0].status == status);
    CHECK(r.qp.in_error());
    CHECK(r.qp.consumer_counter() == 2);
  }
  // A responder error on the receive CQ.
  Rig r;
  r.t.post_receives(1);
  mlx5_err_cqe e{};
  e.syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
  e.s_wqe_opcode_qpn = htobe32(0x321);
  e.op_own = MLX5_CQE_RESP_ERR << 4;
  std::memcpy(r.hw.recv_cq.buf, &e, sizeof e);
  std::vector<RecvCompletion> got;
  CHECK(r.t.poll_recv([&](const RecvCompletion& c) { got.push_back(c); }, 4) == 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].qp_num == 0x321);
  CHECK(got[0].status == WcStatus::kLocalLengthError);
  CHECK(r.t.srq_posted() == 0);
}

namespace {
// A compressed session written by hand from the PRM description: title at `h` (format
// 3, byte_cnt = n), mini-CQE array k in entry h+1 (k = 0) or h+8k.
void put_session(const CqDescriptor& cq, uint32_t h, uint32_t qpn, uint32_t imm, const std::vector<uint32_t>& bytes) {
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  auto entry = [&](uint32_t idx) { return cq.buf + size_t{idx % cq.cqe_cnt} * cq.cqe_size + (cq.cqe_size - 64); };
  for (uint32_t i = 0; i < n; ++i) {
    std::byte* arr = entry(h + (i < 8 ? 1 : 8 * (i / 8)));
    const uint32_t be = htobe32(bytes[i]);
    std::memcpy(arr + 8 * (i % 8) + 4, &be, 4);
    std::memset(arr + 8 * (i % 8), 0, 4);
  }
  mlx5_cqe64 t{};
  t.sop_drop_qpn = htobe32(qpn);
  t.imm_inval_pkey = htobe32(imm);
  t.byte_cnt = htobe32(n);
  t.op_own = static_cast<uint8_t>((MLX5_CQE_RESP_WR_IMM << 4) | (3 << 2) | ((h / cq.cqe_cnt) & 1));
  std::memcpy(entry(h), &t, sizeof t);
}
}  // namespace

TEST_CASE("Compressed receive sessions of every size expand in order, across polls and ring wraps") {
  Rig r;  // a 16-entry receive CQ and 16 receives: sessions up to 16 entries
  const CqDescriptor& cq = r.hw.recv_cq;
  uint32_t h = 0;
  for (uint32_t n = 2; n <= 16; ++n) {
    r.t.post_receives(n);
    std::vector<uint32_t> bytes(n);
    for (uint32_t i = 0; i < n; ++i) bytes[i] = 32 * (n * 100 + i);
    put_session(cq, h, 0x777 + n, 5000 + n, bytes);
    std::vector<RecvCompletion> got;
    auto sink = [&](const RecvCompletion& c) { got.push_back(c); };
    while (r.t.poll_recv(sink, 3) > 0) {
    }
    REQUIRE(got.size() == n);
    for (uint32_t i = 0; i < n; ++i) {
      CHECK(got[i].qp_num == 0x777 + n);
      CHECK(got[i].imm == 5000 + n);
      CHECK(got[i].byte_len == bytes[i]);
    }
    // The whole session is handed back as INVALID, and the consumer counter moved by n.
    for (uint32_t k = 0; k < n; ++k)
      CHECK(cq.buf[size_t{(h + k) % cq.cqe_cnt} * 64 + 63] == std::byte{MLX5_CQE_INVALID << 4});
    h += n;
    CHECK(be32toh(cq.dbrec[0]) == h);
    CHECK(r.t.srq_posted() == 0);
  }
}

TEST_CASE("A compressed session title counting fewer than 2 CQEs, or more than the CQ holds, is a CQ fault") {
  // A session compresses at least two completions (its title and one mini CQE would
  // otherwise be a plain CQE), and never more than the ring's entries: a title outside
  // [2, cqe_cnt] is refused before a mini CQE is read. 2 and cqe_cnt themselves expand
  // (the test above).
  for (const uint32_t n : {0u, 1u, 17u}) {
    Rig r;  // a 16-entry receive CQ
    r.t.post_receives(16);
    put_session(r.hw.recv_cq, 0, 0x777, 5000, std::vector<uint32_t>(n, 64));
    INFO("session of " << n);
    CHECK_THROWS_WITH(r.t.poll_recv([](const RecvCompletion&) { FAIL("a completion of a refused session"); }, 4),
                      Catch::Contains("compressed session of " + std::to_string(n) + " CQEs"));
  }
}

TEST_CASE("An inline-scattered READ completion of exactly the READ's length lands, one byte more is a CQ fault") {
  // MLX5_INLINE_SCATTER_32: a small READ's data arrives in bytes 0..31 of its CQE, and
  // byte_cnt says how many. The data path copies byte_cnt bytes to the READ's buffer, so
  // a count above the READ's length (but within the 32 bytes) would write past it.
  for (const uint32_t claimed : {8u, 9u}) {
    Rig r;
    uint64_t dst[2] = {0, 0};
    REQUIRE(r.qp.post_read(dst, 8, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 8}, 7, true) == PostResult::kOk);
    std::byte* e = r.hw.send_cq.buf;
    mlx5_cqe64 c{};
    c.sop_drop_qpn = htobe32((uint32_t{MLX5_OPCODE_RDMA_READ} << 24) | 0x00ABCD);
    c.wqe_counter = htobe16(0);
    c.byte_cnt = htobe32(claimed);
    c.op_own = static_cast<uint8_t>((MLX5_CQE_REQ << 4) | (1 << 2));  // format 1, owner 0
    std::memcpy(e, &c, sizeof c);
    const auto data = pattern(32, 3);
    std::memcpy(e, data.data(), 32);  // bytes 0..31: the scattered data
    INFO("byte_cnt " << claimed);
    std::vector<SendCompletion> done;
    auto sink = [&](const SendCompletion& s) { done.push_back(s); };
    if (claimed == 8) {
      CHECK(r.t.poll_send(sink, 4) == 1);
      REQUIRE(done.size() == 1);
      CHECK(done[0].wr_id == 7);
      CHECK(done[0].opcode == WcOpcode::kRdmaRead);
      CHECK(std::memcmp(dst, data.data(), 8) == 0);
      CHECK(dst[1] == 0);
    } else {
      CHECK_THROWS_WITH(r.t.poll_send(sink, 4), Catch::Contains("inline-scattered CQE of 9 bytes"));
      CHECK(done.empty());
      CHECK(dst[1] == 0);
    }
  }
}

TEST_CASE("A send CQE for the last WQE posted retires the queue, and one for the producer counter is a CQ fault") {
  // Two 1-block WQEs (indices 0 and 1): the producer counter is 2. A CQE naming index 1
  // is the newest outstanding WQE; index 2 names a WQE not posted yet.
  for (const uint16_t counter : {uint16_t{1}, uint16_t{2}}) {
    Rig r;
    const auto src = pattern(12, 5);
    for (uint32_t i = 0; i < 2; ++i)
      REQUIRE(r.qp.post_write_imm(src.data(), 12, kLkey, RemoteBuffer{kRaddr, kRkey, 0, 64}, 1, i, i == 1) ==
              PostResult::kOk);
    REQUIRE(r.qp.producer_counter() == 2);
    put_req_cqe(r.hw.send_cq, 0, 0x00ABCD, counter, MLX5_OPCODE_RDMA_WRITE_IMM);
    INFO("wqe_counter " << counter);
    std::vector<SendCompletion> done;
    auto sink = [&](const SendCompletion& c) { done.push_back(c); };
    if (counter == 1) {
      CHECK(r.t.poll_send(sink, 4) == 1);
      REQUIRE(done.size() == 1);
      CHECK(done[0].wr_id == 1);
      CHECK(r.qp.consumer_counter() == 2);
    } else {
      CHECK_THROWS_WITH(r.t.poll_send(sink, 4), Catch::Contains("which is not outstanding"));
      CHECK(r.qp.consumer_counter() == 0);
    }
  }
}
