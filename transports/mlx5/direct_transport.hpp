// The direct mlx5 data path: a bkv::Transport whose queue pairs and completion queues
// are views over plain-memory descriptors (descriptors.hpp). Work requests are written
// as WQEs straight into the send queue, published with the doorbell record and a
// BlueFlame write, and completions are read from the CQ buffers by owner bit. No
// ibverbs call is made on the data path.
//
// Control operations (memory registration, queue creation, connection) go to the
// Provider: the ibverbs control path on hardware (hw_provider.hpp), the software NIC
// emulator in tests (emulator/). The transport never knows which one it talks to.
//
// Send side rules:
//  - WRITE / WRITE_IMM of len <= max_inline bytes: fully inline (ctrl + raddr + inline),
//    up to 220 bytes = 4 basic blocks; longer: the first inline_head (<= 204) bytes
//    inline and the rest through one gather entry; READ: ctrl + raddr + scatter entry;
//  - a WQE never crosses the end of the send queue: the blocks left there are filled
//    with one NOP WQE first;
//  - a WQE asks for a CQE only when the caller says so (signaled); an unsignaled WQE's
//    blocks are reclaimed when a later signalled WQE of the same QP completes;
//  - ring_doorbell(): doorbell record, then one BlueFlame write to the alternate half
//    of the QP's BlueFlame register (alternation is per register: QPs whose descriptors
//    carry the same register share one BlueFlameReg, see there):
//    the WQE in one copy when it is the only one since the previous doorbell and fits
//    the BlueFlame size, else the 8-byte doorbell (the last WQE's first 8 bytes, which
//    announces every WQE up to it). A BlueFlame write carries one WQE: its first 8
//    bytes are the doorbell and name that WQE only (docs/design_transports.md §mlx5 rules
//    the emulator checks).
// Completion side rules:
//  - one receive CQ and one send CQ shared by all queue pairs; CQEs are consumed by
//    owner bit, the consumer counter is written to the CQ doorbell record after a poll
//    and before every receive post (below);
//  - compressed sessions (title + mini-CQE arrays, prm.hpp) are expanded in order and
//    resumable across polls; a session's entries are handed back to the NIC (the
//    consumer counter moves past them) only when its last mini CQE is read;
//    inline-scattered READ data is copied to the READ's buffer;
//  - error CQEs become completions with an error status and put the QP in error.
// Receive side: the shared receive queue holds zero-length receives. Its WQEs form a
// fixed cycle (next_wqe_index = i + 1 mod n) written once, as rdma-core initialises it;
// because every receive is identical, a receive is posted by raising the counter in the
// SRQ doorbell record and the list never needs relinking.
// The receive CQ never overruns (PRM: the NIC may write a CQE only into an entry the
// consumer counter in the CQ doorbell record has freed; an overrun is a CQ error that
// takes every QP on the CQ down). Every receive the NIC takes becomes one CQ entry (a
// compressed session of n completions fills n entries), so posted receives minus the
// published consumer counter bound what the NIC can write, and the receive CQ holds at
// least srq_capacity() entries. Hence: a receive counts in srq_posted() until its
// CQE's entry is handed back (a compressed session's receives all when the session
// ends), post_receives() accepts at most srq_capacity() - srq_posted(), and it writes
// the consumer counter to the CQ doorbell record before the SRQ doorbell record, so a
// receive posted from a receive callback never finds the entry just read still
// occupied in the NIC's view.
//
// Threading: one transport per thread, like every Transport. Callbacks may post work
// requests and receives; they must not poll the transport they are called from.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/transport.hpp"
#include "transports/mlx5/blueflame.hpp"
#include "transports/mlx5/descriptors.hpp"
#include "transports/mlx5/prm.hpp"

namespace bkv::mlx5 {

enum class DoorbellMode : uint8_t {
  kBlueFlame = 0,  // BlueFlame copy when the pending WQEs fit, else 8-byte doorbell
  kDoorbellOnly,   // always the 8-byte doorbell
};

struct DirectOptions {
  uint32_t sq_depth = 256;                 // WQEs of the largest size each send queue holds
  uint32_t max_inline = kMaxInline;        // payloads up to this many bytes go fully inline
  uint32_t inline_head = kMaxInlineHead;   // longer payloads: bytes inlined before the gather entry
  uint32_t srq_size = 4096;                // zero-length receives the SRQ holds
  uint32_t recv_cq_entries = 0;            // 0: the SRQ size
  // Must hold one CQE per basic block of every send queue on it (a failed QP completes
  // every WQE it holds, and a WQE may be one block): 64 queue pairs of the default
  // send queue (256 WQEs of 4 blocks = 1024 blocks).
  uint32_t send_cq_entries = 65536;
  DoorbellMode doorbell = DoorbellMode::kBlueFlame;
};

// QP number -> object, O(1) without hashing: a two-level table over the 24-bit QPN.
template <class T>
class QpnTable {
 public:
  T* find(uint32_t qpn) const noexcept {
    const auto& page = pages_[(qpn >> kPageBits) & kPageMask];
    return page ? (*page)[qpn & kPageMask] : nullptr;
  }
  void insert(uint32_t qpn, T* v) {
    auto& page = pages_[(qpn >> kPageBits) & kPageMask];
    if (!page) page = std::make_unique<Page>(Page{});
    (*page)[qpn & kPageMask] = v;
  }

 private:
  static constexpr uint32_t kPageBits = 12;
  static constexpr uint32_t kPageMask = (1u << kPageBits) - 1;
  static_assert(2 * kPageBits == 24, "two levels cover the 24-bit QP number");
  using Page = std::array<T*, 1u << kPageBits>;
  std::array<std::unique_ptr<Page>, 1u << kPageBits> pages_{};
};

// Consumer state of one completion queue.
struct CqState {
  std::byte* base = nullptr;  // buffer + offset of the 64-byte CQE within an entry
  std::byte* end = nullptr;   // base + cqe_cnt * cqe_size
  uint32_t* dbrec = nullptr;
  uint32_t mask = 0;
  uint32_t log2_cnt = 0;
  uint32_t entry_shift = 0;  // log2(cqe_size)
  uint32_t cqe_size = 0;
  uint32_t ci = 0;  // consumer counter (the title of a session in progress)
  // Compressed session in progress (zip_n == 0: none).
  uint32_t zip_n = 0;
  uint32_t zip_i = 0;

  CqState() = default;
  explicit CqState(const CqDescriptor& d)
      : base(d.buf + cqe64_offset(d.cqe_size)),
        dbrec(d.dbrec),
        mask(d.cqe_cnt - 1),
        log2_cnt(static_cast<uint32_t>(std::countr_zero(d.cqe_cnt))),
        entry_shift(static_cast<uint32_t>(std::countr_zero(d.cqe_size))),
        cqe_size(d.cqe_size) {
    end = base + static_cast<size_t>(d.cqe_cnt) * d.cqe_size;
  }

  std::byte* cqe64(uint32_t idx) const noexcept { return base + (static_cast<size_t>(idx & mask) << entry_shift); }
  uint32_t cqe_cnt() const noexcept { return mask + 1; }
  // PRM: after consuming CQEs software publishes its consumer counter (24 bits).
  void publish_ci() const noexcept { write_doorbell_record(dbrec + kCqSetCiIndex, ci & kCqCiMask); }
};

namespace detail {
[[noreturn, gnu::cold, gnu::noinline]] inline void cq_fault(const std::string& what) {
  throw std::runtime_error("mlx5 completion queue: " + what);
}
constexpr WcOpcode wc_opcode_of(uint8_t mlx5_opcode) noexcept {
  switch (mlx5_opcode) {
    case MLX5_OPCODE_RDMA_WRITE_IMM: return WcOpcode::kRdmaWriteImm;
    case MLX5_OPCODE_RDMA_READ: return WcOpcode::kRdmaRead;
    default: return WcOpcode::kRdmaWrite;
  }
}
}  // namespace detail

// One BlueFlame register of a transport and the half its next write goes to.
// Consecutive writes to one register must alternate halves (blueflame.hpp rule 4), and
// libmlx5 gives only the first QPs of a device context a register of their own: later
// QPs share registers. So the half is per register, not per QP: the QPs of a transport
// whose descriptors carry the same bf_reg point at one BlueFlameReg. It takes no lock:
// a register must be written by one thread only, so its QPs belong to one transport
// (one per thread) and no other transport's QP may use it. On hardware each HwProvider
// opens its own device context, whose registers no other provider sees
// (hw_provider.hpp).
struct BlueFlameReg {
  std::byte* cur;     // the half the next write goes to
  std::byte* base;    // the register (bf_reg of its QPs' descriptors)
  uint32_t bf_size;   // bytes per half (every QP on it must agree)

  // Returns the half the next write goes to and switches `cur` to the other one
  // (cur ^= toggle). `cur` is read for the result with a relaxed atomic load, which the
  // compiler does not merge with the plain read of the switch, so the switch stays one
  // xor into memory: the load and that xor, where one load feeding an xor and a store
  // took 3 instructions. One thread writes a register (above), so both reads see the
  // same value.
  [[gnu::always_inline]] std::byte* take_half(uintptr_t toggle) noexcept {
    std::byte* const half = __atomic_load_n(&cur, __ATOMIC_RELAXED);
    cur = reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(cur) ^ toggle);
    return half;
  }
};

template <DirectProvider Provider>
class DirectTransport {
 public:
  using Meter = NullMeter;
  using ConnectInfo = mlx5::ConnectInfo;

  class QueuePair {
   public:
    QueuePair(DirectTransport& owner, const SqDescriptor& d, uint32_t max_bbs, BlueFlameReg& bf)
        : owner_(&owner),
          sq_buf_(d.buf),
          wqe_cnt_(d.wqe_cnt),
          mask_(d.wqe_cnt - 1),
          qpn_(d.qpn),
          qpn8_be_(qpn_part_be(d.qpn)),
          max_inline_(owner.opts_.max_inline),
          inline_head_(owner.opts_.inline_head),
          gather_ds_(owner.opts_.inline_head ? ds_rdma_inline_gather(owner.opts_.inline_head) : ds_rdma_gather()),
          gather_bbs_(bbs_of_ds(gather_ds_)),
          plain_gather_above_(owner.opts_.inline_head ? INT32_MAX : static_cast<int32_t>(owner.opts_.max_inline)),
          gather_word0_(ctrl_word0_fixed(MLX5_OPCODE_RDMA_WRITE_IMM, qpn_ds_be(qpn8_be_, gather_ds_))),
          gather_data_offset_(kCtrlSegSize + kRaddrSegSize +
                              (owner.opts_.inline_head ? align16(kInlineHdrSize + owner.opts_.inline_head) : 0)),
          dbrec_sq_(d.dbrec + kSendDbrIndex),
          bf_reg_(d.bf_reg),
          bf_(&bf),
          bf_toggle_(reinterpret_cast<uintptr_t>(d.bf_reg) ^ reinterpret_cast<uintptr_t>(d.bf_reg + d.bf_size)),
          bf_bbs_(owner.opts_.doorbell == DoorbellMode::kBlueFlame ? d.bf_size / kWqeBb : 0),
          max_bbs_(max_bbs),
          db_tag_bit_(bf_bbs_ >= max_bbs ? 0 : kGeneralDoorbellsOnly),
          wr_ids_(std::make_unique<WrIdSlot[]>(d.wqe_cnt)),
          read_dst_(std::make_unique<std::byte*[]>(d.wqe_cnt)),
          read_len_(std::make_unique<uint32_t[]>(d.wqe_cnt)) {
      db_tag_ = db_tag_bit_;  // the last doorbell left off at 0
      // The doorbells write only the record's low half (write_doorbell_record16); its
      // reserved high half is cleared here, whatever the provider left in it.
      write_doorbell_record(dbrec_sq_, 0);
    }
    QueuePair(const QueuePair&) = delete;
    QueuePair& operator=(const QueuePair&) = delete;

    uint32_t qp_num() const noexcept { return qpn_; }
    ConnectInfo local_info() const { return owner_->provider_.local_info(qpn_); }
    void connect(const ConnectInfo& remote) {
      owner_->provider_.connect(qpn_, remote);
      connected_ = true;
      update_limit();
    }

    [[gnu::always_inline]] PostResult post_write_imm(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst,
                                                     uint32_t imm, uint64_t wr_id, bool signaled) {
      return post_write_op<MLX5_OPCODE_RDMA_WRITE_IMM>(src, len, lkey, dst.addr, dst.rkey, ctrl_word1(signaled, imm),
                                                       wr_id);
    }
    [[gnu::always_inline]] PostResult post_write(const void* src, uint32_t len, uint32_t lkey, RemoteBuffer dst,
                                                 uint64_t wr_id, bool signaled) {
      return post_write_op<MLX5_OPCODE_RDMA_WRITE>(src, len, lkey, dst.addr, dst.rkey, ctrl_word1(signaled, 0), wr_id);
    }
    PostResult post_read(void* dst, uint32_t len, uint32_t lkey, RemoteBuffer src, uint64_t wr_id, bool signaled) {
      if (len > kMaxMessageSize) [[unlikely]] too_long(len);
      const uint32_t ds = len ? ds_rdma_gather() : ds_rdma_no_data();
      const uint32_t bbs = bbs_of_ds(ds);
      if (pi_ + bbs > limit_ && !make_room(bbs)) return PostResult::kSendQueueFull;
      const uint64_t pi = pi_;
      const uint32_t slot = static_cast<uint32_t>(pi) & mask_;
      std::byte* const wqe = begin_wqe(pi, bbs, wr_id);
      write_ctrl_words(wqe,
                       ctrl_word0_fixed(MLX5_OPCODE_RDMA_READ, qpn_ds_be(qpn8_be_, ds)) |
                           ctrl_word0_index(static_cast<uint16_t>(pi)),
                       ctrl_word1(signaled, 0));
      write_raddr_seg(wqe + kCtrlSegSize, src.addr, src.rkey);
      if (len) write_data_seg(wqe + kCtrlSegSize + kRaddrSegSize, len, lkey, reinterpret_cast<uint64_t>(dst));
      read_dst_[slot] = static_cast<std::byte*>(dst);
      read_len_[slot] = len;
      return PostResult::kOk;
    }

    // Publishes every WQE posted since the previous doorbell (blueflame.hpp rules).
    // The common case, one basic block since the last doorbell on a QP with a BlueFlame
    // half, is handled here: that block is one whole WQE (a NOP fill is always followed
    // by the WQE it makes room for, so a lone block is never a NOP), the last one posted,
    // and it goes out in one 64-byte copy from last_ctrl_. It is recognised by one
    // compare: pi_ == db_tag_ + 1 (the tag's bit 63 keeps the compare false on QPs that
    // always take the general path). Everything else goes to ring_doorbell_wqe().
    [[gnu::always_inline]] void ring_doorbell() noexcept {
      // Everything is read into locals first: the barriers below are compiler memory
      // clobbers, after which members would be reloaded.
      const uint64_t pi = pi_;
      const uint64_t db = db_tag_;
      if (pi != db + 1) [[unlikely]] return ring_doorbell_wqe(pi, db);
      const std::byte* const src = last_ctrl_;
      blueflame_copy(publish_one_wqe(pi), src, 1);
    }

    // What every one-WQE doorbell does before its BlueFlame copy: take this BlueFlame
    // half and toggle to the other, tag the doorbell, write the doorbell record (which
    // must be visible before the BlueFlame write). Returns the BlueFlame half. The caller
    // reads last_ctrl_ first: the record write's barrier would make it a reload.
    [[gnu::always_inline]] std::byte* publish_one_wqe(uint64_t pi) noexcept {
      std::byte* const reg = bf_->take_half(bf_toggle_);
      uint32_t* const dbrec = dbrec_sq_;
      db_tag_ = pi;  // db_tag_bit_ is 0 on this path
      write_doorbell_record16(dbrec, static_cast<uint16_t>(pi));
      return reg;
    }

    // WQEs of the largest size this QP builds that are sure to fit now (one NOP fill
    // at the queue end included).
    uint32_t send_queue_free() const noexcept {
      const uint32_t free_bbs = wqe_cnt_ - static_cast<uint32_t>(pi_ - ci_);
      return free_bbs >= max_bbs_ - 1 ? (free_bbs - (max_bbs_ - 1)) / max_bbs_ : 0;
    }
    bool in_error() const noexcept { return error_; }
    // Introspection for tests and benchmarks (16-bit counters as on the wire).
    uint16_t producer_counter() const noexcept { return static_cast<uint16_t>(pi_); }
    uint16_t consumer_counter() const noexcept { return static_cast<uint16_t>(ci_); }
    uint32_t wqe_cnt() const noexcept { return wqe_cnt_; }
    // Offset of the half the next BlueFlame write to this QP's register goes to.
    uint32_t bf_offset() const noexcept { return static_cast<uint32_t>(bf_->cur - bf_reg_); }

   private:
    friend class DirectTransport;

    // A WRITE(+IMM) WQE with a gather entry at pi, bbs blocks: its control segment (word 0
    // from gather_word0_, read here, after begin_wqe) and its remote-address segment; the
    // caller writes the data segment(s).
    template <uint8_t Opcode>
    [[gnu::always_inline]] std::byte* begin_gather_write(uint64_t pi, uint32_t bbs, uint64_t wr_id, uint64_t word1,
                                                         uint64_t raddr, uint32_t rkey) {
      std::byte* const wqe = begin_wqe(pi, bbs, wr_id);
      const uint64_t word0 = gather_word0_;
      write_ctrl_words(wqe, ctrl_word0_reopcode(word0, MLX5_OPCODE_RDMA_WRITE_IMM, Opcode) |
                                ctrl_word0_index(static_cast<uint16_t>(pi)),
                       word1);
      write_raddr_seg(wqe + kCtrlSegSize, raddr, rkey);
      return wqe;
    }

    // One WRITE / WRITE_IMM. `word1` is its control-segment word 1, built once by the
    // public post from `signaled` and the immediate (ctrl_word1): passing the bool and
    // the immediate down instead made the compiler keep the bool in two registers, one
    // for word 1 and one for the slow path's arguments.
    //
    // The queue state is read once into locals and written back before the WQE bytes:
    // stores into the send queue (std::byte) may alias anything, so nothing is read from
    // the QP after them. Control word 0's per-QP part (gather_word0_, qpn8_be_) is read
    // after begin_wqe, next to its use (begin_wqe's stores cannot modify it): read before
    // the limit test it stayed live across the WQE's address computation and GCC spilled
    // it or another value to the stack. A payload copy, if any, comes last so that no
    // value lives across its call.
    //
    // The first test, "a gather entry alone", compares as int32_t: a length of 2^31 or
    // more is negative there and never takes that branch, so it needs no length test of
    // its own; such lengths reach the next branch's test (len > kMaxMessageSize).
    template <uint8_t Opcode>
    [[gnu::always_inline]] PostResult post_write_op(const void* src, uint32_t len, uint32_t lkey, uint64_t raddr,
                                                    uint32_t rkey, uint64_t word1, uint64_t wr_id) {
      static_assert(kMaxMessageSize == uint32_t{INT32_MAX}, "the int32_t compare is the length limit");
      const uint64_t pi = pi_;
      if (static_cast<int32_t>(len) > plain_gather_above_) {
        // ctrl + raddr + one gather entry (no inline head): one block.
        constexpr uint32_t kBbs = bbs_of_ds(ds_rdma_gather());
        if (pi + kBbs > limit_) [[unlikely]]
          return post_write_slow<Opcode>(src, len, lkey, raddr, rkey, word1, wr_id, kBbs);
        std::byte* const wqe = begin_gather_write<Opcode>(pi, kBbs, wr_id, word1, raddr, rkey);
        write_data_seg(wqe + kCtrlSegSize + kRaddrSegSize, len, lkey, reinterpret_cast<uint64_t>(src));
        return PostResult::kOk;
      }
      if (len > max_inline_) {
        // Inline head + gather entry (or, on a QP without inline head, a length of 2^31
        // or more).
        if (len > kMaxMessageSize) [[unlikely]] too_long(len);
        const uint32_t head = inline_head_;
        const uint32_t bbs = gather_bbs_;
        if (pi + bbs > limit_) [[unlikely]]
          return post_write_slow<Opcode>(src, len, lkey, raddr, rkey, word1, wr_id, bbs);
        const uint32_t data_offset = gather_data_offset_;
        std::byte* const wqe = begin_gather_write<Opcode>(pi, bbs, wr_id, word1, raddr, rkey);
        write_data_seg(wqe + data_offset, len - head, lkey, reinterpret_cast<uint64_t>(src) + head);
        write_inline_seg(wqe + kCtrlSegSize + kRaddrSegSize, src, head);
        return PostResult::kOk;
      }
      const uint32_t ds = len ? ds_rdma_inline(len) : ds_rdma_no_data();
      const uint32_t bbs = bbs_of_ds(ds);
      if (pi + bbs > limit_) [[unlikely]] return post_write_slow<Opcode>(src, len, lkey, raddr, rkey, word1, wr_id, bbs);
      std::byte* const wqe = begin_wqe(pi, bbs, wr_id);
      const uint32_t qpn8 = qpn8_be_;
      write_ctrl_words(wqe, ctrl_word0_fixed(Opcode, qpn_ds_be(qpn8, ds)) | ctrl_word0_index(static_cast<uint16_t>(pi)),
                       word1);
      write_raddr_seg(wqe + kCtrlSegSize, raddr, rkey);
      if (len) write_inline_seg(wqe + kCtrlSegSize + kRaddrSegSize, src, len);
      return PostResult::kOk;
    }

    // Claims the `bbs` blocks at producer counter `pi` (which fit: pi + bbs <= limit_)
    // for a WQE of wr_id `wr_id`; returns where the WQE goes.
    [[gnu::always_inline]] std::byte* begin_wqe(uint64_t pi, uint32_t bbs, uint64_t wr_id) noexcept {
      const uint32_t slot = static_cast<uint32_t>(pi) & mask_;
      std::byte* const wqe = sq_buf_ + (static_cast<size_t>(slot) << kWqeBbShift);
      wr_ids_[slot].wr_id = wr_id;
      last_ctrl_ = wqe;
      last_start_ = pi;
      pi_ = pi + bbs;
      return wqe;
    }

    // A post that does not fit below limit_: make_room() and post again (then it fits),
    // or the queue is full.
    template <uint8_t Opcode>
    [[gnu::noinline]] PostResult post_write_slow(const void* src, uint32_t len, uint32_t lkey, uint64_t raddr,
                                                 uint32_t rkey, uint64_t word1, uint64_t wr_id, uint32_t bbs) {
      if (!make_room(bbs)) return PostResult::kSendQueueFull;
      return post_write_op<Opcode>(src, len, lkey, raddr, rkey, word1, wr_id);
    }

    // limit_ = the producer counter a WQE may reach without a NOP fill and without
    // overrunning unretired blocks: min(end of the current pass, ci + wqe_cnt); 0 until
    // the QP is connected, so that every post then takes the slow path. Retiring blocks
    // does not raise it (that would cost every completion); a post that reaches it
    // recomputes it in make_room().
    void update_limit() noexcept {
      const uint64_t pass_end = (pi_ | mask_) + 1;
      limit_ = connected_ ? std::min<uint64_t>(pass_end, ci_ + wqe_cnt_) : 0;
    }

    // Slow path of a post of `bbs` blocks: not connected, queue full (false), or a NOP
    // fill at the queue end. On true, pi_ + bbs <= limit_.
    [[gnu::noinline]] bool make_room(uint32_t bbs) {
      if (!connected_) not_connected();
      const uint32_t slot = static_cast<uint32_t>(pi_) & mask_;
      const uint32_t nop = slot + bbs > wqe_cnt_ ? wqe_cnt_ - slot : 0;
      if (pi_ + nop + bbs > ci_ + wqe_cnt_) return false;
      if (nop) {
        write_nop_wqe(sq_buf_ + (static_cast<size_t>(slot) << kWqeBbShift), static_cast<uint16_t>(pi_), qpn_, nop);
        pi_ += nop;
      }
      update_limit();
      return true;
    }

    // Not one block since the last doorbell. The next most common case, one WQE of
    // several blocks (an inline WQE), on a QP whose BlueFlame half holds any WQE it builds,
    // is handled here: that WQE is contiguous (WQEs never cross the queue end), so it goes
    // out from last_ctrl_. It is recognised by one compare: the last WQE starts where the
    // last doorbell left off (db == last_start_; the tag's bit 63 keeps the compare false
    // on QPs that always take the general path). Everything else goes to
    // ring_doorbell_general().
    [[gnu::always_inline]] void ring_doorbell_wqe(uint64_t pi, uint64_t db) noexcept {
      if (db != last_start_) [[unlikely]] return ring_doorbell_general(pi, db & ~kGeneralDoorbellsOnly);
      // The one WQE's size: 2..kMaxWqeBbs (not 1: the caller's test), <= bf_bbs_.
      const uint32_t bbs = static_cast<uint32_t>(pi - db);
      const std::byte* const src = last_ctrl_;
      blueflame_copy_wqe(publish_one_wqe(pi), src, bbs);
    }

    // No WQE since the last doorbell (nothing to do), several WQEs, or a QP without a
    // usable BlueFlame half: one WQE (it starts where the last doorbell left off) goes
    // out in one copy when it fits the half (WQEs never cross the queue end, so it is
    // contiguous); several WQEs (a NOP fill included) go out as the 8-byte doorbell of
    // the last one, never as one copy (a BlueFlame write announces its first WQE only).
    [[gnu::noinline]] void ring_doorbell_general(uint64_t pi, uint64_t db) noexcept {
      if (pi == db) return;  // nothing posted since the last doorbell
      const uint32_t bbs = static_cast<uint32_t>(pi - db);
      std::byte* const reg = bf_->take_half(bf_toggle_);
      const std::byte* const last = last_ctrl_;
      const bool copy = bbs <= bf_bbs_ && db == last_start_;
      db_tag_ = pi | db_tag_bit_;
      write_doorbell_record16(dbrec_sq_, static_cast<uint16_t>(pi));
      if (copy)
        blueflame_copy(reg, last, bbs);  // the one WQE
      else
        blueflame_doorbell8(reg, last);
    }

    [[noreturn, gnu::cold, gnu::noinline]] void not_connected() const {
      throw std::logic_error("mlx5: post on queue pair " + std::to_string(qpn_) + " before connect()");
    }
    [[noreturn, gnu::cold, gnu::noinline]] void not_outstanding(uint16_t wqe_counter) const {
      detail::cq_fault("CQE for WQE index " + std::to_string(wqe_counter) + " of QP " + std::to_string(qpn_) +
                       ", which is not outstanding (consumer " + std::to_string(static_cast<uint16_t>(ci_)) +
                       ", producer " + std::to_string(static_cast<uint16_t>(pi_)) + ")");
    }
    [[noreturn, gnu::cold, gnu::noinline]] static void too_long(uint32_t len) {
      throw std::invalid_argument("mlx5: a work request of " + std::to_string(len) +
                                  " bytes exceeds the limit of one gather entry (2^31 - 1 bytes)");
    }

    // What a completion needs of the WQE that starts at block `slot`: its opcode and
    // size, read back from its own control segment (intact until retired).
    struct Retired {
      uint32_t slot;
      uint8_t opcode;
    };
    // Completion of the WQE starting at 16-bit counter `wqe_counter`: retires it and
    // every earlier block.
    [[gnu::always_inline]] Retired retire(uint16_t wqe_counter) {
      // The WQE starts `off` blocks after the first unretired one; it is outstanding when
      // it starts before the producer counter (ci_ + off < pi_, i.e. off < pi_ - ci_).
      const uint64_t ci = ci_;
      const uint64_t start = ci + static_cast<uint16_t>(wqe_counter - static_cast<uint16_t>(ci));
      if (start >= pi_) [[unlikely]] not_outstanding(wqe_counter);
      const uint32_t slot = static_cast<uint32_t>(start) & mask_;
      const std::byte* ctrl = sq_buf_ + (static_cast<size_t>(slot) << kWqeBbShift);
      const uint8_t ds_byte = static_cast<uint8_t>(ctrl[offsetof(mlx5_wqe_ctrl_seg, qpn_ds) + 3]);
      const uint8_t opcode = static_cast<uint8_t>(ctrl[offsetof(mlx5_wqe_ctrl_seg, opmod_idx_opcode) + 3]);
      ci_ = start + kBbsOfDsByte.bbs[ds_byte];
      return Retired{slot, opcode};
    }

    DirectTransport* owner_;
    std::byte* sq_buf_;
    uint32_t wqe_cnt_;
    uint32_t mask_;
    uint64_t pi_ = 0;     // producer counter (basic blocks; the wire carries its low 16 bits)
    uint64_t limit_ = 0;  // see update_limit()
    uint64_t ci_ = 0;     // first block not yet retired
    // The producer counter at the last doorbell, with bit 63 (kGeneralDoorbellsOnly) set
    // on a QP whose doorbells all take the general path: no BlueFlame, or a BlueFlame
    // half smaller than its largest WQE (producer counters never reach bit 63).
    static constexpr uint64_t kGeneralDoorbellsOnly = uint64_t{1} << 63;
    uint64_t db_tag_ = 0;
    uint32_t qpn_;
    uint32_t qpn8_be_;  // the QP-number part of qpn_ds, in wire order
    uint32_t max_inline_;
    uint32_t inline_head_;
    uint32_t gather_ds_;   // DS of a WQE with a gather entry (after inline_head bytes inline)
    uint32_t gather_bbs_;
    // Payloads longer than this (compared as int32_t, post_write_op) go through a gather
    // entry with no inline head: max_inline when inline_head is 0, else INT32_MAX (no
    // payload takes that path).
    int32_t plain_gather_above_;
    uint64_t gather_word0_;  // control-segment word 0 of such a WQE as WRITE_IMM, index 0
    uint32_t gather_data_offset_;   // where its data segment goes (after the inline head)
    bool connected_ = false;
    bool error_ = false;
    uint32_t* dbrec_sq_;
    std::byte* bf_reg_;
    BlueFlameReg* bf_;       // the register and the half its next write goes to (shared)
    uintptr_t bf_toggle_;    // bf_->cur ^= bf_toggle_ alternates the halves (0 without BlueFlame)
    uint32_t bf_bbs_;  // BlueFlame capacity in blocks (0: always the 8-byte doorbell)
    uint32_t max_bbs_;
    uint64_t db_tag_bit_;  // kGeneralDoorbellsOnly or 0, as db_tag_ carries it
    std::byte* last_ctrl_ = nullptr;  // the last WQE posted, and the producer counter it starts at
    static constexpr uint64_t kNoWqeYet = ~uint64_t{0};  // no db_tag_ equals it
    uint64_t last_start_ = kNoWqeYet;
    // The wr_id of each WQE, by first block, in its own type: a store of a plain
    // uint64_t might modify any uint64_t the caller holds (its arguments, this QP's
    // counters), which the compiler would then reload; a WrIdSlot store modifies none.
    struct WrIdSlot {
      uint64_t wr_id;
    };
    std::unique_ptr<WrIdSlot[]> wr_ids_;
    std::unique_ptr<std::byte*[]> read_dst_;   // READs only: local buffer (scatter-to-CQE)
    std::unique_ptr<uint32_t[]> read_len_;
  };

  explicit DirectTransport(Provider& provider, const DirectOptions& opts = {}) : provider_(provider), opts_(opts) {
    if (opts_.max_inline > kMaxInline)
      throw std::invalid_argument("mlx5: max_inline " + std::to_string(opts_.max_inline) + " exceeds " +
                                  std::to_string(kMaxInline));
    if (opts_.inline_head > kMaxInlineHead || opts_.inline_head > opts_.max_inline)
      throw std::invalid_argument("mlx5: inline_head " + std::to_string(opts_.inline_head) +
                                  " must be <= 204 and <= max_inline");
    if (opts_.sq_depth == 0 || opts_.srq_size == 0)
      throw std::invalid_argument("mlx5: sq_depth and srq_size must be positive");
    max_bbs_ = bbs_of_ds(std::max({ds_rdma_inline(opts_.max_inline),
                                   opts_.inline_head ? ds_rdma_inline_gather(opts_.inline_head) : ds_rdma_gather()}));
    recv_cq_desc_ = provider_.create_cq(opts_.recv_cq_entries ? opts_.recv_cq_entries : opts_.srq_size, CqRole::kRecv);
    send_cq_desc_ = provider_.create_cq(opts_.send_cq_entries, CqRole::kSend);
    srq_desc_ = provider_.create_srq(opts_.srq_size);
    validate(recv_cq_desc_);
    validate(send_cq_desc_);
    validate(srq_desc_);
    srq_capacity_ = std::min(opts_.srq_size, srq_desc_.max_wr);
    if (recv_cq_desc_.cqe_cnt < srq_capacity_)
      throw std::invalid_argument("mlx5: receive CQ of " + std::to_string(recv_cq_desc_.cqe_cnt) +
                                  " entries cannot hold the completions of " + std::to_string(srq_capacity_) +
                                  " posted receives");
    recv_cq_ = CqState(recv_cq_desc_);
    send_cq_ = CqState(send_cq_desc_);
    for (uint32_t i = 0; i < srq_desc_.wqe_cnt; ++i)
      write_srq_wqe(srq_desc_.buf + static_cast<size_t>(i) * srq_desc_.stride,
                    static_cast<uint16_t>((i + 1) & (srq_desc_.wqe_cnt - 1)));
  }
  DirectTransport(const DirectTransport&) = delete;
  DirectTransport& operator=(const DirectTransport&) = delete;

  MemoryRegion register_memory(void* ptr, size_t len, uint32_t access) {
    return provider_.register_memory(ptr, len, access);
  }

  QueuePair& create_queue_pair() {
    // At least two WQEs of the largest size, so that one always fits after a NOP fill.
    const QpCaps caps{std::max(opts_.sq_depth, 2u), opts_.max_inline};
    const SqDescriptor d = provider_.create_qp(caps, send_cq_desc_, recv_cq_desc_, srq_desc_);
    validate(d);
    // The send CQ holds one CQE per block of every send queue: a QP in error completes
    // every WQE it holds, signalled or not, and a WQE may be a single block, so a queue
    // of sq_depth WQEs of the largest size can have wqe_cnt WQEs outstanding.
    if (sq_blocks_sum_ + d.wqe_cnt > send_cq_desc_.cqe_cnt)
      throw std::invalid_argument("mlx5: the send CQ (" + std::to_string(send_cq_desc_.cqe_cnt) +
                                  " entries) cannot hold a CQE for each of the " + std::to_string(d.wqe_cnt) +
                                  " blocks of another send queue (" + std::to_string(sq_blocks_sum_) +
                                  " taken); raise send_cq_entries");
    if (d.wqe_cnt < 2 * max_bbs_ - 1 || (d.wqe_cnt < opts_.sq_depth * max_bbs_ && d.wqe_cnt < 0x8000))
      throw std::invalid_argument("mlx5: send queue of " + std::to_string(d.wqe_cnt) + " blocks cannot hold " +
                                  std::to_string(caps.max_send_wr) + " WQEs of " + std::to_string(max_bbs_) +
                                  " blocks (a WQE must fit after a NOP fill of up to " +
                                  std::to_string(max_bbs_ - 1) + ")");
    if (qps_by_num_.find(d.qpn) != nullptr)
      throw std::logic_error("mlx5: provider returned QP number " + std::to_string(d.qpn) + " twice");
    QueuePair& qp = qps_.emplace_back(*this, d, max_bbs_, blueflame_reg(d));
    qps_by_num_.insert(d.qpn, &qp);
    sq_blocks_sum_ += d.wqe_cnt;
    return qp;
  }

  // Receive completions (WRITE-with-immediate arrivals), at most `max`.
  // The CQ is read in runs (recv_run): from the consumer counter up to the ring end or
  // the budget, plain RESP_WR_IMM CQEs are recognised by one compare of their owner byte
  // and reported without other branches. A compressed session is expanded here, array
  // by array; single CQEs that are neither (inline scatter, errors) are decoded by
  // recv_single(). The callback is not handed to any out-of-line function, so what it
  // captures can stay in registers.
  template <class F>
  uint32_t poll_recv(F&& cb, uint32_t max) {
    CqState& cq = recv_cq_;
    uint32_t n = 0;
    while (n < max) {
      uint8_t op_own;
      n += recv_run(cq, cb, max - n, op_own);
      if (op_own == kRunAtRingEnd) continue;
      if (!cqe_is_sw_owned(op_own, op_own_owner(cq))) break;
      const std::byte* const c = cq.cqe64(cq.ci);
      if (cqe_format(op_own) == kCqeFormatCompressed) {
        if (cq.zip_n == 0) begin_session(cq, c, op_own, MLX5_CQE_RESP_WR_IMM);
        const uint32_t qpn = cqe_qpn(c);
        const uint32_t imm = cqe_imm(c);
        n += for_each_mini(cq, max - n, [&](const std::byte* mini) {
          cb(RecvCompletion{qpn, imm, load_be32(mini + kMiniByteCntOffset), WcStatus::kSuccess});
          return 1u;
        });
        continue;
      }
      const RecvCompletion rc = recv_single(c, op_own);
      ++n;
      cb(rc);
    }
    if (n) cq.publish_ci();
    return n;
  }

  // Send completions (signalled WQEs and errors), at most `max`. Read in runs as
  // poll_recv reads: a plain REQ CQE (the common case) is recognised by one compare of
  // its owner byte; compressed sessions are expanded here; single CQEs that are neither
  // (inline scatter, errors) are decoded by send_single(). Consecutive CQEs of one QP
  // (the usual case) look the QP up once.
  template <class F>
  uint32_t poll_send(F&& cb, uint32_t max) {
    CqState& cq = send_cq_;
    const uint32_t ci_before = cq.ci;
    SendQpCache qps;
    uint32_t n = 0;
    while (n < max) {
      uint8_t op_own;
      n += send_run(cq, cb, max - n, op_own, qps);
      if (op_own == kRunAtRingEnd) continue;
      if (!cqe_is_sw_owned(op_own, op_own_owner(cq))) break;
      const std::byte* const c = cq.cqe64(cq.ci);
      if (cqe_format(op_own) == kCqeFormatCompressed) {
        if (cq.zip_n == 0) begin_session(cq, c, op_own, MLX5_CQE_REQ);
        const uint32_t qpn = cqe_qpn(c);
        n += for_each_mini(cq, max - n, [&](const std::byte* mini) {
          return complete_send(send_qp(qpn, qps), qpn, load_be16(mini + kMiniWqeCounterOffset), WcStatus::kSuccess,
                               load_be32(mini + kMiniByteCntOffset), nullptr, 0, cb);
        });
        continue;
      }
      const SendCqe e = send_single(c, op_own);
      n += complete_send(send_qp(e.qpn, qps), e.qpn, e.wqe_counter, e.status, e.byte_cnt, e.scattered,
                         e.scatter_limit, cb);
    }
    if (cq.ci != ci_before || cq.zip_n != 0) cq.publish_ci();
    return n;
  }

  // Adds n zero-length receives to the shared receive queue, at most
  // srq_capacity() - srq_posted() (see the header: the receive CQ must absorb them).
  void post_receives(uint32_t n) {
    if (uint64_t{srq_posted()} + n > srq_capacity_)
      throw std::logic_error("mlx5: posting " + std::to_string(n) + " receives to an SRQ holding " +
                             std::to_string(srq_posted()) + " of " + std::to_string(srq_capacity_));
    srq_counter_ += n;
    // The entries consumed so far are free in the NIC's view before it sees the
    // receives: a receive callback's post comes before poll_recv publishes the counter.
    recv_cq_.publish_ci();
    // PRM: the SRQ doorbell record carries the 16-bit count of receives ever posted.
    write_doorbell_record(srq_desc_.dbrec + kSrqDbrIndex, srq_counter_ & 0xFFFF);
  }

  uint32_t srq_capacity() const noexcept { return srq_capacity_; }
  // Receives posted whose CQ entries are not handed back: every receive the NIC takes
  // fills one CQ entry (a session of n completions fills n), and recv_cq_.ci, the
  // counter software publishes, stays at the title of a session in progress. So the
  // mini CQEs of a session already read still count here until the session ends.
  uint32_t srq_posted() const noexcept { return srq_counter_ - recv_cq_.ci; }
  uint32_t send_queue_depth() const noexcept { return opts_.sq_depth; }
  Meter& meter() noexcept { return meter_; }
  const DirectOptions& options() const noexcept { return opts_; }
  const CqState& recv_cq_state() const noexcept { return recv_cq_; }
  const CqState& send_cq_state() const noexcept { return send_cq_; }
  QueuePair* find_queue_pair(uint32_t qpn) const noexcept { return qps_by_num_.find(qpn); }

 private:
  // A run's op_own when it used up its CQEs (ring end or budget). The runs report owner
  // bytes with the solicited bit (bit 1) cleared, so no CQE byte can look like it.
  static constexpr uint8_t kRunAtRingEnd = 0xFF;
  static_assert((kRunAtRingEnd & kCqeSeBit) != 0);

  // The owner bit software expects at cq.ci.
  static uint8_t op_own_owner(const CqState& cq) noexcept { return sw_owner_bit(cq.ci, cq.log2_cnt); }

  // One run of plain RESP_WR_IMM CQEs from cq.ci, at most `max` (>= 1) and not past the
  // ring end. Returns how many it reported; op_own = the owner byte (solicited bit
  // cleared) of the CQE it stopped at, or kRunAtRingEnd when it used up its CQEs.
  template <class F>
  [[gnu::always_inline]] static uint32_t recv_run(CqState& cq, F& cb, uint32_t max, uint8_t& op_own) {
    uint32_t ci = cq.ci;
    const uint32_t pos = ci & cq.mask;
    const size_t stride = cq.cqe_size;
    const std::byte* c = cq.base + (static_cast<size_t>(pos) << cq.entry_shift);
    // The owner byte of a plain RESP_WR_IMM CQE that software owns (the owner bit
    // flips with every pass over the ring; the solicited bit is ignored).
    const uint8_t want = static_cast<uint8_t>((MLX5_CQE_RESP_WR_IMM << 4) | sw_owner_bit(ci, cq.log2_cnt));
    const uint32_t run_begin = ci;
    const uint32_t to_end = cq.mask + 1 - pos;
    const uint32_t run_end = ci + std::min(max, to_end);
    for (;;) {
      op_own = load_op_own(c) & ~kCqeSeBit;
      if (op_own != want) break;
      cq.ci = ++ci;  // before the callback: it may post receives (srq_posted() follows ci)
      cb(RecvCompletion{cqe_qpn(c), cqe_imm(c), cqe_byte_cnt(c), WcStatus::kSuccess});
      c += stride;
      if (ci == run_end) {
        op_own = kRunAtRingEnd;
        break;
      }
    }
    return ci - run_begin;
  }

  // One software-owned receive CQE that is neither plain nor compressed: inline-
  // scattered receives and error CQEs. Consumes it (before the callback runs).
  [[gnu::noinline]] RecvCompletion recv_single(const std::byte* c, uint8_t op_own) {
    const uint8_t opcode = cqe_opcode(op_own);
    ++recv_cq_.ci;
    if (opcode == MLX5_CQE_RESP_WR_IMM) {
      // Inline scatter on a receive: data for the receive buffer was placed in the CQE.
      // Our receives have no buffer, so any such byte is a local length error.
      return RecvCompletion{cqe_qpn(c), cqe_imm(c), cqe_byte_cnt(c), WcStatus::kLocalLengthError};
    }
    if (opcode == MLX5_CQE_RESP_ERR) {
      // Responder errors flush or fail a receive taken from the SRQ.
      return RecvCompletion{err_cqe_qpn(c), 0, 0, status_of_syndrome(err_cqe_syndrome(c))};
    }
    detail::cq_fault("unexpected CQE opcode " + std::to_string(opcode) + " on the receive CQ");
  }

  // The QP of the previous send CQE of this poll (QP numbers are 24 bits, so ~0 is none),
  // and that CQE's sop_drop_qpn word as it sits in the CQE (wire order, send opcode
  // included; kNoWord, which no 32-bit word equals, when there is none): a CQE with the
  // same word is of the same QP without a decode.
  static constexpr uint64_t kNoWord = ~uint64_t{0};
  struct SendQpCache {
    uint32_t qpn = ~0u;
    uint64_t sop_drop_qpn_wire = kNoWord;
    QueuePair* qp = nullptr;
  };
  // The QP of a send CQE, through the cache: consecutive CQEs of one QP (the usual
  // case) look it up once.
  [[gnu::always_inline]] QueuePair* send_qp(uint32_t qpn, SendQpCache& qps) const {
    if (qpn != qps.qpn) [[unlikely]] {
      qps.qp = find_send_qp(qpn);
      qps.qpn = qpn;
      qps.sop_drop_qpn_wire = kNoWord;  // no CQE word matches until send_qpn() sets one
    }
    return qps.qp;
  }
  // The QP number of the plain send CQE `c`, with qps.qp its queue pair. A CQE whose
  // sop_drop_qpn word equals the previous CQE's (same QP, same send opcode) is not
  // decoded again (the decode is out of line: it is rare, and inline it holds registers).
  [[gnu::always_inline]] uint32_t send_qpn(const std::byte* c, SendQpCache& qps) const {
    uint32_t wire;
    std::memcpy(&wire, c + offsetof(mlx5_cqe64, sop_drop_qpn), sizeof wire);
    if (uint64_t{wire} != qps.sop_drop_qpn_wire) [[unlikely]] send_qpn_decode(c, qps);
    return qps.qpn;
  }
  [[gnu::noinline]] void send_qpn_decode(const std::byte* c, SendQpCache& qps) const {
    uint32_t wire;
    std::memcpy(&wire, c + offsetof(mlx5_cqe64, sop_drop_qpn), sizeof wire);
    send_qp(cqe_qpn(c), qps);
    qps.sop_drop_qpn_wire = wire;
  }

  // One run of plain REQ CQEs from cq.ci: at most `max` (>= 1) CQEs, not past the ring
  // end. Returns the completions reported (a CQE of a NOP reports none); op_own as in
  // recv_run (kRunAtRingEnd when the run used up its CQEs). The run walks by CQE address
  // and writes the consumer counter back once at its end: nothing reads the send CQ's
  // counter during a callback (the SRQ count follows the receive CQ only). A callback or
  // a fault that throws still leaves every CQE up to its own consumed.
  template <class F>
  [[gnu::always_inline]] uint32_t send_run(CqState& cq, F& cb, uint32_t max, uint8_t& op_own, SendQpCache& qps) {
    const uint32_t ci = cq.ci;
    const uint32_t pos = ci & cq.mask;
    const uint32_t shift = cq.entry_shift;
    const size_t stride = cq.cqe_size;
    const std::byte* const first = cq.base + (static_cast<size_t>(pos) << shift);
    const std::byte* const end = first + (static_cast<size_t>(std::min(max, cq.mask + 1 - pos)) << shift);
    // Owner byte of an uncompressed, non-scattered REQ CQE that software owns (the
    // solicited bit is ignored).
    const uint8_t want = static_cast<uint8_t>((MLX5_CQE_REQ << 4) | sw_owner_bit(ci, cq.log2_cnt));
    const std::byte* c = first;
    uint32_t reported = 0;
    try {
      for (;;) {
        op_own = load_op_own(c) & ~kCqeSeBit;
        if (op_own != want) break;
        const uint32_t qpn = send_qpn(c, qps);
        reported += complete_send(qps.qp, qpn, cqe_wqe_counter(c), WcStatus::kSuccess, 0, nullptr, 0, cb);
        c += stride;
        if (c == end) {
          op_own = kRunAtRingEnd;
          break;
        }
      }
    } catch (...) {
      cq.ci = ci + static_cast<uint32_t>((c - first) >> shift) + 1;  // c: the CQE being completed
      throw;
    }
    cq.ci = ci + static_cast<uint32_t>((c - first) >> shift);
    return reported;
  }

  // What complete_send() needs of one send CQE.
  struct SendCqe {
    uint32_t qpn;
    uint16_t wqe_counter;
    WcStatus status;
    uint32_t byte_cnt;
    const std::byte* scattered;  // inline-scattered READ data, or nullptr
    uint32_t scatter_limit;
  };

  // One software-owned send CQE that is neither plain nor compressed: inline scatter (a
  // small READ's data inside the CQE) and error CQEs. Consumes it.
  [[gnu::noinline]] SendCqe send_single(const std::byte* c, uint8_t op_own) {
    CqState& cq = send_cq_;
    const uint8_t opcode = cqe_opcode(op_own);
    const uint8_t format = cqe_format(op_own);
    ++cq.ci;
    if (opcode == MLX5_CQE_REQ) {
      const std::byte* scattered = nullptr;
      uint32_t scatter_limit = 0;
      if (format == 1) {  // MLX5_INLINE_SCATTER_32: data in bytes 0..31 of the CQE
        scattered = c;
        scatter_limit = kScatter32Max;
      } else if (format == 2) {  // MLX5_INLINE_SCATTER_64: data in the first half of a 128-byte CQE
        if (cq.cqe_size != 128) detail::cq_fault("64-byte inline scatter in a 64-byte CQE");
        scattered = c - kCqe64Size;
        scatter_limit = kScatter64Max;
      }
      return SendCqe{cqe_qpn(c), cqe_wqe_counter(c), WcStatus::kSuccess, cqe_byte_cnt(c), scattered, scatter_limit};
    }
    if (opcode == MLX5_CQE_REQ_ERR)
      return SendCqe{err_cqe_qpn(c), cqe_wqe_counter(c), status_of_syndrome(err_cqe_syndrome(c)), 0, nullptr, 0};
    detail::cq_fault("unexpected CQE opcode " + std::to_string(opcode) + " on the send CQ");
  }

  // Starts the compressed session whose title `title` (software-owned, format 3) is at
  // cq.ci: checks its opcode and size (2 <= n <= the ring).
  [[gnu::noinline]] static void begin_session(CqState& cq, const std::byte* title, uint8_t op_own,
                                              uint8_t expected_opcode) {
    const uint8_t opcode = cqe_opcode(op_own);
    if (opcode != expected_opcode)
      detail::cq_fault("compressed session of opcode " + std::to_string(opcode) + " on the " +
                       (expected_opcode == MLX5_CQE_REQ ? "send" : "receive") + " CQ");
    const uint32_t n = cqe_byte_cnt(title);
    if (n < 2 || n > cq.cqe_cnt())
      detail::cq_fault("compressed session of " + std::to_string(n) + " CQEs in a CQ of " +
                       std::to_string(cq.cqe_cnt()));
    cq.zip_n = n;
    cq.zip_i = 0;
  }

  // Expands up to `budget` mini CQEs of the session in progress (title at cq.ci),
  // calling per_mini(mini_cqe_bytes) -> completions reported, array by array (no
  // per-mini test for the array change). Returns the completions reported; ends the
  // session when its last mini CQE is done.
  template <class PerMini>
  [[gnu::always_inline]] static uint32_t for_each_mini(CqState& cq, uint32_t budget, PerMini&& per_mini) {
    const uint32_t n = cq.zip_n;
    uint32_t i = cq.zip_i;
    const uint32_t stop = n - i <= budget ? n : i + budget;
    uint32_t reported = 0;
    while (i != stop) {
      const std::byte* mini = cq.cqe64(cq.ci + mini_array_entry(i)) + (i % kMiniCqesPerArray) * kMiniCqeSize;
      const uint32_t array_stop = std::min(stop, (i | (kMiniCqesPerArray - 1)) + 1);
      do {
        cq.zip_i = ++i;  // before the callback: one that throws has consumed its mini CQE
        reported += per_mini(mini);
        mini += kMiniCqeSize;
      } while (i != array_stop);
    }
    if (i == n) end_session(cq);
    return reported;
  }

  // Hands the whole session back: resets its entries so no stale byte looks valid on a
  // later pass, and moves the consumer counter past it.
  [[gnu::noinline]] static void end_session(CqState& cq) noexcept {
    std::byte* e = cq.cqe64(cq.ci);
    for (uint32_t k = 0; k < cq.zip_n; ++k) {
      store_op_own(e, kCqeInvalidOpOwn);
      e += cq.cqe_size;
      if (e == cq.end) e = cq.base;
    }
    cq.ci += cq.zip_n;
    cq.zip_n = 0;
    cq.zip_i = 0;
  }

  [[gnu::noinline]] QueuePair* find_send_qp(uint32_t qpn) const {
    QueuePair* qp = qps_by_num_.find(qpn);
    if (qp == nullptr) unknown_send_qp(qpn);
    return qp;
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void unknown_send_qp(uint32_t qpn) {
    detail::cq_fault("send CQE for unknown QP number " + std::to_string(qpn));
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void bad_scatter(uint32_t byte_cnt, uint8_t opcode, uint32_t read_len) {
    detail::cq_fault("inline-scattered CQE of " + std::to_string(byte_cnt) + " bytes for a WQE of opcode " +
                     std::to_string(opcode) + " reading " + std::to_string(read_len) + " bytes");
  }

  template <class F>
  [[gnu::always_inline]] uint32_t complete_send(QueuePair* qp, uint32_t qpn, uint16_t wqe_counter, WcStatus status,
                                                uint32_t byte_cnt, const std::byte* scattered, uint32_t scatter_limit,
                                                F& cb) {
    const typename QueuePair::Retired w = qp->retire(wqe_counter);
    if (status != WcStatus::kSuccess) qp->error_ = true;
    if (w.opcode == MLX5_OPCODE_NOP) return 0;
    if (scattered != nullptr) {
      // Scatter-to-CQE: a small READ response arrived inside the CQE; it belongs in the
      // READ's local buffer.
      const uint32_t read_len = qp->read_len_[w.slot];
      if (w.opcode != MLX5_OPCODE_RDMA_READ || byte_cnt > read_len || byte_cnt > scatter_limit)
        bad_scatter(byte_cnt, w.opcode, read_len);
      std::memcpy(qp->read_dst_[w.slot], scattered, byte_cnt);
    }
    cb(SendCompletion{qpn, qp->wr_ids_[w.slot].wr_id, detail::wc_opcode_of(w.opcode), status});
    return 1;
  }

  // The BlueFlameReg of the descriptor's register, created on its first QP (control
  // path; a transport has few registers).
  BlueFlameReg& blueflame_reg(const SqDescriptor& d) {
    for (BlueFlameReg& r : bf_regs_) {
      if (r.base != d.bf_reg) continue;
      if (r.bf_size != d.bf_size)
        detail::bad_descriptor("send queue", "QP " + std::to_string(d.qpn) + " has BlueFlame size " +
                                                 std::to_string(d.bf_size) + " on a register other QPs use with size " +
                                                 std::to_string(r.bf_size));
      return r;
    }
    return bf_regs_.emplace_back(BlueFlameReg{d.bf_reg, d.bf_reg, d.bf_size});
  }

  Provider& provider_;
  DirectOptions opts_;
  uint32_t max_bbs_ = 1;
  CqDescriptor recv_cq_desc_{};
  CqDescriptor send_cq_desc_{};
  SrqDescriptor srq_desc_{};
  CqState recv_cq_;
  CqState send_cq_;
  uint32_t srq_capacity_ = 0;
  uint32_t srq_counter_ = 0;
  uint64_t sq_blocks_sum_ = 0;  // blocks of the send queues on the send CQ
  Meter meter_;
  std::deque<BlueFlameReg> bf_regs_;  // stable addresses: QPs point at them
  std::deque<QueuePair> qps_;
  QpnTable<QueuePair> qps_by_num_;
};

}  // namespace bkv::mlx5
