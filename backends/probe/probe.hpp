// `benchkv probe`: micro-benchmarks over the Transport concept itself (no copyrpc), for
// the quantities the simulator's NIC and CPU model needs (docs/your_cluster.md):
//
//   rate       one posting thread keeps WRITE+IMMs outstanding over k queue pairs, in
//              strict round robin, `batch` WQEs per doorbell; WQEs per second over a
//              window of completions, the posting thread's busy fraction and loop rate;
//              with several posting threads (`threads`), each has its own k / threads
//              queue pairs and its own Initiator, all started together, and the test's
//              result is their merge (merge_threads);
//   write_lat  WRITE+IMM ping-pong: the target answers each ping with a WRITE+IMM of the
//              same size; half the round trip, as perftest's ib_write_lat reports;
//   read_lat   one READ outstanding, post to its send completion.
//
// Every test also times, on the meter's clock (virtual time under the simulator, the TSC
// on real runs), each doorbell batch it posts (x = WQEs in the batch) and each send-CQ
// poll (x = completions it returned): the straight lines through them give the CPU cost
// of a WQE and of a doorbell, of an empty poll and of a completion. Under the simulator
// those are the model's cpu.* costs read back through the clock, not an independent
// measurement; on real runs they include the clock reads.
//
// Both sides are step-driven (one step = one loop iteration), so the same code runs as a
// simulated thread's step, in one thread alternating the two sides (one process), or on
// two ranks. The initiator charges Op::kLoop, kCqPoll, kCqe, kFlush and kDoorbell as the
// daemons do, so a simulated probe pays what the model says a daemon pays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/meter.hpp"
#include "core/transport.hpp"

namespace bkv::probe {

enum class TestKind : uint8_t { kRate = 0, kWriteLatency, kReadLatency };

constexpr const char* to_string(TestKind k) noexcept {
  switch (k) {
    case TestKind::kRate: return "rate";
    case TestKind::kWriteLatency: return "write_lat";
    case TestKind::kReadLatency: return "read_lat";
  }
  return "?";
}

// One test of the plan.
struct TestSpec {
  TestKind kind = TestKind::kRate;
  uint32_t qps = 1;      // rate: queue pairs posted to in round robin
  uint32_t batch = 1;    // rate: WQEs per doorbell
  uint32_t size = 64;    // payload bytes
  uint32_t warmup = 0;   // rate: WQEs completed before the window opens; latency: round trips not kept
  uint32_t iters = 0;    // rate: WQEs in the window (rounded up, see Initiator); latency: round trips kept
  uint32_t threads = 1;  // rate: posting threads, each over qps / threads of the queue pairs (one Initiator each)
};

// Least-squares line y = a + b x over the points added.
struct Line {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  void add(double x, double y) noexcept {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  void merge(const Line& o) noexcept {
    n += o.n;
    sx += o.sx;
    sy += o.sy;
    sxx += o.sxx;
    sxy += o.sxy;
  }
  // Whether the points hold two distinct x values (a line is determined).
  bool determined() const noexcept { return n >= 2 && n * sxx - sx * sx > 1e-9 * n * n; }
  double slope() const noexcept { return determined() ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0.0; }
  double intercept() const noexcept { return n > 0 ? (sy - slope() * sx) / n : 0.0; }
  double mean_y() const noexcept { return n > 0 ? sy / n : 0.0; }
};

struct TestResult {
  TestSpec spec;
  // The window: rate tests, from the first poll that saw `warmup` completions to the
  // first that saw iters more (the posts go on past it, so the pipeline is full
  // throughout); latency tests, the kept round trips.
  uint64_t wqes = 0;         // WQEs completed in the window (rate)
  uint64_t window_ns = 0;
  uint64_t loops = 0;        // posting-thread loops in the window
  uint64_t busy_loops = 0;   // of which posted or took a completion
  uint64_t busy_ns = 0;      // their time
  Line post;                 // per doorbell: x = WQEs, y = ns to post them and ring
  Line poll;                 // per send-CQ poll: x = completions returned, y = ns
  Line loop;                 // per rate-test loop: y = ns outside its timed polls and posts
  std::vector<uint64_t> latency_ns;  // latency tests: one sample per kept round trip
  // Rate tests: WQEs posted and completed over the whole test (warm-up, window and the
  // tail past it); equal once the test ended.
  uint64_t posted = 0, completed = 0;
  // A rate test run by several posting threads between two processes: each thread's
  // counts, the target side's included (filled by the caller; empty otherwise).
  struct Thread {
    uint32_t qps = 0;
    uint64_t posted = 0, completed = 0;
    uint64_t received = 0;  // WRITE+IMMs the thread's target took (receive completions)
    uint64_t wqes = 0, window_ns = 0;
    double busy_fraction = 0;
  };
  std::vector<Thread> per_thread;
  // A rate test of several posting threads whose posting or target threads outnumbered
  // their host's CPUs (set by the caller): they yielded the CPU after every loop, so the
  // rate is the scheduler's, not the transport's or the NIC's.
  bool oversubscribed = false;

  double rate_wqe_per_s() const noexcept { return window_ns ? double(wqes) * 1e9 / double(window_ns) : 0.0; }
  double busy_fraction() const noexcept { return window_ns ? double(busy_ns) / double(window_ns) : 0.0; }
  double loop_rate_per_s() const noexcept { return window_ns ? double(loops) * 1e9 / double(window_ns) : 0.0; }
};

// Immediate of a latency ping: the target answers it with a WRITE+IMM of the same size.
inline constexpr uint32_t kPingImm = 0x80000000u;
inline constexpr uint32_t kRateImm = 0;
// Send-CQ moderation of the rate tests: one signalled WQE in kSignalEvery per QP (a
// multiple of every batch size, so the last WQE of a QP in a test is signalled).
inline constexpr uint32_t kSignalEvery = 16;
inline constexpr uint32_t kMaxBatch = 16;
// WQEs outstanding per QP in a rate test (perftest's tx-depth), at most the send queue.
inline constexpr uint32_t kRateDepth = 128;
// Send-queue room a WQE may take where room is counted in 64-byte blocks (mlx5: a WQE
// with up to 220 inline bytes is 4 blocks); a batch is posted only with this much room each.
inline constexpr uint32_t kRoomPerWqe = 4;

// WQEs a rate test posts past warmup + iters, so that the pipeline is still full when
// the window closes: the window opens up to one poll's completions past warmup (at most
// 32 signalled CQEs of kSignalEvery WQEs, and never more than is outstanding), plus one
// round of every QP's signalling unit; a multiple of qps x kSignalEvery.
constexpr uint64_t rate_tail(const TestSpec& s) noexcept {
  const uint64_t unit = uint64_t{s.qps} * kSignalEvery;
  const uint64_t overshoot = std::min<uint64_t>(32ull * kSignalEvery, uint64_t{kRateDepth} * s.qps);
  return (overshoot + unit + unit - 1) / unit * unit;
}

// Refills the SRQ toward its capacity, `receives` being the side's own count (posted
// minus completions polled), by as many as the transport accepts now: it may still
// count receives whose completions were polled (the direct mlx5 path: a compressed
// session read in part keeps its CQ entries); the rest follows at a later refill.
template <Transport T>
void refill_receives(T& t, uint32_t& receives) {
  const uint32_t n = std::min(t.srq_capacity() - receives, t.srq_capacity() - t.srq_posted());
  if (n != 0) t.post_receives(n);
  receives += n;
}

template <Transport T>
class Target;

// The side that posts and measures.
template <Transport T>
class Initiator {
 public:
  using QP = typename T::QueuePair;
  using Info = typename T::ConnectInfo;

  Initiator(T& t, uint32_t qps, uint32_t max_size) : t_(t), max_size_(max_size) {
    if (qps == 0) throw std::invalid_argument("probe: at least one queue pair");
    src_.assign(max_size, std::byte{0x5a});
    dst_.assign(max_size, std::byte{0});
    src_mr_ = t_.register_memory(src_.data(), src_.size(), kAccessLocalWrite);
    dst_mr_ = t_.register_memory(dst_.data(), dst_.size(), kAccessLocalWrite | kAccessRemoteWrite);
    for (uint32_t i = 0; i < qps; ++i) qps_.push_back(&t_.create_queue_pair());
    t_.post_receives(t_.srq_capacity());
    receives_ = t_.srq_capacity();
  }

  uint32_t qps() const noexcept { return static_cast<uint32_t>(qps_.size()); }
  Info local_info(uint32_t i) const { return qps_.at(i)->local_info(); }
  void connect(uint32_t i, const Info& remote) { qps_.at(i)->connect(remote); }
  // Where the target's pongs land (a window of this side's registered memory).
  RemoteBuffer landing() const noexcept { return RemoteBuffer{reinterpret_cast<uint64_t>(dst_mr_.addr), dst_mr_.rkey, 0, dst_mr_.length}; }
  void set_remote(const RemoteBuffer& b) {
    if (b.length < max_size_) throw std::invalid_argument("probe: the target's buffer is smaller than the largest message");
    remote_ = b;
  }

  // The tests to run, in order. Rate tests' iters are rounded up to a multiple of
  // qps x kSignalEvery (every QP's last WQE signalled); their qps at most qps().
  void set_plan(std::vector<TestSpec> plan) {
    for (TestSpec& s : plan) {
      if (s.size == 0 || s.size > max_size_) throw std::invalid_argument("probe: message size out of range");
      if (s.threads != 1)
        throw std::invalid_argument("probe: a test with several posting threads runs as one single-thread test per "
                                    "thread (thread_share), each on its own Initiator");
      if (s.kind == TestKind::kRate) {
        if (s.qps == 0 || s.qps > qps()) throw std::invalid_argument("probe: a rate test over more queue pairs than made");
        if (s.batch == 0 || s.batch > kMaxBatch || kSignalEvery % s.batch != 0)
          throw std::invalid_argument("probe: batch must divide " + std::to_string(kSignalEvery));
        const uint64_t unit = uint64_t{s.qps} * kSignalEvery;
        s.iters = static_cast<uint32_t>((std::max<uint64_t>(s.iters, 1) + unit - 1) / unit * unit);
        s.warmup = static_cast<uint32_t>((uint64_t{s.warmup} + unit - 1) / unit * unit);
      } else if (s.iters == 0) {
        throw std::invalid_argument("probe: a latency test needs iterations");
      }
    }
    plan_ = std::move(plan);
    results_.clear();
    next_ = 0;
    begin_test();
  }

  bool done() const noexcept { return next_ >= plan_.size(); }
  const std::vector<TestResult>& results() const noexcept { return results_; }
  uint64_t errors() const noexcept { return errors_; }
  const std::string& first_error() const noexcept { return first_error_; }

  // One loop. Returns whether the plan still runs.
  bool step() {
    if (done()) return false;
    auto& m = t_.meter();
    const uint64_t t0 = m.now_ns();
    m.charge(Op::kLoop, 1);
    loop_timed_ns_ = 0;
    bool worked = false;
    const TestSpec& s = plan_[next_];
    if (s.kind == TestKind::kRate) worked = rate_loop(s);
    else if (s.kind == TestKind::kWriteLatency) worked = write_lat_loop(s);
    else worked = read_lat_loop(s);
    const uint64_t t2 = m.now_ns();
    if (in_window_ && !done()) {
      TestResult& r = results_.back();
      ++r.loops;
      // The loop's own time: all of it but the timed polls and posts (rate tests, whose
      // loops hold nothing else).
      if (s.kind == TestKind::kRate) r.loop.add(0, double(t2 - t0 - loop_timed_ns_));
      if (worked) {
        ++r.busy_loops;
        r.busy_ns += t2 - t0;
      }
    }
    if (test_finished_) finish_test();
    return !done();
  }

 private:
  void begin_test() {
    test_finished_ = false;
    in_window_ = window_opened_ = false;
    if (done()) return;
    results_.emplace_back();
    results_.back().spec = plan_[next_];
    posted_ = completed_ = 0;
    per_qp_posted_.assign(qps(), 0);
    per_qp_completed_.assign(qps(), 0);
    rr_ = 0;
    rounds_ = 0;
    ping_out_ = false;
    if (plan_[next_].kind == TestKind::kRate && plan_[next_].warmup == 0) open_window();
  }
  void finish_test() {
    ++next_;
    begin_test();
  }
  void open_window() {
    in_window_ = window_opened_ = true;
    window_start_ns_ = t_.meter().now_ns();
    window_start_completed_ = completed_;
  }

  void fail(const std::string& what) {
    if (errors_++ == 0) first_error_ = what;
    throw std::runtime_error("probe: " + what);
  }

  // Polls the send CQ once, timed; returns the completions.
  uint32_t poll_send_timed() {
    auto& m = t_.meter();
    const uint64_t a = m.now_ns();
    m.charge(Op::kCqPoll, 1);
    const uint32_t n = t_.poll_send(
        [this, &m](const SendCompletion& c) {
          m.charge(Op::kCqe, 1);
          if (c.status != WcStatus::kSuccess) fail(std::string("a work request failed: ") + to_string(c.status));
          on_send_completion(c);
        },
        32);
    const uint64_t ns = m.now_ns() - a;
    loop_timed_ns_ += ns;
    if (in_window_) results_.back().poll.add(double(n), double(ns));
    return n;
  }

  void on_send_completion(const SendCompletion& c) {
    const uint32_t qp = static_cast<uint32_t>(c.wr_id >> 32);
    const uint32_t seq = static_cast<uint32_t>(c.wr_id);  // WQEs of this QP through this one
    if (qp >= qps()) fail("a completion names an unknown queue pair");
    const TestSpec& s = plan_[next_];
    if (s.kind == TestKind::kRate) {
      if (seq < per_qp_completed_[qp]) fail("completions out of order on one queue pair");
      completed_ += seq - per_qp_completed_[qp];
      per_qp_completed_[qp] = seq;
    } else if (s.kind == TestKind::kReadLatency) {
      read_done_ = true;
    }
  }

  bool rate_loop(const TestSpec& s) {
    auto& m = t_.meter();
    const uint32_t got = poll_send_timed();
    if (!window_opened_ && completed_ >= s.warmup) open_window();
    if (in_window_ && completed_ - window_start_completed_ >= s.iters) {
      TestResult& r = results_.back();
      r.wqes = completed_ - window_start_completed_;
      r.window_ns = m.now_ns() - window_start_ns_;
      // The rest of the test's WQEs drain before the next test starts.
      in_window_ = false;
    }
    const uint64_t total = uint64_t{s.warmup} + s.iters + rate_tail(s);
    bool posted = false;
    const uint32_t depth = std::min(kRateDepth, t_.send_queue_depth());
    // Strict round robin, one doorbell batch per QP at most, while the next QP has room.
    for (uint32_t b = 0; b < s.qps && posted_ < total; ++b) {
      const uint32_t q = rr_;
      QP& qp = *qps_[q];
      if (per_qp_posted_[q] - per_qp_completed_[q] + s.batch > depth || qp.send_queue_free() < s.batch * kRoomPerWqe) break;
      const uint64_t a = m.now_ns();
      for (uint32_t i = 0; i < s.batch; ++i) {
        m.charge(Op::kFlush, 1);
        const uint32_t seq = ++per_qp_posted_[q];
        const bool sig = seq % kSignalEvery == 0;
        if (qp.post_write_imm(src_.data(), s.size, src_mr_.lkey, remote_, kRateImm, (uint64_t{q} << 32) | seq, sig) !=
            PostResult::kOk)
          fail("the send queue refused a WQE it had room for");
      }
      m.charge(Op::kDoorbell, 1);
      qp.ring_doorbell();
      const uint64_t ns = m.now_ns() - a;
      loop_timed_ns_ += ns;
      if (in_window_) results_.back().post.add(double(s.batch), double(ns));
      posted_ += s.batch;
      rr_ = q + 1 == s.qps ? 0 : q + 1;
      posted = true;
    }
    if (posted_ >= total && completed_ >= total) {
      test_finished_ = true;
      results_.back().posted = posted_;
      results_.back().completed = completed_;
      if (in_window_) {  // not reached on the tail's margin; the window still measured
        TestResult& r = results_.back();
        r.wqes = completed_ - window_start_completed_;
        r.window_ns = m.now_ns() - window_start_ns_;
        in_window_ = false;
      }
    }
    return posted || got > 0;
  }

  // Posts one signalled WQE on QP 0 (the ping or the READ), timed as a batch of one.
  void post_one(const TestSpec& s, bool read) {
    auto& m = t_.meter();
    QP& qp = *qps_[0];
    const uint64_t a = m.now_ns();
    m.charge(Op::kFlush, 1);
    const uint32_t seq = ++per_qp_posted_[0];
    const PostResult pr = read ? qp.post_read(dst_.data(), s.size, dst_mr_.lkey, remote_, seq, true)
                               : qp.post_write_imm(src_.data(), s.size, src_mr_.lkey, remote_, kPingImm | s.size, seq, true);
    if (pr != PostResult::kOk) fail("the send queue refused a latency WQE");
    m.charge(Op::kDoorbell, 1);
    qp.ring_doorbell();
    if (rounds_ >= s.warmup) results_.back().post.add(1, double(m.now_ns() - a));
    ping_out_ = true;
    ping_ns_ = a;
  }

  void keep_sample(const TestSpec& s, uint64_t ns) {
    ++rounds_;
    if (rounds_ <= s.warmup) return;
    TestResult& r = results_.back();
    r.latency_ns.push_back(ns);
    r.window_ns += ns;
    if (rounds_ == uint64_t{s.warmup} + s.iters) test_finished_ = true;
  }

  bool write_lat_loop(const TestSpec& s) {
    auto& m = t_.meter();
    in_window_ = rounds_ >= s.warmup;
    bool worked = poll_send_timed() > 0;  // frees the ping's slot
    uint32_t pongs = 0;
    m.charge(Op::kCqPoll, 1);
    t_.poll_recv(
        [&](const RecvCompletion& c) {
          m.charge(Op::kCqe, 1);
          if (c.status != WcStatus::kSuccess) fail(std::string("a pong failed: ") + to_string(c.status));
          ++pongs;
        },
        32);
    if (pongs > 0) {
      worked = true;
      receives_ -= pongs;
      if (pongs != 1 || !ping_out_) fail("a pong without a ping");
      ping_out_ = false;
      // Half the round trip, as perftest's write latency.
      keep_sample(s, (m.now_ns() - ping_ns_) / 2);
      if (receives_ < t_.srq_capacity() / 2) refill_receives(t_, receives_);
    }
    if (!ping_out_ && !test_finished_ && qps_[0]->send_queue_free() >= kRoomPerWqe) {
      post_one(s, false);
      worked = true;
    }
    return worked;
  }

  bool read_lat_loop(const TestSpec& s) {
    auto& m = t_.meter();
    in_window_ = rounds_ >= s.warmup;
    read_done_ = false;
    bool worked = poll_send_timed() > 0;
    if (read_done_) {
      if (!ping_out_) fail("a READ completion without a READ");
      ping_out_ = false;
      keep_sample(s, m.now_ns() - ping_ns_);
    }
    if (!ping_out_ && !test_finished_) {
      post_one(s, true);
      worked = true;
    }
    return worked;
  }

  T& t_;
  uint32_t max_size_;
  std::vector<std::byte> src_, dst_;
  MemoryRegion src_mr_{}, dst_mr_{};
  std::vector<QP*> qps_;
  RemoteBuffer remote_{};
  uint32_t receives_ = 0;

  std::vector<TestSpec> plan_;
  std::vector<TestResult> results_;
  size_t next_ = 0;
  bool test_finished_ = false, in_window_ = false, window_opened_ = false;
  uint64_t window_start_ns_ = 0, window_start_completed_ = 0;
  uint64_t posted_ = 0, completed_ = 0;
  std::vector<uint32_t> per_qp_posted_, per_qp_completed_;
  uint32_t rr_ = 0;
  uint64_t rounds_ = 0;
  bool ping_out_ = false, read_done_ = false;
  uint64_t ping_ns_ = 0;
  uint64_t loop_timed_ns_ = 0;  // this loop's time in timed polls and posts
  uint64_t errors_ = 0;
  std::string first_error_;
};

// The passive side: takes the WRITE+IMMs (reposting receives), answers pings, serves
// READs (the NIC does: the target's CPU does nothing for them).
template <Transport T>
class Target {
 public:
  using QP = typename T::QueuePair;
  using Info = typename T::ConnectInfo;

  Target(T& t, uint32_t qps, uint32_t max_size) : t_(t) {
    if (qps == 0) throw std::invalid_argument("probe: at least one queue pair");
    buf_.assign(max_size, std::byte{0x3c});
    mr_ = t_.register_memory(buf_.data(), buf_.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
    for (uint32_t i = 0; i < qps; ++i) qps_.push_back(&t_.create_queue_pair());
    t_.post_receives(t_.srq_capacity());
    receives_ = t_.srq_capacity();
  }
  Info local_info(uint32_t i) const { return qps_.at(i)->local_info(); }
  void connect(uint32_t i, const Info& remote) { qps_.at(i)->connect(remote); }
  RemoteBuffer window() const noexcept { return RemoteBuffer{reinterpret_cast<uint64_t>(mr_.addr), mr_.rkey, 0, mr_.length}; }
  void set_remote(const RemoteBuffer& b) noexcept { remote_ = b; }

  uint64_t received() const noexcept { return received_; }
  uint64_t pongs() const noexcept { return pongs_; }

  // One loop: receive completions (reposting receives), pongs, send completions.
  void step() {
    auto& m = t_.meter();
    m.charge(Op::kLoop, 1);
    m.charge(Op::kCqPoll, 1);
    uint32_t got = t_.poll_recv(
        [&](const RecvCompletion& c) {
          m.charge(Op::kCqe, 1);
          if (c.status != WcStatus::kSuccess) throw std::runtime_error(std::string("probe target: ") + to_string(c.status));
          ++received_;
          if ((c.imm & kPingImm) != 0) pong(c.qp_num, c.imm & ~kPingImm);
        },
        64);
    receives_ -= got;
    if (receives_ < t_.srq_capacity() / 2) refill_receives(t_, receives_);
    if (pongs_out_ > 0) {
      m.charge(Op::kCqPoll, 1);
      pongs_out_ -= t_.poll_send(
          [&](const SendCompletion& c) {
            m.charge(Op::kCqe, 1);
            if (c.status != WcStatus::kSuccess) throw std::runtime_error(std::string("probe target: ") + to_string(c.status));
          },
          32);
    }
  }

 private:
  void pong(uint32_t qp_num, uint32_t size) {
    auto& m = t_.meter();
    for (QP* q : qps_)
      if (q->qp_num() == qp_num) {
        m.charge(Op::kFlush, 1);
        if (q->post_write_imm(buf_.data(), size, mr_.lkey, remote_, 0, ++pongs_, true) != PostResult::kOk)
          throw std::runtime_error("probe target: the send queue refused a pong");
        m.charge(Op::kDoorbell, 1);
        q->ring_doorbell();
        ++pongs_out_;
        return;
      }
    throw std::runtime_error("probe target: a ping on an unknown queue pair");
  }

  T& t_;
  std::vector<std::byte> buf_;
  MemoryRegion mr_{};
  std::vector<QP*> qps_;
  RemoteBuffer remote_{};
  uint32_t receives_ = 0;
  uint64_t received_ = 0, pongs_ = 0, pongs_out_ = 0;
};

// One posting thread's part of a rate test with several: its share of the queue pairs
// and of the window, as a single-thread test.
inline TestSpec thread_share(const TestSpec& s) {
  if (s.kind != TestKind::kRate || s.threads == 0 || s.qps % s.threads != 0)
    throw std::invalid_argument("probe: several posting threads need a rate test whose queue pairs they divide");
  TestSpec t = s;
  t.qps = s.qps / s.threads;
  t.warmup = s.warmup / s.threads;
  t.iters = s.iters / s.threads;
  t.threads = 1;
  return t;
}

// The result of a rate test run by several posting threads from each thread's own: the
// WQEs summed over the threads in the longest thread's window (their windows open
// together and overlap, so the sum over the longest is a lower bound of the node's rate);
// loops and busy time of the busiest thread (the one nearest to limiting the rate); the
// timed posts, polls and loops of all.
inline TestResult merge_threads(const TestSpec& spec, const std::vector<TestResult>& parts) {
  TestResult m;
  m.spec = spec;
  const TestResult* busiest = nullptr;
  for (const TestResult& r : parts) {
    m.wqes += r.wqes;
    m.posted += r.posted;
    m.completed += r.completed;
    m.window_ns = std::max(m.window_ns, r.window_ns);
    if (busiest == nullptr || r.busy_fraction() > busiest->busy_fraction()) busiest = &r;
    m.post.merge(r.post);
    m.poll.merge(r.poll);
    m.loop.merge(r.loop);
  }
  if (busiest != nullptr) {
    // Scaled to the merged window, so that busy_fraction() and loop_rate_per_s() are the
    // busiest thread's own.
    const double f = busiest->window_ns ? double(m.window_ns) / double(busiest->window_ns) : 0.0;
    m.loops = static_cast<uint64_t>(double(busiest->loops) * f + 0.5);
    m.busy_loops = static_cast<uint64_t>(double(busiest->busy_loops) * f + 0.5);
    m.busy_ns = static_cast<uint64_t>(double(busiest->busy_ns) * f + 0.5);
  }
  return m;
}

// Connects an initiator and a target made in one process.
template <Transport T>
void connect(Initiator<T>& a, Target<T>& b) {
  for (uint32_t i = 0; i < a.qps(); ++i) {
    a.connect(i, b.local_info(i));
    b.connect(i, a.local_info(i));
  }
  a.set_remote(b.window());
  b.set_remote(a.landing());
}

// Runs a plan with both sides in this thread, one loop of each in turn (a one-process
// probe over a real transport's code: UCX, the mlx5 NIC emulator). Throws when the plan
// has not ended after max_loops initiator loops.
template <Transport T>
void run_in_one_thread(Initiator<T>& a, Target<T>& b, uint64_t max_loops) {
  for (uint64_t i = 0; a.step(); ++i) {
    b.step();
    if (i >= max_loops) throw std::runtime_error("probe: the plan did not end within " + std::to_string(max_loops) + " loops");
  }
}

// Runs the one-thread tests of `plan` (a test of several posting threads needs threads of
// its own on each side, so it is skipped) between two transports of this process, an
// initiator on `a` and a target on `b` over `qps` queue pairs and messages up to
// `max_size` bytes, both stepped by this thread (run_in_one_thread); then checks that
// every WRITE+IMM posted reached the target once and every ping was answered, giving the
// target up to kTailSteps more loops for the last ones. Returns the initiator's results;
// throws std::runtime_error naming the counts when they differ.
inline constexpr uint32_t kTailSteps = 1000;
template <Transport T>
std::vector<TestResult> run_one_process(T& a, T& b, const std::vector<TestSpec>& plan, uint32_t qps, uint32_t max_size,
                                        uint64_t max_loops) {
  Initiator<T> init(a, qps, max_size);
  Target<T> target(b, qps, max_size);
  connect(init, target);
  std::vector<TestSpec> one_thread;
  for (const TestSpec& t : plan)
    if (t.threads == 1) one_thread.push_back(t);
  init.set_plan(one_thread);
  run_in_one_thread(init, target, max_loops);
  uint64_t writes = 0, pings = 0;
  for (const TestResult& r : init.results()) {
    if (r.spec.kind == TestKind::kRate) writes += r.posted;
    if (r.spec.kind == TestKind::kWriteLatency) pings += uint64_t{r.spec.warmup} + r.spec.iters;
  }
  for (uint32_t i = 0; i < kTailSteps && target.received() < writes + pings; ++i) target.step();
  if (target.received() != writes + pings || target.pongs() != pings)
    throw std::runtime_error("probe: the initiator posted " + std::to_string(writes) + " WRITE+IMMs and " +
                             std::to_string(pings) + " pings; the target took " + std::to_string(target.received()) +
                             " and answered " + std::to_string(target.pongs()));
  return init.results();
}

}  // namespace bkv::probe
