// ipc: per-client SPSC request/response rings, tokens, validation, skip rules.
#include <catch2/catch.hpp>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/random.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "tests/shm/shm_test_util.hpp"

using namespace bkv::shm;
using namespace shmtest;
using Catch::Matchers::Contains;

namespace {

struct Fixture : ServerFixture<ILayout, IServer, IpcConfig> {
  explicit Fixture(IpcConfig c, IpcSkipConfig skip = {}) : ServerFixture(c, skip) {}
  size_t client_off(uint32_t c) const { return 128 + c * ILayout::client_stride(cfg.depth); }
  size_t req_off(uint32_t c, uint64_t pos) const { return client_off(c) + 64 + (pos & (cfg.depth - 1)) * 64; }
  size_t resp_off(uint32_t c, uint64_t pos) const {
    return client_off(c) + 64 + cfg.depth * 64 + (pos & (cfg.depth - 1)) * 64;
  }
};
}  // namespace

TEST_CASE("ipc layout: header, per-client claim line, stamped request and response slots", "[shm][ipc]") {
  STATIC_REQUIRE(ILayout::kReqSlotSize == 64);
  STATIC_REQUIRE(ILayout::kRespSlotSize == 64);
  STATIC_REQUIRE(IpcLayout<shmtest::BigReq, shmtest::HugeReq>::kReqSlotSize == 64);    // 8 + 56
  STATIC_REQUIRE(IpcLayout<shmtest::BigReq, shmtest::HugeReq>::kRespSlotSize == 128);  // 8 + 64
  const IpcConfig cfg{3, 4};
  REQUIRE(ILayout::segment_size(cfg) == 128 + 3 * (64 + 4 * 64 + 4 * 64));
  Fixture f(cfg);
  std::byte* b = f.base();
  CHECK(std::memcmp(b, "1VCPIVKB", 8) == 0);  // "BKVIPCV1" little-endian
  CHECK(load_le<uint32_t>(b, 8) == 1);
  CHECK(load_le<uint32_t>(b, 12) == 3);
  CHECK(load_le<uint32_t>(b, 16) == 4);
  CHECK(load_le<uint32_t>(b, 20) == 64);
  CHECK(load_le<uint32_t>(b, 24) == 64);
  CHECK(load_le<uint8_t>(b, 28) == 1);

  IClient c = IClient::connect(f.seg.bytes(), 2);
  CHECK(load_le<uint8_t>(b, f.client_off(2)) == 1);  // claimed
  REQUIRE(c.call(Req{2, 0, 9, 90}, 500) == IpcCallStatus::kOk);
  CHECK(load_le<uint32_t>(b, f.req_off(2, 0)) == 1);      // lap stamp of position 0
  CHECK(load_le<uint32_t>(b, f.req_off(2, 0) + 4) == 0);  // token: first free request slot
  CHECK(load_le<uint64_t>(b, f.req_off(2, 0) + 8 + 8) == 9);

  REQUIRE(f.server.poll() == 1);
  auto r = f.server.recv();
  REQUIRE(r.has_value());
  CHECK(r->handle.client == 2);
  CHECK(r->handle.token == 0);
  CHECK(r->payload.value == 90);
  CHECK(load_le<uint32_t>(b, f.req_off(2, 0)) == 1);  // the server never writes the client's ring
  REQUIRE(f.server.reply(r->handle, Resp{9, 91}) == IpcReplyStatus::kOk);
  CHECK(load_le<uint32_t>(b, f.resp_off(2, 0)) == 1);
  CHECK(load_le<uint32_t>(b, f.resp_off(2, 0) + 4) == 0);
  CHECK(load_le<uint64_t>(b, f.resp_off(2, 0) + 16) == 91);
  const Polled got = poll_answers(c);
  REQUIRE(got.answers == 1);
  CHECK(got.token == 500);
  CHECK(got.resp.value == 91);
  CHECK(c.in_flight() == 0);
}

TEST_CASE("ipc call is Full at depth - out-of-order replies free the right tokens", "[shm][ipc]") {
  Fixture f(IpcConfig{1, 4});
  IClient c = IClient::connect(f.seg.bytes());
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(c.call(Req{0, 0, i, i}, 100 + i) == IpcCallStatus::kOk);
  REQUIRE(c.call(Req{}, 0) == IpcCallStatus::kFull);
  REQUIRE(c.in_flight() == 4);
  REQUIRE(f.server.poll() == 4);
  std::vector<IpcHandle> hs;
  while (auto r = f.server.recv()) {
    REQUIRE(r->payload.seq == hs.size());  // FIFO per client
    hs.push_back(r->handle);
  }
  REQUIRE(hs.size() == 4);
  // Reply 2, then 0.
  REQUIRE(f.server.reply(hs[2], Resp{2, 0}) == IpcReplyStatus::kOk);
  REQUIRE(f.server.reply(hs[0], Resp{0, 0}) == IpcReplyStatus::kOk);
  std::vector<uint64_t> got;
  REQUIRE(c.poll([&](uint64_t t, const Resp& r) {
    REQUIRE(t == 100 + r.seq);
    got.push_back(t);
  }) == 2);
  REQUIRE(got == std::vector<uint64_t>{102, 100});
  // Two new calls reuse the freed request slots; ring positions keep advancing.
  REQUIRE(c.call(Req{0, 0, 4, 4}, 104) == IpcCallStatus::kOk);
  REQUIRE(c.call(Req{0, 0, 5, 5}, 105) == IpcCallStatus::kOk);
  REQUIRE(c.call(Req{}, 0) == IpcCallStatus::kFull);
  REQUIRE(f.server.poll() == 2);
  auto a = *f.server.recv();
  auto b = *f.server.recv();
  CHECK(a.payload.seq == 4);
  CHECK(b.payload.seq == 5);
  CHECK(a.handle.token != hs[1].token);  // tokens of the still-outstanding calls are not reused
  CHECK(a.handle.token != hs[3].token);
  CHECK(b.handle.token != hs[1].token);
  CHECK(b.handle.token != hs[3].token);
  for (auto h : {hs[1], hs[3], a.handle, b.handle}) REQUIRE(f.server.reply(h, Resp{}) == IpcReplyStatus::kOk);
  REQUIRE(c.poll([](uint64_t, const Resp&) {}) == 4);
  CHECK(c.in_flight() == 0);
}

TEST_CASE("ipc validates tokens and handles from shared memory", "[shm][ipc]") {
  Fixture f(IpcConfig{2, 4});
  IClient c = IClient::connect(f.seg.bytes());
  REQUIRE(c.client_index() == 0);
  // A buggy client 1 publishes a request with an out-of-range token.
  store_le<uint32_t>(f.base(), f.req_off(1, 0) + 4, 9);
  store_le<uint32_t>(f.base(), f.req_off(1, 0), 1);
  REQUIRE(c.call(Req{0, 0, 0, 0}, 7) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 2);
  auto r = f.server.recv();
  REQUIRE(r.has_value());
  CHECK(r->handle.client == 0);
  REQUIRE_FALSE(f.server.recv().has_value());
  CHECK(f.server.bad_requests() == 1);
  CHECK(f.server.outstanding(1) == 0);
  // Forged handles.
  CHECK(f.server.reply(IpcHandle{2, 0}, Resp{}) == IpcReplyStatus::kBadClient);
  CHECK(f.server.reply(IpcHandle{0, 4}, Resp{}) == IpcReplyStatus::kBadToken);
  CHECK(f.server.reply(IpcHandle{1, 0}, Resp{}) == IpcReplyStatus::kNotOutstanding);
  // A token of client 0 with no request awaiting a reply, while another one is owed.
  CHECK(f.server.reply(IpcHandle{0, 3}, Resp{}) == IpcReplyStatus::kNotOutstanding);
  // A response whose token the client does not await (written by hand, as a buggy
  // server would) is dropped and counted.
  store_le<uint32_t>(f.base(), f.resp_off(0, 0) + 4, 3);
  store_le<uint32_t>(f.base(), f.resp_off(0, 0), 1);
  REQUIRE(c.poll([](uint64_t, const Resp&) { FAIL("stray response delivered"); }) == 0);
  CHECK(c.protocol_errors() == 1);
  CHECK(c.in_flight() == 1);
}

TEST_CASE("ipc connect: claims, validation of the segment", "[shm][ipc]") {
  const IpcConfig cfg{2, 4};
  SECTION("claims") {
    Fixture f(cfg);
    IClient a = IClient::connect(f.seg.bytes(), 1);
    IClient b = IClient::connect(f.seg.bytes());
    CHECK(b.client_index() == 0);
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes()), Contains("all 2 client indices are taken"));
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes(), 1), Contains("client index 1 is already taken"));
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes(), 2), Contains("client index 2 out of range"));
  }
  SECTION("magic") {
    Fixture f(cfg);
    store_le<uint8_t>(f.base(), 0, 0);
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes()), Contains("bad magic"));
  }
  SECTION("version") {
    Fixture f(cfg);
    store_le<uint32_t>(f.base(), 8, 7);
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes()), Contains("unsupported version 7"));
  }
  SECTION("payload types") {
    Fixture f(cfg);
    REQUIRE_THROWS_WITH((IpcClient<shmtest::HugeReq, Resp>::connect(f.seg.bytes())),
                        Contains("different request/response types"));
  }
  SECTION("size") {
    Segment big = Segment::create_process(ILayout::segment_size(cfg) + 4096);
    IServer s(std::span<std::byte>(big.data(), ILayout::segment_size(cfg)), cfg);
    REQUIRE_THROWS_WITH(IClient::connect(big.bytes()), Contains("does not match the header"));
  }
  SECTION("depth must be a power of two") {
    Segment s = Segment::create_process(ILayout::segment_size(IpcConfig{2, 4}));
    REQUIRE_THROWS_WITH(IServer(s.bytes(), IpcConfig{2, 3}), Contains("queue depth 3 is not a power of two"));
    REQUIRE_THROWS_WITH(IServer(s.bytes(), IpcConfig{2, 4}, IpcSkipConfig{8, 3}), Contains("power-of-two period"));
  }
  SECTION("shutdown") {
    Fixture f(cfg);
    IClient a = IClient::connect(f.seg.bytes());
    f.server.shutdown();
    CHECK(a.call(Req{}, 0) == IpcCallStatus::kServerDisconnected);
    REQUIRE_THROWS_WITH(IClient::connect(f.seg.bytes()), Contains("shut down"));
  }
}

TEST_CASE("poll_with_skip rule 1: a client with depth requests owed is not scanned", "[shm][ipc]") {
  Fixture f(IpcConfig{1, 2}, IpcSkipConfig{1000, 1});  // back-off effectively off
  IClient c = IClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{}, 0) == IpcCallStatus::kOk);
  REQUIRE(c.call(Req{}, 1) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll_with_skip() == 2);
  auto a = *f.server.recv();
  auto b = *f.server.recv();
  const uint64_t scanned = f.server.clients_scanned();
  REQUIRE(f.server.poll_with_skip() == 0);
  CHECK(f.server.clients_scanned() == scanned);  // skipped
  REQUIRE(f.server.poll() == 0);
  CHECK(f.server.clients_scanned() == scanned + 1);  // poll() scans everyone
  REQUIRE(f.server.reply(a.handle, Resp{}) == IpcReplyStatus::kOk);
  REQUIRE(f.server.poll_with_skip() == 0);
  CHECK(f.server.clients_scanned() == scanned + 2);  // scanned again once a reply went out
  (void)b;
}

TEST_CASE("poll_with_skip rule 2: idle clients are backed off, and seen within `period` polls",
          "[shm][ipc]") {
  const IpcSkipConfig skip{4, 8};
  Fixture f(IpcConfig{2, 4}, skip);
  IClient busy = IClient::connect(f.seg.bytes(), 0);
  IClient idle = IClient::connect(f.seg.bytes(), 1);
  // Client 0 posts before every poll; client 1 stays idle.
  auto active_round = [&] {
    REQUIRE(busy.call(Req{}, 0) == IpcCallStatus::kOk);
    REQUIRE(f.server.poll_with_skip() == 1);
    auto r = *f.server.recv();
    REQUIRE(f.server.reply(r.handle, Resp{}) == IpcReplyStatus::kOk);
    REQUIRE(busy.poll([](uint64_t, const Resp&) {}) == 1);
  };
  for (int i = 0; i < 16; ++i) active_round();  // client 1 passes idle_after
  const uint64_t start = f.server.clients_scanned();
  for (int i = 0; i < 64; ++i) active_round();
  // Client 0 is scanned every poll, client 1 on exactly one poll in `period`.
  CHECK(f.server.clients_scanned() - start == 64 + 64 / skip.period);
  // The idle client posts: it is found within `period` polls, and poll() finds it at once.
  REQUIRE(idle.call(Req{1, 0, 0, 0}, 0) == IpcCallStatus::kOk);
  uint32_t polls = 0;
  uint32_t found = 0;
  while (found == 0 && polls < skip.period) {
    found = f.server.poll_with_skip();
    ++polls;
  }
  REQUIRE(found == 1);
  REQUIRE(f.server.recv()->handle.client == 1);
  REQUIRE(idle.call(Req{1, 0, 1, 0}, 0) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll_with_skip() == 1);  // no longer idle: scanned at once
}

TEST_CASE("ipc flat combining drains client by client, starting client rotates", "[shm][ipc]") {
  Fixture f(IpcConfig{3, 4});
  std::vector<IClient> cs;
  for (int i = 0; i < 3; ++i) cs.push_back(IClient::connect(f.seg.bytes()));
  for (uint32_t round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < 3; ++i)
      for (uint64_t k = 0; k < 2; ++k) REQUIRE(cs[i].call(Req{i, 0, k, 0}, k) == IpcCallStatus::kOk);
    REQUIRE(f.server.poll() == 6);
    std::vector<uint32_t> order;
    while (auto r = f.server.recv()) {
      order.push_back(r->handle.client);
      REQUIRE(f.server.reply(r->handle, Resp{}) == IpcReplyStatus::kOk);
    }
    const uint32_t s = round % 3;
    REQUIRE(order == std::vector<uint32_t>{s, s, (s + 1) % 3, (s + 1) % 3, (s + 2) % 3, (s + 2) % 3});
    for (auto& c : cs) REQUIRE(c.poll([](uint64_t, const Resp&) {}) == 2);
  }
}

TEST_CASE("ipc serve: recv and reply in one pass, in recv order, with recv's checks", "[shm][ipc]") {
  Fixture f(IpcConfig{3, 4});
  std::vector<IClient> cs;
  for (int i = 0; i < 2; ++i) cs.push_back(IClient::connect(f.seg.bytes()));
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint64_t k = 0; k < 2; ++k) REQUIRE(cs[0].call(Req{0, 0, k, 10 + k}, 100 + k) == IpcCallStatus::kOk);
    REQUIRE(cs[1].call(Req{1, 0, 0, 20}, 200) == IpcCallStatus::kOk);
    // Client index 2 is nobody's: a forged request with an out-of-range token.
    store_le<uint32_t>(f.base(), f.req_off(2, round) + 4, 9);
    store_le<uint32_t>(f.base(), f.req_off(2, round), 1);
    REQUIRE(f.server.poll() == 4);
    std::vector<uint64_t> values;
    std::vector<uint32_t> answered;
    const uint32_t n = f.server.serve(
        [&](const Req& q) {
          values.push_back(q.value);
          return Resp{q.seq, shmtest::answer(q.value)};
        },
        [&](uint32_t client) { answered.push_back(client); });
    CHECK(n == 3);
    CHECK(f.server.bad_requests() == round + 1);
    // The poll starts at client `round` (rotation): 0 0 1 [2], then 1 [2] 0 0.
    if (round == 0) {
      CHECK(values == std::vector<uint64_t>{10, 11, 20});
      CHECK(answered == std::vector<uint32_t>{0, 0, 1});
    } else {
      CHECK(values == std::vector<uint64_t>{20, 10, 11});
      CHECK(answered == std::vector<uint32_t>{1, 0, 0});
    }
    CHECK_FALSE(f.server.recv().has_value());  // serve took every request of the poll
    for (uint32_t c = 0; c < 3; ++c) CHECK(f.server.outstanding(c) == 0);
    CHECK(f.server.reply(IpcHandle{0, 0}, Resp{}) == IpcReplyStatus::kNotOutstanding);
    std::vector<uint64_t> got;
    for (auto& c : cs)
      c.poll([&](uint64_t t, const Resp& r) {
        got.push_back(t);
        CHECK(r.value == shmtest::answer(r.seq + (t >= 200 ? 20 : 10)));
      });
    CHECK(got == std::vector<uint64_t>{100, 101, 200});
    CHECK(load_le<uint32_t>(f.base(), f.resp_off(2, 0)) == 0);  // the forged request got no answer
  }
  for (auto& c : cs) CHECK(c.protocol_errors() == 0);
}

TEST_CASE("ipc serve: after an exception from respond, recv() goes on at the next request", "[shm][ipc]") {
  Fixture f(IpcConfig{1, 4});
  IClient c = IClient::connect(f.seg.bytes());
  for (uint64_t k = 0; k < 3; ++k) REQUIRE(c.call(Req{0, 0, k, 1 + k}, k) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 3);
  int responded = 0;
  CHECK_THROWS_AS(f.server.serve(
                      [&](const Req& q) {
                        if (++responded == 2) throw std::runtime_error("respond failed");
                        return Resp{q.seq, shmtest::answer(q.value)};
                      },
                      [](uint32_t) {}),
                  std::runtime_error);
  // The first request was answered, the second taken (the exception is the caller's),
  // the third is still there.
  const auto r = f.server.recv();
  REQUIRE(r.has_value());
  CHECK(r->payload.seq == 2);
  CHECK_FALSE(f.server.recv().has_value());
  std::vector<uint64_t> got;
  c.poll([&](uint64_t t, const Resp&) { got.push_back(t); });
  CHECK(got == std::vector<uint64_t>{0});
}

TEST_CASE("ipc random interleavings over many laps: exactly-once, FIFO per client", "[shm][ipc]") {
  const IpcConfig cfg{3, 4};
  Fixture f(cfg, IpcSkipConfig{2, 2});
  std::vector<IClient> cs;
  for (int i = 0; i < 3; ++i) cs.push_back(IClient::connect(f.seg.bytes()));
  bkv::Rng rng(bkv::derive_seed(2, {7}));
  std::vector<uint64_t> next(3, 0), seen(3, 0), answered(3, 0);
  std::vector<IpcRequest<Req>> held;
  uint64_t calls = 0;
  constexpr uint64_t kCalls = 4000;
  for (uint64_t step = 0; step < 200000 && (calls < kCalls || answered[0] + answered[1] + answered[2] < kCalls); ++step) {
    const uint64_t op = rng.below(8);
    if (op < 3 && calls < kCalls) {
      const uint32_t i = static_cast<uint32_t>(rng.below(3));
      const auto st = cs[i].call(Req{i, 0, next[i], next[i] + 1}, next[i]);
      if (st == IpcCallStatus::kOk) {
        ++next[i];
        ++calls;
      } else {
        REQUIRE(st == IpcCallStatus::kFull);
      }
    } else if (op < 5) {
      if (rng.below(2) == 0) f.server.poll(); else f.server.poll_with_skip();
      while (auto r = f.server.recv()) {
        REQUIRE(r->handle.client == r->payload.client);
        REQUIRE(r->payload.seq == seen[r->handle.client]++);
        held.push_back(*r);
      }
    } else if (op < 7 && !held.empty()) {
      const size_t k = rng.below(held.size());
      const auto r = held[k];
      held.erase(held.begin() + static_cast<long>(k));
      REQUIRE(f.server.reply(r.handle, Resp{r.payload.seq, shmtest::answer(r.payload.value)}) == IpcReplyStatus::kOk);
    } else {
      const uint32_t i = static_cast<uint32_t>(rng.below(3));
      cs[i].poll([&](uint64_t t, const Resp& r) {
        REQUIRE(t == r.seq);
        REQUIRE(r.value == shmtest::answer(t + 1));
        ++answered[i];
      });
    }
  }
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(answered[i] == next[i]);
    CHECK(cs[i].protocol_errors() == 0);
  }
  CHECK(calls == kCalls);
  CHECK(f.server.bad_requests() == 0);
}

TEST_CASE("ipc over /dev/shm: server and client on two mappings of one object", "[shm][ipc]") {
  const IpcConfig cfg{2, 4};
  const std::string name = shmtest::shm_name("ipc_two_maps");
  Segment owner = Segment::create_shm(name, ILayout::segment_size(cfg), true);
  IServer server(owner.bytes(), cfg);
  Segment attached = Segment::attach_shm(name, ILayout::segment_size(cfg));
  REQUIRE(attached.data() != owner.data());
  IClient c = IClient::connect(attached.bytes());
  for (uint64_t round = 0; round < 10; ++round) {  // several laps of the depth-4 rings
    for (uint64_t k = 0; k < 4; ++k) REQUIRE(c.call(Req{0, 0, round * 4 + k, k}, k) == IpcCallStatus::kOk);
    REQUIRE(server.poll() == 4);
    while (auto r = server.recv()) REQUIRE(server.reply(r->handle, Resp{r->payload.seq, shmtest::answer(r->payload.value)}) == IpcReplyStatus::kOk);
    REQUIRE(c.poll([&](uint64_t t, const Resp& r) {
      REQUIRE(r.seq == round * 4 + t);
      REQUIRE(r.value == shmtest::answer(t));
    }) == 4);
  }
}

TEST_CASE("ipc refuses a second reply while other requests of the client are held", "[shm][ipc]") {
  Fixture f(IpcConfig{1, 4});
  IClient c = IClient::connect(f.seg.bytes());
  REQUIRE(c.call(Req{0, 0, 1, 10}, 1) == IpcCallStatus::kOk);
  REQUIRE(c.call(Req{0, 0, 2, 20}, 2) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 2);
  auto r1 = f.server.recv();
  auto r2 = f.server.recv();
  REQUIRE(r1.has_value());
  REQUIRE(r2.has_value());
  REQUIRE(f.server.reply(r1->handle, Resp{1, 11}) == IpcReplyStatus::kOk);
  CHECK(f.server.reply(r1->handle, Resp{1, 12}) == IpcReplyStatus::kNotOutstanding);
  CHECK(f.server.outstanding(0) == 1);
  REQUIRE(f.server.reply(r2->handle, Resp{2, 21}) == IpcReplyStatus::kOk);
  std::vector<uint64_t> got;
  REQUIRE(c.poll([&](uint64_t t, const Resp&) { got.push_back(t); }) == 2);
  CHECK(got == std::vector<uint64_t>{1, 2});
  CHECK(c.protocol_errors() == 0);
}

TEST_CASE("ipc drops a request whose token still awaits a reply", "[shm][ipc]") {
  Fixture f(IpcConfig{2, 4});
  // A buggy client 1 publishes two requests with token 2 (written by hand).
  for (uint64_t pos = 0; pos < 2; ++pos) {
    store_le<uint32_t>(f.base(), f.req_off(1, pos) + 4, 2);
    store_le<uint32_t>(f.base(), f.req_off(1, pos), 1);
  }
  REQUIRE(f.server.poll() == 2);
  auto r = f.server.recv();
  REQUIRE(r.has_value());
  CHECK(r->handle.token == 2);
  REQUIRE_FALSE(f.server.recv().has_value());
  CHECK(f.server.bad_requests() == 1);
  CHECK(f.server.outstanding(1) == 1);
  REQUIRE(f.server.reply(r->handle, Resp{}) == IpcReplyStatus::kOk);
  CHECK(f.server.reply(r->handle, Resp{}) == IpcReplyStatus::kNotOutstanding);
}

TEST_CASE("ipc request hints: poll_hinted finds what poll finds, in order, with the same skip-rule state",
          "[shm][ipc]") {
  // Two servers driven alike, one with request hints: 70 clients (two hint words), the
  // skip rule's counts saturating after 2 empty scans. Polls of every kind (poll_hinted
  // against poll, poll_with_skip on both, poll on the hinted one), requests taken
  // partly before the next poll, replies out of order.
  const IpcConfig cfg{70, 4};
  const IpcSkipConfig skip{2, 4};
  Fixture plain(cfg, skip), hinted(cfg, skip);
  hinted.server.keep_request_hints();
  REQUIRE(plain.server.request_hints() == nullptr);
  REQUIRE(hinted.server.request_hints() != nullptr);
  std::vector<IClient> pc, hc;
  for (uint32_t i = 0; i < cfg.max_clients; ++i) {
    pc.push_back(IClient::connect(plain.seg.bytes(), i));
    hc.push_back(IClient::connect(hinted.seg.bytes(), i));
    hc.back().use_request_hints(hinted.server.request_hints());
  }
  std::vector<IpcRequest<Req>> held;  // taken by recv() on both (the same), not yet replied
  bkv::Rng rng(bkv::derive_seed(5, {11}));
  std::vector<uint64_t> next(cfg.max_clients, 0);
  uint64_t found = 0, taken = 0, hinted_polls = 0;
  for (int step = 0; step < 60000; ++step) {
    const uint64_t op = rng.below(10);
    if (op < 4) {  // a few clients call
      for (uint64_t k = rng.below(4); k-- > 0;) {
        const uint32_t i = static_cast<uint32_t>(rng.below(rng.below(4) == 0 ? cfg.max_clients : 5));
        const Req r{i, 0, next[i], next[i] + 1};
        const IpcCallStatus a = pc[i].call(r, next[i]), b = hc[i].call(r, next[i]);
        REQUIRE(a == b);
        if (a == IpcCallStatus::kOk) ++next[i];
      }
    } else if (op < 6) {
      const uint64_t kind = rng.below(4);
      uint32_t a, b;
      if (kind == 0) {
        a = plain.server.poll_with_skip();
        b = hinted.server.poll_with_skip();
      } else if (kind == 1) {
        a = plain.server.poll();
        b = hinted.server.poll();
      } else {
        a = plain.server.poll();
        b = hinted.server.poll_hinted();
        ++hinted_polls;
      }
      REQUIRE(a == b);
      REQUIRE(plain.server.clients_scanned() == hinted.server.clients_scanned());
      found += a;
      // Some or all of what the poll found is taken now; the rest waits for the next poll.
      for (uint64_t k = rng.below(2) == 0 ? ~uint64_t{0} : rng.below(3); k-- > 0;) {
        auto ra = plain.server.recv();
        auto rb = hinted.server.recv();
        REQUIRE(ra.has_value() == rb.has_value());
        if (!ra) break;
        REQUIRE(ra->handle.client == rb->handle.client);
        REQUIRE(ra->handle.token == rb->handle.token);
        REQUIRE(ra->payload.seq == rb->payload.seq);
        held.push_back(*ra);
        ++taken;
      }
    } else if (op < 8 && !held.empty()) {
      const size_t k = rng.below(held.size());
      const IpcRequest<Req> r = held[k];
      held.erase(held.begin() + static_cast<long>(k));
      REQUIRE(plain.server.reply(r.handle, Resp{r.payload.seq, 0}) == IpcReplyStatus::kOk);
      REQUIRE(hinted.server.reply(r.handle, Resp{r.payload.seq, 0}) == IpcReplyStatus::kOk);
    } else {
      const uint32_t i = static_cast<uint32_t>(rng.below(cfg.max_clients));
      REQUIRE(pc[i].poll([](uint64_t, const Resp&) {}) == hc[i].poll([](uint64_t, const Resp&) {}));
    }
  }
  CHECK(found > 10000);
  CHECK(taken > 10000);
  CHECK(hinted_polls > 5000);
  CHECK(plain.server.bad_requests() == 0);
  CHECK(hinted.server.bad_requests() == 0);
}

TEST_CASE("ipc request hints: without keep_request_hints poll_hinted is poll", "[shm][ipc]") {
  Fixture f(IpcConfig{3, 4});
  std::vector<IClient> cs;
  for (uint32_t i = 0; i < 3; ++i) cs.push_back(IClient::connect(f.seg.bytes(), i));
  REQUIRE(f.server.request_hints() == nullptr);
  REQUIRE(cs[2].call(Req{2, 0, 0, 0}, 0) == IpcCallStatus::kOk);
  REQUIRE(cs[0].call(Req{0, 0, 0, 0}, 0) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll_hinted() == 2);
  CHECK(f.server.clients_scanned() == 3);
  CHECK(f.server.recv()->handle.client == 0);
  CHECK(f.server.recv()->handle.client == 2);
}

TEST_CASE("ipc reply flags: each response published sets its client's flag, and only its", "[shm][ipc]") {
  Fixture f(IpcConfig{3, 4});
  std::vector<IClient> cs;
  for (uint32_t i = 0; i < 3; ++i) cs.push_back(IClient::connect(f.seg.bytes(), i));
  uint8_t flags[3] = {0, 0, 0};
  uint8_t* const at[3] = {&flags[0], &flags[1], &flags[2]};
  uint8_t* const two[2] = {&flags[0], &flags[1]};
  CHECK_THROWS_WITH(f.server.use_reply_flags(two), Contains("2 flags for 3 clients"));
  f.server.use_reply_flags(at);
  // serve(): clients 0 and 2 called, client 1 did not.
  REQUIRE(cs[0].call(Req{0, 0, 1, 0}, 10) == IpcCallStatus::kOk);
  REQUIRE(cs[2].call(Req{2, 0, 2, 0}, 20) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 2);
  REQUIRE(f.server.serve([](const Req& r) { return Resp{r.seq, 0}; }, [](uint32_t) {}) == 2);
  CHECK(flags[0] == 1);
  CHECK(flags[1] == 0);
  CHECK(flags[2] == 1);
  // Cleared by the client (backend::Client's part): a poll finds the responses.
  flags[0] = flags[2] = 0;
  CHECK(cs[0].poll([](uint64_t, const Resp&) {}) == 1);
  CHECK(cs[2].poll([](uint64_t, const Resp&) {}) == 1);
  // reply(): client 1's request, answered after recv().
  REQUIRE(cs[1].call(Req{1, 0, 3, 0}, 30) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 1);
  const auto r = f.server.recv();
  REQUIRE(r.has_value());
  CHECK(flags[1] == 0);  // received, not answered
  REQUIRE(f.server.reply(r->handle, Resp{3, 0}) == IpcReplyStatus::kOk);
  CHECK(flags[0] == 0);
  CHECK(flags[1] == 1);
  CHECK(flags[2] == 0);
  // A refused reply sets nothing.
  flags[1] = 0;
  CHECK(f.server.reply(r->handle, Resp{3, 0}) == IpcReplyStatus::kNotOutstanding);
  CHECK(flags[1] == 0);
  // No flags again: nothing is written.
  f.server.use_reply_flags({});
  REQUIRE(cs[0].call(Req{0, 0, 4, 0}, 11) == IpcCallStatus::kOk);
  REQUIRE(f.server.poll() == 1);
  REQUIRE(f.server.serve([](const Req& q) { return Resp{q.seq, 0}; }, [](uint32_t) {}) == 1);
  CHECK(flags[0] == 0);
}
