// Fuzzes the mlx5 completion decode (prm.hpp rules in direct_transport.hpp): the input
// writes arbitrary bytes into the receive and send completion queues of a direct
// transport (emulated NIC memory, never delivered by the emulator, so every CQE is
// the input's) while a few send WQEs are outstanding, and polls both queues with
// small budgets: plain CQEs, error CQEs, inline-scattered CQEs, compressed sessions
// with their mini-CQE arrays, resumed across polls. Every CQE is either decoded or
// refused with "mlx5 completion queue: ..." (std::runtime_error), which ends the run
// as it ends a real one; nothing may be read or written outside the queues.
//
// One end is the input's doing, not the transport's: forged bytes in the send CQ can
// make a well-formed CQE naming an outstanding WQE, which no driver can tell from the
// NIC's own; the transport then reuses those blocks, and the emulator, which knows it
// wrote no such CQE, refuses the next doorbell as a send-queue overflow. That refusal
// ends the input only when forged bytes went into the send CQ; without them it is the
// transport's bug and fails the run.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "transports/mlx5/emulator/emulated_transport.hpp"

using namespace bkv;
using namespace bkv::mlx5;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {

// The whole buffer of a CQ (base points at the 64-byte CQE inside the first entry).
std::span<std::byte> cq_bytes(const CqState& cq) {
  std::byte* buf = cq.base - cqe64_offset(cq.cqe_size);
  return {buf, size_t{cq.cqe_cnt()} * cq.cqe_size};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  emu::NodeOptions node;
  node.cqe_size = (in.take<uint8_t>() & 1) ? 128 : 64;
  DirectOptions o;
  o.sq_depth = 16;
  o.srq_size = 16;
  o.recv_cq_entries = 16;
  o.send_cq_entries = 64;
  emu::Fabric fabric;
  emu::EmulatedTransport a(fabric, node, o, emu::DeliveryMode::kManual);
  emu::EmulatedTransport b(fabric, node, o, emu::DeliveryMode::kManual);
  auto& qa = a.create_queue_pair();
  auto& qb = b.create_queue_pair();
  qa.connect(qb.local_info());
  qb.connect(qa.local_info());
  std::vector<std::byte> src(256), dst(256);
  const MemoryRegion src_mr = a.register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion dst_mr =
      b.register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
  const RemoteBuffer remote{reinterpret_cast<uint64_t>(dst.data()), dst_mr.rkey, 0, dst.size()};
  a.post_receives(16);
  const auto recv_cq = cq_bytes(a.inner().recv_cq_state());
  const auto send_cq = cq_bytes(a.inner().send_cq_state());

  bool send_cq_forged = false;
  try {
    for (uint32_t step = 0; step < 256 && !in.empty(); ++step) {
      switch (in.below(6)) {
        case 0:
        case 1: {  // forged bytes into one of the completion queues
          const bool into_send = in.below(2) != 0;
          const auto cq = into_send ? send_cq : recv_cq;
          send_cq_forged |= into_send;
          const size_t off = in.below(static_cast<uint32_t>(cq.size()));
          const auto b = in.bytes(std::min<size_t>(1 + in.below(64), cq.size() - off));
          std::memcpy(cq.data() + off, b.data(), b.size());
          break;
        }
        case 2: {
          const uint32_t max = 1 + in.below(20);
          const uint32_t got = a.poll_recv([](const RecvCompletion&) {}, max);
          if (got > max) violated("poll_recv reported more completions than asked");
          if (a.srq_posted() < 16) a.post_receives(16 - a.srq_posted());
          break;
        }
        case 3: {
          const uint32_t max = 1 + in.below(20);
          const uint32_t got = a.poll_send([](const SendCompletion&) {}, max);
          if (got > max) violated("poll_send reported more completions than asked");
          break;
        }
        case 4: {  // an outstanding WQE for send CQEs to name (never executed)
          const uint32_t len = 1 + in.below(255);
          const bool signaled = in.take<uint8_t>() & 1;
          PostResult r;
          switch (in.below(3)) {
            case 0: r = qa.post_write(src.data(), len, src_mr.lkey, remote, step, signaled); break;
            case 1: r = qa.post_write_imm(src.data(), len, src_mr.lkey, remote, step, step, signaled); break;
            default: r = qa.post_read(src.data(), len, src_mr.lkey, remote, step, signaled); break;
          }
          (void)r;
          qa.ring_doorbell();  // manual delivery: the emulated NIC reads the WQE, never executes it
          break;
        }
        default:
          break;
      }
    }
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind("mlx5 completion queue: ", 0) != 0) throw;
  } catch (const emu::Violation& v) {
    if (!send_cq_forged || std::string(v.what()).find(": send queue overflow: ") == std::string::npos) throw;
  }
  return 0;
}
