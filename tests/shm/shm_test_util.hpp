// Helpers shared by the core/shm tests: payload types and raw little-endian access to
// segment bytes (to check layouts byte by byte, independently of the structs).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "core/shm/delegationrpc.hpp"
#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"

namespace shmtest {

// A `Server` over zeroed process memory of Layout::segment_size(config), made with the
// config and any further arguments.
template <class Layout, class Server, class Config>
struct ServerFixture {
  template <class... Extra>
  explicit ServerFixture(Config c, Extra&&... extra)
      : cfg(c),
        seg(bkv::shm::Segment::create_process(Layout::segment_size(c))),
        server(seg.bytes(), c, std::forward<Extra>(extra)...) {}
  Config cfg;
  bkv::shm::Segment seg;
  Server server;
  std::byte* base() const { return seg.data(); }
};

struct Req {  // 24 bytes: request slot align_up(24 + 24, 64) = 64
  uint32_t client;
  uint32_t pad;
  uint64_t seq;
  uint64_t value;
};
static_assert(sizeof(Req) == 24);

struct Resp {  // 16 bytes: response slot align_up(8 + 16, 64) = 64
  uint64_t seq;
  uint64_t value;
};
static_assert(sizeof(Resp) == 16);

struct BigReq {  // 56 bytes: request slot align_up(24 + 56, 64) = 128
  uint64_t words[7];
};
static_assert(sizeof(BigReq) == 56);

struct HugeReq {  // 64 bytes: ipc/flux slot align_up(8 + 64, 64) = 128
  uint64_t words[8];
};
static_assert(sizeof(HugeReq) == 64);

// delegationrpc and ipc over the test messages.
using DLayout = bkv::shm::DelegationLayout<Req, Resp>;
using DServer = bkv::shm::DelegationServer<Req, Resp>;
using DClient = bkv::shm::DelegationClient<Req, Resp>;
using ILayout = bkv::shm::IpcLayout<Req, Resp>;
using IServer = bkv::shm::IpcServer<Req, Resp>;
using IClient = bkv::shm::IpcClient<Req, Resp>;

// What one poll of a client found: how many answers, and the token and response of the
// last one. `on_failed` (a failed call's token), when given, goes to the poll as is.
struct Polled {
  uint32_t answers = 0;
  uint64_t token = 0;
  Resp resp{};
};
template <class Client, class... OnFailed>
Polled poll_answers(Client& c, OnFailed&&... on_failed) {
  Polled p;
  p.answers = c.poll(
      [&](uint64_t t, const Resp& r) {
        p.token = t;
        p.resp = r;
      },
      std::forward<OnFailed>(on_failed)...);
  return p;
}

// The value a server computes from a request: tests check responses against it.
inline uint64_t answer(uint64_t v) { return v * 0x9E3779B97F4A7C15ull + 7; }

template <class T>
T load_le(const std::byte* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}
template <class T>
void store_le(std::byte* base, size_t off, T v) {
  std::memcpy(base + off, &v, sizeof(T));
}

// Unique /dev/shm name per test process.
inline std::string shm_name(const char* tag) {
  return "/bkv_test_" + std::string(tag) + "_" + std::to_string(::getpid());
}

}  // namespace shmtest
