// The owner's side of data_put / data_get (docs/data.md §Protocol): serves the data
// requests that arrive on a copyrpc Context, moving each value by one-sided RDMA between
// the requester's announced buffer region and the owner's BlobStore, and serves the
// requests of the node's own clients by copying through shared memory.
//
// Remote request, in order:
//   1. validate: structure, rank, key, a region announced on this endpoint, the rkey,
//      the slice and [offset, offset + length) inside it, the length against the store;
//      a failure is answered with a DataError and counted (rejected()), and no RDMA
//      operation is posted;
//   2. put: acquire a block, RDMA READ the range into it; when the READ completes,
//      commit the block to the key and answer PutOk;
//      get: pin the key's block, RDMA WRITE it to the range and answer GetOk at once
//      (the answer's WRITE+IMM follows the data on the same RC queue pair, so the data
//      is in place before the requester sees the answer); unpin when the WRITE completes;
//   3. no free block or a full send queue: the request is parked, in order, and retried
//      at the next step.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "core/kv/blob_store.hpp"
#include "core/kv/data_wire.hpp"
#include "core/transport.hpp"

namespace bkv::data {

struct DataServerCounters {
  uint64_t puts = 0;           // values committed
  uint64_t gets = 0;           // values written (GetOk)
  uint64_t not_found = 0;      // GetNotFound
  uint64_t announcements = 0;  // regions accepted
  uint64_t parked = 0;         // requests that waited for a block or a send-queue slot
  std::array<uint64_t, kv::kDataErrorCount> rejected{};  // by DataError
  uint64_t rejected_total() const noexcept {
    uint64_t n = 0;
    for (uint64_t r : rejected) n += r;
    return n;
  }
};

template <Transport T, class Token>
class DataServer {
 public:
  using Ctx = copyrpc::Context<T, Token>;

  DataServer(Ctx& ctx, kv::BlobStore& store) : ctx_(ctx), store_(store) {
    const auto arena = store.arena();
    arena_mr_ = ctx.transport().register_memory(arena.data(), arena.size(), kAccessLocalWrite);
  }

  // A request taken from the Context (recv()). Announcements and data requests are told
  // apart by size; anything else is answered kMalformedRequest.
  void on_request(copyrpc::RecvHandle&& h) {
    const std::span<const std::byte> payload = h.payload();
    h.drop_payload();  // the payload is decoded here; only the reply address is kept
    if (payload.size() == sizeof(kv::RegionAnnouncement)) {
      const auto a = kv::decode_data<kv::RegionAnnouncement>(payload);
      if (!a) return reject(std::move(h), kv::DataError::kMalformedRequest, 0);
      if (h.endpoint() >= regions_.size()) regions_.resize(h.endpoint() + 1);
      regions_[h.endpoint()] = *a;
      ++counters_.announcements;
      return answer(std::move(h), kv::DataResponse::make(kv::DataResponseKind::kAnnounceOk, 0));
    }
    const auto r = kv::decode_data<kv::DataRequest>(payload);
    if (!r) return reject(std::move(h), kv::DataError::kMalformedRequest, 0);
    if (!parked_.empty() || !start(h, *r)) park(std::move(h), *r);
  }

  // Raw completions of the Context (poll_raw) that belong to this server.
  void on_raw_completion(uint64_t user_id, WcStatus status) {
    if (user_id >= ops_.size() || !ops_[user_id].live)
      throw std::logic_error("data: a raw completion for no transfer in flight");
    Transfer& t = ops_[user_id];
    t.live = false;
    free_ops_.push_back(static_cast<uint32_t>(user_id));
    if (t.is_put) {
      if (status == WcStatus::kSuccess) {
        store_.commit(t.key, t.block, t.length);
        ++counters_.puts;
        answer(std::move(t.handle), kv::DataResponse::make(kv::DataResponseKind::kPutOk, t.key));
      } else {
        store_.abandon(t.block);
        reject(std::move(t.handle), kv::DataError::kTransferFailed, t.key);
      }
    } else {
      store_.unpin(t.block);
      if (status != WcStatus::kSuccess) ++counters_.rejected[static_cast<uint8_t>(kv::DataError::kTransferFailed)];
    }
  }

  // Retries parked requests in arrival order; stops at the first that still cannot start.
  void retry_parked() {
    while (!parked_.empty()) {
      if (!start(parked_.front().handle, parked_.front().req)) return;
      parked_.pop_front();
    }
  }

  // A request of one of this node's clients: the value moves by memcpy between the
  // client's slice (`slice`, `slice_bytes` long) and the store. nullopt: no free block
  // now, ask again later.
  std::optional<kv::DataResponse> serve_local(const kv::DataRequest& r, std::byte* slice, uint64_t slice_bytes) {
    if (!r.valid()) return rejected_local(kv::DataError::kMalformedRequest, 0);
    if (r.rank != store_.rank()) return rejected_local(kv::DataError::kWrongRank, r.key);
    if (!store_.in_range(r.key)) return rejected_local(kv::DataError::kKeyOutOfRange, r.key);
    if (!kv::range_in_slice(r.offset, r.length, slice_bytes)) return rejected_local(kv::DataError::kOutsideBuffer, r.key);
    if (r.is_put()) {
      if (r.length > store_.max_value_bytes()) return rejected_local(kv::DataError::kValueTooLarge, r.key);
      const auto b = store_.acquire();
      if (!b) return std::nullopt;
      std::memcpy(store_.block_data(*b), slice + r.offset, r.length);
      store_.commit(r.key, *b, r.length);
      ++counters_.puts;
      return kv::DataResponse::make(kv::DataResponseKind::kPutOk, r.key);
    }
    const auto v = store_.pin(r.key);
    if (!v) {
      ++counters_.not_found;
      return kv::DataResponse::make(kv::DataResponseKind::kGetNotFound, r.key);
    }
    if (v->length > r.length) {
      store_.unpin(v->block);
      return rejected_local(kv::DataError::kBufferTooSmall, r.key);
    }
    std::memcpy(slice + r.offset, store_.block_data(v->block), v->length);
    store_.unpin(v->block);
    ++counters_.gets;
    return kv::DataResponse::make(kv::DataResponseKind::kGetOk, r.key, v->length);
  }

  const DataServerCounters& counters() const noexcept { return counters_; }
  size_t parked() const noexcept { return parked_.size(); }
  size_t transfers_in_flight() const noexcept { return ops_.size() - free_ops_.size(); }

 private:
  struct Transfer {
    copyrpc::RecvHandle handle;  // a put's request, answered at its completion (a get's is answered at once)
    uint64_t key = 0;
    uint32_t block = 0;
    uint32_t length = 0;
    bool is_put = false;
    bool live = false;
  };
  struct Parked {
    copyrpc::RecvHandle handle;
    kv::DataRequest req;
  };

  // Validates and starts one request. true: started or answered, and `h` is spent (moved
  // into the transfer or replied); false: it must wait (no block, send queue full), and
  // `h` is still live.
  bool start(copyrpc::RecvHandle& h, const kv::DataRequest& r) {
    if (r.rank != store_.rank()) return reject(std::move(h), kv::DataError::kWrongRank, r.key), true;
    if (!store_.in_range(r.key)) return reject(std::move(h), kv::DataError::kKeyOutOfRange, r.key), true;
    if (h.endpoint() >= regions_.size() || !regions_[h.endpoint()])
      return reject(std::move(h), kv::DataError::kNoRegion, r.key), true;
    const kv::RegionAnnouncement& reg = *regions_[h.endpoint()];
    if (r.rkey != reg.rkey) return reject(std::move(h), kv::DataError::kBadRkey, r.key), true;
    if (r.slice >= reg.slices || !kv::range_in_slice(r.offset, r.length, reg.slice_bytes))
      return reject(std::move(h), kv::DataError::kOutsideBuffer, r.key), true;
    const RemoteBuffer remote{reg.addr + uint64_t{r.slice} * reg.slice_bytes + r.offset, reg.rkey, 0, r.length};
    const uint32_t id = next_op_id();
    if (r.is_put()) {
      if (r.length > store_.max_value_bytes()) return reject(std::move(h), kv::DataError::kValueTooLarge, r.key), true;
      const auto b = store_.acquire();
      if (!b) return false;
      if (ctx_.post_raw_read(h.endpoint(), store_.block_data(*b), r.length, arena_mr_.lkey, remote, id) !=
          PostResult::kOk) {
        store_.abandon(*b);
        return false;
      }
      ops_[id] = Transfer{std::move(h), r.key, *b, r.length, true, true};
      free_ops_.pop_back();
      return true;
    }
    const auto v = store_.pin(r.key);
    if (!v) {
      ++counters_.not_found;
      answer(std::move(h), kv::DataResponse::make(kv::DataResponseKind::kGetNotFound, r.key));
      return true;
    }
    if (v->length > r.length) {
      store_.unpin(v->block);
      return reject(std::move(h), kv::DataError::kBufferTooSmall, r.key), true;
    }
    RemoteBuffer dst = remote;
    dst.length = v->length;
    if (ctx_.post_raw_write(h.endpoint(), store_.block_data(v->block), v->length, arena_mr_.lkey, dst, id) !=
        PostResult::kOk) {
      store_.unpin(v->block);
      return false;
    }
    ops_[id] = Transfer{copyrpc::RecvHandle{}, r.key, v->block, v->length, false, true};
    free_ops_.pop_back();
    ++counters_.gets;
    answer(std::move(h), kv::DataResponse::make(kv::DataResponseKind::kGetOk, r.key, v->length));
    return true;
  }

  // The id the next transfer will take (taken for real only once its post succeeded).
  uint32_t next_op_id() {
    if (free_ops_.empty()) {
      free_ops_.push_back(static_cast<uint32_t>(ops_.size()));
      ops_.emplace_back();
    }
    return free_ops_.back();
  }

  void park(copyrpc::RecvHandle&& h, const kv::DataRequest& r) {
    ++counters_.parked;
    parked_.push_back(Parked{std::move(h), r});
  }

  void reject(copyrpc::RecvHandle&& h, kv::DataError e, uint64_t key) {
    ++counters_.rejected[static_cast<uint8_t>(e)];
    answer(std::move(h), kv::DataResponse::failure(e, key));
  }
  kv::DataResponse rejected_local(kv::DataError e, uint64_t key) {
    ++counters_.rejected[static_cast<uint8_t>(e)];
    return kv::DataResponse::failure(e, key);
  }

  void answer(copyrpc::RecvHandle&& h, const kv::DataResponse& resp) {
    const copyrpc::CallStatus s = ctx_.reply(std::move(h), kv::data_bytes(resp));
    // A failed endpoint answers nothing (the requester sees the failure itself); an
    // allowance too small for 16 bytes is the requester's error and gets no answer.
    if (s != copyrpc::CallStatus::kOk) ++unanswered_;
  }

  Ctx& ctx_;
  kv::BlobStore& store_;
  MemoryRegion arena_mr_;
  std::vector<std::optional<kv::RegionAnnouncement>> regions_;  // by endpoint
  std::vector<Transfer> ops_;
  std::vector<uint32_t> free_ops_;
  std::deque<Parked> parked_;
  DataServerCounters counters_;
  uint64_t unanswered_ = 0;
};

}  // namespace bkv::data
