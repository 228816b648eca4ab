// Instruction cost of the direct mlx5 data path, over the software NIC emulator.
//
// The measured work sits in noinline functions (bkvbench::measured_*) so callgrind can
// count exactly them (bench/mlx5_callgrind.sh runs valgrind --tool=callgrind
// --collect-atstart=no --toggle-collect=<function>); everything the emulated NIC does
// (reading doorbells, executing requests, writing CQEs) happens outside them.
//
//   bench_mlx5_instructions flush <payload-bytes> <max_inline>
//       like copyrpc's flush: over 64 queue pairs, one post_write_imm + ring_doorbell
//       each (one WQE per doorbell, BlueFlame copy) per measured call; units = posts.
//       max_inline 0 = gather entry only (no payload copy by the CPU)
//   bench_mlx5_instructions batch <payload-bytes> <max_inline> <k>
//       k post_write_imm on one queue pair, then one ring_doorbell; units = posts
//   bench_mlx5_instructions flush-local | batch-local ...
//       the same with the arguments copied into locals first (measured_*_local)
//   bench_mlx5_instructions post <payload-bytes> <max_inline>
//       one post_write_imm + ring_doorbell per measured call (call overhead included)
//   bench_mlx5_instructions baseline
//       the single-post harness calling an empty function (call overhead to subtract)
//   bench_mlx5_instructions poll <batch> [compressed]
//       poll_recv over `batch` waiting receive CQEs per call
//   bench_mlx5_instructions poll-send <batch>
//       poll_send over `batch` signalled WRITE completions per call
//
// Each run prints its setup and a line "units=<n>" (posts or CQEs measured), plus the
// wall-clock time per unit of the same run (informational; the target is in
// instructions, which callgrind counts deterministically).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "transports/mlx5/direct_transport.hpp"
#include "transports/mlx5/emulator/emulator.hpp"

using namespace bkv;
using namespace bkv::mlx5;
using T = DirectTransport<emu::Node>;

namespace bkvbench {

volatile uint64_t g_sink = 0;

// The arguments of one post, kept in memory as a caller (copyrpc's endpoint) would.
struct PostArgs {
  T::QueuePair* qp;
  const std::byte* src;
  uint32_t len;
  uint32_t lkey;
  RemoteBuffer dst;
  uint64_t i;  // immediate and wr_id; every 64th request is signalled
};

[[gnu::always_inline]] inline PostResult post_one(PostArgs& a) {
  const PostResult r = a.qp->post_write_imm(a.src, a.len, a.lkey, a.dst, static_cast<uint32_t>(a.i), a.i,
                                            (a.i & 63) == 63);
  a.qp->ring_doorbell();
  ++a.i;
  return r;
}

// One WRITE+IMM and its doorbell on each of n queue pairs.
[[gnu::noinline]] uint32_t measured_flush(PostArgs* args, uint32_t n) {
  uint32_t ok = 0;
  for (uint32_t k = 0; k < n; ++k) ok += post_one(args[k]) == PostResult::kOk;
  return ok;
}

[[gnu::noinline]] PostResult measured_post(PostArgs& a) { return post_one(a); }

// k WRITE+IMMs on one queue pair, then one doorbell for all of them.
[[gnu::noinline]] uint32_t measured_batch(PostArgs& a, uint32_t k) {
  uint32_t ok = 0;
  for (uint32_t j = 0; j < k; ++j) {
    ok += a.qp->post_write_imm(a.src, a.len, a.lkey, a.dst, static_cast<uint32_t>(a.i), a.i, (a.i & 63) == 63) ==
          PostResult::kOk;
    ++a.i;
  }
  a.qp->ring_doorbell();
  return ok;
}

// The flush and batch work with the arguments copied into locals first, as a caller that
// holds them in registers would (copyrpc's flush reads them from its endpoint once per
// post). The functions above read them through the PostArgs reference, and a store
// into the QP's state (a uint64_t, a pointer) may modify a PostArgs field of that type,
// so the compiler reloads those after every post; a local whose address is not taken
// cannot be modified by any store. Same posts, same doorbells, same WQE bytes.
[[gnu::noinline]] uint32_t measured_flush_local(PostArgs* args, uint32_t n) {
  uint32_t ok = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const PostArgs a = args[k];
    ok += a.qp->post_write_imm(a.src, a.len, a.lkey, a.dst, static_cast<uint32_t>(a.i), a.i, (a.i & 63) == 63) ==
          PostResult::kOk;
    a.qp->ring_doorbell();
    args[k].i = a.i + 1;
  }
  return ok;
}

[[gnu::noinline]] uint32_t measured_batch_local(PostArgs& args, uint32_t k) {
  const PostArgs a = args;
  uint64_t i = a.i;
  uint32_t ok = 0;
  for (uint32_t j = 0; j < k; ++j) {
    ok += a.qp->post_write_imm(a.src, a.len, a.lkey, a.dst, static_cast<uint32_t>(i), i, (i & 63) == 63) ==
          PostResult::kOk;
    ++i;
  }
  a.qp->ring_doorbell();
  args.i = i;
  return ok;
}

// The flush and batch harnesses with no post and no doorbell in them: the same loops,
// the same argument loads and the same `signaled` computation, each value handed to an
// empty asm statement that must be assumed to read it and to write memory (as a post's
// stores may: the arguments are then reloaded through the reference, as above). What
// measured_flush / measured_batch count on top of these is the post and the doorbell.
[[gnu::always_inline]] inline void harness_use(const PostArgs& a) {
  const bool signaled = (a.i & 63) == 63;
  asm volatile("" ::"r"(a.qp), "r"(a.src), "r"(a.len), "r"(a.lkey), "r"(a.dst.addr), "r"(a.dst.rkey),
               "r"(a.i), "r"(signaled)
               : "memory");
}
[[gnu::noinline]] uint32_t measured_flush_harness(PostArgs* args, uint32_t n) {
  uint32_t ok = 0;
  for (uint32_t k = 0; k < n; ++k) {
    harness_use(args[k]);
    ++args[k].i;
    ++ok;
  }
  return ok;
}
[[gnu::noinline]] uint32_t measured_batch_harness(PostArgs& a, uint32_t k) {
  uint32_t ok = 0;
  for (uint32_t j = 0; j < k; ++j) {
    harness_use(a);
    ++a.i;
    ++ok;
  }
  return ok;
}

// The single-post harness with nothing in it: the call overhead to subtract.
[[gnu::noinline]] PostResult measured_baseline(PostArgs& a) {
  g_sink = g_sink + a.len + a.lkey + a.dst.addr + a.i;
  ++a.i;
  return PostResult::kOk;
}

[[gnu::noinline]] uint32_t measured_poll_recv(T& t, uint32_t max) {
  uint64_t s = 0;
  const uint32_t n = t.poll_recv([&](const RecvCompletion& c) { s += c.qp_num ^ c.imm ^ c.byte_len; }, max);
  g_sink = g_sink + s;
  return n;
}

[[gnu::noinline]] uint32_t measured_poll_send(T& t, uint32_t max) {
  uint64_t s = 0;
  const uint32_t n = t.poll_send([&](const SendCompletion& c) { s += c.wr_id ^ c.qp_num; }, max);
  g_sink = g_sink + s;
  return n;
}

}  // namespace bkvbench

namespace {

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "bench_mlx5_instructions: %s\nusage: bench_mlx5_instructions flush|flush-local|flush-harness|post <bytes> "
               "<max_inline> | batch|batch-local|batch-harness <bytes> <max_inline> <k> | "
               "baseline | poll <batch> [compressed] | poll-send <batch>\n",
               msg.c_str());
  std::exit(2);
}

uint32_t parse(const char* s, const char* what, uint32_t lo, uint32_t hi) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi)
    usage(std::string(what) + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "], got '" + s + "'");
  return static_cast<uint32_t>(v);
}

// Two emulated NICs; `nqp` connected queue-pair pairs between them.
struct Rig {
  emu::Fabric fabric;
  emu::Node& na;
  emu::Node& nb;
  T a;
  T b;
  std::vector<T::QueuePair*> qa, qb;
  std::vector<std::byte> src, dst;
  MemoryRegion src_mr, dst_mr;

  Rig(const emu::NodeOptions& nic, const DirectOptions& o, uint32_t nqp)
      : na(fabric.add_node(nic)), nb(fabric.add_node(nic)), a(na, o), b(nb, o), src(1 << 16), dst(1 << 16) {
    for (uint32_t k = 0; k < nqp; ++k) {
      qa.push_back(&a.create_queue_pair());
      qb.push_back(&b.create_queue_pair());
      qa.back()->connect(qb.back()->local_info());
      qb.back()->connect(qa.back()->local_info());
    }
    src_mr = a.register_memory(src.data(), src.size(), kAccessLocalWrite);
    dst_mr = b.register_memory(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
    b.post_receives(b.srq_capacity());
  }
  RemoteBuffer at(uint64_t off) const {
    return RemoteBuffer{reinterpret_cast<uint64_t>(dst.data()) + off, dst_mr.rkey, 0, dst.size() - off};
  }
  // The NIC side and the peer, outside the measured functions.
  void drain() {
    fabric.deliver();
    while (b.poll_recv([](const RecvCompletion&) {}, 1024) > 0) {
    }
    while (a.poll_send([](const SendCompletion&) {}, 1024) > 0) {
    }
    if (b.srq_posted() < b.srq_capacity() / 2) b.post_receives(b.srq_capacity() - b.srq_posted());
  }
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage("missing mode");
  std::string mode = argv[1];
  bool local_args = false;  // flush-local / batch-local: the measured_*_local functions
  DirectOptions o;
  o.sq_depth = 256;
  o.srq_size = 4096;
  o.send_cq_entries = 1 << 16;  // one CQE per send-queue block: 64 QPs of 1024 blocks
  emu::NodeOptions nic;
  uint64_t units = 0;
  double ns = 0;

  bool harness = false;      // flush-harness / batch-harness: the measured_*_harness functions
  if (mode == "flush-local") mode = "flush", local_args = true;
  if (mode == "batch-local") mode = "batch", local_args = true;
  if (mode == "flush-harness") mode = "flush", harness = true;
  if (mode == "batch-harness") mode = "batch", harness = true;
  if (mode == "flush" || mode == "post" || mode == "baseline" || mode == "batch") {
    uint32_t len = 64;
    uint32_t k = 1;
    o.max_inline = 0;
    if (mode != "baseline") {
      if (argc != (mode == "batch" ? 5 : 4)) usage(mode + " needs <bytes> <max_inline>" + (mode == "batch" ? " <k>" : ""));
      len = parse(argv[2], "bytes", 0, 60000);
      o.max_inline = parse(argv[3], "max_inline", 0, kMaxInline);
      if (mode == "batch") k = parse(argv[4], "k", 1, 64);
    }
    o.inline_head = std::min(o.max_inline, kMaxInlineHead);
    const uint32_t nqp = mode == "flush" ? 64 : 1;
    Rig r(nic, o, nqp);
    std::vector<bkvbench::PostArgs> args;
    for (uint32_t k = 0; k < nqp; ++k) args.push_back({r.qa[k], r.src.data(), len, r.src_mr.lkey, r.at(0), 0});
    const uint32_t rounds = mode == "flush" ? 400 : mode == "batch" ? 20000 / k : 20000;
    std::printf("setup: %s: post_write_imm(%u bytes; max_inline %u, inline_head %u), %u per doorbell, on %u queue "
                "pair(s) per measured call, BlueFlame %u-byte halves, 1 signalled in 64, %u calls\n",
                mode.c_str(), len, o.max_inline, o.inline_head, k, nqp, nic.bf_size, rounds);
    for (uint32_t i = 0; i < rounds; ++i) {
      const auto t0 = Clock::now();
      uint32_t ok = 0;
      if (mode == "flush") ok = harness      ? bkvbench::measured_flush_harness(args.data(), nqp)
                                : local_args ? bkvbench::measured_flush_local(args.data(), nqp)
                                             : bkvbench::measured_flush(args.data(), nqp);
      else if (mode == "batch") ok = harness      ? bkvbench::measured_batch_harness(args[0], k)
                                     : local_args ? bkvbench::measured_batch_local(args[0], k)
                                                  : bkvbench::measured_batch(args[0], k);
      else if (mode == "post") ok = bkvbench::measured_post(args[0]) == PostResult::kOk;
      else ok = bkvbench::measured_baseline(args[0]) == PostResult::kOk;
      ns += since(t0);
      if (ok != nqp * k) {
        std::fprintf(stderr, "send queue full at call %u\n", i);
        return 1;
      }
      units += nqp * k;
      r.na.process_doorbells();  // the NIC reads each BlueFlame write before the next one
      if (mode == "flush" || mode == "batch" || i % 64 == 63) r.drain();
    }
  } else if (mode == "poll" || mode == "poll-send") {
    if (argc < 3) usage("poll needs <batch>");
    const uint32_t batch = parse(argv[2], "batch", 1, 1024);
    const bool compressed = argc > 3 && std::string(argv[3]) == "compressed";
    if (argc > 3 && !compressed) usage("the optional argument of poll is 'compressed'");
    if (compressed) {
      nic.compress_recv = true;
      nic.max_session = 64;
    }
    o.max_inline = 0;
    o.inline_head = 0;
    Rig r(nic, o, 1);
    T::QueuePair& qa = *r.qa[0];
    const uint32_t rounds = std::max<uint32_t>(20000 / batch, 50);
    const bool send = mode == "poll-send";
    std::printf("setup: %s over %u waiting %s CQEs per call (%s), %u calls\n", send ? "poll_send" : "poll_recv", batch,
                send ? "requester" : "RESP_WR_IMM", compressed ? "compressed sessions of <= 64" : "uncompressed",
                rounds);
    for (uint32_t round = 0; round < rounds; ++round) {
      for (uint32_t k = 0; k < batch; ++k) {
        // Same immediate in every request: the compressible case when compression is on.
        if (qa.post_write_imm(r.src.data(), 64, r.src_mr.lkey, r.at(0), 2, k, send || k + 1 == batch) !=
            PostResult::kOk) {
          std::fprintf(stderr, "send queue full\n");
          return 1;
        }
        qa.ring_doorbell();
        r.na.process_doorbells();
      }
      r.fabric.deliver();
      const auto t0 = Clock::now();
      const uint32_t got = send ? bkvbench::measured_poll_send(r.a, batch) : bkvbench::measured_poll_recv(r.b, batch);
      ns += since(t0);
      if (got != batch) {
        std::fprintf(stderr, "polled %u CQEs, expected %u\n", got, batch);
        return 1;
      }
      units += got;
      r.drain();
    }
  } else {
    usage("unknown mode '" + mode + "'");
  }
  std::printf("units=%llu\n", static_cast<unsigned long long>(units));
  std::printf("wall-clock: %.1f ns per unit (informational)\n", ns / static_cast<double>(units));
  return 0;
}
