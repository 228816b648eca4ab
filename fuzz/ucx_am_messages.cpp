// Fuzzes the ucx-am baseline's checks of a peer's messages (backends/ucx_am): the KV
// request and response (message_well_formed, request_verdict) and the data benchmark's
// request (data_request_verdict). They are pure functions of the bytes the AM handlers
// receive and of the job's shape, so no UCX worker runs here; what a check lets through
// goes on to what the daemon does with it, on a real store: kv::execute for a KV
// request, BlobStore's acquire/commit (a put: the payload copied into the block) or
// pin/unpin (a get) for a data request. Input: a selector byte (bits 0-1: KV request,
// KV response, data request; bit 2: the payload came by rendezvous; bit 3: lengths from
// the next byte instead of the right ones), then the message's bytes. Every input is dropped,
// answered with an error or served, never read or written out of bounds; what is served
// keeps the rules the daemon relies on (a client of the job, a valid request for this
// rank and a key in range, a put's payload of its length and at most the largest value).
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/ucx_am/ucx_am_data.hpp"
#include "core/kv/blob_store.hpp"
#include "core/kv/store.hpp"
#include "fuzz/fuzz_input.hpp"

using namespace bkv;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {

constexpr uint32_t kRank = 1, kNp = 2, kClients = 3;
constexpr uint64_t kKeys = 16;
constexpr uint32_t kMaxValue = 256;

// The message as the handler sees it: `length` bytes (zeros past the input's end) in a
// buffer of exactly that size.
std::vector<uint8_t> message_bytes(FuzzInput& in, size_t length) {
  std::vector<uint8_t> m(length, 0);
  const auto b = in.bytes(length);
  if (!b.empty()) std::memcpy(m.data(), b.data(), b.size());
  return m;
}

void kv_request(FuzzInput& in, bool rndv, size_t header_length, size_t length) {
  const std::vector<uint8_t> bytes = message_bytes(in, length);
  if (!ucx_am::message_well_formed(header_length, bytes.size(), sizeof(ucx_am::RequestMsg), rndv)) return;
  if (header_length != 0 || rndv || bytes.size() != sizeof(ucx_am::RequestMsg)) violated("a malformed request accepted");
  ucx_am::RequestMsg m;
  std::memcpy(&m, bytes.data(), sizeof m);
  static kv::Store store(kRank, kKeys);
  switch (ucx_am::request_verdict(m, uint64_t{kNp} * kClients)) {
    case ucx_am::RequestVerdict::kUnknownClient:
      if (m.client < kNp * kClients) violated("a request of a client of the job dropped");
      return;
    case ucx_am::RequestVerdict::kMalformed:
      if (m.req.valid()) violated("a valid request answered as malformed");
      return;
    case ucx_am::RequestVerdict::kServe: {
      if (m.client >= kNp * kClients || !m.req.valid()) violated("an invalid request served");
      const kv::Response r = kv::execute(store, m.req);
      if (!r.valid()) violated("kv::execute answered an invalid response");
      const bool ours = m.req.rank == kRank && m.req.key < kKeys;
      if (ours == r.is_error()) violated("kv::execute's error does not follow the rank and key range");
      return;
    }
  }
  violated("an unknown request verdict");
}

void kv_response(FuzzInput& in, bool rndv, size_t header_length, size_t length) {
  const std::vector<uint8_t> bytes = message_bytes(in, length);
  if (!ucx_am::message_well_formed(header_length, bytes.size(), sizeof(ucx_am::ResponseMsg), rndv)) return;
  ucx_am::ResponseMsg m;
  std::memcpy(&m, bytes.data(), sizeof m);
  (void)m.resp.valid();  // the client counts an invalid one as an error
}

void data_request(FuzzInput& in, size_t header_length) {
  const std::vector<uint8_t> header = message_bytes(in, header_length);
  const auto payload = in.bytes(in.remaining());
  if (header_length != sizeof(ucx_am::DataAmRequest)) return;  // the handler drops it ("header of the wrong size")
  ucx_am::DataAmRequest h;
  std::memcpy(&h, header.data(), sizeof h);
  static kv::BlobStore store(kRank, kKeys, kMaxValue, 2);
  const ucx_am::DataRequestVerdict v =
      ucx_am::data_request_verdict(h, payload.size(), uint64_t{kNp} * kClients, kRank, kKeys, kMaxValue);
  if (v.unknown_client) {
    if (h.client < kNp * kClients) violated("a data request of a client of the job dropped");
    return;
  }
  if (v.error != kv::DataError::kNone) return;
  const kv::DataRequest& r = h.req;
  if (h.client >= kNp * kClients || !r.valid() || r.rank != kRank || r.key >= kKeys)
    violated("a data request served that is not for this rank, in range and valid");
  if (r.is_put()) {
    if (payload.size() != r.length || r.length > kMaxValue) violated("a put served whose payload is not its length");
    const auto b = store.acquire();
    if (!b) violated("the store ran out of blocks");
    std::memcpy(store.block_data(*b), payload.data(), payload.size());
    store.commit(r.key, *b, r.length);
    return;
  }
  if (!payload.empty()) violated("a get served with a payload");
  if (const auto value = store.pin(r.key)) {
    if (value->length > kMaxValue) violated("a stored value longer than the largest");
    store.unpin(value->block);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t selector = in.take<uint8_t>();
  const bool rndv = (selector & 4) != 0;
  // An odd length byte: for the KV messages, bit 7 a 1-byte AM header and bits 0-6 the
  // payload's length; for a data request, the header's length.
  const bool odd_length = (selector & 8) != 0;
  const uint8_t odd = odd_length ? in.take<uint8_t>() : 0;
  const size_t kv_header = odd_length ? odd >> 7 : 0, kv_length = odd & 0x7F;
  switch (selector & 3) {
    case 0: kv_request(in, rndv, kv_header, odd_length ? kv_length : sizeof(ucx_am::RequestMsg)); break;
    case 1: kv_response(in, rndv, kv_header, odd_length ? kv_length : sizeof(ucx_am::ResponseMsg)); break;
    default: data_request(in, odd_length ? odd : sizeof(ucx_am::DataAmRequest)); break;
  }
  return 0;
}
