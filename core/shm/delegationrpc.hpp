// delegationrpc: a shared-memory MPSC request ring with per-client response slots
// (docs/design_shm.md §delegationrpc layout, §delegationrpc protocol). Every client thread
// of a node writes its remote requests into ONE ring owned by daemon #0; the daemon
// writes each response straight into the issuing client's response slot.
//
// Segment layout (byte offsets; pinned by the static_asserts below):
//   [0, 128)    header   {magic u64 @0, version u32 @8, max_clients u32 @12,
//                          ring_depth u32 @16, resp_depth u32 @20,
//                          next_client_id atomic u32 @24, server_alive atomic u8 @28}
//   [128, 256)  control  {head atomic u64 @128, tail atomic u64 @192} (own cache lines)
//   [256, ...)  ring_depth request slots of align_up(24 + sizeof(Req), 64) bytes:
//                          {committed atomic u8 @0, client_id u32 @4,
//                           resp_slot_idx u32 @8, call_tag u32 @12,
//                           claim atomic u64 @16, payload @24}
//   then        max_clients * resp_depth response slots of align_up(8 + sizeof(Resp), 64):
//                          {valid atomic u8 @0, call_tag u32 @4, payload @8}
//               slot (c, s) at resp_area + (c * resp_depth + s) * resp_slot_size.
//   then        max_clients client records of 64 bytes:
//                          {pid atomic i32 @0, waiting atomic u64 @8}
//               record c at records + c * 64.
//
// Protocol: positions are virtual u64, slot = pos & (ring_depth - 1).
//   client call : server_alive (acquire) -> ServerDisconnected; pick a response slot
//                 round-robin; pos = head.fetch_add(1, relaxed); spin while
//                 pos - tail (acquire) >= ring_depth (the record names pos meanwhile);
//                 claim the slot (CAS of the claim word, below); write client_id,
//                 resp_slot_idx, call_tag (below), payload; committed.store(1, release);
//                 in_flight++.
//   server poll : snapshot head (acquire); count contiguous committed slots from the
//                 cursor; stop at the first hole (reserved, not yet committed).
//   server recv : stop at a hole; read the entry; committed.store(0, release); cursor++;
//                 check the entry (below): a legitimate one is returned and its
//                 (client, slot) marked as awaiting a reply, a forged one is counted
//                 and skipped.
//   advance_tail: a cursor short of the head snapshot: time the hole there, skip it if
//                 abandoned (below); tail.store(cursor, release) releases ring space to
//                 spinning clients.
//   reply       : only to an awaited (client, slot): write the payload and the
//                 call_tag of the request it answers, valid.store(1, release), clear
//                 the awaiting mark.
//   client poll : for each awaited slot: valid (acquire), read, valid.store(0, release),
//                 in_flight--; the response's call_tag is the awaited call's: callback
//                 with the response; another tag: the call ends failed (below).
//
// What a client can legitimately have in the ring (recv() checks each rule; the
// entries come from shared memory written by possibly buggy clients):
//  1. client_id < max_clients and resp_slot_idx < resp_depth (in the layout);
//  2. client_id < next_client_id (the client registered: its CAS precedes its commit);
//  3. no other request of that (client, slot) awaits a reply: a client reuses a slot
//     only after it consumed the response of the previous call on it;
//  4. the slot holds no unconsumed response: the client cleared `valid` (release)
//     before it committed (release), so the server's acquire of `committed` sees 0.
// An entry breaking a rule is rejected and counted per rule (rejected()). With rules 3
// and 4 a victim whose (client, slot) is named by a forged entry still receives exactly
// one end per call, never waits forever: while the victim's own request awaits a
// reply the forged one is refused, and a forged request accepted first is answered
// into the slot the victim reads. The server cannot tell who wrote an entry (the
// layout carries no writer identity, and every client can write every slot), so when
// the forged entry comes first that answer is the forged request's, which the call
// tags (below) keep from being taken for the victim's; the same holds when a forged
// request for an idle slot is answered just as the victim reuses the slot. A client discards a response found in a slot it does not await (the answer
// to a forged request) before it reuses the slot, and counts it (stray_responses()).
//
// Call tags (per-call response authentication): every call carries a 32-bit tag the
// client draws for it, tag = mix32(sequence + key), mix32 a bijection, the sequence
// counting the client's calls and the key drawn at connect (std::random_device, or
// given): the tags of one client never repeat within 2^32 calls, and a writer that did
// not read the victim's entry cannot name the tag of the victim's call except by a
// 2^-32 chance. The server keeps the tag of each request awaiting a reply and writes
// it into the response header. A client accepts a response only if it carries the tag
// of the call awaiting in that slot; any other (the answer to a forged request naming
// the victim's (client, slot), accepted before the victim's own, which rule 3 or 4
// then refused) ends the awaited call as failed: poll's on_failed(token) runs once,
// the response is discarded and counted (mismatched_responses()). So a forged
// client_id never hands the victim another request's answer: every call ends once,
// with its own answer or failed. The victim's refused request is never answered (it
// was dropped); a request still in the ring when its call was failed may be answered
// later into the slot: an idle slot's stray response (discarded on reuse, above), or a
// busy slot's response with the old tag (that call fails too). What no check in a
// shared segment can stop: a writer that copies the victim's tag from the ring, or
// writes the victim's response slot directly; the tags catch buggy clients (a wrong
// client_id or slot index), not a deliberate attacker with write access.
//
// Abandoned positions. Reserving (head.fetch_add) and committing are two steps, and
// the server reads in order, so a position whose reserver never commits (its process
// died, or its call() gave up waiting for ring space) would stop the server and, once
// the ring is full, every client. The server skips such a hole only when it can prove
// that no writer of the position will ever write it:
//  - claim word (per request slot, u64): the name of the last position claimed in that
//    slot, name(pos) = 2 * (pos + 1) (0: never), bit 0 set when that position was
//    abandoned. A writer of pos, once it has ring space, claims the slot with a CAS from
//    any value below name(pos) to name(pos), and only then writes the entry; a value at
//    or above name(pos) means pos was abandoned (or the word was forged): the call ends
//    kAbandoned without writing anything. The server abandons pos by a CAS from the
//    value it read (which must not be name(pos): a claimed position is never skipped)
//    to name(pos) | 1. One word, one total order of its CASes: either the writer claims
//    first (the server's CAS fails and the hole stays until the commit) or the server
//    marks first (the writer's CAS fails, it never writes the slot).
//  - client record (per client id, one line): the pid of the connecting process
//    (written at connect) and `waiting`: name(pos) while the client waits for ring
//    space at pos, | 1 when it gave pos up (the wait ended without space: server gone,
//    unresponsive, tail forged; or its claim found pos abandoned). A client with a
//    given-up position not yet passed by the server (tail beyond it and its claim word
//    marked abandoned, or claimed by a later lap: a tail alone may be forged) reserves
//    nothing new (try_call: kFull, call(): waits as for ring space), so its record keeps
//    naming it.
//  - the server, when advance_tail() finds the cursor short of the head snapshot (the
//    reads stopped at a hole; recv()'s per-entry path is unchanged), counts sightings of
//    that hole and reads the clock only every kHoleSightingsPerClockRead of them; once
//    the same hole has lasted hole_limit() it looks for the registered client whose
//    record names the position. Given up, or waiting with a pid that kill(pid, 0) says
//    does not exist (ESRCH): the server CASes the claim word to abandoned and skips the
//    position (no response: nobody awaits one; counted in skipped()). A reserver alive
//    keeps the hole, looked at again one hole_limit later. Each hole is timed on its own:
//    n abandoned positions in a row take n limits.
//  - a hole no record names (a writer that raised head without reserving through a
//    client: head forged, e.g. raised by the ring depth, which leaves ring_depth holes
//    and a ring that stays full; or a reserver that stopped or died between
//    head.fetch_add and its claim without having waited for space) is skipped at the
//    kDelegationUnnamedHoleLooks-th look in a row that finds no record naming it (one
//    hole_limit apart, so 4 limits: 400 ms by default), by winning its claim word like
//    any skip (counted as kUnnamed). The positions after it that were already reserved
//    when the server first met the hole (below the head snapshot of then: reserved at
//    least that long ago) are skipped with it, in turn, while each is uncommitted,
//    unclaimed and named by no record (at most ring_depth per advance_tail(); the first
//    one committed, claimed or named ends the run, and a named one is handled as
//    above). A live late writer of such a position is safe: its claim finds the mark and
//    its call ends kAbandoned, nothing written.
// Why a late writer cannot corrupt a later lap: the only writes to a slot are by a
// writer that won its claim, and the only positions skipped are those whose claim the
// server won. A writer that is not dead after all (a pid from another pid namespace, a
// client object used after fork, a forged record) loses its claim and writes nothing;
// the slot is next claimed by the position ring_depth later, whose writer waits for
// tail to pass the skipped position first. A claim word is never reused for the same
// name (positions only grow), so an old CAS cannot succeed against a later lap's value.
// Positions are compared as names modulo 2^64, i.e. modulo 2^63.
// What the claim word cannot settle, so the hole stays: a reserver that dies after its
// claim and before its commit (it may have written part of the entry; skipping it would
// let a not-really-dead writer finish into the next lap). That window is a few
// instructions long. A forged head raised far beyond ring_depth + max_clients is
// skipped at ring_depth positions per advance_tail(), each with a look at the records:
// a head raised by 2^40 would take that many positions' work. A pid reused by another
// process makes a dead reserver look alive: the hole stays, never the reverse.
// Untrusted values: the record's position must equal the cursor's name, its pid is only
// passed to kill(pid, 0) (pid <= 0, EPERM: alive), the client index is bounded by
// max_clients; a forged record can make a live waiting client's call end kAbandoned,
// never make the server skip a claimed or committed position (a committed byte seen
// after the server's CAS is read as an entry and checked like any other). A writer that
// stores into ring slots directly (a claim word, a committed byte) can disturb the
// ring as before; the claim word is no more protected than the other slot fields.
//
// Sizes: the header fields are capped (kDelegationMax*), segment sizes are computed
// with checked arithmetic, and attach refuses a header that declares more bytes than
// the segment has, naming the field; a client sizes its local state (resp_depth
// entries) only from a validated header.
//
// Deviations from the original design, all invisible in the layout:
//  - The original client call puts a release fence before the release store of
//    `committed`; the
//    release store alone already orders every earlier write (and ThreadSanitizer does
//    not support standalone fences), so the fence is omitted. Same for reply().
//  - The original assigns response slots strictly round-robin, which lets a new call
//    reuse a slot whose response is still outstanding when responses come back out of
//    order. Here the round-robin cursor skips slots that still await a response, and a
//    call with every slot busy returns kNoFreeSlot (poll first).
//  - reply() refuses a slot whose previous response was not consumed yet (kSlotBusy)
//    instead of overwriting it.
//  - client poll() reads only the slots that await a response (known client-side), so
//    an idle client touches no shared line; poll_slot(i) checks one slot.
//  - Reply hints, for a server and clients that one OS thread runs (the simulator):
//    reply() also sets the slot's bit in the client's hint words, kept in the server
//    object, not in the segment (DelegationServer::keep_reply_hints); a client given
//    them (DelegationClient::use_reply_hints) and polling with poll_hinted() reads only
//    the slots that await a response and whose bit is set, clearing each bit it visits.
//    Same calls ended in the same order as poll(), because reply() is the only writer
//    of `valid` there: a slot with a response always has its bit set (a bit is cleared
//    only when its slot is read), and poll_hinted() skips only slots without one.
//  - try_call(): the tail it reads (acquire) before reserving serves the wait as well:
//    tail only grows, so a position below that tail + ring_depth has ring space, and
//    tail is read again only for a position at or beyond it.
//
// Each client object belongs to one thread, in the process that connected it (its
// record holds that process's pid); the server object to the daemon thread.
//  - try_call(): non-blocking variant for the simulator (single thread: nothing may
//    spin). It returns kFull without reserving when head - tail >= ring_depth; on real
//    threads a producer that races past that check spins briefly as call() does.
//  - a spinning call() gives up with kServerDisconnected if the server shuts down, and
//    with kServerUnresponsive if tail does not move for wait_limit() (a server that
//    died or was stopped without clearing server_alive); its record gives the position
//    up, and a server that comes back skips it (abandoned positions, above).
//  - a tail beyond the caller's position (forged: the server passes a position that is
//    not committed only after marking it abandoned in its claim word; that mark, or a
//    later lap's claim of the slot, ends the wait with kAbandoned) ends try_call() and call() with kRingCorrupted instead of
//    waiting forever. try_call() detects it before reserving; call() after reserving,
//    and gives the position up as above.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>

#include "core/cache_hint.hpp"
#include "core/shm/common.hpp"

namespace bkv::shm {

inline constexpr uint64_t kDelegationMagic = 0x444C475250435631ull;  // "DLGRPCV1"
inline constexpr uint32_t kDelegationVersion = 2;  // 2: claim words and client records

// Caps of the header fields (config at create, header at attach). They cover the
// benchkv limits (1024 client threads, queue depth 2^16, ring depth 1024) with room.
inline constexpr uint32_t kDelegationMaxClients = 1u << 16;
inline constexpr uint32_t kDelegationMaxRingDepth = 1u << 20;
inline constexpr uint32_t kDelegationMaxRespDepth = 1u << 16;

// A blocking call() gives up (kServerUnresponsive) when the ring stays full and the
// server's tail does not move for this long: a dead or stopped server.
inline constexpr std::chrono::nanoseconds kDelegationDefaultWaitLimit = std::chrono::seconds(10);

// The server looks at who reserved the position it is stuck on (header comment:
// abandoned positions) once it has found the same hole for this long, and again every
// such period while the hole stays.
inline constexpr std::chrono::nanoseconds kDelegationDefaultHoleLimit = std::chrono::milliseconds(100);
// Looks in a row (one hole limit apart) that find no record naming the hole before the
// server skips it as unnamed (header comment: abandoned positions).
inline constexpr uint32_t kDelegationUnnamedHoleLooks = 4;

// ---- layout ----------------------------------------------------------------------

struct DelegationHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t max_clients;
  uint32_t ring_depth;      // power of two
  uint32_t resp_depth;      // power of two
  uint32_t next_client_id;  // atomic: registration counter
  uint8_t server_alive;     // atomic bool
  uint8_t pad[99];
};
static_assert(std::is_standard_layout_v<DelegationHeader> && sizeof(DelegationHeader) == 128);
static_assert(offsetof(DelegationHeader, magic) == 0 && offsetof(DelegationHeader, version) == 8);
static_assert(offsetof(DelegationHeader, max_clients) == 12 && offsetof(DelegationHeader, ring_depth) == 16);
static_assert(offsetof(DelegationHeader, resp_depth) == 20 && offsetof(DelegationHeader, next_client_id) == 24);
static_assert(offsetof(DelegationHeader, server_alive) == 28);

// Ring control, placed right after the header: head and tail on separate cache lines.
struct DelegationControl {
  uint64_t head;  // atomic: clients fetch_add (relaxed)
  uint8_t pad0[56];
  uint64_t tail;  // atomic: server store (release), clients load (acquire)
  uint8_t pad1[56];
};
static_assert(std::is_standard_layout_v<DelegationControl> && sizeof(DelegationControl) == 128);
static_assert(offsetof(DelegationControl, head) == 0 && offsetof(DelegationControl, tail) == kCacheLine);

inline constexpr size_t kDelegationControlOffset = sizeof(DelegationHeader);                       // 128
inline constexpr size_t kDelegationSlotsOffset = kDelegationControlOffset + sizeof(DelegationControl);  // 256
static_assert(kDelegationControlOffset + offsetof(DelegationControl, head) == 128);
static_assert(kDelegationControlOffset + offsetof(DelegationControl, tail) == 192);
static_assert(kDelegationSlotsOffset == 256);

// Fixed part of a request slot; the payload follows at byte 24.
struct DelegationSlotHeader {
  uint8_t committed;  // atomic: 0 = free or reserved, 1 = committed
  uint8_t pad0[3];
  uint32_t client_id;
  uint32_t resp_slot_idx;
  uint32_t call_tag;  // echoed in the response (header comment: call tags)
  uint64_t claim;     // atomic: who may write the slot (header comment: abandoned positions)
};
static_assert(std::is_standard_layout_v<DelegationSlotHeader> && sizeof(DelegationSlotHeader) == 24);
static_assert(offsetof(DelegationSlotHeader, committed) == 0 && offsetof(DelegationSlotHeader, client_id) == 4);
static_assert(offsetof(DelegationSlotHeader, resp_slot_idx) == 8 && offsetof(DelegationSlotHeader, call_tag) == 12);
static_assert(offsetof(DelegationSlotHeader, claim) == 16);
inline constexpr size_t kDelegationReqPayloadOffset = 24;

// One line per client id, after the response slots: the process of the client and the
// position it waits on (header comment: abandoned positions).
struct DelegationClientRecord {
  int32_t pid;  // atomic: getpid() of the process that connected this client id
  uint32_t pad0;
  uint64_t waiting;  // atomic: delegation_position_name(pos) while waiting for ring space at pos, | 1 once given up
  uint8_t pad1[48];
};
static_assert(std::is_standard_layout_v<DelegationClientRecord> && sizeof(DelegationClientRecord) == kCacheLine);
static_assert(offsetof(DelegationClientRecord, pid) == 0 && offsetof(DelegationClientRecord, waiting) == 8);

// The name of ring position pos in a claim word or a client record: 2 * (pos + 1), so 0
// names no position and bit 0 is free for the "abandoned" mark. Names are compared
// modulo 2^64, positions therefore modulo 2^63 (never reached: a ring taking 10^9
// requests per second passes 2^63 after 292 years).
constexpr uint64_t delegation_position_name(uint64_t pos) noexcept { return (pos + 1) << 1; }
inline constexpr uint64_t kDelegationAbandonedMark = 1;

// Fixed part of a response slot; the payload follows at byte 8.
struct DelegationRespHeader {
  uint8_t valid;  // atomic: 0 = empty, 1 = response present
  uint8_t pad[3];
  uint32_t call_tag;  // the tag of the request this response answers
};
static_assert(std::is_standard_layout_v<DelegationRespHeader> && sizeof(DelegationRespHeader) == 8);
static_assert(offsetof(DelegationRespHeader, valid) == 0 && offsetof(DelegationRespHeader, call_tag) == 4);

// The call tag of a client's sequence-th call under its key: a bijection of
// sequence + key (the 32-bit finalizer of MurmurHash3: xor-shifts and odd multipliers,
// each invertible), so one client's tags repeat only after 2^32 calls.
constexpr uint32_t delegation_call_tag(uint32_t sequence, uint32_t key) noexcept {
  uint32_t x = sequence + key;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}
inline constexpr size_t kDelegationRespPayloadOffset = 8;

struct DelegationConfig {
  uint32_t max_clients = 1;
  uint32_t ring_depth = 1024;  // power of two (the original uses 1024)
  uint32_t resp_depth = 4;     // power of two (the original uses the queue depth)
};

template <class Req, class Resp>
struct DelegationLayout {
  static_assert(std::is_trivially_copyable_v<Req> && std::is_trivially_copyable_v<Resp>,
                "delegationrpc payloads are copied byte-wise through shared memory");
  static_assert(std::is_default_constructible_v<Req> && std::is_default_constructible_v<Resp>,
                "delegationrpc payloads are read into default-constructed values");

  // align_up(24 + sizeof(Req), 64) and align_up(8 + sizeof(Resp), 64)
  // (docs/design_shm.md §delegationrpc layout).
  static constexpr size_t kReqSlotSize = align_up(kDelegationReqPayloadOffset + sizeof(Req), kCacheLine);
  static constexpr size_t kRespSlotSize = align_up(kDelegationRespPayloadOffset + sizeof(Resp), kCacheLine);

  // Throws ShmError naming the offending field (and the cap it exceeds).
  static void validate_config(const DelegationConfig& c, const char* where) {
    const std::string w(where);
    if (c.max_clients == 0) throw ShmError(w + ": max_clients must be > 0");
    require_at_most(c.max_clients, kDelegationMaxClients, w, "max_clients");
    if (!is_pow2(c.ring_depth))
      throw ShmError(w + ": ring_depth=" + std::to_string(c.ring_depth) + " is not a power of two");
    require_at_most(c.ring_depth, kDelegationMaxRingDepth, w, "ring_depth");
    if (!is_pow2(c.resp_depth))
      throw ShmError(w + ": resp_depth=" + std::to_string(c.resp_depth) + " is not a power of two");
    require_at_most(c.resp_depth, kDelegationMaxRespDepth, w, "resp_depth");
  }

  // End of the request slots: 256 + ring_depth * request slot size (checked).
  static constexpr std::optional<uint64_t> request_slots_end(uint32_t ring_depth) noexcept {
    const auto bytes = checked_mul(ring_depth, kReqSlotSize);
    return bytes ? checked_add(kDelegationSlotsOffset, *bytes) : std::nullopt;
  }
  // Bytes of the response slots: max_clients * resp_depth * response slot size (checked).
  static constexpr std::optional<uint64_t> response_slots_bytes(uint32_t max_clients, uint32_t resp_depth) noexcept {
    const auto slots = checked_mul(max_clients, resp_depth);
    return slots ? checked_mul(*slots, kRespSlotSize) : std::nullopt;
  }
  // End of the response slots: request_slots_end + response_slots_bytes (checked).
  static constexpr std::optional<uint64_t> response_slots_end(const DelegationConfig& c) noexcept {
    const auto req_end = request_slots_end(c.ring_depth);
    const auto resp = response_slots_bytes(c.max_clients, c.resp_depth);
    return req_end && resp ? checked_add(*req_end, *resp) : std::nullopt;
  }
  // End of the segment: response_slots_end + max_clients client records (checked).
  static constexpr std::optional<uint64_t> segment_end(const DelegationConfig& c) noexcept {
    const auto resp_end = response_slots_end(c);
    const auto records = checked_mul(c.max_clients, sizeof(DelegationClientRecord));
    return resp_end && records ? checked_add(*resp_end, *records) : std::nullopt;
  }
  // Within the caps the sizes cannot overflow (so segment_end never fails there).
  static_assert(kReqSlotSize < (size_t{1} << 31) && kRespSlotSize < (size_t{1} << 31));
  static_assert(segment_end(DelegationConfig{kDelegationMaxClients, kDelegationMaxRingDepth, kDelegationMaxRespDepth})
                    .has_value());

  // Offset of the response slots in a segment of a validated config.
  static constexpr size_t resp_area_offset(uint32_t ring_depth) noexcept {
    return kDelegationSlotsOffset + size_t{ring_depth} * kReqSlotSize;
  }
  // Offset of the client records in a segment of a validated config.
  static constexpr size_t records_offset(const DelegationConfig& c) noexcept {
    return resp_area_offset(c.ring_depth) + size_t{c.max_clients} * c.resp_depth * kRespSlotSize;
  }

  // Total segment size for cfg. Throws ShmError naming the field if cfg is invalid or
  // the segment would exceed kMaxChannelSegmentBytes.
  static size_t segment_size(const DelegationConfig& c) {
    validate_config(c, "delegationrpc layout");
    const auto end = segment_end(c);
    if (!end || *end > kMaxChannelSegmentBytes)
      throw ShmError("delegationrpc layout: max_clients=" + std::to_string(c.max_clients) + " x resp_depth=" +
                     std::to_string(c.resp_depth) + " response slots, ring_depth=" + std::to_string(c.ring_depth) +
                     " request slots and " + std::to_string(c.max_clients) +
                     " client records exceed the segment limit of " + std::to_string(kMaxChannelSegmentBytes) +
                     " bytes");
    return static_cast<size_t>(*end);
  }
};

// Reads and checks the header of an existing delegationrpc segment: magic, version,
// depths within the caps, and a segment size equal to what the header's sizes imply
// (a header declaring more than the segment holds is named field by field). Every
// header field is read once, into the returned config.
template <class Req, class Resp>
DelegationConfig validate_delegation_segment(std::span<std::byte> mem) {
  using L = DelegationLayout<Req, Resp>;
  if (mem.size() < kDelegationSlotsOffset)
    throw ShmError("delegationrpc attach: segment of " + std::to_string(mem.size()) +
                   " bytes is smaller than the 256-byte header and ring control");
  if (reinterpret_cast<uintptr_t>(mem.data()) % kCacheLine != 0)
    throw ShmError("delegationrpc attach: segment is not 64-byte aligned");
  auto& h = *reinterpret_cast<DelegationHeader*>(mem.data());
  const uint64_t magic = atomic_field(h.magic).load(std::memory_order_acquire);  // published last
  if (magic != kDelegationMagic)
    throw ShmError("delegationrpc attach: bad magic " + hex_u64(magic) + " (expected " + hex_u64(kDelegationMagic) +
                   " \"DLGRPCV1\")");
  if (h.version != kDelegationVersion)
    throw ShmError("delegationrpc attach: unsupported version " + std::to_string(h.version) + " (expected " +
                   std::to_string(kDelegationVersion) + ")");
  const DelegationConfig cfg{h.max_clients, h.ring_depth, h.resp_depth};
  L::validate_config(cfg, "delegationrpc attach: header");
  const std::string mismatch = "delegationrpc attach: segment size " + std::to_string(mem.size()) +
                               " does not match the header: ";
  const std::string hint = "; wrong payload types or a stale segment?";
  const std::string beyond = ", beyond the segment of " + std::to_string(mem.size()) + " bytes" + hint;
  // Within the caps neither end overflows (static_assert in the layout).
  const uint64_t req_end = *L::request_slots_end(cfg.ring_depth);
  if (req_end > mem.size())
    throw ShmError(mismatch + "ring_depth=" + std::to_string(cfg.ring_depth) + " request slots of " +
                   std::to_string(L::kReqSlotSize) + " B end at byte " + std::to_string(req_end) + beyond);
  const uint64_t resp_end = *L::response_slots_end(cfg);
  if (resp_end > mem.size())
    throw ShmError(mismatch + "max_clients=" + std::to_string(cfg.max_clients) + " x resp_depth=" +
                   std::to_string(cfg.resp_depth) + " response slots of " + std::to_string(L::kRespSlotSize) +
                   " B end at byte " + std::to_string(resp_end) + beyond);
  const uint64_t want = *L::segment_end(cfg);
  if (want > mem.size())
    throw ShmError(mismatch + "max_clients=" + std::to_string(cfg.max_clients) + " client records of " +
                   std::to_string(sizeof(DelegationClientRecord)) + " B end at byte " + std::to_string(want) + beyond);
  if (want != mem.size())
    throw ShmError("delegationrpc attach: segment size " + std::to_string(mem.size()) +
                   " does not match the header (max_clients=" + std::to_string(cfg.max_clients) +
                   ", ring_depth=" + std::to_string(cfg.ring_depth) + ", resp_depth=" + std::to_string(cfg.resp_depth) +
                   ", request slot " + std::to_string(L::kReqSlotSize) + " B, response slot " +
                   std::to_string(L::kRespSlotSize) + " B, client record " +
                   std::to_string(sizeof(DelegationClientRecord)) + " B -> " + std::to_string(want) +
                   " bytes); wrong payload types or a stale segment?");
  return cfg;
}

// ---- shared view -----------------------------------------------------------------

// Address arithmetic over a validated segment. Depths are cached locally: neither side
// re-reads them from shared memory after validation.
template <class Req, class Resp>
class DelegationView {
 public:
  using Layout = DelegationLayout<Req, Resp>;

  DelegationView() = default;
  DelegationView(std::byte* base, const DelegationConfig& cfg) noexcept
      : base_(base),
        cfg_(cfg),
        ring_mask_(cfg.ring_depth - 1),
        resp_area_(base + Layout::resp_area_offset(cfg.ring_depth)),
        records_(reinterpret_cast<DelegationClientRecord*>(base + Layout::records_offset(cfg))) {}

  DelegationHeader& header() const noexcept { return *reinterpret_cast<DelegationHeader*>(base_); }
  DelegationControl& control() const noexcept {
    return *reinterpret_cast<DelegationControl*>(base_ + kDelegationControlOffset);
  }
  // Request slot of virtual position pos: slots + (pos & (ring_depth - 1)) * slot size.
  std::byte* req_slot(uint64_t pos) const noexcept {
    return base_ + kDelegationSlotsOffset + (pos & ring_mask_) * Layout::kReqSlotSize;
  }
  static DelegationSlotHeader& req_header(std::byte* slot) noexcept {
    return *reinterpret_cast<DelegationSlotHeader*>(slot);
  }
  // Response slot address: resp_area + (client_id * resp_depth + slot) * resp slot size.
  // Callers bounds-check client_id < max_clients and slot < resp_depth first.
  std::byte* resp_slot(uint32_t client_id, uint32_t slot) const noexcept {
    assert(client_id < cfg_.max_clients && slot < cfg_.resp_depth);
    return resp_area_ + (uint64_t{client_id} * cfg_.resp_depth + slot) * Layout::kRespSlotSize;
  }
  static DelegationRespHeader& resp_header(std::byte* slot) noexcept {
    return *reinterpret_cast<DelegationRespHeader*>(slot);
  }
  // Client record of client_id (callers bounds-check client_id < max_clients first).
  DelegationClientRecord& record(uint32_t client_id) const noexcept {
    assert(client_id < cfg_.max_clients);
    return records_[client_id];
  }
  bool server_alive() const noexcept {
    return atomic_field(header().server_alive).load(std::memory_order_acquire) != 0;
  }
  const DelegationConfig& config() const noexcept { return cfg_; }

 private:
  std::byte* base_ = nullptr;
  DelegationConfig cfg_{};
  uint64_t ring_mask_ = 0;
  std::byte* resp_area_ = nullptr;
  DelegationClientRecord* records_ = nullptr;
};

// ---- server ----------------------------------------------------------------------

template <class Req>
struct DelegationEntry {
  uint32_t client_id;      // checked by recv() against the rules in the header comment
  uint32_t resp_slot_idx;  // idem
  uint32_t call_tag;       // any value: reply() echoes the one recv() kept
  Req payload;
};

enum class DelegationReplyStatus : uint8_t {
  kOk = 0,
  kBadClientId,  // client_id >= max_clients: nothing written
  kBadSlot,      // resp_slot_idx >= resp_depth: nothing written
  kSlotBusy,     // the slot holds an unread response (written there by someone other
                 // than this server): nothing written, the request is dropped
  kNotAwaited,   // recv() returned no request of that (client, slot) that awaits a
                 // reply: nothing written
};

// Why recv() rejected a ring entry (one rule of the header comment each).
enum class DelegationReject : uint8_t {
  kBadClientId = 0,     // rule 1: client_id >= max_clients
  kBadSlot,             // rule 1: resp_slot_idx >= resp_depth
  kUnregisteredClient,  // rule 2: client_id >= next_client_id
  kSlotAwaitingReply,   // rule 3: that (client, slot) already awaits a reply
  kSlotHoldsResponse,   // rule 4: that (client, slot) holds an unconsumed response
};
inline constexpr size_t kDelegationRejectReasons = 5;
static_assert(static_cast<size_t>(DelegationReject::kSlotHoldsResponse) + 1 == kDelegationRejectReasons);

// Why the server skipped a hole (header comment: abandoned positions).
enum class DelegationSkip : uint8_t {
  kReserverGone = 0,  // the reserver's process no longer exists (kill(pid, 0): ESRCH)
  kReserverGaveUp,    // the reserver gave the position up itself (call() gave up, or its claim failed)
  kUnnamed,           // no record named it for kDelegationUnnamedHoleLooks looks (forged head), or
                      // it was reserved before such a hole was met and is unnamed too
};
inline constexpr size_t kDelegationSkipReasons = 3;
static_assert(static_cast<size_t>(DelegationSkip::kUnnamed) + 1 == kDelegationSkipReasons);

// Whether pid names a process that no longer exists: kill(pid, 0) fails with ESRCH.
// Anything else (it exists, EPERM: it exists under another user, a pid <= 0 that names
// no single process) counts as alive, so a wrong pid read from shared memory can only
// keep a hole, never skip one.
inline bool delegation_reserver_gone(int32_t pid) noexcept {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

template <class Req, class Resp>
class alignas(kCacheLine) DelegationServer {
 public:
  using Layout = DelegationLayout<Req, Resp>;
  using Entry = DelegationEntry<Req>;

  // Formats `mem` (exactly Layout::segment_size(cfg) bytes, 64-byte aligned) as a new
  // delegationrpc segment with the server alive. The magic is published last, so a
  // client attaching concurrently never sees a half-written header.
  DelegationServer(std::span<std::byte> mem, const DelegationConfig& cfg) {
    Layout::validate_config(cfg, "delegationrpc create");
    const size_t want = Layout::segment_size(cfg);
    if (mem.size() != want)
      throw ShmError("delegationrpc create: segment has " + std::to_string(mem.size()) + " bytes, layout needs " +
                     std::to_string(want));
    if (reinterpret_cast<uintptr_t>(mem.data()) % kCacheLine != 0)
      throw ShmError("delegationrpc create: segment is not 64-byte aligned");
    std::memset(mem.data(), 0, mem.size());
    view_ = DelegationView<Req, Resp>(mem.data(), cfg);
    awaiting_.assign(size_t{cfg.max_clients} * cfg.resp_depth, 0);
    awaited_tag_.assign(size_t{cfg.max_clients} * cfg.resp_depth, 0);
    DelegationHeader& h = view_.header();
    h.version = kDelegationVersion;
    h.max_clients = cfg.max_clients;
    h.ring_depth = cfg.ring_depth;
    h.resp_depth = cfg.resp_depth;
    atomic_field(h.next_client_id).store(0, std::memory_order_relaxed);
    atomic_field(h.server_alive).store(1, std::memory_order_relaxed);
    atomic_field(h.magic).store(kDelegationMagic, std::memory_order_release);
  }
  DelegationServer(const DelegationServer&) = delete;  // one server state per ring
  DelegationServer& operator=(const DelegationServer&) = delete;
  DelegationServer(DelegationServer&&) noexcept = default;
  DelegationServer& operator=(DelegationServer&&) noexcept = default;

  // Snapshots head for recv(), without poll()'s count: for a server that takes the entries
  // with recv() at once (recv() stops at a hole itself).
  void snapshot_head() noexcept {
    cached_head_ = atomic_field(view_.control().head).load(std::memory_order_acquire);
  }

  // Whether the last head snapshot lies beyond the cursor: recv() may return an entry.
  // False means recv() would return nothing and advance_tail() store the tail it stored
  // last (only recv() moves the cursor).
  bool has_unread() const noexcept { return cursor_ < cached_head_; }

  // Snapshots head and returns how many committed entries follow the cursor without a
  // hole (a position reserved by a client that has not committed yet).
  uint32_t poll() noexcept {
    snapshot_head();
    // Positions at or beyond cursor + ring_depth cannot be committed yet (their writers
    // wait for tail to pass them), and their slots alias consumed ones.
    const uint64_t limit = cursor_ + view_.config().ring_depth;
    const uint64_t end = cached_head_ < limit ? cached_head_ : limit;
    uint32_t n = 0;
    for (uint64_t p = cursor_; p < end; ++p) {
      auto& s = DelegationView<Req, Resp>::req_header(view_.req_slot(p));
      if (atomic_field(s.committed).load(std::memory_order_acquire) == 0) break;  // hole
      ++n;
    }
    return n;
  }

  // Takes the next legitimate entry at the cursor; stops at a hole and at the head
  // snapshot of the last poll(). Entries that break a rule (header comment) are
  // consumed, counted in rejected() and skipped, so poll()'s count is an upper bound.
  // Always inlined: a server calls it once per entry and once more to find the end, and
  // out of line each call returned the optional entry through memory.
  [[gnu::always_inline]] std::optional<Entry> recv() noexcept {
    while (cursor_ < cached_head_) {
      std::byte* slot = view_.req_slot(cursor_);
      auto& s = DelegationView<Req, Resp>::req_header(slot);
      if (atomic_field(s.committed).load(std::memory_order_acquire) == 0) return std::nullopt;
      Entry e;
      e.client_id = s.client_id;
      e.resp_slot_idx = s.resp_slot_idx;
      e.call_tag = s.call_tag;
      std::memcpy(&e.payload, slot + kDelegationReqPayloadOffset, sizeof(Req));
      atomic_field(s.committed).store(0, std::memory_order_release);
      ++cursor_;
      if (const auto why = check_entry(e.client_id, e.resp_slot_idx)) {
        ++rejected_[static_cast<size_t>(*why)];
        continue;
      }
      const size_t k = awaiting_index(e.client_id, e.resp_slot_idx);
      awaiting_[k] = 1;
      awaited_tag_[k] = e.call_tag;
      return e;
    }
    return std::nullopt;
  }

  // Publishes the consumed position: clients spinning on a full ring may proceed. A
  // cursor short of the head snapshot (the reads stopped at a hole) is where holes are
  // timed and abandoned ones skipped (header comment: abandoned positions), so a server
  // must call it after its reads, also after reads that returned nothing.
  void advance_tail() noexcept {
    if (cursor_ < cached_head_) [[unlikely]] at_stop();
    atomic_field(view_.control().tail).store(cursor_, std::memory_order_release);
  }

  // Writes resp, with the call tag of the request recv() returned for it, into
  // client_id's response slot resp_slot_idx, which must await a reply (an entry recv()
  // returned and not answered yet). The values are bounds-checked before any use.
  // Answered or dropped (kSlotBusy), the slot no longer awaits a reply.
  DelegationReplyStatus reply(uint32_t client_id, uint32_t resp_slot_idx, const Resp& resp) noexcept {
    if (client_id >= view_.config().max_clients) return DelegationReplyStatus::kBadClientId;
    if (resp_slot_idx >= view_.config().resp_depth) return DelegationReplyStatus::kBadSlot;
    const size_t k = awaiting_index(client_id, resp_slot_idx);
    if (awaiting_[k] == 0) return DelegationReplyStatus::kNotAwaited;
    awaiting_[k] = 0;
    std::byte* slot = view_.resp_slot(client_id, resp_slot_idx);
    auto& r = DelegationView<Req, Resp>::resp_header(slot);
    if (atomic_field(r.valid).load(std::memory_order_acquire) != 0) return DelegationReplyStatus::kSlotBusy;
    r.call_tag = awaited_tag_[k];
    std::memcpy(slot + kDelegationRespPayloadOffset, &resp, sizeof(Resp));
    atomic_field(r.valid).store(1, std::memory_order_release);
    if (hint_words_ != 0) hints_[hint_index(client_id, resp_slot_idx)] |= uint64_t{1} << (resp_slot_idx % 64);
    return DelegationReplyStatus::kOk;
  }

  // A cache hint for reply(client_id, resp_slot_idx) to come (a server that knows a
  // batch of replies before writing them): the response slot's line and the awaited tag.
  // Changes nothing; ids out of range are ignored, as reply() refuses them.
  void prefetch_reply(uint32_t client_id, uint32_t resp_slot_idx) const noexcept {
    if (client_id >= view_.config().max_clients || resp_slot_idx >= view_.config().resp_depth) return;
    prefetch_line(view_.resp_slot(client_id, resp_slot_idx));
    prefetch_line(&awaited_tag_[awaiting_index(client_id, resp_slot_idx)]);
  }

  // Reply hints (header comment): from now on reply() sets bit (slot % 64) of word
  // (slot / 64) of the client's hint words after writing the response. Only for a server
  // and clients run by one OS thread, before the first reply: the words are plain
  // memory, and a response written earlier would have no bit.
  void keep_reply_hints() {
    if (hint_words_ != 0) return;
    hint_words_ = view_.config().resp_depth < 64 ? 1 : view_.config().resp_depth / 64;
    hints_.assign(size_t{view_.config().max_clients} * hint_words_, 0);
  }
  // Client client_id's hint words (hint_words() of them), for its use_reply_hints; nullptr
  // without keep_reply_hints or for a client id out of range.
  uint64_t* reply_hints(uint32_t client_id) noexcept {
    if (hint_words_ == 0 || client_id >= view_.config().max_clients) return nullptr;
    return &hints_[hint_index(client_id, 0)];
  }
  // Hint words per client (a client's busy words): resp_depth / 64, at least 1; 0 without
  // keep_reply_hints.
  uint32_t hint_words() const noexcept { return hint_words_; }

  // Marks the server gone: later calls return kServerDisconnected.
  void shutdown() noexcept { atomic_field(view_.header().server_alive).store(0, std::memory_order_release); }

  uint64_t cursor() const noexcept { return cursor_; }
  const DelegationConfig& config() const noexcept { return view_.config(); }
  // Entries recv() rejected, per rule and in total.
  uint64_t rejected(DelegationReject why) const noexcept { return rejected_[static_cast<size_t>(why)]; }
  uint64_t rejected_total() const noexcept {
    uint64_t n = 0;
    for (const uint64_t r : rejected_) n += r;
    return n;
  }
  // Holes skipped as abandoned positions (no response is sent for them), per reason and
  // in total; and how often the server looked at who reserved the hole it was stuck on.
  uint64_t skipped(DelegationSkip why) const noexcept { return skipped_[static_cast<size_t>(why)]; }
  uint64_t skipped_total() const noexcept { return skipped_[0] + skipped_[1] + skipped_[2]; }
  uint64_t hole_checks() const noexcept { return hole_checks_; }
  // How long the server waits on one hole before it looks at the reserver (and between
  // two looks). Zero: at the hole's second clock read (the first one starts its
  // timing), i.e. its 1 + 2 * kHoleSightingsPerClockRead-th sighting. Negative: ShmError.
  void set_hole_limit(std::chrono::nanoseconds limit) {
    if (limit < std::chrono::nanoseconds::zero())
      throw ShmError("delegationrpc server: hole limit " + std::to_string(limit.count()) + " ns is negative");
    hole_limit_ = limit;
  }
  std::chrono::nanoseconds hole_limit() const noexcept { return hole_limit_; }

  // Sightings of one hole between two clock reads: the clock is read only for a hole
  // that outlives this many polls, never for the short ones a writer leaves between its
  // reservation and its commit.
  static constexpr uint32_t kHoleSightingsPerClockRead = 256;

 private:
  size_t awaiting_index(uint32_t client_id, uint32_t slot) const noexcept {
    assert(client_id < view_.config().max_clients && slot < view_.config().resp_depth);
    return size_t{client_id} * view_.config().resp_depth + slot;
  }
  size_t hint_index(uint32_t client_id, uint32_t slot) const noexcept {
    assert(hint_words_ != 0 && client_id < view_.config().max_clients && slot < view_.config().resp_depth);
    return size_t{client_id} * hint_words_ + slot / 64;
  }

  // The first rule (header comment) that an entry naming (client_id, slot) breaks.
  std::optional<DelegationReject> check_entry(uint32_t client_id, uint32_t slot) noexcept {
    if (client_id >= view_.config().max_clients) return DelegationReject::kBadClientId;
    if (slot >= view_.config().resp_depth) return DelegationReject::kBadSlot;
    if (client_id >= registered_) {  // refresh the registration count only when needed
      registered_ = atomic_field(view_.header().next_client_id).load(std::memory_order_acquire);
      if (client_id >= registered_) return DelegationReject::kUnregisteredClient;
    }
    if (awaiting_[awaiting_index(client_id, slot)] != 0) return DelegationReject::kSlotAwaitingReply;
    auto& r = DelegationView<Req, Resp>::resp_header(view_.resp_slot(client_id, slot));
    // With reply hints a slot without its bit holds no response (header comment: reply()
    // is the only writer of `valid` and sets the bit, which only a read of the slot
    // clears): the client's line is not read.
    if (hint_words_ != 0 && (hints_[hint_index(client_id, slot)] & (uint64_t{1} << (slot % 64))) == 0) {
      assert(atomic_field(r.valid).load(std::memory_order_acquire) == 0);
      return std::nullopt;
    }
    if (atomic_field(r.valid).load(std::memory_order_acquire) != 0) return DelegationReject::kSlotHoldsResponse;
    return std::nullopt;
  }

  // advance_tail() found the cursor short of the head snapshot: the reads stopped at a
  // hole, or the caller stopped early (then the position is committed: nothing to do).
  // Counts the sightings of the same hole and reads the clock every
  // kHoleSightingsPerClockRead of them (header comment: abandoned positions); skips it
  // when skip_abandoned_hole() says so. Out of line, and reached only from
  // advance_tail(): the per-entry read does not change.
  [[gnu::noinline]] void at_stop() noexcept {
    auto& s = DelegationView<Req, Resp>::req_header(view_.req_slot(cursor_));
    if (atomic_field(s.committed).load(std::memory_order_acquire) != 0) return;
    if (cursor_ < unnamed_run_end_) {  // a run of unnamed positions being skipped
      skip_unnamed_run();
      return;
    }
    if (cursor_ != hole_pos_) {
      hole_pos_ = cursor_;
      hole_head_ = cached_head_;  // positions below it are reserved from now on
      hole_sightings_ = 0;
      hole_timed_ = false;
      unnamed_looks_ = 0;
      return;
    }
    if (++hole_sightings_ < kHoleSightingsPerClockRead) return;
    hole_sightings_ = 0;
    const auto now = std::chrono::steady_clock::now();
    if (!hole_timed_) {
      hole_timed_ = true;
      hole_since_ = now;
      return;
    }
    if (now - hole_since_ < hole_limit_) return;
    hole_since_ = now;  // a reserver found alive is looked at again one limit later
    skip_abandoned_hole();
  }

  // The hole at the cursor has lasted hole_limit: skip it if its reserver gave it up or
  // is gone, and only by winning the claim word against the reserver (header comment).
  bool skip_abandoned_hole() noexcept {
    ++hole_checks_;
    const uint64_t name = delegation_position_name(cursor_);
    auto& s = DelegationView<Req, Resp>::req_header(view_.req_slot(cursor_));
    auto claim = atomic_field(s.claim);
    uint64_t seen = claim.load(std::memory_order_acquire);
    if (seen == name) {  // claimed: its writer is between its claim and its commit
      unnamed_looks_ = 0;
      return false;
    }
    // The reserver: the registered client whose record names this position (the first
    // one: a forged record can only name a position that another client reserved, and
    // winning the claim word below keeps that client from writing it).
    const uint32_t registered = atomic_field(view_.header().next_client_id).load(std::memory_order_acquire);
    const uint32_t n = registered < view_.config().max_clients ? registered : view_.config().max_clients;
    std::optional<DelegationSkip> why;
    for (uint32_t c = 0; c < n && !why; ++c) {
      DelegationClientRecord& r = view_.record(c);
      const uint64_t waiting = atomic_field(r.waiting).load(std::memory_order_acquire);
      if ((waiting & ~kDelegationAbandonedMark) != name) continue;
      if ((waiting & kDelegationAbandonedMark) != 0) {
        why = DelegationSkip::kReserverGaveUp;
      } else if (delegation_reserver_gone(atomic_field(r.pid).load(std::memory_order_relaxed))) {
        why = DelegationSkip::kReserverGone;
      } else {
        unnamed_looks_ = 0;
        return false;  // the reserver lives: a slow writer, the hole stays
      }
    }
    if (!why) {
      // Nobody names it: reserved a moment ago (the reserver claims it or writes its
      // record next), or never reserved by a client (a forged head). Skipped at the
      // kDelegationUnnamedHoleLooks-th such look in a row, with the unnamed positions
      // reserved behind it before it was met.
      if (++unnamed_looks_ < kDelegationUnnamedHoleLooks) return false;
      if (!mark_abandoned(cursor_, seen)) return false;
      ++skipped_[static_cast<size_t>(DelegationSkip::kUnnamed)];
      ++cursor_;
      unnamed_run_end_ = hole_head_;
      skip_unnamed_run();
      return true;
    }
    unnamed_looks_ = 0;
    if (!mark_abandoned(cursor_, seen)) return false;
    ++skipped_[static_cast<size_t>(*why)];
    ++cursor_;
    return true;
  }

  // Marks position pos abandoned by a CAS of its claim word from `seen` (not its name).
  // Fails if its reserver claimed it since (it lives after all), or if the slot holds a
  // committed byte: no writer of the position can commit any more, so that byte was not
  // written by one (a forged write), and the next recv() reads it as an entry and checks it.
  bool mark_abandoned(uint64_t pos, uint64_t seen) noexcept {
    auto& s = DelegationView<Req, Resp>::req_header(view_.req_slot(pos));
    if (!atomic_field(s.claim).compare_exchange_strong(seen, delegation_position_name(pos) | kDelegationAbandonedMark,
                                                       std::memory_order_acq_rel, std::memory_order_acquire))
      return false;
    return atomic_field(s.committed).load(std::memory_order_acquire) == 0;
  }

  // Skips the unnamed positions from the cursor up to unnamed_run_end_ (reserved before
  // an unnamed hole was met), at most ring_depth per call; the first position that is
  // committed, claimed or named by a record ends the run (a named one is timed as any
  // hole).
  void skip_unnamed_run() noexcept {
    const uint32_t registered = atomic_field(view_.header().next_client_id).load(std::memory_order_acquire);
    const uint32_t n = registered < view_.config().max_clients ? registered : view_.config().max_clients;
    bool stopped = false;
    for (uint32_t k = 0; k < view_.config().ring_depth && cursor_ < unnamed_run_end_; ++k) {
      const uint64_t name = delegation_position_name(cursor_);
      auto& s = DelegationView<Req, Resp>::req_header(view_.req_slot(cursor_));
      uint64_t seen = atomic_field(s.claim).load(std::memory_order_acquire);
      bool named = seen == name || atomic_field(s.committed).load(std::memory_order_acquire) != 0;
      for (uint32_t c = 0; c < n && !named; ++c)
        named = (atomic_field(view_.record(c).waiting).load(std::memory_order_acquire) & ~kDelegationAbandonedMark) ==
                name;
      if (named || !mark_abandoned(cursor_, seen)) {
        stopped = true;
        break;
      }
      ++skipped_[static_cast<size_t>(DelegationSkip::kUnnamed)];
      ++cursor_;
    }
    if (stopped || cursor_ >= unnamed_run_end_) unnamed_run_end_ = 0;
  }

  DelegationView<Req, Resp> view_;
  uint64_t cursor_ = 0;       // next position to consume
  uint64_t cached_head_ = 0;  // head snapshot of the last poll()
  uint32_t registered_ = 0;   // clients known to have registered (next_client_id seen)
  LineVector<uint8_t> awaiting_;  // (client, slot) has a request awaiting a reply
  LineVector<uint32_t> awaited_tag_;  // the call tag of that request
  // Reply hints (keep_reply_hints; hint_words_ == 0: none): per client, hint_words_ words,
  // bit s % 64 of the client's word s / 64 set by reply() to its slot s and cleared by
  // its poll().
  uint32_t hint_words_ = 0;
  LineVector<uint64_t> hints_;
  std::array<uint64_t, kDelegationRejectReasons> rejected_{};
  // The hole the server is stuck on (at_hole): its position, sightings since the last
  // clock read, and when it was first timed.
  uint64_t hole_pos_ = ~uint64_t{0};
  uint64_t hole_head_ = 0;        // the head snapshot when the server met that hole
  uint32_t unnamed_looks_ = 0;    // looks in a row that found no record naming it
  uint64_t unnamed_run_end_ = 0;  // skipping unnamed positions up to here (skip_unnamed_run)
  uint32_t hole_sightings_ = 0;
  bool hole_timed_ = false;
  std::chrono::steady_clock::time_point hole_since_{};
  std::chrono::nanoseconds hole_limit_ = kDelegationDefaultHoleLimit;
  std::array<uint64_t, kDelegationSkipReasons> skipped_{};
  uint64_t hole_checks_ = 0;
};

// ---- client ----------------------------------------------------------------------

enum class DelegationCallStatus : uint8_t {
  kOk = 0,
  kFull,                // try_call only: the ring had no free position; nothing reserved
  kNoFreeSlot,          // every response slot awaits a response: poll() first
  kServerDisconnected,  // server_alive is false
  kRingCorrupted,       // tail beyond the caller's position (forged): see the header comment
  kServerUnresponsive,  // call() only: the ring stayed full, tail unmoved, for wait_limit()
  kAbandoned,           // the reserved position was marked abandoned before this call could
                        // claim it (header comment: abandoned positions); nothing written
};

struct DelegationCallResult {
  DelegationCallStatus status;
  uint32_t resp_slot;  // the response slot used (valid when status == kOk)
};

template <class Req, class Resp>
class alignas(kCacheLine) DelegationClient {
 public:
  using Layout = DelegationLayout<Req, Resp>;

  // Validates the segment and registers: client ids are handed out in order and the
  // (max_clients + 1)-th registration is refused. The call tags' key (header comment)
  // is drawn from std::random_device: one per thread, opened at the thread's first
  // connect (opening one costs about 10 us here, and a simulated run connects thousands
  // of clients: 1.5% of a 4 ms C1 NP=32 run when each connect opened its own).
  static DelegationClient connect(std::span<std::byte> mem) {
    thread_local std::random_device entropy;
    return connect(mem, entropy());
  }
  // The same with a given key (tests, fuzzing: reproducible tags).
  static DelegationClient connect(std::span<std::byte> mem, uint32_t tag_key) {
    const DelegationConfig cfg = validate_delegation_segment<Req, Resp>(mem);
    DelegationView<Req, Resp> view(mem.data(), cfg);
    if (!view.server_alive()) throw ShmError("delegationrpc connect: the server has shut down");
    auto next = atomic_field(view.header().next_client_id);
    uint32_t id = next.load(std::memory_order_relaxed);
    do {
      if (id >= cfg.max_clients)
        throw ShmError("delegationrpc connect: all " + std::to_string(cfg.max_clients) + " client ids are taken");
    } while (!next.compare_exchange_weak(id, id + 1, std::memory_order_relaxed));
    // The record of a fresh id is zero (ids are never handed out twice): no position.
    atomic_field(view.record(id).pid).store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
    return DelegationClient(view, id, tag_key);
  }

  DelegationClient(const DelegationClient&) = delete;  // one client state per client id
  DelegationClient& operator=(const DelegationClient&) = delete;
  DelegationClient(DelegationClient&&) noexcept = default;
  DelegationClient& operator=(DelegationClient&&) noexcept = default;

  // Blocking call (docs/design_shm.md §delegationrpc protocol): spins while the ring is full
  // (until the server advances tail or shuts down). Never spins for a response slot:
  // kNoFreeSlot instead.
  DelegationCallResult call(const Req& req, uint64_t user_token = 0) noexcept {
    if (!view_.server_alive()) return {DelegationCallStatus::kServerDisconnected, 0};
    const int slot = pick_resp_slot();
    if (slot < 0) return {DelegationCallStatus::kNoFreeSlot, 0};
    if (given_up_ != 0) [[unlikely]] {
      const DelegationCallStatus st = wait_given_up_passed(true);
      if (st != DelegationCallStatus::kOk) return {st, 0};
    }
    discard_stray_response(static_cast<uint32_t>(slot));
    return reserve_and_commit(static_cast<uint32_t>(slot), req, user_token, 0);
  }

  // Non-blocking call: kFull (nothing reserved) when head - tail >= ring_depth.
  [[gnu::always_inline]] inline DelegationCallResult try_call(const Req& req, uint64_t user_token = 0) noexcept {
    if (!view_.server_alive()) return {DelegationCallStatus::kServerDisconnected, 0};
    const int slot = pick_resp_slot();
    if (slot < 0) return {DelegationCallStatus::kNoFreeSlot, 0};
    if (given_up_ != 0) [[unlikely]] {
      const DelegationCallStatus st = wait_given_up_passed(false);
      if (st != DelegationCallStatus::kOk) return {st, 0};
    }
    auto& ctl = view_.control();
    // tail first: tail <= head at any moment, and head only grows, so a tail beyond
    // the later head snapshot was forged (and the difference would underflow).
    const uint64_t tail = atomic_field(ctl.tail).load(std::memory_order_acquire);
    const uint64_t head = atomic_field(ctl.head).load(std::memory_order_relaxed);
    if (tail > head) return {DelegationCallStatus::kRingCorrupted, 0};
    if (head - tail >= view_.config().ring_depth) return {DelegationCallStatus::kFull, 0};
    discard_stray_response(static_cast<uint32_t>(slot));
    // Positions below tail + ring_depth have ring space (tail <= head was checked; a
    // sum that wraps only makes the reservation read tail again).
    return reserve_and_commit(static_cast<uint32_t>(slot), req, user_token, tail + view_.config().ring_depth);
  }

  // Ends every call whose slot holds a response: on_response(uint64_t user_token,
  // const Resp&) when the response carries the call's tag, else on_failed(uint64_t
  // user_token) (header comment: call tags). Returns the number of calls ended. The slot
  // is released before the callback runs, so the callback may call() again.
  // The slots are visited in ascending index order, only those awaiting a response (the
  // set bits of the busy words); a slot that a callback makes busy above the one just
  // ended is visited too, as a loop over every slot would.
  template <class F, class G>
  [[gnu::always_inline]] inline uint32_t poll(F&& on_response, G&& on_failed) {
    uint32_t n = 0;
    const size_t words = busy_words_;
    size_t w = 0;
    do {  // at least one word
      uint64_t awaiting = busy_word(w);
      while (awaiting != 0) {
        const uint32_t bit = static_cast<uint32_t>(std::countr_zero(awaiting));
        if (take_response(static_cast<uint32_t>(w) * kSlotsPerBusyWord + bit, on_response, on_failed)) {
          ++n;
          awaiting = busy_word(w) & bits_above(bit);  // the callback may have made calls
        } else {
          awaiting &= awaiting - 1;
        }
      }
    } while (++w < words);
    return n;
  }
  // Reply hints (header comment), for poll_hinted(): `words`, the server's
  // DelegationServer::reply_hints for this client id (nullptr: none). Only where one OS
  // thread runs the server and this client, the server keeping hints since before its
  // first reply to this client (every response then comes with its bit). The words stay
  // the server's, which outlives this client.
  void use_reply_hints(uint64_t* words) noexcept { hints_ = words; }
  bool uses_reply_hints() const noexcept { return hints_ != nullptr; }

  // For callers that need no failure callback (tests, benchmarks): a call failed on a
  // mismatched tag ends without one, counted only in mismatched_responses().
  template <class F>
  uint32_t poll(F&& on_response) {
    return poll(on_response, [](uint64_t) {});
  }

  // poll() with reply hints (use_reply_hints; without them, poll()): the busy slots with
  // a hint bit, ascending, each bit cleared when its slot is read. Invariant (asserted
  // in debug builds): a busy slot without a bit holds no response, so the calls ended
  // and their order are poll()'s (header comment: reply hints). poll() may still be
  // used: it leaves bits set, and a bit whose slot holds nothing is cleared when read.
  template <class F, class G>
  [[gnu::always_inline]] inline uint32_t poll_hinted(F&& on_response, G&& on_failed) {
    if (hints_ == nullptr) return poll(on_response, on_failed);
    uint32_t n = 0;
    const size_t words = busy_words_;
    size_t w = 0;
    do {  // at least one word
      assert(unhinted_slots_hold_no_response(w));
      uint64_t awaiting = busy_word(w) & hints_[w];
      while (awaiting != 0) {
        const uint32_t bit = static_cast<uint32_t>(std::countr_zero(awaiting));
        hints_[w] &= ~slot_bit(bit);  // read now: a later response sets it again
        if (take_response(static_cast<uint32_t>(w) * kSlotsPerBusyWord + bit, on_response, on_failed)) {
          ++n;
          awaiting = busy_word(w) & hints_[w] & bits_above(bit);  // the callback may have made calls
        } else {
          awaiting &= awaiting - 1;
        }
      }
    } while (++w < words);
    return n;
  }
  template <class F>
  uint32_t poll_hinted(F&& on_response) {
    return poll_hinted(on_response, [](uint64_t) {});
  }

  // Checks one response slot (for event-driven callers that know which slot changed).
  // Returns true if a call ended (answered or failed). Slots not awaiting a response
  // are not read at all.
  template <class F, class G>
  bool poll_slot(uint32_t slot, F&& on_response, G&& on_failed) {
    if (!slot_busy(slot)) return false;
    return take_response(slot, on_response, on_failed);
  }
  template <class F>
  bool poll_slot(uint32_t slot, F&& on_response) {
    return poll_slot(slot, on_response, [](uint64_t) {});
  }

  uint32_t client_id() const noexcept { return client_id_; }
  uint32_t in_flight() const noexcept { return in_flight_; }
  // How long call() waits for ring space while the server makes no progress at all.
  void set_wait_limit(std::chrono::nanoseconds limit) noexcept { wait_limit_ = limit; }
  std::chrono::nanoseconds wait_limit() const noexcept { return wait_limit_; }
  // Responses found in slots that awaited none (answers to forged requests), discarded.
  uint64_t stray_responses() const noexcept { return stray_responses_; }
  // Responses whose call tag was not the awaited call's: each failed that call.
  uint64_t mismatched_responses() const noexcept { return mismatched_responses_; }
  // The tag of the call awaiting in `slot` (meaningful while slot_busy(slot)).
  uint32_t call_tag(uint32_t slot) const noexcept { return slot < view_.config().resp_depth ? calls_[slot].tag : 0; }
  bool slot_busy(uint32_t slot) const noexcept {
    return slot < view_.config().resp_depth && (busy_word(slot / kSlotsPerBusyWord) & slot_bit(slot)) != 0;
  }
  bool server_alive() const noexcept { return view_.server_alive(); }
  const DelegationConfig& config() const noexcept { return view_.config(); }

  // Cache hints for a caller that prefetches a call's lines ahead of it (the simulator,
  // where one thread runs thousands of clients and a call finds none of its lines
  // cached). Addresses only: nothing here changes or decides anything.
  // The lines the next call reads in this client's state: the response slot it would
  // reuse (pick_resp_slot's usual choice, the cursor; discard_stray_response reads it)
  // and the slot's call record.
  struct NextCallLines {
    const void* response_slot;
    const void* call;
  };
  NextCallLines next_call_lines() const noexcept {
    return {resp_slots_ + size_t{next_resp_slot_} * Layout::kRespSlotSize, &calls_[next_resp_slot_]};
  }
  // For a prefetcher that runs just before this client's next call and poll and cannot
  // read this (by then cold) object without waiting: the lines found from the segment
  // and the server's reply hints instead. prefetch() asks for the claim word of the ring
  // slot a call reserving now would take (the head's slot: exact unless another client of
  // the ring reserves first) and, with reply hints (use_reply_hints), the response slot
  // and call record of each response the server gave since the last poll (the first 64
  // slots' word). It holds addresses only: taken once, after use_reply_hints, it stays
  // right for the client's life.
  // 40 bytes, so that the simulator's binding holds it in one line with what a step
  // reads first: the claim words are found from the head word's address (the ring's
  // control and slots lie at fixed offsets of the segment), and word 0's mask from the
  // number of slots it names.
  struct StepHint {
    const uint64_t* head = nullptr;
    const uint64_t* replies = nullptr;  // reply hint word 0 (nullptr: no hints)
    const std::byte* resp_slot0 = nullptr;
    const std::byte* call0 = nullptr;  // the call record of response slot 0
    uint32_t ring_mask = 0;
    uint32_t reply_shift = 0;  // 64 - the slots word 0 names (resp_depth < 64: fewer than 64)
    // From the head word to slot 0's claim word.
    static constexpr ptrdiff_t kHeadToClaim0 =
        ptrdiff_t{kDelegationSlotsOffset + offsetof(DelegationSlotHeader, claim)} -
        ptrdiff_t{kDelegationControlOffset + offsetof(DelegationControl, head)};
    const void* claim_line() const noexcept {
      return reinterpret_cast<const std::byte*>(head) + kHeadToClaim0 +
             (__atomic_load_n(head, __ATOMIC_RELAXED) & ring_mask) * Layout::kReqSlotSize;
    }
    // f(response slot, call record) of each slot with a reply hint bit (only bits that
    // name one of the client's slots: the word is the server's, a hint never names a
    // line outside the slots).
    template <class F>
    void for_each_reply(F&& f) const noexcept {
      if (replies == nullptr) return;
      for (uint64_t w = *replies & (~uint64_t{0} >> reply_shift); w != 0; w &= w - 1) {
        const auto slot = static_cast<uint32_t>(std::countr_zero(w));
        f(static_cast<const void*>(resp_slot0 + size_t{slot} * Layout::kRespSlotSize),
          static_cast<const void*>(call0 + size_t{slot} * sizeof(SlotCall)));
      }
    }
    void prefetch() const noexcept {
      prefetch_line(claim_line());
      for_each_reply([](const void* slot, const void* call) {
        prefetch_line(slot);
        prefetch_line(call);
      });
    }
  };
  static_assert(sizeof(StepHint) == 40);
  StepHint step_hint() const noexcept {
    const uint32_t named = view_.config().resp_depth < kSlotsPerBusyWord ? view_.config().resp_depth
                                                                          : uint32_t{kSlotsPerBusyWord};
    return {&view_.control().head, hints_, resp_slots_, reinterpret_cast<const std::byte*>(calls_.data()),
            view_.config().ring_depth - 1, 64 - named};
  }

 private:
  DelegationClient(const DelegationView<Req, Resp>& view, uint32_t id, uint32_t tag_key)
      : view_(view),
        client_id_(id),
        tag_key_(tag_key),
        busy_words_(static_cast<uint32_t>(busy_words(view.config().resp_depth))),
        resp_slots_(view.resp_slot(id, 0)),
        slots_in_word_(view.config().resp_depth < kSlotsPerBusyWord ? (uint64_t{1} << view.config().resp_depth) - 1
                                                                    : ~uint64_t{0}),
        calls_(view.config().resp_depth, SlotCall{}),
        busy_more_(busy_words_ - 1, 0),
        record_(&view.record(id)) {}

  // Round-robin over the response slots, skipping those still awaiting a response: the
  // first free slot at or after the cursor, wrapping around (the lowest clear bit of
  // the cursor's word at or above the cursor, then the next words, then the cursor's
  // word below it). The cursor moves only when a call succeeds (reserve_and_commit).
  int pick_resp_slot() const noexcept {
    const uint32_t cursor = next_resp_slot_;
    if ((busy_word(cursor / kSlotsPerBusyWord) & slot_bit(cursor)) == 0) [[likely]]
      return static_cast<int>(cursor);  // the usual case: the cursor's call was answered
    return scan_for_free_slot();
  }
  [[gnu::noinline]] int scan_for_free_slot() const noexcept {
    const size_t words = busy_words_;  // a power of two
    size_t w = next_resp_slot_ / kSlotsPerBusyWord;
    uint64_t free = ~busy_word(w) & slots_in_word_ & ~(slot_bit(next_resp_slot_) - 1);
    for (size_t k = 0; free == 0; ++k) {
      if (k == words) return -1;
      w = (w + 1) & (words - 1);
      free = ~busy_word(w) & slots_in_word_;
    }
    return static_cast<int>(w * kSlotsPerBusyWord + static_cast<uint32_t>(std::countr_zero(free)));
  }

  // Busy words: bit (slot % 64) of word (slot / 64) is set while the slot awaits a
  // response. resp_depth is a power of two, so the words are too (one when <= 64).
  static constexpr uint32_t kSlotsPerBusyWord = 64;
  static constexpr size_t busy_words(uint32_t resp_depth) noexcept {
    return resp_depth < kSlotsPerBusyWord ? 1 : resp_depth / kSlotsPerBusyWord;
  }
  static constexpr uint64_t slot_bit(uint32_t slot) noexcept { return uint64_t{1} << (slot % kSlotsPerBusyWord); }
  // Word w of the busy bits: the first in the object (a client of up to 64 response slots,
  // every benchkv client at a queue depth up to 64, touches no other line for them), the
  // others in busy_more_.
  uint64_t& busy_word(size_t w) noexcept { return w == 0 ? busy0_ : busy_more_[w - 1]; }
  uint64_t busy_word(size_t w) const noexcept { return w == 0 ? busy0_ : busy_more_[w - 1]; }
  // The bits of a word above `bit` (none above bit 63: 2 << 63 wraps to 0).
  static constexpr uint64_t bits_above(uint32_t bit) noexcept { return ~((uint64_t{2} << bit) - 1); }
  static_assert(bits_above(63) == 0 && bits_above(0) == ~uint64_t{1});

  // The invariant of poll_hinted for word w: no busy slot without a hint bit has a response.
  bool unhinted_slots_hold_no_response(size_t w) const noexcept {
    for (uint64_t unhinted = busy_word(w) & ~hints_[w]; unhinted != 0; unhinted &= unhinted - 1) {
      const uint32_t slot = static_cast<uint32_t>(w) * kSlotsPerBusyWord + static_cast<uint32_t>(std::countr_zero(unhinted));
      auto& r = DelegationView<Req, Resp>::resp_header(resp_slots_ + size_t{slot} * Layout::kRespSlotSize);
      if (atomic_field(r.valid).load(std::memory_order_acquire) != 0) return false;
    }
    return true;
  }

  // Ends the call awaiting in `slot` (a busy slot) if its response is there: the slot is
  // released before the callback runs (the callback may make calls).
  template <class F, class G>
  [[gnu::always_inline]] inline bool take_response(uint32_t slot, F& on_response, G& on_failed) {
    std::byte* p = resp_slots_ + size_t{slot} * Layout::kRespSlotSize;
    auto& r = DelegationView<Req, Resp>::resp_header(p);
    if (atomic_field(r.valid).load(std::memory_order_acquire) == 0) return false;
    const uint32_t tag = r.call_tag;
    Resp resp;
    std::memcpy(&resp, p + kDelegationRespPayloadOffset, sizeof(Resp));
    atomic_field(r.valid).store(0, std::memory_order_release);
    const SlotCall call = calls_[slot];  // copy: the callback may reuse the slot
    const uint64_t token = call.token;
    busy_word(slot / kSlotsPerBusyWord) &= ~slot_bit(slot);
    --in_flight_;
    if (tag != call.tag) [[unlikely]] {
      ++mismatched_responses_;
      on_failed(token);
    } else {
      on_response(token, static_cast<const Resp&>(resp));
    }
    return true;
  }

  // A slot this client does not await may still hold a response: the answer to a
  // forged request naming it. Cleared (and counted) before the slot is reused, so it
  // is neither taken for the new call's answer nor makes the server refuse the call
  // (rule 4). The clear is released by the commit that follows. With reply hints a slot
  // without its bit holds no response (header comment: reply() is the only writer of
  // `valid` and sets the bit, which only a read of the slot clears), and is not read.
  void discard_stray_response(uint32_t slot) noexcept {
    auto& r = DelegationView<Req, Resp>::resp_header(resp_slots_ + size_t{slot} * Layout::kRespSlotSize);
    if (hints_ != nullptr && (hints_[slot / kSlotsPerBusyWord] & slot_bit(slot)) == 0) {
      assert(atomic_field(r.valid).load(std::memory_order_acquire) == 0);
      return;
    }
    if (atomic_field(r.valid).load(std::memory_order_acquire) == 0) return;
    atomic_field(r.valid).store(0, std::memory_order_relaxed);
    ++stray_responses_;
  }

  // Reserve a position, wait for ring space, write the slot, commit
  // (docs/design_shm.md §delegationrpc protocol). space_below: positions below it are known
  // to have ring space (a tail read with acquire before the reservation, plus
  // ring_depth: tail only grows), so the reservation reads tail only for a position at
  // or beyond it (another client reserved in between, or the ring is full); 0: nothing
  // known, tail is read.
  // Always inlined (into try_call and call): out of line its call and saved registers
  // cost more than the claim it holds.
  [[gnu::always_inline]] inline DelegationCallResult reserve_and_commit(uint32_t slot, const Req& req,
                                                                        uint64_t user_token,
                                                                        uint64_t space_below) noexcept {
    const uint64_t pos = atomic_field(view_.control().head).fetch_add(1, std::memory_order_relaxed);
    if (pos >= space_below) [[unlikely]] {
      const DelegationCallStatus st = wait_for_space(pos);
      if (st != DelegationCallStatus::kOk) return {st, 0};
    }
    std::byte* p = view_.req_slot(pos);
    auto& s = DelegationView<Req, Resp>::req_header(p);
    // Claim the slot for pos: only a claim word naming an earlier position (or none) is
    // taken over; a name at or beyond pos means pos was abandoned (header comment).
    {
      auto claim = atomic_field(s.claim);
      const uint64_t name = delegation_position_name(pos);
      uint64_t seen = claim.load(std::memory_order_relaxed);
      do {
        if (seen >= name) [[unlikely]] return give_up(pos, DelegationCallStatus::kAbandoned);
      } while (!claim.compare_exchange_weak(seen, name, std::memory_order_acquire, std::memory_order_relaxed));
    }
    const uint32_t tag = delegation_call_tag(call_sequence_++, tag_key_);
    s.client_id = client_id_;
    s.resp_slot_idx = slot;
    s.call_tag = tag;
    std::memcpy(p + kDelegationReqPayloadOffset, &req, sizeof(Req));
    atomic_field(s.committed).store(1, std::memory_order_release);
    busy_word(slot / kSlotsPerBusyWord) |= slot_bit(slot);
    calls_[slot] = SlotCall{user_token, tag};
    ++in_flight_;
    next_resp_slot_ = (slot + 1) & (view_.config().resp_depth - 1);
    return {DelegationCallStatus::kOk, slot};
  }

  // Waits until the reserved position pos has ring space (kOk), the server shuts down,
  // makes no progress for wait_limit, or tail turns out forged (beyond pos).
  // The record names pos while this client waits, so that a server stuck on pos can
  // find it; a wait that ends without ring space gives pos up (give_up).
  [[gnu::noinline]] DelegationCallStatus wait_for_space(uint64_t pos) noexcept {
    atomic_field(record_->waiting).store(delegation_position_name(pos), std::memory_order_relaxed);
    auto& ctl = view_.control();
    const uint64_t depth = view_.config().ring_depth;
    SpinWait spin;
    uint64_t seen_tail = ~uint64_t{0};
    std::chrono::steady_clock::time_point tail_moved{};
    for (;;) {
      const uint64_t tail = atomic_field(ctl.tail).load(std::memory_order_acquire);
      // The server passes an uncommitted position only once it marked it abandoned, so
      // tail <= pos unless pos's claim word says so: the mark, or the claim of a later
      // lap that reused the slot since (this call may have waited long after the
      // skip). A larger tail with a claim word below the mark was forged, and
      // pos - tail would wrap and wait forever.
      if (tail > pos) [[unlikely]] {
        const uint64_t claim = atomic_field(DelegationView<Req, Resp>::req_header(view_.req_slot(pos)).claim)
                                   .load(std::memory_order_acquire);
        return give_up(pos, claim > delegation_position_name(pos) ? DelegationCallStatus::kAbandoned
                                                                  : DelegationCallStatus::kRingCorrupted)
            .status;
      }
      if (pos - tail < depth) return DelegationCallStatus::kOk;
      if (!view_.server_alive()) return give_up(pos, DelegationCallStatus::kServerDisconnected).status;
      // A server that died without clearing server_alive (or is stopped) never moves
      // tail again: give up after wait_limit without progress (checked once per yield).
      if (tail != seen_tail) {
        seen_tail = tail;
        tail_moved = std::chrono::steady_clock::now();
      } else if (spin.spins + 1 == kSpinsBeforeYield && std::chrono::steady_clock::now() - tail_moved > wait_limit_) {
        return give_up(pos, DelegationCallStatus::kServerUnresponsive).status;
      }
      spin.wait();
    }
  }

  // Gives the reserved, unclaimed position pos up: the record names it abandoned, so a
  // server stuck on it skips it, and the next call waits until the server has passed it
  // (wait_given_up_passed): a later record would no longer name it.
  [[gnu::noinline, gnu::cold]] DelegationCallResult give_up(uint64_t pos, DelegationCallStatus why) noexcept {
    given_up_ = delegation_position_name(pos);
    atomic_field(record_->waiting).store(given_up_ | kDelegationAbandonedMark, std::memory_order_release);
    return {why, 0};
  }

  // A call after a give-up: kOk once tail has passed the given-up position (the record
  // may name another one then). Else try_call returns kFull; call() waits as for ring
  // space (kServerDisconnected, kServerUnresponsive after wait_limit without progress).
  // The server passes a position this client gave up only by marking its claim word
  // abandoned (it was never claimed, so never committed), and a later lap's claim only
  // grows the word: a tail beyond the position with the word still below the mark was
  // forged, and taking it for passed would let the next wait overwrite the record that
  // the server, stuck on the position, still needs.
  [[gnu::noinline, gnu::cold]] DelegationCallStatus wait_given_up_passed(bool block) noexcept {
    const uint64_t pos = (given_up_ >> 1) - 1;
    auto& ctl = view_.control();
    auto claim = atomic_field(DelegationView<Req, Resp>::req_header(view_.req_slot(pos)).claim);
    SpinWait spin;
    uint64_t seen_tail = ~uint64_t{0};
    std::chrono::steady_clock::time_point tail_moved{};
    for (;;) {
      const uint64_t tail = atomic_field(ctl.tail).load(std::memory_order_acquire);
      if (tail > pos && claim.load(std::memory_order_acquire) > given_up_) {
        given_up_ = 0;
        return DelegationCallStatus::kOk;
      }
      if (!block) return DelegationCallStatus::kFull;
      if (!view_.server_alive()) return DelegationCallStatus::kServerDisconnected;
      if (tail != seen_tail) {
        seen_tail = tail;
        tail_moved = std::chrono::steady_clock::now();
      } else if (spin.spins + 1 == kSpinsBeforeYield && std::chrono::steady_clock::now() - tail_moved > wait_limit_) {
        return DelegationCallStatus::kServerUnresponsive;
      }
      spin.wait();
    }
  }

  // The call in a response slot, client-local (never in the segment): its user token and
  // tag side by side, so that a call's bookkeeping is one line, not two.
  struct SlotCall {
    uint64_t token = 0;
    uint32_t tag = 0;
  };
  static_assert(sizeof(SlotCall) == 16 && kCacheLine % sizeof(SlotCall) == 0);

  // Layout: a simulation steps thousands of clients in turn, so a call finds none of its
  // client's lines in the cache. What a call and a poll read comes first, in two lines
  // (the object is line-aligned): the view and the cursor, then the busy bits, the tag
  // state, the response slots and the per-slot calls; the rest after.
  DelegationView<Req, Resp> view_;
  uint32_t client_id_ = 0;
  uint32_t next_resp_slot_ = 0;
  uint32_t in_flight_ = 0;
  uint32_t call_sequence_ = 0;  // calls made: the next call's tag is its tag
  uint64_t busy0_ = 0;          // busy word 0 (busy_word): slots awaiting a response (client-local)
  uint32_t tag_key_ = 0;
  uint32_t busy_words_ = 1;       // busy words (busy_words(resp_depth)): busy0_ and busy_more_
  uint64_t given_up_ = 0;  // name of the position this client gave up, until tail passes it (0: none)
  std::byte* resp_slots_ = nullptr;  // this client's response slot 0 (its resp_depth slots follow)
  uint64_t slots_in_word_ = 0;    // the bits of a busy word that are slots (resp_depth < 64: the low resp_depth)
  uint64_t* hints_ = nullptr;  // reply hints (use_reply_hints), as many words as the busy words; nullptr: none
  LineVector<SlotCall> calls_;  // the call in each slot (client-local)
  LineVector<uint64_t> busy_more_;  // busy words 1.. (resp_depth > 64)
  uint64_t stray_responses_ = 0;
  uint64_t mismatched_responses_ = 0;
  std::chrono::nanoseconds wait_limit_ = kDelegationDefaultWaitLimit;
  DelegationClientRecord* record_ = nullptr;  // this client's record in the segment
};

}  // namespace bkv::shm
