// Message rate over the UCX transport, two processes on this machine (fork; the
// connection blobs travel over a socketpair), the same shape as `ucx_perftest -t
// ucp_am_bw` (one client process sending, one server process receiving, one UCX worker
// each), so bench/ucx_compare.sh can put the numbers side by side and print ratios.
//
//   bench_ucx_copyrpc_rate [--size B] [--seconds S] [--warmup S] [--window W]
//                          [--tls LIST] [--mode copyrpc|write_imm|both]
//                          [--client-cpu C] [--server-cpu C]
//
// Modes:
//   write_imm: the client keeps the send queue full of B-byte WRITE+IMMs into the
//              server's ring (one signalled in 64); the server polls its receive queue
//              and reposts receives. Rate = requests acknowledged per second (a request
//              completes when the server has placed it). The transport's own cost
//              next to a raw UCX AM (each WRITE+IMM is one AM plus, per 64, one ACK).
//   copyrpc:   copyrpc calls of B-byte requests answered by B-byte responses, W calls in
//              flight; the server answers every request. Rate = calls answered per
//              second (each call moves two B-byte messages, batched by copyrpc).
// Output: one "setup:" line, then "result: <mode> <rate> per_s" lines (machine-readable).
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "apps/benchkv/real/cpu_pinning.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace bkv;
using ucx::UcxTransport;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  uint32_t size = 32;
  double seconds = 2.0;
  double warmup = 0.3;
  uint32_t window = 64;
  std::string tls = "sm,self";
  std::string mode = "both";
  int client_cpu = -2;  // -2 = automatic, -1 = unpinned
  int server_cpu = -2;
};

// ---- socketpair helpers (control path only) ----
void write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w <= 0) throw std::runtime_error("bench: socketpair write failed");
    b += w;
    n -= static_cast<size_t>(w);
  }
}
void read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, b, n);
    if (r <= 0) throw std::runtime_error("bench: socketpair read failed (peer exited?)");
    b += r;
    n -= static_cast<size_t>(r);
  }
}
bool stop_requested(int fd) {  // non-blocking check for the client's stop byte
  char c;
  return ::recv(fd, &c, 1, MSG_DONTWAIT) == 1;
}

// The client's measurement: `round()` (one pass of its loop) repeated for o.warmup
// seconds, then for o.seconds; the rate of the second part in units of `done` (the
// client's count of completed operations) per second. Then the server is told to stop
// and the client waits for it, so that both tear down together.
template <class Round>
double measure_then_stop(const Options& o, int fd, const uint64_t& done, Round&& round) {
  auto run_for = [&](double secs) {
    const uint64_t start = done;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration<double>(secs);
    while (Clock::now() < end) round();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    return static_cast<double>(done - start) / dt;
  };
  run_for(o.warmup);
  const double rate = run_for(o.seconds);
  const char stop = 1;
  write_all(fd, &stop, 1);
  char stopped;
  read_all(fd, &stopped, 1);
  return rate;
}

ucx::Config ucx_config(const Options& o) {
  ucx::Config c;
  c.tls = o.tls;
  c.send_queue_depth = 1024;
  c.srq_capacity = 4096;
  return c;
}

// ---- write_imm mode ----
struct RingInfo {
  ucx::ConnectInfo qp;
  RemoteBuffer ring;
};

double write_imm_client(const Options& o, int fd) {
  UcxTransport t(ucx_config(o));
  std::vector<std::byte> src(o.size + 64, std::byte{0x5A});
  const MemoryRegion mr = t.register_memory(src.data(), src.size(), kAccessLocalWrite);
  auto& qp = t.create_queue_pair();
  RingInfo mine{qp.local_info(), {}}, theirs{};
  write_all(fd, &mine, sizeof mine);
  read_all(fd, &theirs, sizeof theirs);
  qp.connect(theirs.qp);
  const uint64_t slots = theirs.ring.length / std::max<uint32_t>(o.size, 1);
  uint64_t posted = 0, completed = 0;
  return measure_then_stop(o, fd, completed, [&] {
    uint32_t n = 0;
    while (qp.send_queue_free() > 0 && n < 64) {
      const bool sig = posted % 64 == 63;
      const RemoteBuffer dst{theirs.ring.addr + (posted % slots) * o.size, theirs.ring.rkey, 0, o.size};
      if (qp.post_write_imm(src.data(), o.size, mr.lkey, dst, static_cast<uint32_t>(posted), posted, sig) !=
          PostResult::kOk)
        break;
      ++posted;
      ++n;
    }
    if (n > 0) qp.ring_doorbell();
    t.poll_send([&](const SendCompletion& c) {
      if (c.status != WcStatus::kSuccess) throw std::runtime_error(std::string("bench: ") + to_string(c.status));
      completed = c.wr_id + 1;
    }, 64);
  });
}

void write_imm_server(const Options& o, int fd) {
  UcxTransport t(ucx_config(o));
  std::vector<std::byte> ring(std::max<uint64_t>(uint64_t{o.size} * 4096, 4096));
  const MemoryRegion mr = t.register_memory(ring.data(), ring.size(), kAccessLocalWrite | kAccessRemoteWrite);
  auto& qp = t.create_queue_pair();
  RingInfo mine{qp.local_info(), RemoteBuffer{reinterpret_cast<uint64_t>(ring.data()), mr.rkey, 0, ring.size()}};
  RingInfo theirs{};
  read_all(fd, &theirs, sizeof theirs);
  write_all(fd, &mine, sizeof mine);
  qp.connect(theirs.qp);
  t.post_receives(t.srq_capacity());
  uint64_t iter = 0;
  for (;;) {
    const uint32_t n = t.poll_recv([](const RecvCompletion&) {}, 256);
    if (n > 0) t.post_receives(n);
    if ((++iter & 1023) == 0 && stop_requested(fd)) break;
  }
  const char done = 1;
  write_all(fd, &done, 1);
}

// ---- copyrpc mode ----
using Ctx = copyrpc::Context<UcxTransport, uint64_t>;

// One endpoint of ctx connected to the other process's over the socket fd: the client
// sends its endpoint info first, the server reads first.
uint32_t connect_over_socket(Ctx& ctx, int fd, bool client) {
  const uint32_t ep = ctx.create_endpoint();
  const Ctx::Info mine = ctx.local_info(ep);
  Ctx::Info theirs{};
  if (client) write_all(fd, &mine, sizeof mine);
  read_all(fd, &theirs, sizeof theirs);
  if (!client) write_all(fd, &mine, sizeof mine);
  ctx.connect(ep, theirs);
  return ep;
}

[[noreturn]] void failed_back(copyrpc::EndpointError e) {
  throw std::runtime_error(std::string("bench: a call failed back: ") + copyrpc::to_string(e));
}

double copyrpc_client(const Options& o, int fd) {
  UcxTransport t(ucx_config(o));
  Ctx ctx(t);
  const uint32_t ep = connect_over_socket(ctx, fd, /*client=*/true);
  std::vector<std::byte> req(o.size, std::byte{0x11});
  uint64_t inflight = 0, answered = 0, token = 0;
  return measure_then_stop(o, fd, answered, [&] {
    while (inflight < o.window) {
      const copyrpc::CallResult r = ctx.call(ep, req, o.size, token++);
      if (!r.ok()) {
        if (copyrpc::retry_after_poll(r.status)) break;
        throw std::runtime_error(std::string("bench: call: ") + copyrpc::to_string(r.status));
      }
      ++inflight;
    }
    ctx.poll([&](uint64_t, std::span<const std::byte>) {
      --inflight;
      ++answered;
    }, [](auto&&, copyrpc::EndpointError e) { failed_back(e); });
  });
}

void copyrpc_server(const Options& o, int fd) {
  UcxTransport t(ucx_config(o));
  Ctx ctx(t);
  connect_over_socket(ctx, fd, /*client=*/false);  // the server only answers: its endpoint is not named again
  std::vector<std::byte> resp(o.size, std::byte{0x22});
  uint64_t iter = 0;
  for (;;) {
    ctx.drain([](uint64_t, std::span<const std::byte>) {}, [](auto&&, copyrpc::EndpointError e) { failed_back(e); });
    copyrpc::RecvHandle h;
    while (ctx.recv(h))
      if (ctx.reply(std::move(h), resp) != copyrpc::CallStatus::kOk) throw std::runtime_error("bench: reply failed");
    ctx.flush();
    if ((++iter & 1023) == 0 && stop_requested(fd)) break;
  }
  const char done = 1;
  write_all(fd, &done, 1);
}

// Runs one mode: fork a server, run the client here, return the client's rate.
template <class Client, class Server>
double run_pair(const Options& o, Client client, Server server) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) throw std::runtime_error("bench: socketpair failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("bench: fork failed");
  if (pid == 0) {
    ::close(sv[0]);
    int status = 0;
    try {
      runtime::pin_current_thread(o.server_cpu);
      server(o, sv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench server: %s\n", e.what());
      status = 1;
    }
    std::fflush(nullptr);
    ::_exit(status);
  }
  ::close(sv[1]);
  runtime::pin_current_thread(o.client_cpu);
  double rate = 0;
  try {
    rate = client(o, sv[0]);
  } catch (...) {
    ::close(sv[0]);
    ::waitpid(pid, nullptr, 0);
    throw;
  }
  ::close(sv[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("bench: the server process failed");
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"copyrpc / WRITE+IMM message rate over the UCX transport (two processes)"};
  app.add_option("--size", o.size, "message payload bytes")->check(CLI::Range(1u, 1u << 16));
  app.add_option("--seconds", o.seconds, "measured seconds per mode")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "warm-up seconds per mode (not measured)")->check(CLI::NonNegativeNumber);
  app.add_option("--window", o.window, "copyrpc calls in flight")->check(CLI::Range(1u, 4096u));
  app.add_option("--tls", o.tls, "UCX_TLS for both processes");
  app.add_option("--mode", o.mode, "copyrpc | write_imm | both")->check(CLI::IsMember({"copyrpc", "write_imm", "both"}));
  app.add_option("--client-cpu", o.client_cpu, "CPU of the client process (-1 unpinned; default: the last CPU)");
  app.add_option("--server-cpu", o.server_cpu, "CPU of the server process (-1 unpinned; default: the one before)");
  CLI11_PARSE(app, argc, argv);
  const std::vector<int> cpus = runtime::allowed_cpus();
  if (o.client_cpu == -2) o.client_cpu = cpus.size() >= 2 ? cpus[cpus.size() - 1] : -1;
  if (o.server_cpu == -2) o.server_cpu = cpus.size() >= 2 ? cpus[cpus.size() - 2] : -1;
  std::printf("setup: UCX transport, 2 processes (fork), UCX_TLS=%s, payload %u B, window %u, %.2f s measured after "
              "%.2f s warm-up, client cpu %d, server cpu %d\n",
              o.tls.c_str(), o.size, o.window, o.seconds, o.warmup, o.client_cpu, o.server_cpu);
  std::fflush(stdout);
  try {
    if (o.mode == "write_imm" || o.mode == "both") {
      const double r = run_pair(o, write_imm_client, write_imm_server);
      std::printf("result: write_imm %.0f per_s\n", r);
      std::fflush(stdout);
    }
    if (o.mode == "copyrpc" || o.mode == "both") {
      const double r = run_pair(o, copyrpc_client, copyrpc_server);
      std::printf("result: copyrpc %.0f per_s\n", r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ucx_copyrpc_rate: %s\n", e.what());
    return 1;
  }
  return 0;
}
