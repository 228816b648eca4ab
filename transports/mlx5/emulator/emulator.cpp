// Software NIC emulator (see emulator.hpp). Decoding uses the rdma-core structures of
// <infiniband/mlx5dv.h> directly; nothing here calls the transport's WQE writers.
#include "transports/mlx5/emulator/emulator.hpp"

#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bkv::mlx5::emu {

namespace {

// The NIC-side constants, restated from the PRM so the emulator does not lean on the
// transport's headers for them.
constexpr uint32_t kBb = 64;                   // send WQE basic block
constexpr uint32_t kOctoword = 16;             // DS unit
constexpr uint32_t kMaxWqeBytes = 63 * 16;     // 6-bit DS
constexpr uint32_t kMaxPieces = 64;
constexpr uint8_t kFormatCompressed = 3;
constexpr uint32_t kFirstQpn = 0x012FFE;       // QP numbers straddle a 4096 boundary
constexpr uint32_t kKeyTag = 0x5A;             // low byte of every key (mkey "variant")

[[noreturn]] void violation(const std::string& what) { throw Violation("mlx5 emulator: " + what); }

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Zeroed, page-aligned memory the emulated NIC owns.
struct Buffer {
  std::byte* p = nullptr;
  size_t n = 0;
  Buffer() = default;
  explicit Buffer(size_t bytes) : n(bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 4095) & ~size_t{4095};
    p = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, rounded);
  }
  Buffer(Buffer&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~Buffer() { std::free(p); }
};

uint32_t rd32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return be32toh(v);
}
void wr32(std::byte* p, uint32_t host) {
  const uint32_t v = htobe32(host);
  std::memcpy(p, &v, 4);
}
void wr16(std::byte* p, uint16_t host) {
  const uint16_t v = htobe16(host);
  std::memcpy(p, &v, 2);
}

// A completion before it is written (possibly into a compressed session).
struct Completion {
  uint8_t opcode = MLX5_CQE_REQ;  // MLX5_CQE_REQ, MLX5_CQE_RESP_WR_IMM, *_ERR
  uint32_t qpn = 0;
  uint8_t send_opcode = 0;        // requester: opcode of the WQE
  uint16_t wqe_counter = 0;
  uint32_t byte_cnt = 0;
  uint32_t imm = 0;               // host order
  uint32_t srqn = 0;
  uint8_t syndrome = 0;           // errors
  uint32_t scatter_len = 0;       // READ data placed in the CQE
  std::array<std::byte, 64> scatter{};
};

bool compressible(const Completion& c) {
  return (c.opcode == MLX5_CQE_REQ || c.opcode == MLX5_CQE_RESP_WR_IMM) && c.scatter_len == 0;
}

// A decoded work request.
struct Op {
  uint8_t opcode = 0;
  bool signaled = false;
  uint16_t wqe_index = 0;
  uint16_t bbs = 0;  // basic blocks the WQE occupies
  uint32_t imm = 0;
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  struct Piece {
    bool is_inline;
    uint32_t len;
    uint32_t lkey;
    uint64_t addr;    // data segment: local address; inline: offset into bytes
  };
  uint32_t npieces = 0;
  std::array<Piece, kMaxPieces> pieces{};
  uint64_t total = 0;
  uint32_t inline_len = 0;
  std::array<std::byte, kMaxWqeBytes> bytes{};  // inline data
};

// What a CQ and an SRQ both are to the NIC: a ring of entries in memory software gave
// it, and a doorbell record.
struct EmuRing {
  Buffer buf;
  Buffer dbrec;
  uint32_t cnt = 0;  // entries, a power of two
};

struct EmuCq : EmuRing {
  uint32_t size = 0;
  uint32_t log2 = 0;
  uint32_t cqn = 0;
  CqRole role = CqRole::kSend;
  uint32_t pi = 0;  // producer counter (entries)
  std::vector<Completion> session;

  std::byte* cqe64(uint32_t idx) const { return buf.p + static_cast<size_t>(idx & (cnt - 1)) * size + (size - 64); }
  uint8_t owner(uint32_t idx) const { return static_cast<uint8_t>((idx >> log2) & 1); }
};

struct EmuSrq : EmuRing {
  uint32_t stride = 0;
  uint32_t srqn = 0;
  uint16_t consumed = 0;  // receives taken (16-bit, like the doorbell counter)
  uint16_t next = 0;      // next WQE index the NIC takes (follows next_wqe_index)
  bool created = false;

  uint16_t available() const {
    const uint32_t word = rd32(dbrec.p);
    // PRM / rdma-core (*srq->db = htobe32(srq->counter), a 16-bit counter): bits 31:16
    // of the SRQ doorbell record are reserved.
    if (word >> 16)
      violation("SRQ " + std::to_string(srqn) + " doorbell record " + hex(word) +
                ": bits 31:16 are reserved (the receive counter is 16 bits)");
    return static_cast<uint16_t>(word - consumed);
  }
};

struct EmuQp {
  uint32_t qpn = 0;
  Buffer sq;
  uint32_t wqe_cnt = 0;
  Buffer dbrec;
  uint32_t bf_reg = 0;   // index into Impl::bf_regs
  uint32_t bf_size = 0;
  uint32_t send_cq = 0;  // index into Impl::cqs
  uint32_t recv_cq = 0;
  uint32_t peer_qpn = 0;
  bool connected = false;
  bool error = false;
  uint16_t hw_ci = 0;      // next WQE counter the NIC fetches
  // First block software cannot know to be free: the end of the last WQE a CQE was
  // written for (a CQE for WQE w tells software that w and every block before it is
  // done; an unsignalled WQE frees nothing by itself).
  uint16_t completed = 0;
  std::deque<Op> ops;
};

// A BlueFlame register (two halves of bf_size bytes, or the 8-byte doorbell register
// when bf_size is 0) and the QPs that write it.
struct EmuBfReg {
  Buffer mem;
  uint32_t bf_size = 0;
  uint32_t next_half = 0;      // half the next write must use, whichever QP makes it
  std::vector<uint32_t> qps;   // indexes into Impl::qps
};

}  // namespace

struct Node::Impl {
  std::vector<EmuCq> cqs;
  EmuSrq srq;
  std::vector<EmuQp> qps;
  std::vector<EmuBfReg> bf_regs;

  EmuCq& cq_by_desc(const CqDescriptor& d) {
    for (auto& c : cqs)
      if (c.cqn == d.cqn && c.buf.p == d.buf) return c;
    violation("create_qp with a CQ descriptor this node did not create (cqn " + std::to_string(d.cqn) + ")");
  }
  uint32_t cq_index(const CqDescriptor& d) { return static_cast<uint32_t>(&cq_by_desc(d) - cqs.data()); }
  EmuQp& qp(uint32_t qpn) {
    for (auto& q : qps)
      if (q.qpn == qpn) return q;
    throw std::invalid_argument("mlx5 emulator: unknown QP number " + std::to_string(qpn));
  }
};

// ------------------------------------------------------------------------------------
// Fabric
// ------------------------------------------------------------------------------------

Fabric::Fabric() : next_qpn_(kFirstQpn) {}
Fabric::~Fabric() = default;

Node& Fabric::add_node(const NodeOptions& opts) {
  if (opts.cqe_size != 64 && opts.cqe_size != 128) throw std::invalid_argument("emulator: cqe_size must be 64 or 128");
  if (opts.bf_size % kBb != 0) throw std::invalid_argument("emulator: bf_size must be a multiple of 64");
  if (opts.max_session < 2) throw std::invalid_argument("emulator: max_session must be >= 2");
  nodes_.push_back(std::make_unique<Node>(*this, static_cast<uint32_t>(nodes_.size()), opts));
  return *nodes_.back();
}

std::byte* Fabric::check(uint32_t key, uint64_t addr, uint64_t len, uint32_t access, uint32_t node) const noexcept {
  if ((key & 0xFF) != kKeyTag) return nullptr;
  const uint32_t idx = key >> 8;
  if (idx == 0 || idx > regions_.size()) return nullptr;
  const Region& r = regions_[idx - 1];
  if (r.node != node || (r.access & access) != access) return nullptr;
  const uint64_t base = reinterpret_cast<uint64_t>(r.base);
  if (addr < base) return nullptr;
  const uint64_t off = addr - base;
  if (off > r.length || len > r.length - off) return nullptr;
  return r.base + off;
}

uint64_t Fabric::pending() const {
  uint64_t n = 0;
  for (const auto& node : nodes_)
    for (const auto& q : node->impl_->qps) n += q.ops.size();
  return n;
}

// ------------------------------------------------------------------------------------
// CQE writing
// ------------------------------------------------------------------------------------

namespace {

void check_space(Stats&, EmuCq& cq, uint32_t entries) {
  // PRM: the consumer counter in the CQ doorbell record (24 bits) bounds the producer.
  const uint32_t word = rd32(cq.dbrec.p);
  // PRM / rdma-core (htobe32(cons_index & 0xffffff)): bits 31:24 are reserved.
  if (word >> 24)
    violation("CQ " + std::to_string(cq.cqn) + " doorbell record " + hex(word) +
              ": bits 31:24 are reserved (the consumer counter is 24 bits)");
  const uint32_t ci = word;
  const uint32_t used = (cq.pi - ci) & 0xFFFFFF;
  if (used > cq.cnt || used + entries > cq.cnt)
    violation("CQ " + std::to_string(cq.cqn) + " overflow: producer " + std::to_string(cq.pi) +
              ", consumer counter in the doorbell record " + std::to_string(ci) + ", " + std::to_string(cq.cnt) +
              " entries, " + std::to_string(entries) + " more needed");
}

void advance(Stats& st, EmuCq& cq, uint32_t entries) {
  const uint32_t before = cq.pi >> cq.log2;
  cq.pi += entries;
  st.cq_passes += (cq.pi >> cq.log2) - before;
  st.cqes += entries;
}

void publish(std::byte* cqe64, uint8_t op_own) {
  __atomic_store_n(reinterpret_cast<uint8_t*>(cqe64 + offsetof(mlx5_cqe64, op_own)), op_own, __ATOMIC_RELEASE);
}

void write_single(Stats& st, EmuCq& cq, const Completion& c) {
  check_space(st, cq, 1);
  std::byte* e = cq.cqe64(cq.pi);
  std::memset(e, 0, 63);
  uint8_t flags = 0;
  if (c.opcode == MLX5_CQE_REQ_ERR || c.opcode == MLX5_CQE_RESP_ERR) {
    mlx5_err_cqe err{};
    err.srqn = htobe32(c.srqn);
    err.syndrome = c.syndrome;
    err.vendor_err_synd = 0;
    err.s_wqe_opcode_qpn = htobe32((uint32_t{c.send_opcode} << 24) | c.qpn);
    err.wqe_counter = htobe16(c.wqe_counter);
    std::memcpy(e, &err, 63);
    ++st.error_cqes;
  } else {
    mlx5_cqe64 q{};
    q.srqn_uidx = htobe32(c.srqn);
    q.imm_inval_pkey = htobe32(c.imm);
    q.byte_cnt = htobe32(c.byte_cnt);
    q.sop_drop_qpn = htobe32((c.opcode == MLX5_CQE_REQ ? uint32_t{c.send_opcode} << 24 : 0) | c.qpn);
    q.wqe_counter = htobe16(c.wqe_counter);
    std::memcpy(e, &q, 63);
    if (c.scatter_len > 0) {
      // Scatter-to-CQE: <= 32 bytes in bytes 0..31 of the CQE, else (128-byte CQEs)
      // up to 64 bytes in the first half of the entry.
      if (c.scatter_len <= 32) {
        std::memcpy(e, c.scatter.data(), c.scatter_len);
        flags = MLX5_INLINE_SCATTER_32;
      } else {
        std::memcpy(e - 64, c.scatter.data(), c.scatter_len);
        flags = MLX5_INLINE_SCATTER_64;
      }
      ++st.scattered;
    }
  }
  publish(e, static_cast<uint8_t>((c.opcode << 4) | flags | cq.owner(cq.pi)));
  advance(st, cq, 1);
}

// Title + mini-CQE arrays (layout in transports/mlx5/prm.hpp, restated here).
void write_session(Stats& st, EmuCq& cq) {
  const uint32_t n = static_cast<uint32_t>(cq.session.size());
  if (n == 0) return;
  if (n == 1) {
    write_single(st, cq, cq.session.front());
    cq.session.clear();
    return;
  }
  check_space(st, cq, n);
  const uint32_t h = cq.pi;
  const Completion& t = cq.session.front();
  for (uint32_t k = 0; k * 8 < n; ++k) {
    std::byte* arr = cq.cqe64(h + (k == 0 ? 1 : 8 * k));
    std::memset(arr, 0, 64);
    for (uint32_t j = 0; j < 8 && 8 * k + j < n; ++j) {
      const Completion& m = cq.session[8 * k + j];
      std::byte* mini = arr + 8 * j;
      if (t.opcode == MLX5_CQE_REQ) {
        wr16(mini + 0, m.wqe_counter);
        mini[2] = std::byte{m.send_opcode};
      } else {
        wr32(mini + 0, 0);  // rx_hash_result: no RSS on an RC QP
      }
      wr32(mini + 4, m.byte_cnt);
    }
  }
  std::byte* title = cq.cqe64(h);
  std::memset(title, 0, 63);
  mlx5_cqe64 q{};
  q.srqn_uidx = htobe32(t.srqn);
  q.imm_inval_pkey = htobe32(t.imm);
  q.byte_cnt = htobe32(n);
  q.sop_drop_qpn = htobe32((t.opcode == MLX5_CQE_REQ ? uint32_t{t.send_opcode} << 24 : 0) | t.qpn);
  q.wqe_counter = htobe16(t.wqe_counter);
  std::memcpy(title, &q, 63);
  publish(title, static_cast<uint8_t>((t.opcode << 4) | (kFormatCompressed << 2) | cq.owner(h)));
  advance(st, cq, n);
  ++st.sessions;
  st.mini_cqes += n;
  cq.session.clear();
}

void emit(Stats& st, EmuCq& cq, const Completion& c, const NodeOptions& o) {
  const bool compress = cq.role == CqRole::kSend ? o.compress_send : o.compress_recv;
  if (compress && compressible(c)) {
    if (!cq.session.empty()) {
      const Completion& t = cq.session.front();
      const bool same = t.opcode == c.opcode && t.qpn == c.qpn && (c.opcode == MLX5_CQE_REQ || t.imm == c.imm);
      if (!same || cq.session.size() >= o.max_session) write_session(st, cq);
    }
    cq.session.push_back(c);
    return;
  }
  write_session(st, cq);
  write_single(st, cq, c);
}

}  // namespace

// ------------------------------------------------------------------------------------
// Node: control path
// ------------------------------------------------------------------------------------

Node::Node(Fabric& fabric, uint32_t id, const NodeOptions& opts)
    : fabric_(fabric), id_(id), opts_(opts), impl_(std::make_unique<Impl>()) {}
Node::~Node() = default;

MemoryRegion Node::register_memory(void* ptr, size_t len, uint32_t access) {
  if (ptr == nullptr || len == 0) throw std::invalid_argument("mlx5 emulator: register_memory of an empty region");
  fabric_.regions_.push_back(Fabric::Region{static_cast<std::byte*>(ptr), len, access, id_});
  const uint32_t key = (static_cast<uint32_t>(fabric_.regions_.size()) << 8) | kKeyTag;
  return MemoryRegion{static_cast<std::byte*>(ptr), len, key, key};
}

CqDescriptor Node::create_cq(uint32_t min_entries, CqRole role) {
  EmuCq& cq = impl_->cqs.emplace_back();
  cq.cnt = std::bit_ceil(std::max<uint32_t>(min_entries, 2));
  cq.size = opts_.cqe_size;
  cq.log2 = static_cast<uint32_t>(std::countr_zero(cq.cnt));
  cq.cqn = fabric_.next_cqn_++;
  cq.role = role;
  cq.buf = Buffer(size_t{cq.cnt} * cq.size);
  cq.dbrec = Buffer(64);
  // rdma-core initialises every CQE as INVALID, owned by hardware.
  for (uint32_t i = 0; i < cq.cnt; ++i) cq.cqe64(i)[63] = std::byte{MLX5_CQE_INVALID << 4};
  return CqDescriptor{cq.buf.p, cq.cnt, cq.size, reinterpret_cast<uint32_t*>(cq.dbrec.p), cq.cqn};
}

SrqDescriptor Node::create_srq(uint32_t min_wr) {
  EmuSrq& s = impl_->srq;
  if (s.created) throw std::logic_error("mlx5 emulator: one SRQ per node");
  s.created = true;
  s.cnt = std::bit_ceil(std::max<uint32_t>(min_wr, 2));
  if (s.cnt > 0x8000) throw std::invalid_argument("mlx5 emulator: SRQ larger than 32768");
  s.stride = 32;
  s.srqn = fabric_.next_srqn_++;
  s.buf = Buffer(size_t{s.cnt} * s.stride);
  s.dbrec = Buffer(64);
  // As rdma-core does at creation: the free list is the cycle 0 -> 1 -> ... -> 0.
  for (uint32_t i = 0; i < s.cnt; ++i) {
    mlx5_wqe_srq_next_seg n{};
    n.next_wqe_index = htobe16(static_cast<uint16_t>((i + 1) & (s.cnt - 1)));
    std::memcpy(s.buf.p + size_t{i} * s.stride, &n, sizeof n);
  }
  return SrqDescriptor{s.buf.p, s.cnt, s.stride, reinterpret_cast<uint32_t*>(s.dbrec.p), s.srqn, s.cnt};
}

SqDescriptor Node::create_qp(const QpCaps& caps, const CqDescriptor& send_cq, const CqDescriptor& recv_cq,
                             const SrqDescriptor& srq) {
  if (!impl_->srq.created || srq.buf != impl_->srq.buf.p) violation("create_qp with an SRQ this node did not create");
  if (caps.max_send_wr == 0) throw std::invalid_argument("mlx5 emulator: max_send_wr must be positive");
  // As libmlx5: the send queue holds max_send_wr WQEs of the largest size the caps allow.
  const uint32_t max_wqe = 16 + 16 + ((4 + caps.max_inline + 15) & ~15u);
  const uint32_t bbs_per_wqe = std::max<uint32_t>(1, (std::max<uint32_t>(max_wqe, 48) + kBb - 1) / kBb);
  const uint64_t want = std::bit_ceil(uint64_t{caps.max_send_wr} * bbs_per_wqe);
  if (want > 0x8000) throw std::invalid_argument("mlx5 emulator: send queue larger than 32768 blocks");
  EmuQp& q = impl_->qps.emplace_back();
  q.qpn = fabric_.next_qpn_++;
  q.wqe_cnt = static_cast<uint32_t>(std::max<uint64_t>(want, 4));
  q.sq = Buffer(size_t{q.wqe_cnt} * kBb);
  q.dbrec = Buffer(64);
  q.bf_size = opts_.bf_size;
  q.send_cq = impl_->cq_index(send_cq);
  q.recv_cq = impl_->cq_index(recv_cq);
  const uint32_t qp_index = static_cast<uint32_t>(impl_->qps.size() - 1);
  // The QP's BlueFlame register: its own, or register i mod bf_registers (shared).
  q.bf_reg = opts_.bf_registers ? qp_index % opts_.bf_registers : qp_index;
  if (q.bf_reg == impl_->bf_regs.size()) {
    EmuBfReg& r = impl_->bf_regs.emplace_back();
    r.mem = Buffer(std::max<uint32_t>(2 * q.bf_size, 64));
    r.bf_size = q.bf_size;
  } else if (q.bf_reg > impl_->bf_regs.size() || impl_->bf_regs[q.bf_reg].bf_size != q.bf_size) {
    impl_->qps.pop_back();
    throw std::invalid_argument("mlx5 emulator: bf_registers or bf_size changed between QPs of one node");
  }
  EmuBfReg& reg = impl_->bf_regs[q.bf_reg];
  reg.qps.push_back(qp_index);
  fabric_.qps_[q.qpn] = {this, qp_index};
  return SqDescriptor{q.sq.p, q.wqe_cnt, kBb, reinterpret_cast<uint32_t*>(q.dbrec.p), reg.mem.p, q.bf_size, q.qpn};
}

ConnectInfo Node::local_info(uint32_t qpn) const {
  ConnectInfo ci{};
  ci.qpn = impl_->qp(qpn).qpn;
  ci.lid = static_cast<uint16_t>(id_ + 1);
  ci.port = 1;
  ci.mtu = IBV_MTU_4096;
  ci.link_layer = IBV_LINK_LAYER_INFINIBAND;
  return ci;
}

void Node::connect(uint32_t qpn, const ConnectInfo& remote) {
  EmuQp& q = impl_->qp(qpn);
  const auto it = fabric_.qps_.find(remote.qpn);
  if (it == fabric_.qps_.end() || it->second.first->id_ + 1 != remote.lid)
    throw std::invalid_argument("mlx5 emulator: connect QP " + std::to_string(qpn) + " to unknown QP " +
                                std::to_string(remote.qpn) + " at LID " + std::to_string(remote.lid));
  q.peer_qpn = remote.qpn;
  q.connected = true;
}

bool Node::qp_in_error(uint32_t qpn) const { return impl_->qp(qpn).error; }
uint32_t Node::srq_available() const { return impl_->srq.created ? impl_->srq.available() : 0; }

void Node::inject_error_cqe(CqRole which, uint8_t opcode, uint8_t syndrome, uint32_t qpn, uint16_t wqe_counter) {
  for (EmuCq& cq : impl_->cqs) {
    if (cq.role != which) continue;
    write_session(fabric_.stats_, cq);
    Completion c;
    c.opcode = opcode;
    c.syndrome = syndrome;
    c.qpn = qpn;
    c.wqe_counter = wqe_counter;
    c.srqn = impl_->srq.srqn;
    write_single(fabric_.stats_, cq, c);
    return;
  }
  violation("inject_error_cqe: no CQ of that role on node " + std::to_string(id_));
}

// ------------------------------------------------------------------------------------
// Node: doorbells and WQE decoding
// ------------------------------------------------------------------------------------

namespace {

bool all_zero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

struct CtrlView {
  uint8_t opcode;
  uint8_t opmod;
  uint16_t index;
  uint32_t qpn;
  uint32_t ds;
  uint8_t fm_ce_se;
  uint32_t imm;  // host order
};

CtrlView read_ctrl(const std::byte* p) {
  mlx5_wqe_ctrl_seg c;
  std::memcpy(&c, p, sizeof c);
  const uint32_t oio = be32toh(c.opmod_idx_opcode);
  const uint32_t qd = be32toh(c.qpn_ds);
  return CtrlView{static_cast<uint8_t>(oio & 0xFF), static_cast<uint8_t>(oio >> 24),
                  static_cast<uint16_t>((oio >> 8) & 0xFFFF), qd >> 8, qd & 0x3F, c.fm_ce_se, be32toh(c.imm)};
}

// Copies the WQE starting at counter `idx` (ds*16 bytes, wrapping at the queue end).
void copy_wqe(const EmuQp& q, uint16_t idx, uint32_t bytes, std::byte* out, Stats& st) {
  const size_t qbytes = size_t{q.wqe_cnt} * kBb;
  const size_t off = size_t{idx & (q.wqe_cnt - 1)} * kBb;
  if (off + bytes > qbytes) {
    ++st.wrapped_wqes;
    std::memcpy(out, q.sq.p + off, qbytes - off);
    std::memcpy(out + (qbytes - off), q.sq.p, bytes - (qbytes - off));
  } else {
    std::memcpy(out, q.sq.p + off, bytes);
  }
}

// Decodes one WQE (already checked: index, QP number, DS) into an Op. NOP -> false.
bool decode(const std::byte* w, const CtrlView& c, Op& op, Stats& st) {
  const std::string where = "WQE " + std::to_string(c.index) + " of QP " + std::to_string(c.qpn);
  if (c.opcode == MLX5_OPCODE_NOP) {
    ++st.nops;
    return false;
  }
  if (c.opcode != MLX5_OPCODE_RDMA_WRITE && c.opcode != MLX5_OPCODE_RDMA_WRITE_IMM &&
      c.opcode != MLX5_OPCODE_RDMA_READ)
    violation(where + ": unsupported opcode " + hex(c.opcode));
  if (c.opmod != 0) violation(where + ": opmod " + std::to_string(c.opmod) + " must be 0");
  const uint32_t end = c.ds * kOctoword;
  if (end < sizeof(mlx5_wqe_ctrl_seg) + sizeof(mlx5_wqe_raddr_seg))
    violation(where + ": DS " + std::to_string(c.ds) + " leaves no room for the remote address segment");
  op.opcode = c.opcode;
  op.wqe_index = c.index;
  // PRM: CE field (bits 3:2 of fm_ce_se) = 2 requests a CQE.
  op.signaled = (c.fm_ce_se & 0x0C) == MLX5_WQE_CTRL_CQ_UPDATE;
  op.imm = c.opcode == MLX5_OPCODE_RDMA_WRITE_IMM ? c.imm : 0;
  mlx5_wqe_raddr_seg r;
  std::memcpy(&r, w + sizeof(mlx5_wqe_ctrl_seg), sizeof r);
  op.raddr = be64toh(r.raddr);
  op.rkey = be32toh(r.rkey);
  uint32_t o = sizeof(mlx5_wqe_ctrl_seg) + sizeof(mlx5_wqe_raddr_seg);
  while (o < end) {
    if (op.npieces == kMaxPieces) violation(where + ": too many segments");
    uint32_t bc;
    std::memcpy(&bc, w + o, 4);
    bc = be32toh(bc);
    Op::Piece& p = op.pieces[op.npieces];
    if (bc & MLX5_INLINE_SEG) {
      if (c.opcode == MLX5_OPCODE_RDMA_READ) violation(where + ": inline data in a READ");
      const uint32_t len = bc & ~static_cast<uint32_t>(MLX5_INLINE_SEG);
      const uint32_t seg = (static_cast<uint32_t>(sizeof(mlx5_wqe_inl_data_seg)) + len + kOctoword - 1) & ~(kOctoword - 1);
      if (o + seg > end) violation(where + ": inline segment of " + std::to_string(len) + " bytes overruns DS");
      std::memcpy(op.bytes.data() + op.inline_len, w + o + sizeof(mlx5_wqe_inl_data_seg), len);
      p = Op::Piece{true, len, 0, op.inline_len};
      op.inline_len += len;
      st.inline_bytes += len;
      o += seg;
    } else {
      if (o + sizeof(mlx5_wqe_data_seg) > end) violation(where + ": data segment overruns DS");
      mlx5_wqe_data_seg d;
      std::memcpy(&d, w + o, sizeof d);
      const uint32_t len = be32toh(d.byte_count);
      if (len == 0) violation(where + ": data segment of byte_count 0 (means 2 GiB)");
      p = Op::Piece{false, len, be32toh(d.lkey), be64toh(d.addr)};
      st.gather_bytes += len;
      o += sizeof(mlx5_wqe_data_seg);
    }
    op.total += p.len;
    ++op.npieces;
  }
  return true;
}

}  // namespace

namespace {

// The send counter of a QP's doorbell record (its reserved bits checked).
uint32_t send_counter(const EmuQp& q) {
  const uint32_t dbr_word = rd32(q.dbrec.p + 4 * MLX5_SND_DBR);
  // PRM / rdma-core (htobe32(cur_post & 0xffff)): the send counter is bits 15:0,
  // bits 31:16 are reserved.
  if (dbr_word >> 16)
    violation("QP " + std::to_string(q.qpn) + ": send doorbell record " + hex(dbr_word) +
              " has reserved bits 31:16 set (the send counter is 16 bits)");
  return dbr_word;
}

}  // namespace

void Node::process_doorbells() {
  Stats& st = fabric_.stats_;
  // Every register written since the NIC last read it: the write is a doorbell of one QP.
  for (size_t r = 0; r < impl_->bf_regs.size(); ++r) {
    EmuBfReg& reg = impl_->bf_regs[r];
    // Which BlueFlame half (or the plain doorbell register) was written?
    const uint32_t half_bytes = reg.bf_size ? reg.bf_size : 8;
    std::byte* halves[2] = {reg.mem.p, reg.bf_size ? reg.mem.p + reg.bf_size : nullptr};
    const bool written[2] = {!all_zero(halves[0], 8), halves[1] != nullptr && !all_zero(halves[1], 8)};
    if (!written[0] && !written[1]) continue;
    const bool shared = reg.qps.size() > 1;
    // (Built by appending: GCC 12 at -O3 warns -Wrestrict, a known false positive, on
    // "literal" + std::to_string(...) once inlined, wherever that pattern is.)
    std::string rname;
    if (shared) {
      rname = "BlueFlame register ";
      rname += std::to_string(r);
      rname += " (shared by QPs";
      for (uint32_t i : reg.qps) {
        rname += ' ';
        rname += std::to_string(impl_->qps[i].qpn);
      }
      rname += ')';
    } else {
      rname = "QP ";
      rname += std::to_string(impl_->qps[reg.qps[0]].qpn);
    }
    if (written[0] && written[1]) violation(rname + ": both BlueFlame halves written before the NIC read one");
    const uint32_t half = written[0] ? 0 : 1;
    if (reg.bf_size && half != reg.next_half)
      violation(rname + ": BlueFlame write to half " + std::to_string(half) + ", expected half " +
                std::to_string(reg.next_half) +
                (shared ? " (consecutive writes to one register alternate halves, whichever QP makes them)"
                        : " (consecutive doorbells alternate)"));
    std::byte* bf = halves[half];
    // The QP: the register's only one, else the QP number in the write's first 8 bytes
    // (qpn_ds, bits 31:8), as the NIC reads it.
    EmuQp* qp = &impl_->qps[reg.qps[0]];
    if (shared) {
      const uint32_t qpn = rd32(bf + offsetof(mlx5_wqe_ctrl_seg, qpn_ds)) >> 8;
      qp = nullptr;
      for (uint32_t i : reg.qps)
        if (impl_->qps[i].qpn == qpn) qp = &impl_->qps[i];
      if (qp == nullptr) violation(rname + ": a write names QP " + std::to_string(qpn) + ", which does not use this register");
    }
    EmuQp& q = *qp;
    const uint32_t counter = send_counter(q);
    const std::string qname = "QP " + std::to_string(q.qpn);
    ++st.doorbells;
    if (counter == q.hw_ci) violation(qname + ": doorbell without new WQEs in the doorbell record");
    // Send-queue overflow: the blocks from the last one a CQE has freed up to the
    // doorbell record must fit the ring, else software has overwritten WQEs the NIC may
    // not have executed yet (or whose completion software could not have seen).
    if (static_cast<uint16_t>(counter - q.completed) > q.wqe_cnt)
      violation(qname + ": send queue overflow: the doorbell record announces WQEs up to block " +
                std::to_string(counter) + " but no CQE has freed the blocks from " + std::to_string(q.completed) +
                " (" + std::to_string(static_cast<uint16_t>(counter - q.completed)) + " blocks outstanding in a ring of " +
                std::to_string(q.wqe_cnt) + ")");
    const bool is_copy = q.bf_size && !all_zero(bf + 8, half_bytes - 8);
    std::array<std::byte, kMaxWqeBytes> wqe{};
    uint32_t bf_off = 0;
    std::array<std::byte, 8> last_ctrl{};
    uint16_t idx = q.hw_ci;
    uint32_t nwqes = 0;
    while (idx != counter) {
      // Header of the next WQE, from the send queue.
      copy_wqe(q, idx, 16, wqe.data(), st);
      CtrlView c = read_ctrl(wqe.data());
      const std::string where = qname + " WQE " + std::to_string(idx);
      if (c.index != idx) violation(where + ": control segment carries index " + std::to_string(c.index));
      if (c.qpn != q.qpn) violation(where + ": control segment carries QP number " + std::to_string(c.qpn));
      if (c.ds == 0) violation(where + ": DS is 0");
      const uint32_t bytes = c.ds * kOctoword;
      const uint32_t bbs = (bytes + kBb - 1) / kBb;
      if (static_cast<uint16_t>(counter - idx) < bbs)
        violation(where + ": WQE of " + std::to_string(bbs) + " blocks runs past the doorbell record (" +
                  std::to_string(counter) + ")");
      copy_wqe(q, idx, bytes, wqe.data(), st);
      if (is_copy) {
        // PRM / rdma-core (BlueFlame only when one WQE is posted, nreq == 1): the first
        // 8 bytes of a BlueFlame write are the doorbell, which names one WQE (its index
        // and size); a second WQE in the same write is not announced to the NIC.
        if (++nwqes > 1)
          violation(where + ": a BlueFlame write carries more than one WQE (its first 8 bytes are the doorbell of "
                            "the first WQE only; post several WQEs with the 8-byte doorbell of the last one)");
        // The NIC takes the WQE from the BlueFlame copy; it must match the queue.
        if (bf_off + bbs * kBb > q.bf_size)
          violation(where + ": BlueFlame copy ends before the WQEs the doorbell record announces");
        if (std::memcmp(bf + bf_off, wqe.data(), bytes) != 0)
          violation(where + ": BlueFlame copy differs from the send queue");
        bf_off += bbs * kBb;
        ++st.bf_copy_wqes;
      }
      std::memcpy(last_ctrl.data(), wqe.data(), 8);
      ++st.wqes;
      Op op;
      op.bbs = static_cast<uint16_t>(bbs);
      if (decode(wqe.data(), c, op, st)) q.ops.push_back(op);
      idx = static_cast<uint16_t>(idx + bbs);
    }
    if (is_copy) {
      ++st.bf_copies;
      if (bf_off < q.bf_size && !all_zero(bf + bf_off, q.bf_size - bf_off))
        violation(qname + ": BlueFlame copy holds more than the WQEs the doorbell record announces");
    } else {
      ++st.doorbells8;
      if (std::memcmp(bf, last_ctrl.data(), 8) != 0)
        violation(qname + ": 8-byte doorbell differs from the first 8 bytes of the last WQE's control segment");
    }
    std::memset(bf, 0, half_bytes);
    q.hw_ci = idx;
    if (reg.bf_size) reg.next_half ^= 1;
  }
  for (const EmuQp& q : impl_->qps)
    if (send_counter(q) != q.hw_ci)
      violation("QP " + std::to_string(q.qpn) + ": send doorbell record advanced to " + std::to_string(send_counter(q)) +
                " without a doorbell / BlueFlame write");
}


// ------------------------------------------------------------------------------------
// Execution
// ------------------------------------------------------------------------------------

namespace {

// The target QP of a request discards it (IBA RC: a QP in the Error state, or one not
// connected to the requester, processes no inbound packet; nothing is placed, no
// receive is consumed and no ACK or NAK goes back). The requester retransmits until its
// retry count is exhausted and completes the WQE with a transport-retry-exceeded error
// (syndrome 0x15), which puts its own QP in the error state.
bool discards_inbound(const EmuQp& target, uint32_t requester_qpn) {
  return target.error || !target.connected || target.peer_qpn != requester_qpn;
}

// The responder that NAKed a remote access error (bad rkey, range or permission) enters
// the error state too. Modelled because the IBA classes an R_Key or access violation
// of an RC request as a responder error that moves the responder's QP to Error with an
// affiliated asynchronous event (local access violation work queue error), which
// ConnectX reports as IBV_EVENT_QP_ACCESS_ERR; SoftRoCE (rxe) does the same. Not seen
// on a ConnectX here (no device). The emulator has no asynchronous events: the
// responder's owner learns of it only from its own next request (flushed) or from its
// peer's requests (retry-exceeded). Of the two choices this is the stricter one: code
// that needs the NAKing side to keep working fails a test here.
void nak_remote_access_error(EmuQp& responder) { responder.error = true; }

}  // namespace

uint64_t Fabric::deliver() {
  uint64_t executed = 0;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto& nodeptr : nodes_) {
      Node& node = *nodeptr;
      for (EmuQp& q : node.impl_->qps) {
        while (!q.ops.empty()) {
          Op& op = q.ops.front();
          EmuCq& scq = node.impl_->cqs[q.send_cq];
          Completion done;
          done.qpn = q.qpn;
          done.send_opcode = op.opcode;
          done.wqe_counter = op.wqe_index;
          done.srqn = node.impl_->srq.srqn;
          auto fail = [&](uint8_t syndrome) {
            done.opcode = MLX5_CQE_REQ_ERR;
            done.syndrome = syndrome;
            q.error = true;
            q.completed = static_cast<uint16_t>(op.wqe_index + op.bbs);
            emit(stats_, scq, done, node.opts_);
          };
          if (q.error || !q.connected) {
            fail(MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
          } else {
            const auto peer_it = qps_.find(q.peer_qpn);
            Node& peer_node = *peer_it->second.first;
            EmuQp& peer = peer_node.impl_->qps[peer_it->second.second];
            const bool is_read = op.opcode == MLX5_OPCODE_RDMA_READ;
            // Local gather / scatter entries (lkey, bounds; scatter needs local write).
            bool local_ok = true;
            std::array<std::byte*, kMaxPieces> local{};
            for (uint32_t i = 0; i < op.npieces && local_ok; ++i) {
              const Op::Piece& p = op.pieces[i];
              if (p.is_inline) continue;
              local[i] = check(p.lkey, p.addr, p.len, is_read ? uint32_t{kAccessLocalWrite} : uint32_t{0}, node.id_);
              local_ok = local[i] != nullptr;
            }
            std::byte* remote = nullptr;
            if (local_ok && !discards_inbound(peer, q.qpn) && op.total > 0)
              remote = check(op.rkey, op.raddr, op.total, is_read ? uint32_t{kAccessRemoteRead} : uint32_t{kAccessRemoteWrite},
                             peer_node.id_);
            if (!local_ok) {
              fail(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
            } else if (discards_inbound(peer, q.qpn)) {
              // Nothing answers: the requester's retries run out (no time passes here).
              fail(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
            } else if (op.total > 0 && remote == nullptr) {
              // The responder NAKs and enters the error state itself: see
              // nak_remote_access_error().
              nak_remote_access_error(peer);
              fail(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
            } else if (op.opcode == MLX5_OPCODE_RDMA_WRITE_IMM && peer_node.impl_->srq.available() == 0) {
              ++stats_.rnr_waits;  // receiver not ready: retried when receives are posted
              break;
            } else {
              done.opcode = MLX5_CQE_REQ;
              done.byte_cnt = static_cast<uint32_t>(op.total);
              if (is_read) {
                const uint32_t scatter_max = node.opts_.cqe_size == 128 ? 64 : 32;
                if (node.opts_.scatter_to_cqe && op.signaled && op.total > 0 && op.total <= scatter_max) {
                  done.scatter_len = static_cast<uint32_t>(op.total);
                  std::memcpy(done.scatter.data(), remote, op.total);
                } else {
                  uint64_t off = 0;
                  for (uint32_t i = 0; i < op.npieces; ++i) {
                    std::memcpy(local[i], remote + off, op.pieces[i].len);
                    off += op.pieces[i].len;
                  }
                }
              } else {
                uint64_t off = 0;
                for (uint32_t i = 0; i < op.npieces; ++i) {
                  const Op::Piece& p = op.pieces[i];
                  const std::byte* src = p.is_inline ? op.bytes.data() + p.addr : local[i];
                  std::memcpy(remote + off, src, p.len);
                  off += p.len;
                }
              }
              if (op.opcode == MLX5_OPCODE_RDMA_WRITE_IMM) {
                // One receive from the peer's SRQ: the NIC follows next_wqe_index.
                EmuSrq& srq = peer_node.impl_->srq;
                const uint16_t wqe = srq.next;
                const std::byte* rw = srq.buf.p + size_t{wqe} * srq.stride;
                mlx5_wqe_srq_next_seg ns;
                std::memcpy(&ns, rw, sizeof ns);
                mlx5_wqe_data_seg ds;
                std::memcpy(&ds, rw + sizeof ns, sizeof ds);
                if (be32toh(ds.byte_count) != 0 && be32toh(ds.lkey) != MLX5_INVALID_LKEY)
                  violation("SRQ WQE " + std::to_string(wqe) + " has a receive buffer; a WRITE_IMM scatters nothing");
                const uint16_t next = be16toh(ns.next_wqe_index);
                if (next >= srq.cnt) violation("SRQ WQE " + std::to_string(wqe) + " links to " + std::to_string(next));
                srq.next = next;
                ++srq.consumed;
                Completion rc;
                rc.opcode = MLX5_CQE_RESP_WR_IMM;
                rc.qpn = peer.qpn;
                rc.imm = op.imm;
                rc.byte_cnt = static_cast<uint32_t>(op.total);
                rc.wqe_counter = wqe;
                rc.srqn = srq.srqn;
                emit(stats_, peer_node.impl_->cqs[peer.recv_cq], rc, peer_node.opts_);
              }
              if (op.signaled) {
                q.completed = static_cast<uint16_t>(op.wqe_index + op.bbs);
                emit(stats_, scq, done, node.opts_);
              }
            }
          }
          q.ops.pop_front();
          ++executed;
          progress = true;
        }
      }
    }
  }
  for (auto& node : nodes_)
    for (EmuCq& cq : node->impl_->cqs) write_session(stats_, cq);
  return executed;
}

}  // namespace bkv::mlx5::emu
