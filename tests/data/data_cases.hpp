// The data_put / data_get test cases (docs/data.md), written once over any transport
// and run by test_data_instant (instant loopback) and test_data_mlx5 (the direct mlx5
// data path over the NIC emulator). A Net supplies the transports:
//
//   struct Net {
//     using Transport = ...;              // a bkv::Transport
//     struct Options { ... };              // how its transports are made
//     explicit Net(const Options&);
//     std::unique_ptr<Transport> make();   // a new transport on the shared fabric
//     void tick();                         // lets the fabric run (a NIC beside the CPU)
//   };
//
// DataPair: the owner's DataServer (rank 1) against a hand-driven requester context;
// DataCluster: whole nodes (daemon #0 and clients) of either backend (test_data_wallclock
// also steps them on real threads).
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "backends/data/data_node.hpp"
#include "backends/data/data_server.hpp"

namespace bkv::test {

inline copyrpc::ContextConfig data_small_ring() {
  copyrpc::ContextConfig c;
  c.ring_size = 1u << 16;
  c.srq_size = 256;
  return c;
}

// A requester context on node A with a buffer of `slices` x `slice_bytes`, and the owner
// (rank 1, 8 keys) on node B.
template <class Net>
struct DataPair {
  using T = typename Net::Transport;
  Net net;
  std::unique_ptr<T> ta = net.make(), tb = net.make();
  copyrpc::Context<T, uint64_t> req{*ta, data_small_ring()};
  copyrpc::Context<T, uint64_t> srv{*tb, data_small_ring()};
  kv::BlobStore store;
  data::DataServer<T, uint64_t> server{srv, store};
  std::vector<std::byte> buf;
  MemoryRegion mr{};
  uint64_t slice_bytes;
  uint32_t ep_req = 0;
  uint64_t next_id = 0;
  std::map<uint64_t, kv::DataResponse> answers;

  DataPair(const typename Net::Options& no, uint64_t slice, uint32_t slices, uint32_t max_value = 4096,
           uint32_t spare = 8, uint32_t access = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite)
      : net(no), store(1, 8, max_value, spare), buf(slice * slices), slice_bytes(slice) {
    ep_req = req.create_endpoint();
    const uint32_t ep_srv = srv.create_endpoint();
    req.connect(ep_req, srv.local_info(ep_srv));
    srv.connect(ep_srv, req.local_info(ep_req));
    mr = ta->register_memory(buf.data(), buf.size(), access);
  }
  kv::RegionAnnouncement announcement(uint32_t slices) const {
    kv::RegionAnnouncement a;
    a.rkey = mr.rkey, a.addr = reinterpret_cast<uint64_t>(buf.data()), a.slice_bytes = slice_bytes, a.slices = slices;
    return a;
  }
  template <class M>
  uint64_t send(const M& m) {
    const uint64_t id = next_id++;
    REQUIRE(req.call(ep_req, kv::data_bytes(m), sizeof(kv::DataResponse), id).ok());
    return id;
  }
  uint64_t put(uint64_t key, uint32_t slice, uint64_t offset, uint32_t len) {
    kv::DataRequest r = kv::DataRequest::put(1, key, offset, len);
    r.slice = slice, r.rkey = mr.rkey;
    return send(r);
  }
  uint64_t get(uint64_t key, uint32_t slice, uint64_t offset, uint32_t cap) {
    kv::DataRequest r = kv::DataRequest::get(1, key, offset, cap);
    r.slice = slice, r.rkey = mr.rkey;
    return send(r);
  }
  // Runs both sides until nothing moves.
  void pump() {
    for (int i = 0; i < 50; ++i) {
      net.tick();
      req.poll([this](uint64_t&& id, std::span<const std::byte> b) {
        const auto r = kv::decode_data<kv::DataResponse>(b);
        REQUIRE(r);
        answers[id] = *r;
      }, [](uint64_t&&, copyrpc::EndpointError) { FAIL("a call was failed back"); });
      srv.drain([](uint64_t&&, std::span<const std::byte>) {}, [](uint64_t&&, copyrpc::EndpointError) { FAIL("a call was failed back"); });
      copyrpc::RecvHandle h;
      while (srv.recv(h)) server.on_request(std::move(h));
      srv.poll_raw([this](uint64_t id, WcStatus s) { server.on_raw_completion(id, s); });
      server.retry_parked();
      srv.flush();
    }
  }
  std::byte* at(uint32_t slice, uint64_t offset) { return buf.data() + slice * slice_bytes + offset; }
  void fill(uint32_t slice, uint64_t offset, uint32_t len, uint32_t seed) {
    for (uint32_t i = 0; i < len; ++i) at(slice, offset)[i] = std::byte(uint8_t(seed * 131 + i * 7 + (i >> 8)));
  }
  bool holds(uint32_t slice, uint64_t offset, uint32_t len, uint32_t seed) {
    for (uint32_t i = 0; i < len; ++i)
      if (at(slice, offset)[i] != std::byte(uint8_t(seed * 131 + i * 7 + (i >> 8)))) return false;
    return true;
  }
  uint64_t rejected(kv::DataError e) const { return server.counters().rejected[static_cast<uint8_t>(e)]; }
};

// ---------------------------------------------------------------- requester and owner

template <class Net>
void data_case_get_returns_put(const typename Net::Options& no, uint32_t size) {
  DataPair<Net> p(no, uint64_t{2} << 20, 1, 1u << 20, 4);
  p.send(p.announcement(1));
  p.fill(0, 0, size, 3);
  const uint64_t put = p.put(5, 0, 0, size);
  p.pump();
  REQUIRE(p.answers.at(put).kind == kv::DataResponseKind::kPutOk);
  std::memset(p.at(0, 0), 0, size);                               // the requester forgets the bytes
  const uint64_t get = p.get(5, 0, uint64_t{1} << 20, 1u << 20);  // into the other half
  const uint64_t miss = p.get(6, 0, 0, 16);
  p.pump();
  REQUIRE(p.answers.at(get).kind == kv::DataResponseKind::kGetOk);
  CHECK(p.answers.at(get).length == size);
  CHECK(p.holds(0, uint64_t{1} << 20, size, 3));
  CHECK(p.answers.at(miss).kind == kv::DataResponseKind::kGetNotFound);
  CHECK(p.server.counters().puts == 1);
  CHECK(p.server.counters().gets == 1);
  CHECK(p.server.counters().rejected_total() == 0);
}

template <class Net>
void data_case_wrap(const typename Net::Options& no) {
  // A slice of 10000 bytes used as a ring of values of 3000 bytes: the 4th value wraps
  // to offset 0, and so on; each put is read back from a different place.
  DataPair<Net> p(no, 10000, 2);
  p.send(p.announcement(2));
  uint64_t cursor = 0;
  auto next = [&](uint32_t len) {
    if (cursor + len > 10000) cursor = 0;
    const uint64_t o = cursor;
    cursor += len;
    return o;
  };
  std::vector<std::pair<uint64_t, uint64_t>> puts;  // (answer id, seed)
  for (uint32_t i = 0; i < 20; ++i) {
    const uint64_t o = next(3000);
    p.fill(1, o, 3000, 100 + i);
    puts.push_back({p.put(i % 8, 1, o, 3000), 100 + i});
    p.pump();
  }
  for (const auto& [id, seed] : puts) CHECK(p.answers.at(id).kind == kv::DataResponseKind::kPutOk);
  for (uint32_t k = 0; k < 8; ++k) {
    const uint64_t o = next(3000);
    const uint64_t g = p.get(k, 1, o, 3000);
    p.pump();
    REQUIRE(p.answers.at(g).kind == kv::DataResponseKind::kGetOk);
    // The last put of key k was put number 16 + k (k < 4) or 8 + k.
    const uint32_t last = k < 4 ? 16 + k : 8 + k;
    CHECK(p.holds(1, o, 3000, 100 + last));
  }
}

template <class Net>
void data_case_concurrent_puts(const typename Net::Options& no) {
  DataPair<Net> p(no, 4096 * 16, 1, 4096, 16);
  p.send(p.announcement(1));
  std::vector<uint64_t> gets;
  for (uint32_t round = 0; round < 4; ++round) {
    // Four puts of key 3 with different contents and two gets, all in flight together.
    for (uint32_t i = 0; i < 4; ++i) {
      p.fill(0, i * 4096, 4096, round * 4 + i);
      p.put(3, 0, i * 4096, 4096);
    }
    for (uint32_t j = 0; j < 2; ++j) gets.push_back(p.get(3, 0, (8 + round * 2 + j) * 4096, 4096));
    p.pump();
  }
  for (size_t g = 0; g < gets.size(); ++g) {
    const kv::DataResponse& r = p.answers.at(gets[g]);
    if (r.kind == kv::DataResponseKind::kGetNotFound) continue;
    REQUIRE(r.kind == kv::DataResponseKind::kGetOk);
    const uint64_t off = (8 + g) * 4096;
    bool whole = false;
    for (uint32_t seed = 0; seed < 16; ++seed) whole = whole || p.holds(0, off, 4096, seed);
    CHECK(whole);
  }
  // After everything completed, the key holds the last put's bytes.
  const uint64_t g = p.get(3, 0, 15 * 4096, 4096);
  p.pump();
  REQUIRE(p.answers.at(g).kind == kv::DataResponseKind::kGetOk);
  // Slot 3's buffer still holds round 3's 4th value: that put was the last one served.
  CHECK(p.holds(0, 15 * 4096, 4096, 15));
  CHECK(p.store.free_blocks() == 8 + 16 - 1);  // only key 3 holds a block
}

template <class Net>
void data_case_rejections(const typename Net::Options& no) {
  DataPair<Net> p(no, 1000, 2);
  const uint64_t before = p.put(1, 0, 0, 10);  // no announcement yet
  p.pump();
  CHECK(p.answers.at(before).error == kv::DataError::kNoRegion);
  p.send(p.announcement(2));
  const uint64_t past_end = p.put(1, 1, 990, 11);
  const uint64_t bad_slice = p.get(1, 2, 0, 10);
  const uint64_t huge_offset = p.put(1, 0, ~uint64_t{0} - 4, 10);
  kv::DataRequest foreign = kv::DataRequest::put(1, 1, 0, 10);
  foreign.rkey = p.mr.rkey + 1;
  const uint64_t bad_key = p.send(foreign);
  const uint64_t whole_slice = p.put(1, 0, 0, 1000);  // exactly the slice: accepted
  const uint64_t key_range = p.put(8, 0, 0, 10);
  kv::DataRequest wrong_rank = kv::DataRequest::put(0, 1, 0, 10);
  wrong_rank.rkey = p.mr.rkey;
  const uint64_t other_rank = p.send(wrong_rank);
  p.pump();
  CHECK(p.answers.at(past_end).error == kv::DataError::kOutsideBuffer);
  CHECK(p.answers.at(bad_slice).error == kv::DataError::kOutsideBuffer);
  CHECK(p.answers.at(huge_offset).error == kv::DataError::kOutsideBuffer);
  CHECK(p.answers.at(bad_key).error == kv::DataError::kBadRkey);
  CHECK(p.answers.at(whole_slice).kind == kv::DataResponseKind::kPutOk);
  CHECK(p.answers.at(key_range).error == kv::DataError::kKeyOutOfRange);
  CHECK(p.answers.at(other_rank).error == kv::DataError::kWrongRank);
  CHECK(p.rejected(kv::DataError::kOutsideBuffer) == 3);
  CHECK(p.rejected(kv::DataError::kBadRkey) == 1);
  CHECK(p.rejected(kv::DataError::kNoRegion) == 1);
  CHECK(p.server.counters().rejected_total() == 7);
  // A get into a buffer shorter than the value is refused, and the buffer is untouched.
  std::memset(p.at(1, 0), 0x11, 999);
  const uint64_t short_get = p.get(1, 1, 0, 999);
  p.pump();
  CHECK(p.answers.at(short_get).error == kv::DataError::kBufferTooSmall);
  CHECK(p.at(1, 0)[998] == std::byte{0x11});
  // The endpoint is still healthy after all of that.
  CHECK(p.req.error(p.ep_req) == copyrpc::EndpointError::kNone);
}

template <class Net>
void data_case_value_too_large(const typename Net::Options& no) {
  DataPair<Net> p(no, 8192, 1, 4096, 2);
  p.send(p.announcement(1));
  const uint64_t id = p.put(0, 0, 0, 4097);
  p.pump();
  CHECK(p.answers.at(id).error == kv::DataError::kValueTooLarge);
  CHECK(p.rejected(kv::DataError::kValueTooLarge) == 1);
}

template <class Net>
void data_case_parking(const typename Net::Options& no) {
  DataPair<Net> p(no, 4096 * 8, 1, 4096, 1);  // 8 keys + 1 spare block
  p.send(p.announcement(1));
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < 8; ++i) {
    p.fill(0, i * 4096, 4096, i);
    ids.push_back(p.put(i, 0, i * 4096, 4096));
  }
  p.pump();
  for (uint64_t id : ids) CHECK(p.answers.at(id).kind == kv::DataResponseKind::kPutOk);
  CHECK(p.server.counters().puts == 8);
}

// ---------------------------------------------------------------- whole nodes

template <class Net>
struct DataCluster {
  using T = typename Net::Transport;
  Net net;
  std::vector<std::unique_ptr<T>> transports;
  std::vector<std::unique_ptr<kv::BlobStore>> stores;
  std::vector<std::unique_ptr<data::ClientBuffers>> buffers;
  std::vector<shm::Segment> rings;
  std::vector<std::unique_ptr<data::DataDaemon<T>>> daemons;
  std::vector<std::vector<std::unique_ptr<data::DataClient<T>>>> clients;

  DataCluster(const typename Net::Options& no, data::DataNodeConfig base) : net(no) {
    const auto cc = data_small_ring();
    for (uint32_t r = 0; r < base.np; ++r) {
      data::DataNodeConfig c = base;
      c.rank = r;
      stores.push_back(std::make_unique<kv::BlobStore>(r, c.key_range, c.max_value_bytes, c.clients * c.queue_depth + 4));
      buffers.push_back(std::make_unique<data::ClientBuffers>(c.clients, c.slice_bytes()));
      rings.push_back(shm::Segment::create_process(data::data_ring_bytes(c.backend, c.clients, c.queue_depth)));
      transports.push_back(net.make());
      daemons.push_back(std::make_unique<data::DataDaemon<T>>(*transports.back(), cc, c, *stores.back(),
                                                              *buffers.back(), rings.back().bytes()));
      clients.emplace_back();
      for (uint32_t i = 0; i < c.clients; ++i) {
        transports.push_back(net.make());
        clients.back().push_back(
            std::make_unique<data::DataClient<T>>(*transports.back(), cc, c, i, *buffers.back(), rings.back().bytes()));
      }
    }
    for (uint32_t a = 0; a < base.np; ++a)
      for (uint32_t b = 0; b < base.np; ++b) {
        if (a == b) continue;
        if (data::daemon_calls_for_clients(base.backend)) {
          if (a > b) continue;
          const uint32_t ea = daemons[a]->create_endpoint_to(b), eb = daemons[b]->create_endpoint_to(a);
          daemons[a]->context().connect(ea, daemons[b]->context().local_info(eb));
          daemons[b]->context().connect(eb, daemons[a]->context().local_info(ea));
        } else {
          for (auto& cl : clients[a]) {
            const uint32_t ec = cl->create_endpoint_to(b), ed = daemons[b]->create_serving_endpoint();
            cl->context()->connect(ec, daemons[b]->context().local_info(ed));
            daemons[b]->context().connect(ed, cl->context()->local_info(ec));
          }
        }
      }
    for (auto& d : daemons) d->start();
    for (auto& cs : clients)
      for (auto& c : cs) c->start();
  }
  void step() {
    net.tick();
    for (auto& d : daemons) d->step();
    for (auto& cs : clients)
      for (auto& c : cs) c->step();
  }
  uint64_t sum(auto field) {
    uint64_t n = 0;
    for (auto& cs : clients)
      for (auto& c : cs) n += (c->counters().*field).load();
    return n;
  }
};

// Every backend, remote only or mixed with local requests: every request completes,
// without error, and each daemon ends idle.
template <class Net>
void data_case_whole_nodes(const typename Net::Options& no, data::DataBackend backend, bool remote_only) {
  data::DataNodeConfig cfg;
  cfg.np = 3, cfg.clients = 2, cfg.queue_depth = 4, cfg.max_value_bytes = 8192, cfg.value_bytes = 5000;
  cfg.key_range = 16, cfg.backend = backend, cfg.remote_only = remote_only;
  DataCluster<Net> c(no, cfg);
  for (int i = 0; i < 400; ++i) c.step();
  for (auto& cs : c.clients)
    for (auto& cl : cs) cl->stop_issuing();
  for (int i = 0; i < 50; ++i) c.step();
  const uint64_t issued = c.sum(&data::DataClientCounters::issued);
  CHECK(issued > 1000);
  CHECK(c.sum(&data::DataClientCounters::completed) == issued);
  CHECK(c.sum(&data::DataClientCounters::errors) == 0);
  CHECK(c.sum(&data::DataClientCounters::bytes) > 0);
  uint64_t served = 0, rejected = 0;
  for (auto& d : c.daemons) {
    served += d->server_counters().puts + d->server_counters().gets + d->server_counters().not_found;
    rejected += d->server_counters().rejected_total();
    CHECK(d->protocol_errors() == 0);
    CHECK(d->idle());
  }
  CHECK(served == issued);
  CHECK(rejected == 0);
  // The channel to daemon #0: Meta's clients use the ipc rings (a private SPSC pair
  // each), the others the delegation ring.
  for (auto& ring : c.rings) {
    if (data::uses_ipc(backend))
      CHECK(shm::validate_ipc_segment<kv::DataRequest, kv::DataResponse>(ring.bytes()).max_clients == cfg.clients);
    else
      CHECK_THROWS_AS((shm::validate_ipc_segment<kv::DataRequest, kv::DataResponse>(ring.bytes())), shm::ShmError);
  }
}

}  // namespace bkv::test
