// The runtime a node is built over (backends/node.hpp), in one shape for every mode.
//
// A node asks its runtime, per thread index (daemons 0..D-1, clients D..D+C-1):
//   Transport& transport(thread)  the transport of a thread that owns a copyrpc context,
//                                 made the first time the node asks (before threads start)
//   Meter&     meter(thread)      where that thread's CPU costs go
//   Waker&     waker()            told when a daemon answers a client
//
// Modes differ in two things only, the two template parameters:
//   Threads  how threads are made: real threads (RealThreads below: costs are not
//            metered, clients spin, nobody is woken) or simulated threads (the simulator
//            runner's: each thread's meter is its simulated clock, the waker schedules
//            the answered client);
//   Make     how a transport is made for a thread: a callable
//            `Transport& make(uint32_t thread, Meter& meter)`; whatever the transport
//            needs to outlive (device contexts, fabrics) the maker owns or references.
//
// Each thread's transport is made at most once and kept, so a node that asks twice
// gets the same transport.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/node_config.hpp"
#include "core/meter.hpp"

namespace bkv::app {

template <class Threads, class Make>
class NodeRuntime {
 public:
  using Meter = typename Threads::Meter;
  using Waker = typename Threads::Waker;
  using Transport = std::remove_reference_t<std::invoke_result_t<Make&, uint32_t, Meter&>>;
  static_assert(std::is_lvalue_reference_v<std::invoke_result_t<Make&, uint32_t, Meter&>>,
                "a transport maker returns a reference to a transport that someone owns");

  NodeRuntime(uint32_t threads, Threads th, Make make)
      : threads_(std::move(th)), make_(std::move(make)), by_thread_(threads, nullptr) {}
  NodeRuntime(const NodeRuntime&) = delete;
  NodeRuntime& operator=(const NodeRuntime&) = delete;

  Transport& transport(uint32_t thread) {
    if (thread >= by_thread_.size())
      throw std::out_of_range("node runtime: thread " + std::to_string(thread) + " of " +
                              std::to_string(by_thread_.size()));
    if (by_thread_[thread] == nullptr) by_thread_[thread] = &make_(thread, threads_.meter(thread));
    return *by_thread_[thread];
  }
  Meter& meter(uint32_t thread) { return threads_.meter(thread); }
  Waker& waker() { return threads_.waker(); }

  // The transports made so far, in thread order.
  template <class F>
  void for_each_transport(F&& f) const {
    for (Transport* t : by_thread_)
      if (t != nullptr) f(*t);
  }
  uint32_t transports() const noexcept {
    uint32_t n = 0;
    for (const Transport* t : by_thread_) n += t != nullptr;
    return n;
  }
  Threads& threads() noexcept { return threads_; }

 private:
  Threads threads_;
  Make make_;
  std::vector<Transport*> by_thread_;
};

// Real threads (hardware, UCX, the wall-clock loopback): no cost metering; clients spin
// on their response slots, so nobody needs waking.
struct RealThreads {
  using Meter = NullMeter;
  using Waker = backend::NullWaker;
  Meter& meter(uint32_t /*thread*/) noexcept { return meter_; }
  Waker& waker() noexcept { return waker_; }

 private:
  Meter meter_;
  Waker waker_;
};

// Storage for transports a maker creates and owns, alive as long as the maker.
template <class T>
class OwnedTransports {
 public:
  template <class... A>
  T& emplace(A&&... args) {
    all_.push_back(std::make_unique<T>(std::forward<A>(args)...));
    return *all_.back();
  }

 private:
  std::vector<std::unique_ptr<T>> all_;
};

}  // namespace bkv::app
