// The simulated NICs and network: RC queue pairs, the NIC pipeline as a chain of queueing
// stations, completion queues and shared receive queues, on the discrete-event engine.
//
// ----------------------------------------------------------------------------------
// Pipeline of one work request (WQE). Each arrow is an engine event; inside an event
// the stations named are computed on arrival (stations.hpp).
//
//   post (thread now())           WQE written into the SQ ring, stage Posted; an inline
//                                 WRITE's payload is copied with it (the caller may reuse
//                                 its buffer once post returns, as on hardware)
//   ring_doorbell (thread now())  -> Doorbell   at now + doorbell_ns (MMIO over PCIe)
//   Doorbell   the NIC learns of the WQEs; they queue for admission (Admit)
//   Admit      per-QP window: at most send.qp_window WQEs of a QP inside the send
//              pipeline, and at most send.max_outstanding_reads READs in flight;
//              admitted WQEs are fetched by DMA read (up to fetch_max_wqes per read,
//              PCIe host->NIC: read latency + bytes/bandwidth), skipped for WQEs that
//              came with a BlueFlame doorbell        -> Engine at fetch completion
//   Engine     send engine pool (send.engines servers, per_wqe + per_byte service,
//              QP-context / translation cache misses add to the service); with
//              send.qp_serial a QP's WQEs never overlap in the engines; local key and
//              bounds check; payload gather by DMA read unless inline
//                                                     -> Tx when gathered
//   Tx         leaves the window (admits the next WQE of the QP); serializes on the
//              node's port at link bandwidth; one-way latency = base + jitter
//                                                     -> Rx at the remote port
//   Rx         (responder) serializes into the target port (switch egress), receive
//              engine pool (recv.engines, per packet + per byte, per-QP in order with
//              recv.qp_serial), rkey/bounds/permission/owner check (software_nic); WRITE:
//              DMA write of data (+CQE) over PCIe NIC->host  -> Land
//              READ: DMA read of the data from responder memory -> ReadTx
//              violation: NAK (remote access error)      -> Ack
//   Land       WRITE bytes copied into the target's memory (inline: from the copy taken
//              at post; gathered: from the source buffer as it is now); WRITE+IMM
//              consumes one SRQ receive and queues a receive completion (wakes the
//              owning thread); no receive posted: RNR NAK, the WQE lands again after
//              the NAK's way back (ack_turnaround + latency), rnr.delay_ns and the
//              resend's way out (latency) (the QP's later WQEs wait behind it);
//              signaled -> Ack after ack_turnaround + latency
//   ReadTx     (responder) READ data copied into the requester's buffer (contents are
//              undefined until the completion, as on a real NIC), response serialized
//              on the responder's port, latency back     -> ReadRx
//   ReadRx     requester port, receive engine, DMA write of data + CQE -> Complete
//   Ack        requester port, receive engine (ack_ns), CQE DMA write -> Complete;
//              a NAK moves the QP to the error state and flushes every later WQE
//   Complete   signaled or failed WQEs produce a send completion (wakes the thread);
//              the WQE retires (its SQ slot is reused only after the user polled a
//              later-or-equal signaled completion: send queue depth has its real meaning)
//
// RC order: every stage is FIFO per QP. An event for (QP, stage) drains the QP's WQEs
// at that stage whose due time has come, oldest first, and stops at the first one not
// yet due; a later WQE whose jittered arrival is earlier simply waits for the earlier
// one. So jitter, engine parallelism or RNR never reorder one QP; WQEs that skip a
// stage (READs skip Land, WRITEs skip ReadTx) pass it once they are beyond it, and a
// stage held up by an earlier WQE on the other branch (a READ behind a WRITE that has
// not landed: the READ must see its data) is drained again when that WQE moves on.
//
// Approximations: stations computed inside the event of an earlier station (the PCIe
// gather behind the engine, the receive engine and PCIe write behind the port) see
// their arrivals in the order of the earlier station's events, which may differ from
// their own arrival order by up to one service time. Messages larger than the MTU
// occupy the port as one unit (no packet interleaving between QPs). An RNR NAK and the
// resend it causes take their wire latencies but no station: the resend skips the
// requester's send engine and port and the responder's port, receive engine and data
// DMA write (about 0.4 us for a small WRITE+IMM with the defaults, most of it the 250 ns
// DMA write, once per RNR period of at least 10 us), and no station is busy for it.
// ACKs of unsignaled WRITEs are coalesced into later ones and not modelled; ACKs that
// are modelled use the requester's port and receive engines but not the responder's
// port. A fetched WQE is read over PCIe as wqe_bytes (one 64 B basic block) whatever its
// size: an inline WQE of up to 220 B spans up to 4 blocks, so its fetch is short by up to
// 192 B (about 8 ns of PCIe against a fetch of about 500 ns; at C1 a WQE is BlueFlamed,
// not fetched, unless one doorbell covers several).
//
// Faults (sim/faults.hpp; none by default): a receive queue may be treated as empty for
// a while (the rnr_storm hook): WRITE+IMMs landing there are RNR NAKed as above, with
// the storm's retry count; exhausting it fails the connection when the NAK is back at
// the requester. A request packet may be lost at Tx (the
// packet_loss hook): the requester retransmits it after the local ACK timeout, the QP's
// later WQEs waiting behind it at Tx (go-back-N: the responder would drop the packets
// that follow a gap, and they are resent after it; their first transmissions are not
// modelled), at most retry_cnt times; one more loss completes it with kRetryExceeded and
// the connection fails. The same fault loses ACKs and READ responses on the link
// (packets the responder's node sends back to the requester's): the request was
// executed, but the requester hears nothing and resends it when the local ACK timer
// (started at the request's last transmission) expires, counted against the same
// retry_cnt. The resent request reaches the responder as a duplicate (its PSN is behind
// the responder's expected PSN): the responder's duplicate detection does not execute a
// WRITE again and only ACKs it; a READ is executed again (IB: duplicate READs are
// re-read). With duplicate detection switched off (set_duplicate_detection, the
// model's "psn_duplicate_detection": false; a planted bug for the tests) a duplicate
// WRITE lands again, and a WRITE+IMM consumes a receive and completes again. The WQE
// waits out this exchange at the Ack stage (Wqe::resend says where it is), so the QP's
// later completions wait behind it; a lost ACK is not covered by a later WQE's ACK
// (coalesced ACKs are not modelled: each WQE's ACK is lost or not on its own, which
// resends more than RC would when later WQEs are acknowledged in time). A failed
// connection (fail_connection; also a qp_error fault):
// both QPs go to the error state, their unfinished WQEs complete with flush errors, and
// each owner gets one error completion (kWrFlushError) on its receive CQ, standing for
// the asynchronous QP event / connection-manager disconnect a real owner would learn it
// from (it consumes one SRQ receive when one is posted, as a flushed receive would); the
// peer's comes one wire latency later. Packets reaching a QP whose connection failed are
// dropped (their WQEs flush). Requests reaching a QP in the error state for another
// reason (its own local error, a NAK it received), or one not connected back to the
// sender, are discarded there (IBA RC): nothing lands, no receive is taken, and the WQE
// completes with kRetryExceeded one NAK turnaround later (the requester's
// retransmissions until its retry count runs out are not timed); its QP goes to error.
//
// ----------------------------------------------------------------------------------
// Load-dependent latency: which mechanisms make latency grow with outstanding work,
// and their hardware basis (each is a knob in NicConfig):
//  1. Per-QP serialization and window (send.qp_serial, send.qp_window, fetch latency):
//     a ConnectX QP's send queue is processed in order by one processing unit, and a
//     non-BlueFlame WQE must be fetched over PCIe first. One QP therefore sustains only
//     about window / (fetch + processing) WQEs per second; work beyond that queues in
//     Admit while the SQ itself is far from full (docs/calibration.md §C2). More QPs spread
//     the load over more engines (C1: per-node WRITE rate grows with the number of
//     peers rather than staying at one NIC-wide rate).
//  2. Engine pools (send.engines, recv.engines): NIC-wide message-rate limit; multi-
//     server queueing with waiting time that rises steeply near saturation.
//  3. PCIe (pcie.*): descriptor fetches, payload gathers, data and CQE writes share the
//     bus bandwidth; TLP overhead makes small transfers expensive; DMA reads hold one of
//     a limited number of read tags for a whole round trip.
//  4. Ports (link.*): serialization per direction per node; incast at a receiver port.
//  5. On-NIC caches (qp_cache, mtt_cache): with many active QPs or a large registered
//     working set (rings of many endpoints), context and translation entries miss and
//     each miss adds a PCIe round trip to the engine's service time: latency grows with
//     the number of QPs/pages touched, not just the message rate. Translations are
//     tagged by key and page within the key's region (pages counted from the region's
//     start, as if every region began on a page boundary), never by host address: host
//     addresses follow the allocator and ASLR, and would make hits, misses and so every
//     later time differ from run to run.
//  6. RNR (rnr.*): a receiver that does not repost receives fast enough stalls the QP
//     for whole RNR timer periods.
//
// ----------------------------------------------------------------------------------
// Determinism: no wall clock, no pointer-keyed iteration; the wire jitter of each NIC
// comes from its own stream seeded by derive_seed(seed, {node, ...}).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/random.hpp"
#include "core/transport.hpp"
#include "sim/engine.hpp"
#include "sim/nic_config.hpp"
#include "sim/stations.hpp"
#include "transports/software_nic/completion_queue.hpp"
#include "transports/software_nic/memory_table.hpp"
#include "transports/software_nic/receive_queue.hpp"
#include "transports/software_nic/send_queue.hpp"

namespace bkv::sim {

class SimThread;

// Stages in canonical order (see the pipeline above). A WQE's stage only increases.
enum Stage : uint8_t {
  kStPosted = 0,
  kStDoorbell,
  kStAdmit,
  kStEngine,
  kStTx,
  kStRx,
  kStLand,
  kStReadTx,
  kStReadRx,
  kStAck,
  kStComplete,
  kStDone,
  kStageCount
};
inline constexpr uint32_t kStageBits = 4;
static_assert(kStageCount <= (1u << kStageBits), "stage must fit the event argument");
inline constexpr uint32_t kMaxQps = 1u << (32 - kStageBits);

// QP numbers handed to users: global QP index + base (0 is never a valid QP number,
// and numbers stay inside the 24-bit IB QPN space).
inline constexpr uint32_t kQpnBase = 0x40;
inline constexpr uint32_t kMaxQpn = (1u << 24) - 1;

// kWqeRetriesExhausted: its packet was lost once more than the retry count allows (or
// it was RNR NAKed once more than an RNR storm's retry count allows); the QP's error
// flush completes it with kRetryExceeded.
// (Signalled or not is the work request's own `signaled`.)
enum WqeFlags : uint8_t { kWqeBlueFlame = 2, kWqeInline = 4, kWqeRetriesExhausted = 8 };

// Where a WQE whose ACK or READ response was lost stands in its resend (it waits at the
// Ack stage meanwhile; "Faults" above). kResendNone: not resending.
enum Resend : uint8_t {
  kResendNone = 0,
  kResendTimer,   // due: the local ACK timer expires (or an RNR timer), the request goes out again
  kResendFlight,  // due: the resent request reaches the responder
  kResendLand,    // WRITE, duplicate detection off: due: it lands again
  kResendReadTx,  // READ: due: the responder's DMA read is done, the response goes out
  kResendReadRx,  // READ: due: the response reaches the requester
};

// A WQE in a QP's ring: the work request as posted (local: WRITE source or READ
// destination, checked at Engine) and where it stands in the pipeline. The small fields
// come first: they fill the work request's tail padding.
struct Wqe : software_nic::WorkRequest {
  uint8_t stage = kStPosted;
  uint8_t flags = 0;
  WcStatus status = WcStatus::kSuccess;
  uint8_t resend = kResendNone;    // Resend: a lost ACK or READ response being recovered
  uint32_t rnr_tries = 0;
  uint32_t transport_retries = 0;  // retransmissions after a lost packet (packet_loss faults)
  std::byte* remote_host = nullptr;  // target resolved by the responder's key check
  Time due = 0;        // when the WQE is due at its current stage
  Time posted_at = 0;  // thread time of the post
  Time sent_at = 0;  // the request's last transmission (with packet_loss faults: the ACK timer's start)
};
static_assert(sizeof(Wqe) == 88, "the ring's WQE stays as compact as before the shared work request");

// A send completion as queued in the CQ: the user-visible part, the global index of its
// QP and the SQ position it retires (polling it frees the SQ slots up to there).
using SendCqe = software_nic::SendCqEntry<uint32_t>;

struct DeviceContextConfig {
  uint32_t sq_depth = 256;      // WQEs per QP send queue
  uint32_t srq_capacity = 4096; // receives the SRQ can hold
  uint32_t recv_cq_depth = 0;   // 0 = 2 * srq_capacity
};

// One device context (what one Transport object owns): a receive CQ and a send CQ
// shared by its QPs, and one SRQ of zero-length receives.
struct DeviceContext {
  uint32_t index = 0;
  uint32_t node = 0;
  SimThread* thread = nullptr;  // woken when a completion is queued (may be null)
  DeviceContextConfig cfg;
  software_nic::CompletionQueue<RecvCompletion> recv_cq;  // bounded: an overrun is a simulation error
  software_nic::CompletionQueue<SendCqe> send_cq;
  software_nic::SharedReceiveQueue srq;
  std::vector<uint32_t> qps;
  uint64_t recv_cqes = 0;
  uint64_t send_cqes = 0;
};

struct QpState {
  uint32_t index = 0;  // global
  uint32_t node = 0;
  uint32_t ctx = 0;
  uint32_t qp_num = 0;
  uint32_t peer = ~0u;  // global index of the connected QP
  uint64_t mask = 0;
  std::vector<Wqe> ring;  // WQE of sequence s at s & mask; grows with the WQEs in flight
  software_nic::SendQueueSlots slots;  // posted() = sequence of the next WQE
  uint64_t rung = 0;    // WQEs published by a doorbell
  std::array<uint64_t, kStageCount> cursor{};  // first WQE not yet past each stage
  std::array<Time, kStageCount> last_sched{};  // last event time scheduled per stage
  uint32_t in_window = 0;  // WQEs between admission and Tx
  uint32_t reads_out = 0;  // READs between admission and completion
  uint64_t eng_free_ps = 0;  // per-QP serialization in the send engines
  uint64_t rx_free_ps = 0;   // per-QP serialization in the receive engines (as responder)
  bool error = false;       // requester side in the error state
  bool failed = false;      // its connection failed (fault injection): inbound is dropped
  bool resp_error = false;  // responder side discards inbound after a NAK it sent...
  uint64_t resp_error_seq = 0;  // ...for WQEs after this one (sequence in the peer's SQ)
  bool connected() const noexcept { return peer != ~0u; }
};

// The payloads of one QP's inline WRITEs, copied at post: WQE s's is at data[(s & mask) *
// stride], so a WQE needs no field for it. Empty until the QP posts an inline WRITE with
// a payload. Then mask + 1 slots of `stride` bytes: the slots a power of two at least the
// largest span of live WQEs (completion cursor to the newest) seen at an inline post, the
// stride a multiple of 64 at least the largest inline payload posted (grown by doubling,
// at most inline_max_bytes rounded up); both grow at an inline post that needs it, the
// live copies moved. So the store follows what is in flight, and QPs without inline
// WRITEs (all of them with inline_max_bytes = 0) hold none. Kept apart from
// QpState, whose hot fields keep their cache lines.
struct InlineStore {
  std::vector<std::byte> data;
  uint64_t stride = 0;
  uint64_t mask = 0;
};

// What happened to a WQE, for observers (tests, trace export).
struct WqeEvent {
  // kLost: the request packet was lost; kAckLost: its ACK or READ response was lost;
  // kDuplicate: a resent request reached the responder after it had executed it.
  enum Kind : uint8_t { kLanded = 0, kCompleted, kRnrNak, kRemoteError, kLocalError, kLost, kAckLost, kDuplicate };
  Kind kind;
  WcStatus status;
  uint32_t qp;  // global index of the requester QP
  uint64_t seq; // position in the requester's SQ
  Time time;
  const Wqe* wqe;
};
using WqeObserver = void (*)(void* ctx, const WqeEvent& ev);
// Extra one-way delay of a packet from node `from` to node `to` leaving at `at` (fault
// injection, sim/faults.hpp); none is set by default.
using LinkDelay = Time (*)(void* ctx, uint32_t from, uint32_t to, Time at);
// The requester's RC retransmission parameters for a lost packet: the local ACK timeout
// and how many times it resends before completing the WQE with kRetryExceeded.
struct Retransmission {
  Time timeout_ns = 0;
  uint32_t retry_cnt = 0;
};
// Is the packet node `from` sends to node `to` at `at` lost (a request, or an ACK or READ
// response going back to a requester)? If so, `rt` says how the requester retransmits
// it (fault injection, sim/faults.hpp).
using PacketLoss = bool (*)(void* ctx, uint32_t from, uint32_t to, Time at, Retransmission& rt);
// Is node `node`'s receive queue treated as empty at `at` (an RNR storm)? If so,
// `rnr_retry` is the requester's RNR retry count for the NAKs it causes (7: no limit)
// (fault injection, sim/faults.hpp).
using RnrStorm = bool (*)(void* ctx, uint32_t node, Time at, uint32_t& rnr_retry);
// A connection between nodes `node` and `peer` failed (its QP on `node` went to the error
// state for good); reported once per QP (fault injection: the exactly-once oracle).
using ConnectionFailed = void (*)(void* ctx, uint32_t node, uint32_t peer);

struct NicCounters {
  uint64_t doorbells = 0;
  uint64_t wqes_posted = 0;
  uint64_t wqes_sent = 0;        // left the port
  uint64_t packets_in = 0;       // requests arriving as responder
  uint64_t writes_landed = 0;
  uint64_t reads_served = 0;
  uint64_t recv_cqes = 0;
  uint64_t send_cqes = 0;
  uint64_t rnr_naks = 0;
  uint64_t remote_errors = 0;
  uint64_t local_errors = 0;
  uint64_t flushed = 0;
  uint64_t fetches = 0;          // WQE fetch DMA reads
  // Faults (reported only when connection faults are enabled).
  uint64_t packets_lost = 0;       // request packets lost on the wire (sent by this NIC)
  uint64_t acks_lost = 0;          // ACKs and READ responses lost on the wire (sent by this NIC)
  uint64_t retransmissions = 0;    // requests resent after the ACK timeout (their packet, ACK or response lost)
  uint64_t duplicates = 0;         // resent requests this NIC received after executing them
  uint64_t duplicates_executed = 0;  // of those, WRITEs executed again (duplicate detection off)
  uint64_t retry_exceeded = 0;     // WQEs completed with kRetryExceeded
  uint64_t connection_failures = 0;  // QPs of this NIC whose connection failed
  // Admission (per-QP window) queue.
  uint64_t admitted = 0;
  uint64_t admit_wait_ps = 0;
  uint32_t admit_depth = 0;      // WQEs doorbelled but not admitted, all QPs of the NIC
  uint32_t admit_max_depth = 0;
  // Latencies of this NIC's WQEs (requester side), from post.
  uint64_t land_count = 0;
  uint64_t land_latency_ns = 0;
  Time land_latency_max_ns = 0;
  uint64_t complete_count = 0;
  uint64_t complete_latency_ns = 0;
};

// One node's NIC: its configuration turned into station parameters, and its stations.
struct Nic {
  uint32_t node = 0;
  NicConfig cfg;
  // Derived constants (picoseconds).
  uint64_t doorbell_ns = 0;
  uint64_t send_wqe_ps = 0;
  double send_byte_ps = 0;
  uint64_t recv_pkt_ps = 0;
  double recv_byte_ps = 0;
  uint64_t ack_ps = 0;
  uint64_t ack_turnaround_ns = 0;
  uint64_t base_latency_ns = 0;
  uint64_t loopback_latency_ns = 0;
  uint64_t rnr_delay_ns = 0;
  uint64_t qp_miss_ps = 0;
  uint64_t mtt_miss_ps = 0;
  // Stations.
  Channel pcie_down;  // host -> NIC: WQE fetch, payload gather, READ responder data
  TokenPool read_tags;  // outstanding DMA reads (pcie.read_tags tokens)
  Channel pcie_up;    // NIC -> host: landed data, CQEs
  ServerPool send_engines;
  ServerPool recv_engines;
  Channel tx_port;    // this node's port, egress
  Channel rx_port;    // the switch port towards this node (ingress serialization)
  SetAssocCache qp_cache;
  SetAssocCache mtt_cache;
  Rng rng;            // wire jitter of packets this NIC sends
  NicCounters n;
};

// What a NIC's time-averaged figures (utilization, mean depths) are made of: its
// stations' counters and its admission queue's, cumulative from t = 0. A job is counted
// when it is queued (its whole service and time at the station then), so the figures of
// a window [a, b], those of load(b) minus load(a) over b - a (Network::load_json), count
// the jobs queued in it, some of whose service falls after b, and not the rest of those
// queued before a: they are off by the change of the queues across the window, small
// against a window much longer than the queues.
struct NicLoad {
  static constexpr size_t kStations = 7;
  static constexpr std::array<const char*, kStations> kStationNames{
      "pcie_down", "pcie_read_tags", "pcie_up", "send_engines", "recv_engines", "tx_port", "rx_port"};
  std::array<StationStats, kStations> stations{};
  std::array<uint32_t, kStations> servers{};  // servers (tokens) of each station, at least 1
  uint64_t admitted = 0;
  uint64_t admit_wait_ps = 0;
};

class Network {
 public:
  Network(Engine& engine, uint64_t seed);
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  // --- control path ---
  uint32_t add_node(const NicConfig& cfg);
  uint32_t node_count() const noexcept { return static_cast<uint32_t>(nics_.size()); }
  uint32_t create_context(uint32_t node, SimThread* thread, const DeviceContextConfig& cfg);
  uint32_t create_qp(uint32_t ctx);
  // Connects QP `qp` to the QP numbered `remote_qp_num` on `remote_node`; throws
  // std::invalid_argument if no such QP exists there. Posts on a QP that is not
  // connected complete with kWrFlushError.
  void connect(uint32_t qp, uint32_t remote_node, uint32_t remote_qp_num);
  software_nic::MemoryTable& memory() noexcept { return memory_; }
  void set_observer(WqeObserver fn, void* ctx) noexcept {
    observer_ = fn;
    observer_ctx_ = ctx;
  }
  void set_link_delay(LinkDelay fn, void* ctx) noexcept {
    link_delay_ = fn;
    link_delay_ctx_ = ctx;
  }
  // Enables packet losses (`fn`, may be null) and connection failures; before the run.
  void enable_connection_faults(PacketLoss fn, void* ctx);
  // The connection of QP `qp` fails now (a qp_error fault): see "Faults" above.
  void fail_connection(uint32_t qp);
  // Enables RNR storms (`fn`): WRITE+IMMs landing while fn says so are RNR NAKed; a WQE
  // that exhausts the storm's retry count fails its connection (needs
  // enable_connection_faults first).
  void set_rnr_storm(RnrStorm fn, void* ctx);
  // Called for every QP whose connection fails (after enable_connection_faults).
  void set_connection_failed(ConnectionFailed fn, void* ctx) noexcept {
    connection_failed_ = fn;
    connection_failed_ctx_ = ctx;
  }
  // The responders' duplicate detection (on by default; "Faults" above). Off: a resent
  // WRITE that was executed already is executed again (a planted bug for the tests).
  void set_duplicate_detection(bool on) noexcept { duplicate_detection_ = on; }

  // --- data path (called by the owning thread; `now` is its mid-step time) ---
  PostResult post(uint32_t qp, const software_nic::WorkRequest& wr, Time now);
  void ring_doorbell(uint32_t qp, Time now);
  void post_receives(uint32_t ctx, uint32_t n);
  uint32_t send_queue_free(uint32_t qp) const noexcept { return qps_[qp].slots.free_slots(); }

  // --- state and metrics ---
  DeviceContext& context(uint32_t ctx) noexcept { return ctxs_[ctx]; }
  const DeviceContext& context(uint32_t ctx) const noexcept { return ctxs_[ctx]; }
  QpState& qp(uint32_t qp) noexcept { return qps_[qp]; }
  const QpState& qp(uint32_t qp) const noexcept { return qps_[qp]; }
  uint32_t qp_count() const noexcept { return static_cast<uint32_t>(qps_.size()); }
  const Nic& nic(uint32_t node) const noexcept { return nics_[node]; }
  Engine& engine() noexcept { return engine_; }

  // Node's NicLoad now.
  NicLoad load(uint32_t node) const;
  // The figures of `to` minus `from` over window_ns: per station ("stations", by
  // NicLoad::kStationNames) jobs, busy_ns, utilization, mean_depth, mean_wait_ns and
  // mean_sojourn_ns, and the admission queue's ("admission") admitted, mean_wait_ns and
  // mean_depth.
  static nlohmann::json load_json(const NicLoad& from, const NicLoad& to, Time window_ns);
  // Per-NIC report over the whole simulation, [0, elapsed_ns]: "whole_simulation" (its
  // "elapsed_ns", load_json from t = 0 and each station's and the admission queue's
  // max_depth), "counters", "latency" and "caches".
  nlohmann::json report_json(uint32_t node, Time elapsed_ns) const;

 private:
  static void on_event(void* ctx, uint32_t arg);
  // The engine's prefetch hint for an event of on_event: the QP's cursor and its WQE.
  static void prefetch_event(void* ctx, uint32_t arg);
  static void on_connection_failure(void* ctx, uint32_t qp);
  // QP q's connection failed at `now`: error state, flushed WQEs, the owner told; the
  // peer fails one wire latency later.
  void fail_qp(QpState& q, Time now);
  // The request packet of WQE `seq` left at `out` and was lost: retransmit or give up.
  bool lose(QpState& q, uint64_t seq, Wqe& w, Time out, const Retransmission& rt);
  // The requester of WQE `seq` hears nothing for a request the responder executed (its
  // ACK or READ response was lost at `at`): it resends when the ACK timer expires, or
  // gives up. The WQE waits at the Ack stage (kResendTimer).
  void ack_lost(QpState& q, uint64_t seq, Wqe& w, Time at, const Retransmission& rt, Nic& responder);
  // The WQE waits at the Ack stage for the ACK timer expiring at `timer`, then resends;
  // with retry_cnt resends spent its connection fails then instead.
  void await_ack_timer(QpState& q, Wqe& w, Time timer, uint32_t retry_cnt);
  // READ response of q's WQE w arriving at the requester at `now`: port, receive engine,
  // DMA of data and CQE; the WQE moves to Complete (returns when).
  Time read_response_in(QpState& q, Wqe& w, Time now);
  // One step of the resend of a WQE whose ACK or READ response was lost (w.resend).
  bool resend_step(QpState& q, uint64_t seq, Wqe& w, Time now);
  // Is the ACK or READ response the responder's node sends at `at` to q's node lost?
  bool response_lost(const QpState& q, const Nic& responder, Time at, Retransmission& rt) {
    return packet_loss_ != nullptr && packet_loss_(packet_loss_ctx_, responder.node, q.node, at, rt);
  }
  void drain(uint32_t qp, uint8_t stage);
  // Processes the due head WQE `seq` at `stage`; false = blocked (stays at the stage).
  // It calls the stage's function below: one per stage of the pipeline (the comment at
  // the top of this file), each doing what its line there says. A NIC element that acts
  // at a stage (a station, a cache, a check, a fault) is consulted in that stage's
  // function; each takes the WQE to its next stage (w.stage, w.due, schedule_stage) or
  // returns false to hold it (and the QP's later WQEs) where it is.
  bool process(QpState& q, uint64_t seq, Wqe& w, uint8_t stage, Time now);
  bool stage_doorbell(QpState& q, Wqe& w);
  bool stage_engine(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_tx(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_rx(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_land(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_read_tx(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_read_rx(QpState& q, Wqe& w, Time now);
  bool stage_ack(QpState& q, uint64_t seq, Wqe& w, Time now);
  bool stage_complete(QpState& q, uint64_t seq, Wqe& w, Time now);
  // A request WQE that reached a responder QP whose connection failed, or that discards
  // it (behind a WQE it NAKed): flushed; the requester completes it in error.
  bool flush_at_responder(QpState& q, Wqe& w);
  // A WRITE+IMM resent after an RNR NAK (a new arrival, at Land) to a target QP that
  // went to the error state meanwhile (Rx checks a first arrival; a WQE that passed Rx
  // before the error lands): the QP discards it (IBA RC: nothing placed, no receive
  // taken, nothing sent back), and the requester, retransmitting until its retry count
  // is exhausted, completes it with kRetryExceeded and goes to error. The retries are
  // not timed: the completion comes one NAK turnaround later rather than retry_cnt + 1
  // ACK timeouts.
  bool target_discards(QpState& q, Wqe& w, Time now, Nic& responder);
  void try_admit(QpState& q, Time now);
  static constexpr uint64_t kInitialWqeSlots = 8;  // a QP's WQE ring grows from here
  void grow_wqe_ring(QpState& q);
  // Grows q's InlineStore so that inline WRITE `seq` (just posted), of `len` bytes, has a
  // slot of its own.
  void grow_inline_store(QpState& q, uint64_t seq, uint32_t len);
  // Moves the copies of q's inline WQEs from the completion cursor up to `end`
  // (exclusive) into `slots` slots of `stride` bytes.
  void relayout_inline(QpState& q, uint64_t end, uint64_t slots, uint64_t stride);
  const std::byte* inline_payload(const QpState& q, uint64_t seq) const noexcept {
    const InlineStore& st = inline_[q.index];
    return st.data.data() + (seq & st.mask) * st.stride;
  }
  // Where WRITE `seq` takes its payload from when it lands.
  const std::byte* write_source(const QpState& q, uint64_t seq, const Wqe& w) const noexcept {
    return (w.flags & kWqeInline) != 0 && w.length > 0 ? inline_payload(q, seq) : w.local;
  }
  // What a WRITE or WRITE+IMM does where it lands (at stage Land, and again when a lost
  // ACK's resend executes a duplicate): a WRITE+IMM takes a receive WQE of rc's SRQ
  // (the caller has checked one is there; a full receive CQ throws: completions are not
  // polled), the payload is copied, and a WRITE+IMM's receive completion is queued with
  // rc's thread woken (after the caller's notify of kLanded).
  static void take_receive(DeviceContext& rc);
  void land_payload(const QpState& q, uint64_t seq, const Wqe& w, Nic& responder);
  static void complete_receive(DeviceContext& rc, Nic& responder, const QpState& b, const Wqe& w, Time now);
  void schedule_stage(QpState& q, uint8_t stage, Time due);
  void nak(QpState& q, Wqe& w, uint64_t at_ps, Nic& responder);
  // A WRITE+IMM RNR NAKed at `responder` at `nak_at`: when its resend reaches the
  // responder again (the NAK back to q's node, the RNR timer there, the resend out).
  Time rnr_resend_lands(QpState& q, Nic& responder, Time nak_at);
  // Moves q to the error state: WQEs from `first` on that are not yet complete are
  // flushed (complete at complete_due with kWrFlushError, in order).
  void enter_error(QpState& q, uint64_t first, Time complete_due);
  // The responder QP b NAKed the requester's WQE `seq`: it discards what follows and
  // goes to the error state itself.
  void responder_error(QpState& b, uint64_t seq, Time now);
  static bool discarded(const QpState& b, uint64_t seq) noexcept { return b.resp_error && seq > b.resp_error_seq; }
  // One-way latency of a packet `from` sends to `to_node` leaving at `at`. A jitter sample
  // above kMaxModelNs (a tail no 64-bit time holds) is an error (jitter_out_of_range).
  Time wire_latency(Nic& from, uint32_t to_node, Time at);
  [[noreturn]] static void jitter_out_of_range(uint32_t node, double sample);
  void notify(WqeEvent::Kind kind, const QpState& q, uint64_t seq, const Wqe& w, Time t) {
    if (observer_ != nullptr) [[unlikely]]
      observer_(observer_ctx_, WqeEvent{kind, w.status, q.index, seq, t, &w});
  }
  // The MTT cache misses of a translation of [addr, addr + len) under `key` on `nic`:
  // one lookup per page the range spans, pages numbered from the start of the key's
  // region, tagged (key << kMttPageBits | page). Exact while the key and the page fit
  // their fields (else mtt_tag_out_of_range).
  uint64_t mtt_misses(Nic& nic, uint32_t key, uint64_t addr, uint32_t len);
  static constexpr unsigned kMttPageBits = 40;
  static constexpr uint64_t kMttPageLimit = uint64_t{1} << kMttPageBits;
  static constexpr uint64_t kMttKeyLimit = uint64_t{1} << (63 - kMttPageBits);
  // A tag's top bit stays clear, so no (key, page) makes the all-ones tag that marks an
  // empty cache entry (SetAssocCache).
  static_assert(((kMttKeyLimit - 1) << kMttPageBits | (kMttPageLimit - 1)) == ~uint64_t{0} >> 1,
                "key and page fields fill a tag below its top bit");
  [[noreturn]] static void mtt_tag_out_of_range(uint32_t key, uint64_t page);
  // A DMA read of `bytes` issued at arrive_ps: waits for a free read tag, serializes on
  // PCIe host->NIC, returns when the data is in the NIC.
  static uint64_t dma_read(Nic& nic, uint64_t arrive_ps, uint64_t bytes);
  Nic& nic_of(const QpState& q) noexcept { return nics_[q.node]; }

  Engine& engine_;
  TargetId target_;
  uint64_t seed_;
  software_nic::MemoryTable memory_;
  // Vectors, indexed on every event: created during setup only (nothing keeps a
  // reference across add_node, create_context or create_qp).
  std::vector<Nic> nics_;
  std::vector<DeviceContext> ctxs_;
  std::vector<QpState> qps_;
  std::vector<InlineStore> inline_;  // per QP, same index as qps_
  WqeObserver observer_ = nullptr;
  void* observer_ctx_ = nullptr;
  LinkDelay link_delay_ = nullptr;
  void* link_delay_ctx_ = nullptr;
  bool connection_faults_ = false;  // enable_connection_faults() was called
  PacketLoss packet_loss_ = nullptr;
  void* packet_loss_ctx_ = nullptr;
  RnrStorm rnr_storm_ = nullptr;
  void* rnr_storm_ctx_ = nullptr;
  ConnectionFailed connection_failed_ = nullptr;
  void* connection_failed_ctx_ = nullptr;
  bool duplicate_detection_ = true;
  TargetId failure_target_{};  // connection failures (added only with connection faults)
  bool need_complete_drain_ = false;
};

}  // namespace bkv::sim
