// What the fuzzers of the shm request/response protocols (delegationrpc, ipc) share:
// their messages, a client with the tokens it has open, and the forged write into the
// segment.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>

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

}  // namespace bkv::fuzz
