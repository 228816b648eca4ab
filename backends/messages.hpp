// What daemons and clients exchange: requests and responses as kv bytes (validated when
// they come from a peer), the inter-daemon (flux) message, and the token a daemon keeps
// with each call it issues to find who waits for the answer.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "core/kv/types.hpp"
#include "core/shm/flux.hpp"
#include "core/shm/ipc.hpp"

namespace bkv::backend {

using kv::Request;
using kv::Response;

// Requests travel as the kv::Request bytes (copyrpc payload = RemoteRequest), responses
// as kv::Response bytes: both fixed size and validated by the receiver.
using kv::as_bytes;
// Decodes bytes from a peer (kv::decode_*: size and validity checked).
inline bool decode(std::span<const std::byte> b, Request& out) noexcept {
  const auto r = kv::decode_request(b);
  if (r) out = *r;
  return r.has_value();
}
inline bool decode(std::span<const std::byte> b, Response& out) noexcept {
  const auto r = kv::decode_response(b);
  if (r) out = *r;
  return r.has_value();
}

// Inter-daemon (flux) message: a request to execute on the target's shard, a request to
// send over copyrpc on the caller's behalf (Meta), or a response.
struct FluxMsg {
  enum Kind : uint8_t { kExecute = 1, kRemoteCall = 2, kResponse = 3 };
  uint8_t kind = 0;
  uint8_t pad[7] = {};
  Request req{};
  Response resp{};
};
static_assert(sizeof(FluxMsg) == 48 && std::is_trivially_copyable_v<FluxMsg>);

// What a daemon remembers about a call it issued (copyrpc or flux), returned with the
// response: who waits for the answer and where.
//   origin        waiter                         slot
//   kDelegation   delegation client id           its response slot
//   kIpc          ipc client id                  the ipc handle's token
//   kFlux         calling daemon (flux source)   the caller's flux slot
//   kClient       (a direct client's own call: nobody else waits)  the client's token
//   kParked       index of the parked request    0
struct CallToken {
  enum Origin : uint8_t { kDelegation = 1, kIpc = 2, kFlux = 3, kClient = 4, kParked = 5 };
  uint8_t origin = 0;
  uint32_t waiter = 0;
  uint32_t slot = 0;

  static CallToken delegation(uint32_t client, uint32_t resp_slot) noexcept { return {kDelegation, client, resp_slot}; }
  static CallToken ipc(const shm::IpcHandle& h) noexcept { return {kIpc, h.client, h.token}; }
  static CallToken flux(const shm::FluxReplyToken& t) noexcept { return {kFlux, t.source, t.slot}; }
  static CallToken own_call(uint32_t client_token = 0) noexcept { return {kClient, 0, client_token}; }
  static CallToken parked(uint32_t index) noexcept { return {kParked, index, 0}; }

  shm::IpcHandle ipc_handle() const noexcept { return shm::IpcHandle{waiter, slot}; }
  shm::FluxReplyToken flux_reply() const noexcept { return shm::FluxReplyToken{waiter, slot}; }
};

}  // namespace bkv::backend
