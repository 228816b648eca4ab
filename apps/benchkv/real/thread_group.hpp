// Threaded runtime for real runs: a group of pinned threads, each running a backend's
// step() in a loop until a shared stop flag is raised (docs/design_backends.md §Step model).
//
// Life of a thread: pin to its CPU -> init() (build thread-owned state, e.g. its
// transport, pre-generate the access pattern) -> report ready -> wait at the start gate
// -> `while (!stop) step();` -> return. The main thread calls wait_ready() (all inits
// done; rethrows an init failure), then e.g. an MPI barrier, then start(); later
// request_stop() and join(). An exception in any thread raises the stop flag for the
// whole group and is rethrown by join() (the first one).
//
// The step loop is a template instantiated per step type, so step() inlines; the only
// type-erased call is the thread's entry, once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "apps/benchkv/real/cpu_pinning.hpp"

namespace bkv::runtime {

inline constexpr size_t kCacheLineSize = 64;

// The stop flag, alone on its cache line: written once by the main thread, read by every
// step loop on each iteration.
class alignas(kCacheLineSize) StopFlag {
 public:
  void request_stop() noexcept { stop_.store(true, std::memory_order_release); }
  bool stop_requested() const noexcept { return stop_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> stop_{false};
};
static_assert(sizeof(StopFlag) == kCacheLineSize && alignof(StopFlag) == kCacheLineSize);

class ThreadGroup {
 public:
  ThreadGroup() = default;
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
  ~ThreadGroup() {
    request_stop();
    open_gate();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  // Starts a thread pinned to `cpu` (-1: unpinned) that runs init() once, waits for
  // start(), then step() until the stop flag is raised. `name` shows in error messages
  // and (first 15 characters) in the OS thread name.
  template <class Init, class Step>
  void spawn(std::string name, int cpu, Init init, Step step) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++spawned_;
    }
    auto body = [this, name = std::move(name), cpu, init = std::move(init), step = std::move(step)]() mutable {
      set_thread_name(name);
      bool ready_reported = false;
      try {
        if (!pin_current_thread(cpu)) record_failure_note(name + ": could not pin to CPU " + std::to_string(cpu));
        init();
        report_ready();
        ready_reported = true;
        wait_gate();
        run_loop(step);
      } catch (...) {
        record_exception(std::current_exception());
        if (!ready_reported) report_ready();
      }
    };
    try {
      threads_.emplace_back(std::move(body));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      --spawned_;
      throw;
    }
  }
  template <class Step>
  void spawn(std::string name, int cpu, Step step) {
    spawn(std::move(name), cpu, [] {}, std::move(step));
  }

  // Blocks until every spawned thread finished init(). Rethrows the first failure.
  void wait_ready() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_cv_.wait(lock, [&] { return ready_ == spawned_; });
    if (error_) std::rethrow_exception(error_);
  }
  // Opens the start gate: every thread enters its step loop.
  void start() { open_gate(); }
  void request_stop() noexcept { stop_.request_stop(); }
  const StopFlag& stop_flag() const noexcept { return stop_; }
  bool stop_requested() const noexcept { return stop_.stop_requested(); }
  // Joins every thread; rethrows the first exception any of them threw.
  void join() {
    open_gate();  // a thread still at the gate must be able to leave
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
  }
  size_t size() const noexcept { return threads_.size(); }
  // Pinning failures (not fatal), for the caller to print once.
  std::vector<std::string> notes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return notes_;
  }

 private:
  template <class Step>
  void run_loop(Step& step) {
    while (!stop_.stop_requested()) step();
  }
  void report_ready() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++ready_;
    ready_cv_.notify_all();
  }
  void wait_gate() {
    std::unique_lock<std::mutex> lock(mutex_);
    gate_cv_.wait(lock, [&] { return gate_open_; });
  }
  void open_gate() {
    std::lock_guard<std::mutex> lock(mutex_);
    gate_open_ = true;
    gate_cv_.notify_all();
  }
  void record_exception(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::move(e);
    }
    request_stop();
  }
  void record_failure_note(std::string note) {
    std::lock_guard<std::mutex> lock(mutex_);
    notes_.push_back(std::move(note));
  }
  static void set_thread_name(const std::string& name) noexcept {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  }

  StopFlag stop_;
  mutable std::mutex mutex_;
  std::condition_variable ready_cv_, gate_cv_;
  size_t spawned_ = 0, ready_ = 0;
  bool gate_open_ = false;
  std::exception_ptr error_;
  std::vector<std::string> notes_;
  std::vector<std::thread> threads_;
};

}  // namespace bkv::runtime
