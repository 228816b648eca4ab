// Configuration of one simulated NIC and its link (JSON, nlohmann_json), with defaults
// for a ConnectX-6/7 on PCIe Gen4 x16 behind an HDR100 InfiniBand port and one switch.
// The basis of each default is given next to it; times are nanoseconds (fractions
// allowed), sizes bytes, bandwidths Gbit/s. nic_model.hpp describes what each knob does
// in the pipeline.
//
// JSON: the same nesting as the struct, e.g.
//   { "doorbell_ns": 200, "send": { "engines": 16, "qp_window": 4 },
//     "latency": { "base_ns": 300, "jitter": { "kind": "exponential", "mean": 20 } } }
// Absent keys keep their default; unknown keys and out-of-range values are errors
// naming the key path (e.g. "nic.send.qp_window").
//
// Each struct lists its parameters once, in fields(v): the JSON reader and writer
// (nic_config.cpp) walk that list, so a new parameter is a member and one line there.
// A visitor V offers number(key, double&, lo, hi), integer(key, uint32_t&, lo, hi),
// boolean(key, bool&), distribution(key, Distribution&, lo) and object(key, Struct&);
// lo/hi are the accepted range; times are at most kMaxModelNs.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "sim/distributions.hpp"

namespace bkv::sim {

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();
// The largest time a model parameter may give, in ns: one hour of virtual time (as a
// fault window's end). Model times become integer nanoseconds and picoseconds; below
// this, any sum of a few of them stays exact and far inside 64 bits, where a larger
// value would overflow the conversion.
inline constexpr double kMaxModelNs = 3.6e12;
// The largest per-byte time, in ns: a 2^32-byte message at this rate is about 4.3e18
// ps, still inside 64-bit picoseconds.
inline constexpr double kMaxPerByteNs = 1e6;
inline constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
// The largest inline payload of an RDMA WRITE in one mlx5 send WQE: the control
// segment's DS field (6 bits) sizes a WQE at up to 63 units of 16 bytes, of which the
// control segment, the remote-address segment (16 bytes each) and the inline segment's
// 4-byte header are not payload (transports/mlx5/prm.hpp).
inline constexpr uint32_t kMaxInlineBytes = 63 * 16 - 16 - 16 - 4;
static_assert(kMaxInlineBytes == 972);

struct NicConfig {
  // --- host interface (send side) ---
  // CPU store of the doorbell/BlueFlame MMIO until the NIC sees it: a posted PCIe write
  // through the root complex, ~150-250 ns on Xeon with Gen4/Gen5.
  double doorbell_ns = 200;
  // BlueFlame: when a doorbell publishes at most this many WQEs, the driver copies the
  // WQE into the BlueFlame register with the doorbell, and the NIC skips the WQE fetch
  // (mlx5 does this for single-WQE posts). 0 = never.
  uint32_t blueflame_max_wqes = 1;
  // Payloads up to this size are inline in the WQE (no gather DMA read); 220 is the
  // mlx5 maximum with a 256-byte WQE (docs/design_transports.md §mlx5 and verbs transports). At
  // most kMaxInlineBytes: what the WQE format can carry at all.
  uint32_t inline_max_bytes = 220;
  uint32_t wqe_bytes = 64;        // one mlx5 basic block (ctrl + raddr + data segment)
  uint32_t fetch_max_wqes = 8;    // WQEs one DMA read may fetch (prefetch burst), <= 64

  struct Pcie {
    // DMA read round trip (request TLP up, completion down) for a small read: ~400-600
    // ns measured for Gen3/Gen4 NICs on Xeon (Neugebauer et al., SIGCOMM 2018).
    double read_latency_ns = 500;
    // Posted DMA write until it is visible in host memory / the LLC (DDIO): about half a
    // read round trip.
    double write_latency_ns = 250;
    // Gen4 x16: 16 GT/s x 16 lanes = 252 Gbit/s after 128b/130b; ~200 effective after
    // DLLP/flow-control traffic. Gen5 doubles it.
    double bandwidth_gbps = 200;
    // DMA reads in flight at once (PCIe tags the NIC may have outstanding; Gen4 10-bit
    // tags allow hundreds). A read holds a tag from issue until its data is back, so
    // with many WQE fetches/gathers outstanding, reads queue for tags. 0 = unlimited.
    uint32_t read_tags = 256;
    uint32_t max_payload_bytes = 256;  // MPS: one TLP carries at most this much data
    uint32_t tlp_overhead_bytes = 24;  // TLP header + sequence/LCRC + framing per TLP
    template <class V>
    void fields(V& v) {
      v.number("read_latency_ns", read_latency_ns, 0, kMaxModelNs);
      v.number("write_latency_ns", write_latency_ns, 0, kMaxModelNs);
      v.number("bandwidth_gbps", bandwidth_gbps, 1e-3, kNoLimit);
      v.integer("read_tags", read_tags, 0, 4096);
      v.integer("max_payload_bytes", max_payload_bytes, 1, kU32Max);
      v.integer("tlp_overhead_bytes", tlp_overhead_bytes, 0, kU32Max);
    }
  } pcie;

  struct Send {
    // Send processing units working in parallel. ConnectX-6 is rated ~215 M messages/s
    // NIC-wide: 16 engines x ~75 ns per WQE.
    uint32_t engines = 16;            // 0 = unlimited
    double per_wqe_ns = 75;
    double per_byte_ns = 0;           // bandwidth limits live in PCIe and the link
    // A QP's WQEs are processed in order by one engine at a time (the QP's send context
    // is owned by one processing unit), so one QP cannot use the whole pool.
    bool qp_serial = true;
    // WQEs of one QP inside the send pipeline at once (fetch -> engine -> gather, until
    // handed to the port): with the fetch latency exposed, this caps one QP's rate.
    uint32_t qp_window = 4;
    // Outstanding RDMA READs per QP (the initiator depth, max_rd_atomic; 16 on ConnectX).
    uint32_t max_outstanding_reads = 16;
    template <class V>
    void fields(V& v) {
      v.integer("engines", engines, 0, 4096);
      v.number("per_wqe_ns", per_wqe_ns, 0, kMaxModelNs);
      v.number("per_byte_ns", per_byte_ns, 0, kMaxPerByteNs);
      v.boolean("qp_serial", qp_serial);
      v.integer("qp_window", qp_window, 1, kU32Max);
      v.integer("max_outstanding_reads", max_outstanding_reads, 1, kU32Max);
    }
  } send;

  struct Recv {
    uint32_t engines = 16;            // 0 = unlimited
    double per_packet_ns = 60;        // header checks, QP context, DMA setup per packet
    double per_byte_ns = 0;
    double ack_ns = 20;               // processing an ACK/NAK at the requester
    bool qp_serial = true;            // a responder QP handles its packets in PSN order
    template <class V>
    void fields(V& v) {
      v.integer("engines", engines, 0, 4096);
      v.number("per_packet_ns", per_packet_ns, 0, kMaxModelNs);
      v.number("per_byte_ns", per_byte_ns, 0, kMaxPerByteNs);
      v.number("ack_ns", ack_ns, 0, kMaxModelNs);
      v.boolean("qp_serial", qp_serial);
    }
  } recv;

  struct Link {
    double bandwidth_gbps = 100;      // HDR100 (docs/calibration.md §C1)
    uint32_t mtu_bytes = 4096;        // IB MTU 4096
    // Per packet on the wire: LRH 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4 + VCRC 2, plus
    // delimiters: ~50 bytes. Header-only packets (READ request, ACK) cost one overhead.
    uint32_t packet_overhead_bytes = 50;
    template <class V>
    void fields(V& v) {
      v.number("bandwidth_gbps", bandwidth_gbps, 1e-3, kNoLimit);
      v.integer("mtu_bytes", mtu_bytes, 256, kU32Max);
      v.integer("packet_overhead_bytes", packet_overhead_bytes, 0, kU32Max);
    }
  } link;

  struct Latency {
    // One-way latency between two ports: one HDR switch (~130 ns port to port), a few
    // metres of cable (~5 ns/m), SerDes/FEC at both ends. A transport service's own
    // per-message latency belongs here too when a model needs it (configs/model/c2.json
    // adds the dynamically connected transport's; its basis says how much and why).
    double base_ns = 300;
    // A NIC sending to itself turns the packet around inside the NIC.
    double loopback_ns = 100;
    // Added to every packet's latency (never reorders one QP: see nic_model.hpp).
    Distribution jitter = Distribution::exponential(20);  // JSON null: no jitter
    template <class V>
    void fields(V& v) {
      v.number("base_ns", base_ns, 0, kMaxModelNs);
      v.number("loopback_ns", loopback_ns, 0, kMaxModelNs);
      v.distribution("jitter", jitter, 0.0);
    }
  } latency;

  // Responder: from placing a WRITE to sending its ACK (ACK generation is behind the
  // data DMA in the responder pipeline).
  double ack_turnaround_ns = 50;
  uint32_t cqe_bytes = 64;            // one CQE DMA-written after the data

  struct Rnr {
    // Receiver-not-ready: the requester waits the responder's min_rnr_timer (the
    // receiving node's delay_ns) and resends.
    // IB encodes the timer in steps from 0.01 ms; 10 us is the smallest non-zero step.
    double delay_ns = 10000;
    // The requester's RNR retry count (IB rnr_retry, a QP attribute of the sender: the
    // sending node's value applies); 7 = retry forever.
    uint32_t retry_limit = 7;
    template <class V>
    void fields(V& v) {
      v.number("delay_ns", delay_ns, 1.0, kMaxModelNs);
      v.integer("retry_limit", retry_limit, 0, 7);
    }
  } rnr;

  struct Cache {
    // A set-associative on-NIC cache of ICM entries. 0 entries = disabled (every access
    // hits). A miss costs a PCIe read round trip and stalls the engine that needs it.
    uint32_t entries = 0;
    uint32_t ways = 8;
    double miss_ns = 500;
    uint32_t page_bytes = 4096;       // translation granularity (mtt_cache only)
    template <class V>
    void fields(V& v) {
      v.integer("entries", entries, 0, kU32Max);
      v.integer("ways", ways, 1, 1024);
      v.number("miss_ns", miss_ns, 0, kMaxModelNs);
      v.integer("page_bytes", page_bytes, 1, kU32Max);
    }
    // A relation between fields the reader checks after the object: {key, rule} or {}.
    std::pair<std::string, std::string> invalid() const {
      if (entries % ways != 0) return {"entries", "must be a multiple of ways (" + std::to_string(ways) + ")"};
      return {};
    }
  };
  Cache qp_cache;   // QP contexts, keyed by QP
  Cache mtt_cache;  // memory translation entries, keyed by (key, page)

  template <class V>
  void fields(V& v) {
    v.number("doorbell_ns", doorbell_ns, 0, kMaxModelNs);
    v.integer("blueflame_max_wqes", blueflame_max_wqes, 0, kU32Max);
    v.integer("inline_max_bytes", inline_max_bytes, 0, kMaxInlineBytes);
    v.integer("wqe_bytes", wqe_bytes, 1, kU32Max);
    v.integer("fetch_max_wqes", fetch_max_wqes, 1, 64);
    v.object("pcie", pcie);
    v.object("send", send);
    v.object("recv", recv);
    v.object("link", link);
    v.object("latency", latency);
    v.number("ack_turnaround_ns", ack_turnaround_ns, 0, kMaxModelNs);
    v.integer("cqe_bytes", cqe_bytes, 0, kU32Max);
    v.object("rnr", rnr);
    v.object("qp_cache", qp_cache);
    v.object("mtt_cache", mtt_cache);
  }

  static NicConfig from_json(const nlohmann::json& j, const std::string& path = "nic");
  nlohmann::json to_json() const;
};

}  // namespace bkv::sim
