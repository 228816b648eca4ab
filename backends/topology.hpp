// Which threads hold copyrpc endpoints to which. Every rank computes the same list,
// creates the endpoints that involve it, exchanges EndpointInfo for each connection with
// the peer rank (MPI, or in process) and connects. One mechanism for the simulator, the
// threaded loopback and MPI runs. A backend names its shape (its traits' connections()).
//
// Thread numbering within a node: daemons 0..D-1, then clients D..D+C-1.
//   daemon0_mesh:           daemon #0 of rank a <-> daemon #0 of rank b, every pair a < b
//                           (Delegation).
//   daemon_by_rank_mesh:    daemon (b % D) of rank a <-> daemon (a % D) of rank b: the
//                           daemon that owns the endpoint of a rank is rank % D (Meta;
//                           docs/design_backends.md §Topology and node wiring).
//   client_to_daemon_mesh:  client c of rank a <-> daemon (c % D) of rank b, for every b,
//                           a itself included (over NIC loopback): every client owns an
//                           endpoint to a daemon of every rank (direct).
// A connection whose two ends are on one rank (rank_a == rank_b) has both ends there.
#pragma once

#include <cstdint>
#include <vector>

namespace bkv::backend {

struct Connection {
  uint32_t rank_a, thread_a;
  uint32_t rank_b, thread_b;
};

inline std::vector<Connection> daemon0_mesh(uint32_t np) {
  std::vector<Connection> out;
  for (uint32_t a = 0; a < np; ++a)
    for (uint32_t b = a + 1; b < np; ++b) out.push_back({a, 0, b, 0});
  return out;
}

inline std::vector<Connection> daemon_by_rank_mesh(uint32_t np, uint32_t daemons) {
  std::vector<Connection> out;
  for (uint32_t a = 0; a < np; ++a)
    for (uint32_t b = a + 1; b < np; ++b) out.push_back({a, b % daemons, b, a % daemons});
  return out;
}

inline std::vector<Connection> client_to_daemon_mesh(uint32_t np, uint32_t daemons, uint32_t clients) {
  std::vector<Connection> out;
  for (uint32_t a = 0; a < np; ++a)
    for (uint32_t c = 0; c < clients; ++c)
      for (uint32_t b = 0; b < np; ++b) out.push_back({a, daemons + c, b, c % daemons});
  return out;
}

// The number of connections of each mesh, without building it (the simulator estimates
// its memory before a run, at scales where the list itself would not fit).
constexpr uint64_t daemon0_mesh_size(uint32_t np) noexcept { return uint64_t{np} * (np == 0 ? 0 : np - 1) / 2; }
constexpr uint64_t daemon_by_rank_mesh_size(uint32_t np) noexcept { return daemon0_mesh_size(np); }
constexpr uint64_t client_to_daemon_mesh_size(uint32_t np, uint32_t clients) noexcept {
  return uint64_t{np} * clients * np;
}

// The meshes as the base of a backend's traits: connections(np, D, C) and
// connection_count(np, D, C), as Node calls them (backends/node.hpp).
struct DaemonByRankMesh {
  static auto connections(uint32_t np, uint32_t d, uint32_t) { return daemon_by_rank_mesh(np, d); }
  static uint64_t connection_count(uint32_t np, uint32_t, uint32_t) { return daemon_by_rank_mesh_size(np); }
};
struct ClientToDaemonMesh {
  static auto connections(uint32_t np, uint32_t d, uint32_t c) { return client_to_daemon_mesh(np, d, c); }
  static uint64_t connection_count(uint32_t np, uint32_t, uint32_t c) { return client_to_daemon_mesh_size(np, c); }
};

// Threads that own a copyrpc context whatever the connections (at NP = 1 too):
//   kDaemon0      daemon #0 (it polls its context every loop); created with the node
//   kEveryClient  every client (its remote path is its own context); created at start
enum class StandingContexts : uint8_t { kNone, kDaemon0, kEveryClient };

// One end of a connection: its a side or its b side.
enum class End : uint8_t { kA, kB };
constexpr bool within_rank(const Connection& c) noexcept { return c.rank_a == c.rank_b; }

// The side of connection k that lives on `rank`: (thread, peer rank). For a connection
// within one rank, side a (its b end lives there too).
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
