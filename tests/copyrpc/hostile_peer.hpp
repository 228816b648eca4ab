#pragma once
// A fake copyrpc peer for hostile-input tests: a raw queue pair connected to one endpoint
// of a victim Context, writing hand-made batches (metadata, headers, payload bytes of its
// choosing) into the victim's receive ring, as a buggy or malicious peer could.

#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "transports/loopback/instant.hpp"

namespace bkv::test {

struct HostilePeer {
  using T = loopback::InstantTransport;
  using Ctx = copyrpc::Context<T, uint64_t>;

  loopback::InstantFabric fabric;
  T victim_t{fabric}, attacker_t{fabric};
  Ctx victim;
  uint32_t ep;
  copyrpc::EndpointInfo<T::ConnectInfo> target;
  T::QueuePair* qp;
  std::vector<std::byte> src = std::vector<std::byte>(8192);
  std::vector<std::byte> fake_ring = std::vector<std::byte>(4096);
  MemoryRegion src_mr, ring_mr;
  uint64_t offset = 0;  // where the next batch lands in the victim's ring

  // `receives`: receive buffers the attacker keeps posted (for the victim's WRITE+IMMs).
  HostilePeer(const copyrpc::ContextConfig& cfg, uint32_t receives) : victim(victim_t, cfg) {
    ep = victim.create_endpoint();
    target = victim.local_info(ep);
    qp = &attacker_t.create_queue_pair();
    qp->connect(target.qp);
    src_mr = attacker_t.register_memory(src.data(), src.size(), kAccessLocalWrite);
    ring_mr = attacker_t.register_memory(fake_ring.data(), fake_ring.size(), kAccessLocalWrite | kAccessRemoteWrite);
    copyrpc::EndpointInfo<T::ConnectInfo> me{};
    me.qp = qp->local_info();
    me.recv_ring_addr = reinterpret_cast<uint64_t>(fake_ring.data());
    me.recv_ring_size = 4096;
    me.recv_ring_rkey = ring_mr.rkey;
    me.initial_credit = 1024;
    victim.connect(ep, me);
    attacker_t.post_receives(receives);
  }
  // Writes `len` bytes of src at the current ring offset with the immediate `imm` (the
  // batch's 32-byte units), and moves the offset by the units.
  void write(uint32_t len, uint32_t imm) {
    const RemoteBuffer dst{target.recv_ring_addr + (offset & 4095), target.recv_ring_rkey, 0, len};
    REQUIRE(qp->post_write_imm(src.data(), len, src_mr.lkey, dst, imm, 0, true) == PostResult::kOk);
    qp->ring_doorbell();
    offset += uint64_t{imm} * 32;
  }
  // The victim drains what arrived; returns its endpoint's error state.
  template <class OnFailedCall>
  copyrpc::EndpointError poll(OnFailedCall&& on_failed_call) {
    victim.drain([](uint64_t, std::span<const std::byte>) {}, on_failed_call);
    return victim.error(ep);
  }
  void meta(uint64_t ret, uint64_t grant, uint32_t count, size_t at = 0) {
    copyrpc::store_metadata(src.data() + at, ret, grant, count);
  }
  void header(size_t at, uint32_t call_id, uint32_t units, uint32_t len) {
    copyrpc::store_header(src.data() + at, copyrpc::MessageHeader{call_id, units, len});
  }
};

}  // namespace bkv::test
