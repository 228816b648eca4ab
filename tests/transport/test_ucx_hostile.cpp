// The UCX transport against a hostile peer: a raw UCP worker (no transport of ours)
// that holds the right queue-pair numbers and tokens and sends hand-made active
// messages: duplicated, out-of-order and out-of-window sequence numbers, accesses to
// unregistered keys and ranges one byte past a region, zero-length requests, responses
// to requests never sent, READ responses of the wrong length or repeated, malformed
// headers. The victim must drop (and count) what breaks a rule, NAK what its memory
// protection refuses, and never write outside the range a valid request names.
#include <catch2/catch.hpp>

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/transport/conformance.hpp"
#include "tests/transport/raw_ucp_worker.hpp"
#include "transports/ucx/ucx_rma.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace bkv;
using ucx::AmHeader;
using ucx::AmOp;

namespace {

// A bare UCP worker over TCP with a handler for the transport's AM id that records
// every header it receives (the victim's ACKs, NAKs, READ requests and responses).
struct RawPeer {
  test::RawUcpWorker ucp{"tcp"};
  ucp_ep_h ep = nullptr;
  std::vector<std::byte> address = ucp.address();
  std::vector<AmHeader> received;
  std::vector<std::vector<std::byte>> received_data;

  RawPeer() { ucp.on_am(ucx::kAmId, &RawPeer::on_am, this); }
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t*) {
    auto* self = static_cast<RawPeer*>(arg);
    AmHeader h{};
    if (header_length == sizeof h) std::memcpy(&h, header, sizeof h);
    self->received.push_back(h);
    const auto* d = static_cast<const std::byte*>(data);
    self->received_data.emplace_back(d, d + length);
    return UCS_OK;
  }
  // Peer error handling, as the victim's endpoint over TCP has.
  void connect(const ucx::ConnectInfo& victim) { ep = ucp.connect(victim.address, UCP_ERR_HANDLING_MODE_PEER); }
  // Sends one active message and waits until UCX is done with the buffers, driving
  // `other` too (the victim's worker must progress for the connection to come up).
  template <class Pump>
  void send(const void* header, size_t header_length, const void* data, size_t length, Pump&& other) {
    ucp.send(ep, ucx::kAmId, header, header_length, data, length, other);
  }
  void progress() { ucp.progress(); }
};

constexpr uint32_t kRawQpNum = 0x77;
constexpr uint64_t kRawToken = 0xA5A5'0000'1234'5679ull;

struct Hostile {
  RawPeer raw;  // declared first: outlives the victim, whose close may still talk to it
  std::unique_ptr<ucx::UcxTransport> victim;
  ucx::QueuePair* qp = nullptr;
  std::vector<std::byte> region = std::vector<std::byte>(256, std::byte{0});
  MemoryRegion mr{};
  std::vector<RecvCompletion> recvs;
  std::vector<SendCompletion> sends;

  explicit Hostile(uint32_t receives = 32) {
    ucx::Config c;
    c.tls = "tcp";
    c.rma = false;  // every request on the active-message path checked here
    c.send_queue_depth = 64;
    c.srq_capacity = 64;
    victim = std::make_unique<ucx::UcxTransport>(c);
    qp = &victim->create_queue_pair();
    ucx::ConnectInfo me{};
    me.magic = ucx::kConnectMagic;
    me.qp_num = kRawQpNum;
    me.token = kRawToken;
    me.address_length = static_cast<uint32_t>(raw.address.size());
    std::memcpy(me.address, raw.address.data(), raw.address.size());
    qp->connect(me);
    raw.connect(qp->local_info());
    mr = victim->register_memory(region.data(), region.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
    if (receives > 0) victim->post_receives(receives);
  }
  AmHeader request(AmOp op, uint64_t seq, uint64_t offset, uint32_t length, uint32_t imm = 0) const {
    AmHeader h{};
    h.op = op;
    h.flags = ucx::kFlagAckRequested;
    h.dst_qp = qp->qp_num();
    h.src_qp = kRawQpNum;
    h.imm = imm;
    h.dst_token = qp->local_info().token;
    h.src_token = kRawToken;
    h.seq = seq;
    h.remote_addr = reinterpret_cast<uint64_t>(region.data()) + offset;
    h.rkey = mr.rkey;
    h.length = length;
    return h;
  }
  void send(const AmHeader& h, const std::vector<std::byte>& data = {}) {
    raw.send(&h, sizeof h, data.empty() ? nullptr : data.data(), data.size(), [&] { pump(); });
  }
  void pump() {
    raw.progress();
    victim->poll_recv([&](const RecvCompletion& c) { recvs.push_back(c); }, 64);
    victim->poll_send([&](const SendCompletion& c) { sends.push_back(c); }, 64);
  }
  // Pumps until `done` or, with no condition, for a fixed number of rounds (to show
  // that nothing more happens).
  template <class Pred>
  bool pump_until(Pred&& done, double seconds = 10.0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pump();
    }
    return true;
  }
  void settle() {
    for (int i = 0; i < 2000; ++i) pump();
  }
  size_t replies(AmOp op) const {
    size_t n = 0;
    for (const AmHeader& h : raw.received) n += h.op == op;
    return n;
  }
};

std::vector<std::byte> fill(size_t n, uint8_t v) { return std::vector<std::byte>(n, std::byte{v}); }

}  // namespace

TEST_CASE("ucx hostile: a duplicated sequence number is dropped and counted, the bytes stay", "[ucx][hostile]") {
  Hostile x;
  x.send(x.request(AmOp::kWriteImm, 0, 0, 16, 1), fill(16, 0xA1));
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 1; }));
  CHECK(x.recvs[0].imm == 1);
  CHECK(x.recvs[0].byte_len == 16);
  x.send(x.request(AmOp::kWriteImm, 0, 0, 16, 2), fill(16, 0xB2));  // seq 0 again
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 1; }));
  x.settle();
  CHECK(x.recvs.size() == 1);
  CHECK(x.region[0] == std::byte{0xA1});
  CHECK(x.region[15] == std::byte{0xA1});
  CHECK_FALSE(x.qp->in_error());
  // The stream goes on at seq 1.
  x.send(x.request(AmOp::kWriteImm, 1, 16, 8, 3), fill(8, 0xC3));
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 2; }));
  CHECK(x.recvs[1].imm == 3);
  CHECK(x.region[16] == std::byte{0xC3});
}

TEST_CASE("ucx hostile: requests that arrive out of order run in sequence order", "[ucx][hostile]") {
  Hostile x;
  x.send(x.request(AmOp::kWriteImm, 2, 0, 8, 12), fill(8, 0x22));
  x.send(x.request(AmOp::kWriteImm, 1, 0, 8, 11), fill(8, 0x11));
  x.settle();
  CHECK(x.recvs.empty());  // waiting for seq 0
  CHECK(x.victim->parked_requests() == 2);
  // A second copy of a parked sequence number is a duplicate too.
  x.send(x.request(AmOp::kWriteImm, 2, 0, 8, 99), fill(8, 0x99));
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 1; }));
  x.send(x.request(AmOp::kWriteImm, 0, 0, 8, 10), fill(8, 0x00));
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 3; }));
  CHECK(x.recvs[0].imm == 10);
  CHECK(x.recvs[1].imm == 11);
  CHECK(x.recvs[2].imm == 12);
  CHECK(x.region[0] == std::byte{0x22});  // the last in sequence order wrote last
  CHECK(x.victim->protocol_errors() == 1);
}

TEST_CASE("ucx hostile: sequence numbers beyond the park window are dropped, up to 2^64-1", "[ucx][hostile]") {
  Hostile x;
  for (uint64_t seq : {uint64_t{1} << 16 | 1, uint64_t{1} << 32, ~uint64_t{0}}) {
    x.send(x.request(AmOp::kWriteImm, seq, 0, 8, 7), fill(8, 0x77));
  }
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 3; }));
  x.settle();
  CHECK(x.recvs.empty());
  CHECK(x.region[0] == std::byte{0});
  x.send(x.request(AmOp::kWriteImm, 0, 0, 8, 1), fill(8, 0x01));
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 1; }));
  CHECK(x.region[0] == std::byte{0x01});
}

TEST_CASE("ucx hostile: a WRITE one byte past the region, or with an unknown rkey, is NAKed and writes nothing",
          "[ucx][hostile]") {
  Hostile x;
  const bool past_end = GENERATE(true, false);
  INFO((past_end ? "one byte past the end" : "unknown rkey"));
  AmHeader h = past_end ? x.request(AmOp::kWrite, 0, 1, 256) : x.request(AmOp::kWrite, 0, 0, 256);
  if (!past_end) h.rkey = x.mr.rkey + 1000;
  x.send(h, fill(256, 0xEE));
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kNak) == 1; }));
  for (const AmHeader& r : x.raw.received)
    if (r.op == AmOp::kNak) CHECK(r.status == static_cast<uint8_t>(WcStatus::kRemoteAccessError));
  for (std::byte b : x.region) REQUIRE(b == std::byte{0});
  CHECK(x.qp->in_error());
  // The responder is in error: the next request is flushed, not executed.
  x.send(x.request(AmOp::kWriteImm, 1, 0, 8, 1), fill(8, 0x01));
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kNak) == 2; }));
  CHECK(x.raw.received.back().status == static_cast<uint8_t>(WcStatus::kWrFlushError));
  CHECK(x.recvs.empty());
  CHECK(x.region[0] == std::byte{0});
}

TEST_CASE("ucx hostile: a WRITE ending exactly at the region end lands", "[ucx][hostile]") {
  Hostile x;
  x.send(x.request(AmOp::kWrite, 0, 200, 56), fill(56, 0x5E));
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kAck) == 1; }));
  CHECK(x.region[199] == std::byte{0});
  CHECK(x.region[200] == std::byte{0x5E});
  CHECK(x.region[255] == std::byte{0x5E});
  CHECK_FALSE(x.qp->in_error());
}

TEST_CASE("ucx hostile: a zero-length WRITE+IMM needs no key and completes with length 0", "[ucx][hostile]") {
  Hostile x;
  AmHeader h = x.request(AmOp::kWriteImm, 0, 0, 0, 42);
  h.rkey = 0xDEAD;
  h.remote_addr = 0;
  x.send(h);
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 1; }));
  CHECK(x.recvs[0].imm == 42);
  CHECK(x.recvs[0].byte_len == 0);
  CHECK(x.replies(AmOp::kNak) == 0);
  CHECK_FALSE(x.qp->in_error());
}

TEST_CASE("ucx hostile: a READ past the region is NAKed, a READ of the region's last bytes answered",
          "[ucx][hostile]") {
  Hostile x;
  for (size_t i = 0; i < x.region.size(); ++i) x.region[i] = std::byte(static_cast<uint8_t>(i));
  x.send(x.request(AmOp::kReadRequest, 0, 240, 16));
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kReadResponse) == 1; }));
  REQUIRE(x.raw.received_data.back().size() == 16);
  CHECK(x.raw.received_data.back()[0] == std::byte{240});
  CHECK(x.raw.received_data.back()[15] == std::byte{255});
  x.send(x.request(AmOp::kReadRequest, 1, 241, 16));
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kNak) == 1; }));
  CHECK(x.raw.received.back().status == static_cast<uint8_t>(WcStatus::kRemoteAccessError));
}

TEST_CASE("ucx hostile: malformed messages are dropped and counted", "[ucx][hostile]") {
  Hostile x;
  SECTION("a header of the wrong size") {
    const AmHeader h = x.request(AmOp::kWriteImm, 0, 0, 8, 1);
    const std::vector<std::byte> d = fill(8, 1);
    x.raw.send(&h, sizeof h - 8, d.data(), d.size(), [&] { x.pump(); });
  }
  SECTION("an unknown op") {
    AmHeader h = x.request(AmOp::kWriteImm, 0, 0, 8, 1);
    h.op = static_cast<AmOp>(0);
    x.send(h, fill(8, 1));
    h.op = static_cast<AmOp>(static_cast<uint8_t>(AmOp::kReadResponse) + 1);
    x.send(h, fill(8, 1));
    h.op = static_cast<AmOp>(255);
    x.send(h, fill(8, 1));
  }
  SECTION("a payload shorter or longer than the header says") {
    x.send(x.request(AmOp::kWriteImm, 0, 0, 16, 1), fill(8, 1));
    x.send(x.request(AmOp::kWriteImm, 0, 0, 4, 1), fill(8, 1));
  }
  SECTION("a READ request carrying a payload") {
    x.send(x.request(AmOp::kReadRequest, 0, 0, 8), fill(8, 1));
  }
  SECTION("a wrong source queue pair or token") {
    AmHeader h = x.request(AmOp::kWriteImm, 0, 0, 8, 1);
    h.src_qp = kRawQpNum + 1;
    x.send(h, fill(8, 1));
    h = x.request(AmOp::kWriteImm, 0, 0, 8, 1);
    h.src_token ^= 1;
    x.send(h, fill(8, 1));
  }
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() > 0; }));
  x.settle();
  CHECK(x.recvs.empty());
  CHECK(x.raw.received.empty());  // nothing answered
  for (std::byte b : x.region) REQUIRE(b == std::byte{0});
  CHECK_FALSE(x.qp->in_error());
  // The honest stream is intact: seq 0 still runs.
  x.send(x.request(AmOp::kWriteImm, 0, 0, 8, 5), fill(8, 0x55));
  REQUIRE(x.pump_until([&] { return x.recvs.size() == 1; }));
  CHECK(x.region[0] == std::byte{0x55});
}

TEST_CASE("ucx hostile: responses to requests never sent, of the wrong length, or repeated, touch nothing",
          "[ucx][hostile]") {
  Hostile x;
  // An ACK before the victim sent anything.
  {
    AmHeader h = x.request(AmOp::kAck, 0, 0, 0);
    h.flags = 0;
    x.send(h);
    REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 1; }));
  }
  // The victim READs 16 bytes from the raw peer (the raw peer answers by hand).
  std::vector<std::byte> dst(32, std::byte{0});
  const MemoryRegion dmr = x.victim->register_memory(dst.data(), dst.size(), kAccessLocalWrite);
  REQUIRE(x.qp->post_read(dst.data() + 8, 16, dmr.lkey, RemoteBuffer{0x1000, 0x77, 0, 16}, 9, true) == PostResult::kOk);
  x.qp->ring_doorbell();
  REQUIRE(x.pump_until([&] { return x.replies(AmOp::kReadRequest) == 1; }));
  const AmHeader read = x.raw.received.back();
  CHECK(read.length == 16);
  AmHeader resp = x.request(AmOp::kReadResponse, read.seq, 0, 8);
  resp.flags = 0;
  x.send(resp, fill(8, 0x88));  // wrong length
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 2; }));
  resp.seq = read.seq + 1;  // a request never sent
  resp.length = 16;
  x.send(resp, fill(16, 0x99));
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 3; }));
  x.settle();
  CHECK(x.sends.empty());
  for (std::byte b : dst) REQUIRE(b == std::byte{0});
  // The right answer completes the READ; a repeat of it afterwards writes nothing.
  resp.seq = read.seq;
  x.send(resp, fill(16, 0x42));
  REQUIRE(x.pump_until([&] { return x.sends.size() == 1; }));
  CHECK(x.sends[0].wr_id == 9);
  CHECK(x.sends[0].status == WcStatus::kSuccess);
  CHECK(dst[8] == std::byte{0x42});
  CHECK(dst[23] == std::byte{0x42});
  CHECK(dst[7] == std::byte{0});
  CHECK(dst[24] == std::byte{0});
  x.send(resp, fill(16, 0x13));
  x.settle();
  CHECK(dst[8] == std::byte{0x42});
  CHECK(x.sends.size() == 1);
  // A NAK for the completed READ changes nothing either.
  AmHeader nak = x.request(AmOp::kNak, read.seq, 0, 0);
  nak.flags = 0;
  nak.status = static_cast<uint8_t>(WcStatus::kRemoteAccessError);
  x.send(nak);
  x.settle();
  CHECK_FALSE(x.qp->in_error());
  CHECK(x.sends.size() == 1);
}

TEST_CASE("ucx hostile: receiver not ready holds the expected request, later ones wait behind it in order",
          "[ucx][hostile]") {
  Hostile x(0);  // no receive posted
  x.send(x.request(AmOp::kWriteImm, 0, 0, 8, 10), fill(8, 0x10));
  x.send(x.request(AmOp::kWriteImm, 2, 0, 8, 12), fill(8, 0x12));
  x.send(x.request(AmOp::kWriteImm, 1, 0, 8, 11), fill(8, 0x11));
  x.send(x.request(AmOp::kWriteImm, 0, 0, 8, 99), fill(8, 0x99));  // a duplicate of the waiting one
  REQUIRE(x.pump_until([&] { return x.victim->protocol_errors() == 1; }));
  x.settle();
  CHECK(x.recvs.empty());
  CHECK(x.region[0] == std::byte{0});
  // One receive at a time: each lets exactly the next request in order run.
  for (uint32_t k = 1; k <= 3; ++k) {
    x.victim->post_receives(1);
    REQUIRE(x.pump_until([&] { return x.recvs.size() == k; }));
    x.settle();
    CHECK(x.recvs.size() == k);
    CHECK(x.recvs.back().imm == 9 + k);
    CHECK(x.region[0] == std::byte(static_cast<uint8_t>(0x0F + k)));
  }
  CHECK(x.victim->protocol_errors() == 1);
  CHECK_FALSE(x.qp->in_error());
}

namespace {
// Two honest transports over shared memory, for the long run below.
struct UcxSmPair {
  using T = ucx::UcxTransport;
  std::unique_ptr<T> make() {
    ucx::Config c;
    c.tls = "sm,self";
    c.send_queue_depth = 64;
    c.srq_capacity = 256;
    return std::make_unique<T>(c);
  }
};
}  // namespace

TEST_CASE("ucx: a run of 2^16 + 300 WRITE+IMMs crosses the 16-bit mark of every sequence counter in order",
          "[ucx][long]") {
  // Sequence numbers, AM numbers, the responder's expected number and the park window
  // (2^16) all pass 65536 here; a counter kept in 16 bits anywhere would break the order.
  UcxSmPair h;
  bkv::test::check_write_imm_order_and_integrity(h, (1u << 16) + 300, 24);
}

TEST_CASE("ucx: WRITE+IMMs of every size around the rendezvous threshold arrive intact and in order",
          "[ucx][rndv]") {
  // UCX_RNDV_THRESH (read when a transport is created) puts the eager/rendezvous
  // switch at 4 KiB; each size from 4 KiB - 80 to 4 KiB + 80 goes once, over TCP and
  // over shared memory.
  struct Env {
    Env() { setenv("UCX_RNDV_THRESH", "4096", 1); }
    ~Env() { unsetenv("UCX_RNDV_THRESH"); }
  } env;
  const std::string tls = GENERATE(std::string("tcp"), std::string("sm,self"));
  INFO("tls " << tls);
  struct Harness {
    using T = ucx::UcxTransport;
    std::string tls;
    std::unique_ptr<T> make() {
      ucx::Config c;
      c.tls = tls;
      c.send_queue_depth = 64;
      c.srq_capacity = 256;
      c.rma = false;
      return std::make_unique<T>(c);
    }
  } h{tls};
  bkv::test::LinkedPair<Harness> p(h);
  constexpr uint32_t kLow = 4096 - 80, kHigh = 4096 + 80;
  std::vector<uint64_t> offs;
  uint64_t total = 0;
  for (uint32_t len = kLow; len <= kHigh; ++len) {
    offs.push_back(total);
    total += len;
  }
  std::vector<std::byte> src(total), dst(total + 1, std::byte{0});
  for (uint64_t i = 0; i < total; ++i) src[i] = std::byte(static_cast<uint8_t>(i * 7 + i / 251));
  const MemoryRegion smr = p.a->register_memory(src.data(), src.size(), kAccessLocalWrite);
  const MemoryRegion dmr = p.b->register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
  p.b->post_receives(p.b->srq_capacity());
  const uint32_t n = kHigh - kLow + 1;
  uint32_t posted = 0;
  REQUIRE(bkv::test::pump_until(
      [&] {
        while (posted < n && p.qa->send_queue_free() > 0) {
          const bool sig = posted % 8 == 7 || posted + 1 == n;
          REQUIRE(p.qa->post_write_imm(src.data() + offs[posted], kLow + posted, smr.lkey, p.remote(dmr, offs[posted]),
                                       posted, posted, sig) == PostResult::kOk);
          ++posted;
        }
        p.qa->ring_doorbell();
        p.pump();
      },
      [&] { return p.recvs.size() == n && !p.sends.empty() && p.sends.back().wr_id == n - 1; }));
  for (uint32_t i = 0; i < n; ++i) {
    INFO("message " << i << " of " << kLow + i << " bytes");
    REQUIRE(p.recvs[i].imm == i);
    REQUIRE(p.recvs[i].byte_len == kLow + i);
  }
  CHECK(std::memcmp(src.data(), dst.data(), total) == 0);
  CHECK(dst[total] == std::byte{0});
  for (const SendCompletion& c : p.sends) CHECK(c.status == WcStatus::kSuccess);
  CHECK(p.b->rendezvous_receives() > 0);  // the upper sizes took the rendezvous path
}

TEST_CASE("ucx hostile: a region announcement's packed key of exactly kMaxPackedRkey bytes is accepted, one more "
          "refused", "[ucx][hostile]") {
  ucx::RegionAnnouncementHeader h{};
  h.magic = ucx::kRegionMagic;
  for (const uint32_t n : {1u, ucx::kMaxPackedRkey}) {
    h.packed_length = n;
    INFO("packed key of " << n << " bytes");
    CHECK(ucx::announcement_payload_error(h, n, false) == nullptr);
    CHECK(ucx::announcement_payload_error(h, n, true) != nullptr);  // eager only
  }
  h.packed_length = ucx::kMaxPackedRkey + 1;
  CHECK(ucx::announcement_payload_error(h, ucx::kMaxPackedRkey + 1, false) != nullptr);
  h.packed_length = 0;
  CHECK(ucx::announcement_payload_error(h, 0, false) != nullptr);
}
