// Fuzzes copyrpc's receive path: a fake peer writes arbitrary batches (bytes plus the
// immediate value) into a victim context's receive ring through the instant loopback
// transport, and the victim takes them in through drain(), the same path every
// transport's completions reach. Between batches the victim calls, receives, replies
// and flushes, so requests, responses to its own calls, wrap markers and credit all
// meet forged values. The victim must never read or write out of bounds and never
// throw; a batch that breaks a rule stops the endpoint with an EndpointError, after
// which calls and replies on it fail with kEndpointError. Every call the victim made ends
// at most once, by a response (no longer than its allowance admits) or by being failed
// back, and once the endpoint stopped, the next drain leaves none pending.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "fuzz/fuzz_input.hpp"
#include "transports/loopback/instant.hpp"

using namespace bkv;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {

constexpr uint64_t kRing = 4096;
using T = loopback::InstantTransport;
using Ctx = copyrpc::Context<T, uint64_t>;


struct FakePeer {
  loopback::InstantFabric fabric;
  T victim_t{fabric, 64, 256}, peer_t{fabric, 1024, 256};
  Ctx victim;
  uint32_t ep = 0;
  copyrpc::EndpointInfo<T::ConnectInfo> target{};
  T::QueuePair* qp = nullptr;
  std::vector<std::byte> src = std::vector<std::byte>(kRing);
  std::vector<std::byte> peer_ring = std::vector<std::byte>(kRing);
  uint64_t consumer_word = 0;
  MemoryRegion src_mr{}, ring_mr{}, consumer_mr{};
  uint64_t offset = 0;  // where the peer writes next in the victim's ring

  static copyrpc::ContextConfig cfg() {
    copyrpc::ContextConfig c;
    c.ring_size = kRing;
    c.srq_size = 16;
    c.cq_poll_batch = 4;
    return c;
  }
  FakePeer() : victim(victim_t, cfg()) {
    ep = victim.create_endpoint();
    target = victim.local_info(ep);
    qp = &peer_t.create_queue_pair();
    qp->connect(target.qp);
    src_mr = peer_t.register_memory(src.data(), src.size(), kAccessLocalWrite);
    ring_mr = peer_t.register_memory(peer_ring.data(), peer_ring.size(), kAccessLocalWrite | kAccessRemoteWrite);
    consumer_mr = peer_t.register_memory(&consumer_word, 8, kAccessLocalWrite | kAccessRemoteRead);
    copyrpc::EndpointInfo<T::ConnectInfo> me{};
    me.qp = qp->local_info();
    me.recv_ring_addr = reinterpret_cast<uint64_t>(peer_ring.data());
    me.recv_ring_size = kRing;
    me.recv_ring_rkey = ring_mr.rkey;
    me.consumer_addr = reinterpret_cast<uint64_t>(&consumer_word);
    me.consumer_rkey = consumer_mr.rkey;
    me.initial_credit = kRing / 4;
    victim.connect(ep, me);
    peer_t.post_receives(1024);
  }

  // The peer's side of the transport: take the victim's batches (their content is not
  // the subject here) and keep receives posted; reap the peer's send completions.
  void peer_poll() {
    const uint32_t n = peer_t.poll_recv([](const RecvCompletion&) {}, ~0u);
    if (n > 0) peer_t.post_receives(n);
    peer_t.poll_send([](const SendCompletion&) {}, ~0u);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  FakePeer f;
  std::vector<std::byte> payload(kRing);
  uint64_t token = 0;
  std::vector<uint8_t> pending;  // by token: a call accepted and not yet ended
  std::vector<uint32_t> allowance;  // by token: the response allowance the call asked for
  auto end_call = [&](uint64_t t) {
    if (t >= pending.size() || !pending[t]) violated("a call ended twice, or one never made");
    pending[t] = 0;
  };
  // A response is never longer than reply() sends for its call (the receive path refuses
  // one above max_reply_payload of the call's internal allowance).
  auto on_response = [&](uint64_t t, std::span<const std::byte> p) {
    end_call(t);
    if (p.size() > copyrpc::max_reply_payload(copyrpc::internal_allowance(allowance[t])))
      violated("a response longer than its call's allowance reached on_response");
  };
  auto on_failed_call = [&](uint64_t t, copyrpc::EndpointError e) {
    if (e == copyrpc::EndpointError::kNone || e != f.victim.error(f.ep)) violated("a call failed back without its endpoint's reason");
    end_call(t);
  };
  auto drained = [&]() {
    if (f.victim.error(f.ep) != copyrpc::EndpointError::kNone && f.victim.calls_in_flight(f.ep) != 0)
      violated("a stopped endpoint kept pending calls after a drain");
  };
  for (uint32_t step = 0; step < 256 && !in.empty(); ++step) {
    switch (in.below(6)) {
      case 0: {  // a batch: immediate, length, bytes (the rest of src keeps older bytes)
        const uint32_t raw_imm = in.take<uint32_t>();
        // Mostly immediates near real ones (so the checks past the first are reached),
        // sometimes any 32-bit value.
        const uint32_t imm = (raw_imm & 0x8000'0000u) ? raw_imm : raw_imm % (kRing / 32 + 2);
        const uint64_t at = f.offset & (kRing - 1);
        const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(in.take<uint16_t>() % (kRing + 1), kRing - at));
        const auto b = in.bytes(len);
        std::memcpy(f.src.data(), b.data(), b.size());
        if (len == 0) break;
        const RemoteBuffer dst{f.target.recv_ring_addr + at, f.target.recv_ring_rkey, 0, len};
        if (f.qp->post_write_imm(f.src.data(), len, f.src_mr.lkey, dst, imm, 0, true) != PostResult::kOk) break;
        f.qp->ring_doorbell();
        f.offset += uint64_t{imm} * 32;
        f.victim.drain(on_response, on_failed_call);
        drained();
        break;
      }
      case 1: {  // the victim calls the peer (its call ids are what forged responses name)
        const uint32_t len = in.below(64);
        const uint32_t allowance_asked = in.below(64);
        const auto r = f.victim.call(f.ep, std::span<const std::byte>(payload.data(), len), allowance_asked, token);
        pending.push_back(r.ok() ? 1 : 0);
        allowance.push_back(allowance_asked);
        ++token;
        if (f.victim.error(f.ep) != copyrpc::EndpointError::kNone && r.status != copyrpc::CallStatus::kEndpointError)
          violated("a call on a failed endpoint did not fail");
        break;
      }
      case 2: {  // the victim answers what it received
        copyrpc::RecvHandle h;
        while (f.victim.recv(h)) {
          if (h.endpoint() != f.ep || h.payload().size() > kRing) violated("a received request outside its ring");
          const uint32_t len = in.below(static_cast<uint32_t>(copyrpc::max_reply_payload(h.allowance())) + 1);
          const auto st = f.victim.reply(std::move(h), std::span<const std::byte>(payload.data(), len));
          if (st != copyrpc::CallStatus::kOk && st != copyrpc::CallStatus::kEndpointError) violated("reply refused");
        }
        break;
      }
      case 3:
        f.victim.flush();
        f.peer_poll();
        break;
      case 4:  // the peer's consumer word, read by the victim's RDMA READ
        f.consumer_word = in.take<uint64_t>();
        break;
      default:
        f.victim.poll(on_response, on_failed_call);
        drained();
        f.peer_poll();
        break;
    }
  }
  return 0;
}
