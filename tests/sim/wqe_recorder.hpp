// The WQE events of a simulated cluster's network, recorded from the recorder's
// construction on, for tests that check when the NIC model did what.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "tests/sim/sim_cluster.hpp"

namespace bkv::test {

struct WqeRecorder {
  explicit WqeRecorder(SimCluster& c) { c.net().set_observer(&WqeRecorder::on, this); }
  WqeRecorder(const WqeRecorder&) = delete;
  WqeRecorder& operator=(const WqeRecorder&) = delete;
  std::vector<sim::WqeEvent> events;
  static void on(void* ctx, const sim::WqeEvent& ev) { static_cast<WqeRecorder*>(ctx)->events.push_back(ev); }
  const sim::WqeEvent* find(sim::WqeEvent::Kind k, uint32_t qp, uint64_t seq) const {
    for (const auto& e : events)
      if (e.kind == k && e.qp == qp && e.seq == seq) return &e;
    return nullptr;
  }
  // The event, which must have happened.
  const sim::WqeEvent& get(sim::WqeEvent::Kind k, uint32_t qp, uint64_t seq) const {
    const sim::WqeEvent* e = find(k, qp, seq);
    REQUIRE(e != nullptr);
    return *e;
  }
  // The times of every event of kind `k` on `qp`, in the order they happened.
  std::vector<sim::Time> times(sim::WqeEvent::Kind k, uint32_t qp) const {
    std::vector<sim::Time> out;
    for (const auto& e : events)
      if (e.kind == k && e.qp == qp) out.push_back(e.time);
    return out;
  }
};

}  // namespace bkv::test
