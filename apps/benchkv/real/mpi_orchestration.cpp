// MPI side of apps/benchkv/real/mpi_orchestration.hpp.
#include "apps/benchkv/real/mpi_orchestration.hpp"

// The C API only: keep Open MPI's / MPICH's deprecated C++ bindings out (they would
// need libmpi_cxx at link time).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "apps/benchkv/cli/options.hpp"
#include "apps/benchkv/cli/stop_signals.hpp"

namespace bkv::mpi {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string("MPI: ") + call + " failed: " + std::string(text, static_cast<size_t>(len)));
}

// A contiguous datatype of `bytes` bytes, so element counts stay small ints.
class ByteBlock {
 public:
  explicit ByteBlock(size_t bytes) {
    if (bytes == 0 || bytes > static_cast<size_t>(INT_MAX))
      throw std::invalid_argument("MPI: block of " + std::to_string(bytes) + " bytes is not exchangeable");
    check(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type_), "MPI_Type_contiguous");
    check(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  ~ByteBlock() { MPI_Type_free(&type_); }
  ByteBlock(const ByteBlock&) = delete;
  ByteBlock& operator=(const ByteBlock&) = delete;
  MPI_Datatype type() const noexcept { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A process is running: it exists and is not a zombie (ended, not yet reaped).
bool running(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');  // "pid (comm) S ...": the state follows the name
  return close == nullptr || close[1] == '\0' || (close[2] != 'Z' && close[2] != 'X');
}

struct RankProcess {
  uint64_t host = 0;  // hash of the processor name
  int64_t pid = 0;
};
static_assert(std::is_trivially_copyable_v<RankProcess>);

// The environment variable `name` as a number of seconds in (0, 86400], `fallback` when
// it is unset; anything else is bad input: app::OptionError naming it (exit status 2).
double seconds_from_env(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const double t = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !(t > 0) || t > 86400)
    throw app::OptionError(name, std::string(name) + "=\"" + v + "\": must be a number of seconds in (0, 86400]");
  return t;
}

// This process's rank as the launcher announces it before MPI_Init (Open MPI, PMIx,
// MPICH), -1 when none does: only for the start-up guard's message.
int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    char* end = nullptr;
    if (v == nullptr || *v == '\0') continue;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r <= INT_MAX) return static_cast<int>(r);
  }
  return -1;
}

// A phase guard: a thread that waits until finish() or the bound, whichever comes first;
// at the bound it prints what the rank is waiting for and ends the process with
// `exit_code` (the main thread is inside MPI, which cannot be interrupted). The start-up
// guard and the shut-down guard (header, kStartupTimeoutEnv and Session::~Session) are
// two of these: `phase` names which in the message, `env` the bound's variable.
class PhaseGuard {
 public:
  PhaseGuard(const char* phase, const char* env, double timeout_s, int exit_code, int rank, const char* where)
      : phase_(phase), env_(env), timeout_s_(timeout_s), exit_code_(exit_code), rank_(rank), where_(where) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    thread_ = std::thread([this, deadline] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (done_changed_.wait_until(lock, deadline, [this] { return done_; })) return;
      char who[48];
      if (rank_ >= 0)
        std::snprintf(who, sizeof who, "rank %d", rank_);
      else
        std::snprintf(who, sizeof who, "process %d", static_cast<int>(::getpid()));
      std::fprintf(stderr,
                   "benchkv: %s: %s did not finish within %s=%g s (%s%s): a peer rank may be stopped, dead "
                   "or unreachable; ending this rank\n",
                   who, phase_, env_, timeout_s_, in_mpi_ ? "waiting in " : "", where_);
      std::fflush(stderr);
      ::_exit(exit_code_);  // MPI may not be called from this thread (FUNNELED)
    });
  }
  ~PhaseGuard() {
    finish();
    thread_.join();
  }
  PhaseGuard(const PhaseGuard&) = delete;
  PhaseGuard& operator=(const PhaseGuard&) = delete;

  // Where the main thread is from now on (a string literal): inside the MPI call `where`,
  // or (in_mpi false) in the phase `where` describes.
  void at(const char* where, bool in_mpi = true) {
    std::lock_guard<std::mutex> lock(mutex_);
    where_ = where;
    in_mpi_ = in_mpi;
  }
  void set_rank(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    rank_ = rank;
  }
  // The phase finished: the thread ends without a word. Idempotent.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_) return;
      done_ = true;
    }
    done_changed_.notify_one();
  }

 private:
  const char* const phase_;
  const char* const env_;
  const double timeout_s_;
  const int exit_code_;
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  int rank_;
  const char* where_;
  bool in_mpi_ = true;
  std::thread thread_;  // last: started once the members it reads are set
};

}  // namespace

double peer_timeout_seconds() { return seconds_from_env(kPeerTimeoutEnv, kDefaultPeerTimeoutSeconds); }
double startup_timeout_seconds() { return seconds_from_env(kStartupTimeoutEnv, kDefaultStartupTimeoutSeconds); }

struct Session::Impl {
  Impl(double startup_timeout_s, double peer_timeout)
      : startup("start-up", kStartupTimeoutEnv, startup_timeout_s, kStartupTimeoutExitCode, launcher_rank(), "MPI_Init"),
        peer_timeout_s(peer_timeout) {}
  PhaseGuard startup;  // finished by the first collective completed
  const double peer_timeout_s;  // BENCHKV_PEER_TIMEOUT, read before MPI_Init
  bool finalize = false;
  MPI_Comm node = MPI_COMM_NULL;
  // Watchdog: the deadline (steady clock, ns) by which the next collective must have
  // completed; 0 = not armed. Refreshed by every completed collective.
  std::atomic<int64_t> deadline_ns{0};
  std::atomic<bool> stop{false};
  int64_t quiet_ns = 0;
  double collective_timeout_s = 0;  // 0: collectives wait without a deadline
  bool interruptible = false;       // a stop signal ends a collective's wait (Interrupted)
  std::thread watchdog;
  std::vector<RankProcess> processes;  // every rank's, from start_watchdog
  MPI_Request pending_barrier = MPI_REQUEST_NULL;  // start_barrier's, until barrier_done
  void progress() {
    if (quiet_ns > 0) deadline_ns.store(now_ns() + quiet_ns, std::memory_order_relaxed);
  }
  // Waits for a started non-blocking collective: MPI_Wait without a deadline, else
  // MPI_Test until the peer timeout passes (PeerLost; the request stays pending: MPI
  // offers no way to cancel a collective). Completed: re-arms the watchdog.
  void complete(MPI_Request& req, const char* call) {
    startup.at(call);  // (once start-up finished, nobody reads it)
    if (collective_timeout_s <= 0) {
      check(MPI_Wait(&req, MPI_STATUS_IGNORE), call);
    } else {
      const int64_t deadline = now_ns() + static_cast<int64_t>(collective_timeout_s * 1e9);
      for (int done = 0;;) {
        check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), call);
        if (done) break;
        if (const int sig = interruptible ? app::stop_signal() : 0; sig != 0)
          throw Interrupted(app::signal_name(sig) + " came while waiting for " + call, sig);
        if (now_ns() > deadline) {
          char text[160];
          std::snprintf(text, sizeof text, "%s did not complete within %s=%.1f s: a peer rank is stopped, dead or unreachable",
                        call, kPeerTimeoutEnv, collective_timeout_s);
          throw PeerLost(text);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    startup.finish();  // every rank is through MPI_Init (it entered this collective)
    progress();
  }
  // One value reduced over every rank with `op` (MPI type `type`), waited for as above.
  template <class V>
  V allreduce(V v, MPI_Datatype type, MPI_Op op, const char* call) {
    V out{};
    MPI_Request req;
    check(MPI_Iallreduce(&v, &out, 1, type, op, MPI_COMM_WORLD, &req), call);
    complete(req, call);
    return out;
  }
};

Session::Session(int* argc, char*** argv)
    : impl_(std::make_unique<Impl>(startup_timeout_seconds(), peer_timeout_seconds())) {
  int initialized = 0;
  check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    impl_->finalize = true;
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      throw std::runtime_error("MPI: the library does not support MPI_THREAD_FUNNELED");
    }
  }
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  impl_->startup.set_rank(rank_);
  impl_->startup.at("MPI_Comm_split_type");
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &impl_->node),
        "MPI_Comm_split_type");
  check(MPI_Comm_rank(impl_->node, &local_rank_), "MPI_Comm_rank(node)");
  check(MPI_Comm_size(impl_->node, &local_size_), "MPI_Comm_size(node)");
  impl_->startup.at("in this rank's set-up, before its first collective", false);
}

Session::~Session() {
  impl_->startup.finish();  // (when no collective ran: a rank that gave up at once)
  if (impl_->watchdog.joinable()) {
    impl_->stop.store(true);
    impl_->watchdog.join();
  }
  // Shut-down waits for every rank (MPI_Finalize, and MPI_Comm_free may) and cannot be
  // started non-blocking: bounded by the peer timeout from here, as a collective is.
  PhaseGuard shutdown("shut-down", kPeerTimeoutEnv, impl_->peer_timeout_s, kPeerLostExitCode, rank_, "MPI_Comm_free");
  if (impl_->node != MPI_COMM_NULL) MPI_Comm_free(&impl_->node);
  shutdown.at("MPI_Finalize");
  if (impl_->finalize) MPI_Finalize();
}

std::string Session::processor_name() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name");
  return std::string(name, static_cast<size_t>(len));
}

void Session::barrier() const {
  MPI_Request req;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  impl_->complete(req, "MPI_Barrier");
}

void Session::start_barrier() const {
  if (impl_->pending_barrier != MPI_REQUEST_NULL) throw std::logic_error("MPI: a started barrier is still pending");
  impl_->startup.at("MPI_Barrier");
  check(MPI_Ibarrier(MPI_COMM_WORLD, &impl_->pending_barrier), "MPI_Ibarrier");
}

bool Session::barrier_done() const {
  if (impl_->pending_barrier == MPI_REQUEST_NULL) throw std::logic_error("MPI: no started barrier");
  int done = 0;
  check(MPI_Test(&impl_->pending_barrier, &done, MPI_STATUS_IGNORE), "MPI_Test(MPI_Ibarrier)");
  if (done) {  // MPI_Test set the request to MPI_REQUEST_NULL
    impl_->startup.finish();
    impl_->progress();
  }
  return done != 0;
}

void Session::rearm_watchdog() const { impl_->progress(); }
void Session::bound_collectives() { impl_->collective_timeout_s = impl_->peer_timeout_s; }
double Session::collective_deadline_seconds() const noexcept { return impl_->collective_timeout_s; }

uint64_t Session::run_with_heartbeat(const std::function<uint64_t()>& work,
                                     const std::function<void(const std::string&)>& on_peer_lost) const {
  const double timeout = impl_->collective_timeout_s;
  if (timeout <= 0) throw std::logic_error("MPI: a heartbeat needs the collectives' deadline (start_watchdog first)");
  const double period = std::min(kHeartbeatSeconds, timeout / kHeartbeatsPerPeerTimeout);
  std::atomic<bool> ended{false};
  uint64_t result = 0;  // written by the worker before `ended`, read after it
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      result = work();
    } catch (...) {
      error = std::current_exception();
    }
    ended.store(true, std::memory_order_release);
  });
  const bool interruptible = std::exchange(impl_->interruptible, false);  // header: a signal ends no round
  uint64_t out = 0;
  // A lost peer ends the process here, after on_peer_lost and, when that returns, after
  // this rank's work (rank 0 finishing its outputs); a failed MPI call at once.
  try {
    for (;;) {
      const bool done = ended.load(std::memory_order_acquire);
      uint64_t in[2] = {done ? 0u : 1u, done ? result : 0u}, reduced[2] = {0, 0};
      MPI_Request req;
      check(MPI_Iallreduce(in, reduced, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &req), "MPI_Iallreduce");
      impl_->complete(req, "MPI_Allreduce(heartbeat)");
      if (reduced[0] == 0) {
        out = reduced[1];
        break;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(period));
    }
  } catch (const PeerLost& e) {
    try {
      if (on_peer_lost) on_peer_lost(e.what());
    } catch (const std::exception& err) {
      std::fprintf(stderr, "benchkv: rank %d: %s\n", rank_, err.what());
    }
    std::fflush(nullptr);
    worker.join();  // (bounded by the watchdog, when it runs: no collective completes now)
    std::fflush(nullptr);
    ::_exit(kPeerLostExitCode);  // without MPI: MPI_Finalize would wait for the lost peer
  } catch (const std::exception& e) {
    std::fprintf(stderr, "benchkv: rank %d: %s\n", rank_, e.what());
    std::fflush(nullptr);
    ::_exit(1);
  }
  impl_->interruptible = interruptible;
  worker.join();
  if (error) std::rethrow_exception(error);
  return out;
}

namespace {

// write_after_peer_lost's messages: a poll to rank 0, its answer. Tags no other message
// of benchkv uses (collectives do not match point-to-point messages at all); an MPI
// library allows tags up to at least 32767.
constexpr int kPollTag = 0x6b0;
constexpr int kAnswerTag = kPollTag + 1;
constexpr int kAnswerDone = 0, kAnswerWorking = 1;
// Send buffers must stay valid until the message went; these never change.
const int kPollMessage = 1;
const int kAnswers[2] = {kAnswerDone, kAnswerWorking};

}  // namespace

std::string Session::write_after_peer_lost(const std::function<void()>& work) const {
  const double timeout = impl_->collective_timeout_s;
  if (timeout <= 0) throw std::logic_error("MPI: waiting for rank 0 needs the collectives' deadline (start_watchdog first)");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rank_ == 0) {
    std::atomic<bool> ended{false};
    std::exception_ptr error;
    std::thread worker([&] {
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
      ended.store(true, std::memory_order_release);
    });
    std::string why;
    try {
      int poll = 0;
      MPI_Request recv;
      check(MPI_Irecv(&poll, 1, MPI_INT, MPI_ANY_SOURCE, kPollTag, MPI_COMM_WORLD, &recv), "MPI_Irecv(poll)");
      // The ranks whose last poll was answered "still working": once the work ended, each
      // gets "done" at its next poll (one heartbeat period later), waited for at most the
      // peer timeout, so that it ends on its own before this rank's exit has mpirun end it.
      std::vector<char> polling(static_cast<size_t>(size_), 0);
      std::vector<MPI_Request> done_sends;
      const int64_t timeout_ns = static_cast<int64_t>(timeout * 1e9);
      for (int64_t give_up_ns = 0;;) {
        const bool done = ended.load(std::memory_order_acquire);  // the polls that came until now get this answer
        if (done && give_up_ns == 0) give_up_ns = now_ns() + timeout_ns;
        for (int arrived = 1; arrived;) {
          MPI_Status status;
          check(MPI_Test(&recv, &arrived, &status), "MPI_Test(poll)");
          if (!arrived) break;
          const int from = status.MPI_SOURCE;
          MPI_Request send;
          check(MPI_Isend(&kAnswers[done ? 0 : 1], 1, MPI_INT, from, kAnswerTag, MPI_COMM_WORLD, &send),
                "MPI_Isend(answer)");
          if (done) {
            done_sends.push_back(send);
          } else {
            check(MPI_Request_free(&send), "MPI_Request_free");
          }
          if (from > 0 && from < size_) polling[static_cast<size_t>(from)] = done ? 0 : 1;
          check(MPI_Irecv(&poll, 1, MPI_INT, MPI_ANY_SOURCE, kPollTag, MPI_COMM_WORLD, &recv), "MPI_Irecv(poll)");
        }
        if (done && (std::count(polling.begin(), polling.end(), 1) == 0 || now_ns() > give_up_ns)) {
          // The "done" answers leave before this rank exits.
          for (int sent = done_sends.empty(); !sent && now_ns() <= give_up_ns;) {
            check(MPI_Testall(static_cast<int>(done_sends.size()), done_sends.data(), &sent, MPI_STATUSES_IGNORE),
                  "MPI_Testall(answers)");
            if (!sent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (const std::exception& e) {
      why = e.what();
    }
    worker.join();
    if (error) std::rethrow_exception(error);
    return why;
  }
  work();
  const double period = std::min(kHeartbeatSeconds, timeout / kHeartbeatsPerPeerTimeout);
  try {
    for (double wait = 2 * timeout;; wait = timeout) {
      MPI_Request send, recv;
      int answer = -1;
      check(MPI_Isend(&kPollMessage, 1, MPI_INT, 0, kPollTag, MPI_COMM_WORLD, &send), "MPI_Isend(poll)");
      check(MPI_Request_free(&send), "MPI_Request_free");
      check(MPI_Irecv(&answer, 1, MPI_INT, 0, kAnswerTag, MPI_COMM_WORLD, &recv), "MPI_Irecv(answer)");
      const int64_t deadline = now_ns() + static_cast<int64_t>(wait * 1e9);
      for (int arrived = 0; !arrived;) {
        check(MPI_Test(&recv, &arrived, MPI_STATUS_IGNORE), "MPI_Test(answer)");
        if (arrived) break;
        if (const int sig = app::stop_signal(); sig != 0) return app::signal_name(sig) + " came while waiting for rank 0";
        if (now_ns() > deadline) {
          char text[240];
          std::snprintf(text, sizeof text,
                        "rank 0 did not answer within %.1f s (%s%s=%.1f s) while writing its outputs: it is stopped, "
                        "dead or unreachable, or it lost no peer",
                        wait, wait > timeout ? "twice " : "", kPeerTimeoutEnv, timeout);
          return text;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (answer != kAnswerDone && answer != kAnswerWorking)
        return "rank 0 answered " + std::to_string(answer) + ", neither done nor still working";
      impl_->progress();  // rank 0 is alive
      if (answer == kAnswerDone) return "";
      std::this_thread::sleep_for(std::chrono::duration<double>(period));
    }
  } catch (const std::exception& e) {
    return e.what();
  }
}

void Session::start_watchdog(double longest_phase_seconds) {
  if (impl_->watchdog.joinable()) throw std::logic_error("MPI: the watchdog is already running");
  if (!(longest_phase_seconds >= 0)) throw std::invalid_argument("MPI watchdog: negative phase length");
  const double timeout = impl_->peer_timeout_s;
  const double quiet = longest_phase_seconds + 2 * timeout;
  impl_->quiet_ns = static_cast<int64_t>(quiet * 1e9);
  impl_->collective_timeout_s = timeout;
  impl_->interruptible = true;
  impl_->progress();
  app::install_stop_signals();
  RankProcess mine;
  mine.host = std::hash<std::string>{}(processor_name());
  mine.pid = static_cast<int64_t>(::getpid());
  impl_->processes = all_gather(mine);
  const int rank = rank_;
  impl_->watchdog = std::thread([impl = impl_.get(), rank, quiet, timeout] {
    int64_t signalled_ns = 0;  // when this thread first saw a stop signal
    while (!impl->stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (const int sig = app::stop_signal(); sig != 0) {
        if (signalled_ns == 0) signalled_ns = now_ns();
        if (now_ns() - signalled_ns > static_cast<int64_t>(kInterruptGraceSeconds * 1e9)) {
          std::fprintf(stderr,
                       "benchkv: rank %d: %s came %.0f s ago and the measurement has not stopped; ending this rank "
                       "without outputs\n",
                       rank, app::signal_name(sig).c_str(), kInterruptGraceSeconds);
          std::fflush(stderr);
          ::_exit(128 + sig);
        }
      }
      const int64_t d = impl->deadline_ns.load(std::memory_order_relaxed);
      if (d != 0 && now_ns() > d) {
        std::fprintf(stderr,
                     "rank %d: no collective completed for %.1f s (the longest phase plus twice %s=%.1f s): a "
                     "peer rank is stopped, dead or unreachable; ending this rank\n",
                     rank, quiet, kPeerTimeoutEnv, timeout);
        std::fflush(stderr);
        ::_exit(kPeerLostExitCode);  // MPI may not be called from this thread (FUNNELED)
      }
    }
  });
}

std::vector<int> Session::gone_peers() const {
  std::vector<int> gone;
  const std::vector<RankProcess>& all = impl_->processes;
  for (size_t r = 0; r < all.size(); ++r)
    if (static_cast<int>(r) != rank_ && all[r].host == all[static_cast<size_t>(rank_)].host &&
        !running(static_cast<pid_t>(all[r].pid)))
      gone.push_back(static_cast<int>(r));
  return gone;
}

std::vector<std::byte> Session::all_to_all(std::span<const std::byte> outgoing, size_t blob_size) const {
  const size_t n = static_cast<size_t>(size_);
  if (blob_size == 0 || outgoing.size() != blob_size * n)
    throw std::invalid_argument("MPI all_to_all: " + std::to_string(outgoing.size()) + " bytes is not " +
                                std::to_string(n) + " blobs of " + std::to_string(blob_size) + " bytes");
  ByteBlock block(blob_size);
  std::vector<std::byte> in(outgoing.size());
  MPI_Request req;
  check(MPI_Ialltoall(outgoing.data(), 1, block.type(), in.data(), 1, block.type(), MPI_COMM_WORLD, &req),
        "MPI_Ialltoall");
  impl_->complete(req, "MPI_Alltoall");
  return in;
}

std::vector<std::byte> Session::all_gather_bytes(std::span<const std::byte> mine) const {
  ByteBlock block(mine.size());
  std::vector<std::byte> in(mine.size() * static_cast<size_t>(size_));
  MPI_Request req;
  check(MPI_Iallgather(mine.data(), 1, block.type(), in.data(), 1, block.type(), MPI_COMM_WORLD, &req),
        "MPI_Iallgather");
  impl_->complete(req, "MPI_Allgather");
  return in;
}

uint64_t Session::allreduce_sum(uint64_t v) const {
  return impl_->allreduce(v, MPI_UINT64_T, MPI_SUM, "MPI_Allreduce(sum)");
}
double Session::allreduce_sum(double v) const { return impl_->allreduce(v, MPI_DOUBLE, MPI_SUM, "MPI_Allreduce(sum)"); }
uint64_t Session::allreduce_max(uint64_t v) const {
  return impl_->allreduce(v, MPI_UINT64_T, MPI_MAX, "MPI_Allreduce(max)");
}
uint64_t Session::allreduce_min(uint64_t v) const {
  return impl_->allreduce(v, MPI_UINT64_T, MPI_MIN, "MPI_Allreduce(min)");
}

std::vector<std::byte> Session::gather_to_root(std::span<const std::byte> mine) const {
  const uint64_t my_len = mine.size();
  const size_t n = static_cast<size_t>(size_);
  std::vector<uint64_t> lens(rank_ == 0 ? n : 0);
  MPI_Request req;
  check(MPI_Igather(&my_len, 1, MPI_UINT64_T, lens.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req), "MPI_Igather");
  impl_->complete(req, "MPI_Gather");
  std::vector<int> counts, displs;
  std::vector<std::byte> out;
  bool fits = true;
  if (rank_ == 0) {
    uint64_t total = 0;
    for (uint64_t l : lens) {
      counts.push_back(static_cast<int>(l));
      displs.push_back(static_cast<int>(total));
      total += l;
    }
    fits = total <= static_cast<uint64_t>(INT_MAX);
    if (fits) out.resize(total);
  }
  // Every rank must learn whether the root can take it, or the others would hang.
  int ok = fits ? 1 : 0;
  check(MPI_Ibcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  impl_->complete(req, "MPI_Bcast");
  if (!ok) throw std::length_error("MPI gather_to_root: more than 2 GiB to gather on rank 0");
  check(MPI_Igatherv(mine.data(), static_cast<int>(my_len), MPI_BYTE, out.data(), counts.data(), displs.data(),
                     MPI_BYTE, 0, MPI_COMM_WORLD, &req),
        "MPI_Igatherv");
  impl_->complete(req, "MPI_Gatherv");
  return out;
}

void Session::abort(int code, std::string_view message) const {
  std::fprintf(stderr, "rank %d: %.*s\n", rank_, static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();
}

}  // namespace bkv::mpi
