// What the fuzzers of the shm request/response protocols (delegationrpc, ipc) share:
// their messages, a client with the tokens it has open, the forged write into the
// segment and the attach to a segment of another length.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>

#include "core/shm/common.hpp"
#include "fuzz/fuzz_input.hpp"

namespace bkv::fuzz {

struct ShmReq {
  uint64_t a, b;
};
struct ShmResp {
  uint64_t v;
};

template <class Client>
struct TrackedClient {
  Client c;
  std::map<uint64_t, bool> open;  // tokens issued and not yet answered

  // The client was handed `tok` back: it must be one it issued and has not got back.
  void end_call(uint64_t tok) {
    auto it = open.find(tok);
    if (it == open.end()) violated("a client was handed a token it never issued or already got back");
    open.erase(it);
  }
};

// A write of 1 to 16 input bytes into the segment, as a forger with write access would
// do: half of the time at an offset below `low_end` (the header and ring control), else
// anywhere.
inline void forged_write(FuzzInput& in, std::span<std::byte> mem, uint32_t low_end) {
  const bool low = in.take<uint8_t>() & 1;
  const size_t off = low ? in.below(low_end) : in.below(static_cast<uint32_t>(mem.size()));
  const auto b = in.bytes(std::min<size_t>(1 + in.below(16), mem.size() - off));
  std::memcpy(mem.data() + off, b.data(), b.size());
}

// An attach to the first `len` bytes of the segment (len from the input): the protocol's
// header check `validate` refuses them with ShmError, or accepts a header whose declared
// shape fills exactly that many bytes (a forged header may declare another shape).
template <class Layout, class Validate>
void attach_to_prefix(FuzzInput& in, std::span<std::byte> mem, Validate&& validate, const char* violation) {
  const size_t len = in.below(static_cast<uint32_t>(mem.size()) + 1);
  try {
    if (Layout::segment_size(validate(mem.subspan(0, len))) != len) violated(violation);
  } catch (const shm::ShmError&) {
  }
}

}  // namespace bkv::fuzz
