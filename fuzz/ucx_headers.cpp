// Fuzzes the UCX transport's checks of a peer's message headers (transports/ucx): the
// AM user header and payload length of every work request's active message
// (am_header_error, am_payload_error) and the region announcement that carries a packed
// remote key (announcement_header_error, _payload_error, _region_error). They are pure
// functions of the bytes the transport's AM handlers receive, so no UCX worker runs
// here. Input: a selector byte (bit 0: announcement or AM; bit 1: the announcement's
// payload came by rendezvous; bit 2: a header of the length in the next byte instead of the right one),
// then the header's bytes (zeros past the end of the input) and the payload. Every
// input is accepted or refused with a rule; what is accepted keeps the rules the
// transport relies on after the checks (a known op, a payload of the header's length; a
// magic, an eager packed key of 1..kMaxPackedRkey bytes, a non-empty region inside 64
// bits, remote access bits only, a nonzero rkey).
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz/fuzz_input.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace bkv;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {

// The header as the handler sees it: `length` bytes (the input's next bytes, zeros past
// its end), in a buffer of exactly that size so that ASan sees any read past it.
std::vector<uint8_t> header_bytes(FuzzInput& in, size_t length) {
  std::vector<uint8_t> h(length, 0);
  const auto b = in.bytes(length);
  if (!b.empty()) std::memcpy(h.data(), b.data(), b.size());
  return h;
}

void am(FuzzInput& in, bool odd_length, uint8_t length_byte) {
  const size_t header_length = odd_length ? length_byte : sizeof(ucx::AmHeader);
  const std::vector<uint8_t> header = header_bytes(in, header_length);
  const auto payload = in.bytes(in.remaining());
  ucx::AmHeader h{};
  if (ucx::am_header_error(header.data(), header.size(), h) != nullptr) {
    if (header_length == sizeof(ucx::AmHeader) && ucx::valid_op(header[0])) violated("a well-formed AM header refused");
    return;
  }
  if (header_length != sizeof(ucx::AmHeader)) violated("an AM header of the wrong size accepted");
  if (!ucx::valid_op(static_cast<uint8_t>(h.op))) violated("an unknown AM op accepted");
  if (std::memcmp(&h, header.data(), sizeof h) != 0) violated("the accepted AM header differs from its bytes");
  if (ucx::am_payload_error(h, payload.size()) != nullptr) return;
  if (ucx::carries_data(h.op) ? payload.size() != h.length : !payload.empty())
    violated("an AM payload accepted whose length the header does not give");
}

void announcement(FuzzInput& in, bool rndv, bool odd_length, uint8_t length_byte) {
  const size_t header_length = odd_length ? length_byte : sizeof(ucx::RegionAnnouncementHeader);
  const std::vector<uint8_t> header = header_bytes(in, header_length);
  const auto payload = in.bytes(in.remaining());
  ucx::RegionAnnouncementHeader h{};
  if (ucx::announcement_header_error(header.data(), header.size(), h) != nullptr) return;
  if (header_length != sizeof h) violated("an announcement header of the wrong size accepted");
  if (h.magic != ucx::kRegionMagic) violated("an announcement without the magic accepted");
  if (ucx::announcement_payload_error(h, payload.size(), rndv) == nullptr) {
    if (rndv) violated("an announcement's key accepted by rendezvous");
    if (payload.size() != h.packed_length || payload.empty() || payload.size() > ucx::kMaxPackedRkey)
      violated("a packed key accepted whose length is not packed_length in 1..kMaxPackedRkey");
  }
  if (ucx::announcement_region_error(h) != nullptr) return;
  if (h.length == 0 || h.base > std::numeric_limits<uint64_t>::max() - h.length)
    violated("an empty or overflowing region accepted");
  if (h.access == 0 || (h.access & ~ucx::kRemoteAccessBits) != 0) violated("a region with bad access bits accepted");
  if (h.reserved != 0 || h.rkey == 0) violated("a region with a reserved word or rkey 0 accepted");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t selector = in.take<uint8_t>();
  const bool odd_length = (selector & 4) != 0;
  const uint8_t length_byte = odd_length ? in.take<uint8_t>() : 0;
  if (selector & 1)
    announcement(in, (selector & 2) != 0, odd_length, length_byte);
  else
    am(in, odd_length, length_byte);  // the AM handler's checks do not depend on rendezvous
  return 0;
}
