// mpirun -np 2 smoke test of apps/benchkv/mpi_orchestration (not a Catch test: every rank
// runs main). Checks ranks and node-local ranks, the all-to-all blob exchange (slot j
// from rank j, with contents only rank j could have produced), all-gather, all-reduce,
// gather to rank 0; with UCX built in, it also connects a UcxTransport queue pair to
// every peer through the exchanged ConnectInfos and moves WRITE+IMM data both ways
// between the processes. Exit status 0 = pass; every failure prints its reason.
#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "apps/benchkv/real/mpi_orchestration.hpp"

#ifdef BKV_HAVE_UCX
#include <chrono>
#include <memory>

#include "transports/ucx/ucx_transport.hpp"
#endif

namespace {

int failures = 0;
void expect(bool ok, const std::string& what, int rank) {
  if (!ok && ++failures <= 10) std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
}

struct Blob {
  uint32_t from, to;
  uint8_t bytes[1000];
};
uint8_t blob_byte(uint32_t from, uint32_t to, uint32_t i) { return static_cast<uint8_t>(from * 97 + to * 13 + i); }

#ifdef BKV_HAVE_UCX
void ucx_exchange(const bkv::mpi::Session& s) {
  using namespace bkv;
  const int me = s.rank(), n = s.size();
  ucx::Config cfg;
  cfg.tls = "sm,self";
  ucx::UcxTransport t(cfg);
  constexpr uint32_t kMsgs = 200, kLen = 512;
  std::vector<std::byte> out(kLen * n), in(kLen * kMsgs * n);
  const MemoryRegion out_mr = t.register_memory(out.data(), out.size(), kAccessLocalWrite);
  const MemoryRegion in_mr = t.register_memory(in.data(), in.size(), kAccessLocalWrite | kAccessRemoteWrite);
  // What a peer needs: my queue pair's ConnectInfo and where it may write.
  struct PeerInfo {
    ucx::ConnectInfo qp;
    RemoteBuffer inbox;
  };
  std::vector<ucx::QueuePair*> qp(n, nullptr);
  std::vector<PeerInfo> mine(n);
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    qp[j] = &t.create_queue_pair();
    mine[j].qp = qp[j]->local_info();
    mine[j].inbox = RemoteBuffer{reinterpret_cast<uint64_t>(in.data() + uint64_t{kLen} * kMsgs * j), in_mr.rkey, 0,
                                 uint64_t{kLen} * kMsgs};
  }
  const std::vector<PeerInfo> theirs = s.all_to_all(std::span<const PeerInfo>(mine));
  for (int j = 0; j < n; ++j)
    if (j != me) qp[j]->connect(theirs[j].qp);
  s.barrier();
  t.post_receives(t.srq_capacity());
  std::vector<uint32_t> got(n, 0);
  uint32_t signalled_done = 0, signalled_want = 0;
  auto service = [&] {
    t.poll_send([&](const SendCompletion& c) {
      expect(c.status == WcStatus::kSuccess, "UCX send completion status", me);
      ++signalled_done;
    }, 16);
    const uint32_t n_recv = t.poll_recv([&](const RecvCompletion& c) {
      int from = -1;
      for (int j = 0; j < n; ++j)
        if (j != me && qp[j]->qp_num() == c.qp_num) from = j;
      if (from < 0) return expect(false, "completion for an unknown queue pair", me);
      const uint32_t k = got[from]++;
      expect(c.imm == k, "WRITE+IMM order from rank " + std::to_string(from), me);
      expect(c.byte_len == kLen - k % 7, "WRITE+IMM length", me);
      const std::byte* p = in.data() + uint64_t{kLen} * kMsgs * from + uint64_t{kLen} * k;
      for (uint32_t i = 0; i < c.byte_len; ++i)
        if (p[i] != std::byte{blob_byte(from, me, i)}) return expect(false, "WRITE+IMM bytes", me);
    }, 64);
    if (n_recv > 0) t.post_receives(n_recv);
  };
  // Per peer: one source slot written once (only the lengths differ), every message
  // posted from it; it is never rewritten, so no buffer changes under a request.
  for (int j = 0; j < n; ++j) {
    if (j == me) continue;
    std::byte* src = out.data() + kLen * j;
    for (uint32_t i = 0; i < kLen; ++i) src[i] = std::byte{blob_byte(me, j, i)};
    for (uint32_t k = 0; k < kMsgs; ++k) {
      while (qp[j]->send_queue_free() == 0) service();
      const bool sig = (k % 16 == 15) || k + 1 == kMsgs;
      signalled_want += sig;
      const RemoteBuffer dst{theirs[j].inbox.addr + uint64_t{kLen} * k, theirs[j].inbox.rkey, 0, kLen};
      expect(qp[j]->post_write_imm(src, kLen - k % 7, out_mr.lkey, dst, k, k, sig) == PostResult::kOk, "post", me);
      if (k % 4 == 3 || k + 1 == kMsgs) qp[j]->ring_doorbell();
    }
  }
  auto all_done = [&] {
    for (int j = 0; j < n; ++j)
      if (j != me && got[j] < kMsgs) return false;
    return signalled_done == signalled_want;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!all_done() && std::chrono::steady_clock::now() < deadline) service();
  expect(all_done(), "UCX exchange finished before the deadline", me);
  expect(t.protocol_errors() == 0, "no UCX protocol errors", me);
  s.barrier();  // nobody tears down while a peer still needs it
}
#endif

}  // namespace

// `--watchdog PHASE`: the watchdog backstop. After one completed collective, this rank
// sits outside any collective for longer than the watchdog's quiet period (the longest
// phase, PHASE seconds, plus twice BENCHKV_PEER_TIMEOUT): the watchdog must end it with
// its message and kPeerLostExitCode. Falling through the wait is a failure (exit 1). With
// a quiet period longer than BENCHKV_STARTUP_TIMEOUT this also shows that the start-up
// guard ended at the first collective: else it would end the rank first, with status 4.
int watchdog_probe(bkv::mpi::Session& s, double phase) {
  s.start_watchdog(phase);
  s.barrier();
  const double quiet = phase + 2 * s.collective_deadline_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(quiet + 10));
  std::fprintf(stderr, "rank %d: FAILED: the watchdog did not end this rank within %.1f s of quiet\n", s.rank(),
               quiet + 10);
  return 1;
}

// `--stop-before-finalize`: the shut-down guard. Both ranks complete a barrier (their last
// collective); rank 1 then stops itself (SIGSTOP), so rank 0, returning from main, waits
// for it in MPI_Finalize (Session's destructor): the guard must end rank 0 with its
// message and kPeerLostExitCode once BENCHKV_PEER_TIMEOUT has passed. Rank 1, stopped,
// returns only if someone continues it (a failure: exit 1); mpirun ends it.
int stop_before_finalize(bkv::mpi::Session& s) {
  s.barrier();
  if (s.rank() != 1) return 0;
  std::fprintf(stderr, "rank 1: stopping itself after the last collective\n");
  std::fflush(stderr);
  ::raise(SIGSTOP);
  return 1;
}

// Session::run_with_heartbeat: rank 0's work outlasts a round (the others wait for it),
// every rank gets the largest result; a work's exception comes back on its own rank only.
// (The collectives are bounded from here on, by the default peer timeout.)
void heartbeat_checks(bkv::mpi::Session& s) {
  const int me = s.rank();
  s.bound_collectives();
  const auto no_loss = [me](const std::string& why) { std::fprintf(stderr, "rank %d: FAILED: %s\n", me, why.c_str()); };
  const uint64_t got = s.run_with_heartbeat(
      [me] {
        if (me == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return uint64_t(me == 0 ? 7 : me);
      },
      no_loss);
  expect(got == uint64_t(std::max(7, s.size() - 1)), "heartbeat: the largest work result on every rank", me);
  bool threw = false;
  try {
    (void)s.run_with_heartbeat(
        [me]() -> uint64_t {
          if (me == 1) throw std::runtime_error("work failed");
          return 0;
        },
        no_loss);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  expect(threw == (me == 1), "heartbeat: a work's exception rethrown on its rank only", me);
}

int main(int argc, char** argv) {
  bkv::mpi::Session s(&argc, &argv);
  if (argc > 2 && std::strcmp(argv[1], "--watchdog") == 0) return watchdog_probe(s, std::atof(argv[2]));
  if (argc > 1 && std::strcmp(argv[1], "--stop-before-finalize") == 0) return stop_before_finalize(s);
  const int me = s.rank(), n = s.size();
  expect(n >= 2, "at least two ranks (run under mpirun -np 2)", me);
  expect(s.local_size() >= 1 && s.local_size() <= n, "local size within world size", me);
  expect(s.local_rank() >= 0 && s.local_rank() < s.local_size(), "local rank within local size", me);
  // All ranks run on this machine: node-local ranks are a permutation.
  const std::vector<int> locals = s.all_gather(s.local_rank());
  std::set<int> distinct(locals.begin(), locals.end());
  expect(static_cast<int>(distinct.size()) == n && s.local_size() == n, "node-local ranks 0..n-1 on one node", me);

  // All-to-all of 1000-byte blobs.
  std::vector<Blob> out(n);
  for (int j = 0; j < n; ++j) {
    out[j].from = static_cast<uint32_t>(me);
    out[j].to = static_cast<uint32_t>(j);
    for (uint32_t i = 0; i < sizeof out[j].bytes; ++i) out[j].bytes[i] = blob_byte(me, j, i);
  }
  const std::vector<Blob> in = s.all_to_all(std::span<const Blob>(out));
  expect(static_cast<int>(in.size()) == n, "one blob per rank", me);
  for (int j = 0; j < n; ++j) {
    expect(in[j].from == static_cast<uint32_t>(j) && in[j].to == static_cast<uint32_t>(me),
           "blob " + std::to_string(j) + " addressed from rank j to me", me);
    bool bytes_ok = true;
    for (uint32_t i = 0; i < sizeof in[j].bytes; ++i) bytes_ok &= in[j].bytes[i] == blob_byte(j, me, i);
    expect(bytes_ok, "blob bytes from rank " + std::to_string(j), me);
  }
  // Several values per peer.
  std::vector<uint64_t> multi(2 * n);
  for (int j = 0; j < n; ++j) {
    multi[2 * j] = uint64_t(me) * 1000 + j;
    multi[2 * j + 1] = uint64_t(me) * 1000 + j + 500;
  }
  const std::vector<uint64_t> mres = s.all_to_all(std::span<const uint64_t>(multi), 2);
  for (int j = 0; j < n; ++j)
    expect(mres[2 * j] == uint64_t(j) * 1000 + me && mres[2 * j + 1] == uint64_t(j) * 1000 + me + 500,
           "two values per peer", me);
  bool threw = false;
  try {
    (void)s.all_to_all(std::span<const uint64_t>(multi), 3);  // sizes do not add up: no MPI call made
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  expect(threw, "mismatched all_to_all sizes are rejected", me);

  expect(s.allreduce_sum(uint64_t(me + 1)) == uint64_t(n) * (n + 1) / 2, "allreduce_sum(u64)", me);
  expect(s.allreduce_sum(0.5 * (me + 1)) == 0.25 * n * (n + 1), "allreduce_sum(double)", me);
  expect(s.allreduce_max(uint64_t(me * 7)) == uint64_t(n - 1) * 7, "allreduce_max", me);
  expect(s.allreduce_min(uint64_t(me + 3)) == 3, "allreduce_min", me);

  // Rank r contributes r+1 records (the shape of a per-epoch CSV row); rank 0 receives
  // them all, in rank order.
  struct Record {
    uint32_t run, rank, client_id, epoch;
    uint64_t requests, duration_ns;
  };
  std::vector<Record> recs;
  for (int i = 0; i <= me; ++i)
    recs.push_back(Record{1, uint32_t(me), uint32_t(i), 7, uint64_t(me) * 100 + i, 1000});
  const auto all = s.gather_to_root(std::span<const Record>(recs));
  if (me == 0) {
    expect(all.size() == size_t(n) * (n + 1) / 2, "gathered record count", me);
    size_t k = 0;
    for (int r = 0; r < n && k < all.size(); ++r)
      for (int i = 0; i <= r && k < all.size(); ++i, ++k)
        expect(all[k].rank == uint32_t(r) && all[k].client_id == uint32_t(i) && all[k].requests == uint64_t(r) * 100 + i,
               "gathered record in rank order", me);
  } else {
    expect(all.empty(), "non-root ranks gather nothing", me);
  }

#ifdef BKV_HAVE_UCX
  ucx_exchange(s);
#endif
  heartbeat_checks(s);
  s.barrier();
  const uint64_t total_failures = s.allreduce_sum(uint64_t(failures));
  if (me == 0) std::printf("mpi smoke: %d ranks, %llu failures\n", n, static_cast<unsigned long long>(total_failures));
  return total_failures == 0 ? 0 : 1;
}
