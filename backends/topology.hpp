// Which threads hold copyrpc endpoints to which, per backend. Every rank computes the
// same list, creates the endpoints that involve it, exchanges EndpointInfo for each
// connection with the peer rank (MPI, or in process) and connects. One mechanism for
// the simulator, the threaded loopback and MPI runs.
//
// Thread numbering within a node: daemons 0..D-1, then clients D..D+C-1.
//   Delegation: daemon #0 of rank a <-> daemon #0 of rank b, for every pair a < b.
//   Meta:       daemon (b % D) of rank a <-> daemon (a % D) of rank b: the daemon that
//               owns the endpoint of a rank is rank % D (docs/design.md §Topology and
//               node wiring).
//   Direct:     client c of rank a <-> daemon (c % D) of rank b, for every a != b: every
//               client owns endpoints to the remote daemons (no intra-node aggregation).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bkv::backend {

enum class BackendKind : uint8_t { kMeta, kDelegation, kDirect };

struct Connection {
  uint32_t rank_a, thread_a;
  uint32_t rank_b, thread_b;
};

inline std::vector<Connection> connections(BackendKind kind, uint32_t np, uint32_t daemons, uint32_t clients) {
  std::vector<Connection> out;
  switch (kind) {
    case BackendKind::kDelegation:
      for (uint32_t a = 0; a < np; ++a)
        for (uint32_t b = a + 1; b < np; ++b) out.push_back({a, 0, b, 0});
      break;
    case BackendKind::kMeta:
      for (uint32_t a = 0; a < np; ++a)
        for (uint32_t b = a + 1; b < np; ++b) out.push_back({a, b % daemons, b, a % daemons});
      break;
    case BackendKind::kDirect:
      for (uint32_t a = 0; a < np; ++a)
        for (uint32_t c = 0; c < clients; ++c)
          for (uint32_t b = 0; b < np; ++b)
            if (b != a) out.push_back({a, daemons + c, b, c % daemons});
      break;
  }
  return out;
}

// The side of connection k that lives on `rank`: (thread, peer rank).
struct LocalSide {
  uint32_t thread;
  uint32_t peer_rank;
};
inline bool local_side(const Connection& c, uint32_t rank, LocalSide& out) {
  if (c.rank_a == rank) {
    out = {c.thread_a, c.rank_b};
    return true;
  }
  if (c.rank_b == rank) {
    out = {c.thread_b, c.rank_a};
    return true;
  }
  return false;
}

}  // namespace bkv::backend
