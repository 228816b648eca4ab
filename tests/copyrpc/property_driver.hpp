// Randomized property driver for copyrpc, reusable over any Transport.
//
// A cluster of K contexts, fully connected (each pair of contexts joined by one
// endpoint on each side). The driver performs random operations: call (random payload
// 0..ring/8 bytes, random response allowance), recv, reply (to a random held request:
// out of order), drain, flush, poll, and checks after EVERY operation:
//   - the credit invariant in_flight + 2R <= C on every endpoint;
//   - every response matches the payload the responder must have produced for that
//     exact call (a pure function of the request bytes) and arrives exactly once;
//   - every request payload taken by recv() still holds its bytes until its context's
//     next flush (or poll): the peer may not write over it before (it may READ the
//     consumed position at any time);
// and at the end, after a quiescing phase, that every call was answered.
// It also counts ring wraps and exact-boundary appends (a message that would end
// exactly at the ring end) so a test can require both to have happened.
//
// The transport is supplied by the caller through `pump`, called whenever the driver
// wants in-flight work to progress (instant loopback: nothing; a NIC emulator or a
// discrete-event engine: run it).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "core/copyrpc/context.hpp"
#include "core/random.hpp"

namespace bkv::test {

struct PropertyStats {
  uint64_t calls = 0, replies = 0, responses = 0, ring_full = 0, no_credit = 0, polls = 0;
  uint64_t wraps = 0, exact_boundary = 0, reads_posted = 0;
};

// Response payload length and bytes: a pure function of the request bytes and the
// response capacity, so caller and responder compute it independently.
inline std::vector<std::byte> expected_response(const std::vector<std::byte>& req, uint64_t capacity) {
  const uint64_t len = (req.size() * 7 + 3) % (capacity + 1);
  std::vector<std::byte> out(len);
  for (uint64_t i = 0; i < len; ++i) {
    const uint8_t src = req.empty() ? 0 : static_cast<uint8_t>(req[i % req.size()]);
    out[i] = std::byte(static_cast<uint8_t>(src ^ 0x5A ^ static_cast<uint8_t>(i * 13)));
  }
  return out;
}

// One endpoint of a context in a test mesh: its id and the index of the peer context.
struct MeshLink {
  uint32_t ep;
  uint32_t peer;
};

// Connects every pair of contexts with one endpoint on each side; returns each context's
// links. Used by every transport's copyrpc test (instant, DES, wall-clock, UCX, mlx5).
template <class Ctx>
std::vector<std::vector<MeshLink>> connect_full_mesh(const std::vector<std::unique_ptr<Ctx>>& ctxs) {
  const uint32_t n = static_cast<uint32_t>(ctxs.size());
  std::vector<std::vector<MeshLink>> links(n);
  for (uint32_t a = 0; a < n; ++a)
    for (uint32_t b = a + 1; b < n; ++b) {
      const uint32_t ea = ctxs[a]->create_endpoint();
      const uint32_t eb = ctxs[b]->create_endpoint();
      ctxs[a]->connect(ea, ctxs[b]->local_info(eb));
      ctxs[b]->connect(eb, ctxs[a]->local_info(ea));
      links[a].push_back({ea, b});
      links[b].push_back({eb, a});
    }
  return links;
}

template <class Ctx>
std::vector<Ctx*> raw_pointers(const std::vector<std::unique_ptr<Ctx>>& ctxs) {
  std::vector<Ctx*> v;
  for (auto& c : ctxs) v.push_back(c.get());
  return v;
}

// N copyrpc contexts over one fabric, fully connected: transport i is
// Transport(fabric, transport_args...), context i runs over it with `cfg`.
template <class Fabric, class Transport>
struct ContextCluster {
  using T = Transport;
  using Ctx = copyrpc::Context<T, uint64_t>;
  Fabric fabric;
  std::vector<std::unique_ptr<T>> transports;
  std::vector<std::unique_ptr<Ctx>> ctxs;
  std::vector<std::vector<MeshLink>> links;

  template <class... Args>
  ContextCluster(uint32_t nodes, const copyrpc::ContextConfig& cfg, const Args&... transport_args) {
    for (uint32_t i = 0; i < nodes; ++i) {
      transports.push_back(std::make_unique<T>(fabric, transport_args...));
      ctxs.push_back(std::make_unique<Ctx>(*transports.back(), cfg));
    }
    links = connect_full_mesh(ctxs);
  }
  std::vector<Ctx*> ctx_ptrs() { return raw_pointers(ctxs); }
};

template <class T>
class PropertyDriver {
 public:
  using Ctx = copyrpc::Context<T, uint64_t>;
  using Link = MeshLink;

  // ctxs[i] with links[i] = its endpoints and their peer contexts (already connected).
  PropertyDriver(std::vector<Ctx*> ctxs, std::vector<std::vector<Link>> links, uint64_t seed,
                 std::function<void()> pump)
      : ctxs_(std::move(ctxs)), links_(std::move(links)), rng_(seed), seed_(seed), pump_(std::move(pump)),
        held_(ctxs_.size()), flushes_(ctxs_.size(), 0) {}

  PropertyStats run(uint64_t ops) {
    for (uint64_t i = 0; i < ops; ++i) {
      step();
      check_invariants(i);
    }
    quiesce();
    return stats_;
  }

  // Expose for hostile tests etc.
  const PropertyStats& stats() const { return stats_; }

 private:
  struct Outstanding {
    std::vector<std::byte> request;
    uint64_t capacity;
  };
  struct Held {
    copyrpc::RecvHandle h;
    std::vector<std::byte> request;
    uint64_t flush_count;  // its context's flushes_ at recv(): the payload is valid while it holds
  };
  // A received request of context `c` kept for a later reply, with a copy of its payload
  // (the handle's points into the receive ring, valid only until the next flush).
  Held held_request(uint32_t c, copyrpc::RecvHandle&& h) const {
    std::vector<std::byte> request(h.payload().begin(), h.payload().end());
    return Held{std::move(h), std::move(request), flushes_[c]};
  }
  // Context c flushes (flush() or poll()): the payloads it handed out before may go.
  void flush(uint32_t c) {
    ctxs_[c]->flush();
    ++flushes_[c];
  }
  template <class OnResponse, class OnFailedCall>
  void poll(uint32_t c, OnResponse&& on_resp, OnFailedCall&& on_failed) {
    ctxs_[c]->poll(on_resp, on_failed);
    ++flushes_[c];
  }

  std::string where() const {
    std::ostringstream os;
    os << "seed=" << seed_;
    return os.str();
  }

  uint64_t pick_size(uint64_t max) {
    // Mix of small, large and near-boundary sizes.
    switch (rng_.below(4)) {
      case 0: return rng_.below(33);
      case 1: return rng_.below(max + 1);
      case 2: return max - rng_.below(std::min<uint64_t>(64, max) + 1);
      default: return 20 + rng_.below(40);
    }
  }

  void step() {
    const uint32_t c = static_cast<uint32_t>(rng_.below(ctxs_.size()));
    Ctx& ctx = *ctxs_[c];
    const uint64_t r = rng_.below(100);
    if (r < 40) {
      do_call(c);
    } else if (r < 55) {
      do_recv(c);
    } else if (r < 75) {
      do_reply(c);
    } else if (r < 85) {
      ctx.drain(on_response(c), on_failed_call(c));
      pump_();
    } else if (r < 92) {
      flush(c);
      pump_();
    } else {
      poll(c, on_response(c), on_failed_call(c));
      ++stats_.polls;
      pump_();
    }
  }

  // Every endpoint stays healthy in these runs: a call failed back is a failure.
  auto on_failed_call(uint32_t c) {
    return [this, c](uint64_t token, copyrpc::EndpointError e) {
      INFO(where() << " context " << c << " token " << token);
      FAIL("a call was failed back: " << copyrpc::to_string(e));
    };
  }

  auto on_response(uint32_t c) {
    return [this, c](uint64_t token, std::span<const std::byte> payload) {
      auto it = outstanding_.find(token);
      INFO(where() << " context " << c << " token " << token);
      REQUIRE(it != outstanding_.end());  // exactly once: a second delivery finds nothing
      const std::vector<std::byte> want = expected_response(it->second.request, it->second.capacity);
      REQUIRE(payload.size() == want.size());
      REQUIRE(std::equal(payload.begin(), payload.end(), want.begin()));
      outstanding_.erase(it);
      ++stats_.responses;
    };
  }

  void count_boundary(const Ctx& ctx, uint32_t ep, uint64_t payload_len) {
    const auto& e = ctx.endpoint(ep);
    const uint64_t size = e.ring_size();
    const uint64_t msg = copyrpc::padded_message_size(payload_len);
    const uint64_t open = e.batch_open() ? 0 : copyrpc::kFlowMetadataSize;
    if ((e.producer & (size - 1)) + open + msg == size) ++stats_.exact_boundary;
  }

  void do_call(uint32_t c) {
    Ctx& ctx = *ctxs_[c];
    const Link& l = links_[c][rng_.below(links_[c].size())];
    const uint64_t max = ctx.max_payload();
    std::vector<std::byte> req(pick_size(max));
    for (auto& b : req) b = std::byte(static_cast<uint8_t>(rng_.next()));
    // Within what the peer's grant can ever cover (its max_R: TooLarge past it), which is
    // the payload bound unless the peer's max_R is small.
    const uint64_t max_allowance = ctx.endpoint(l.ep).max_response_allowance;
    const uint32_t allowance = static_cast<uint32_t>(rng_.below(2) ? rng_.below(std::min<uint64_t>(64, max_allowance + 1))
                                                                   : std::min(pick_size(max_allowance), max_allowance));
    const uint64_t token = next_token_++;
    const uint64_t wraps_before = ctx.stats().wraps;
    const uint64_t sent_before = ctx.stats().messages_sent;
    count_boundary(ctx, l.ep, req.size());
    const auto res = ctx.call(l.ep, req, allowance, token);
    if (res.status == copyrpc::CallStatus::kRingFull) {
      ++stats_.ring_full;
      REQUIRE(ctx.stats().messages_sent == sent_before);
      return;
    }
    if (res.status == copyrpc::CallStatus::kInsufficientCredit) {
      ++stats_.no_credit;
      return;
    }
    INFO(where() << " call status " << copyrpc::to_string(res.status));
    REQUIRE(res.ok());
    stats_.wraps += ctx.stats().wraps - wraps_before;
    outstanding_.emplace(token, Outstanding{std::move(req), copyrpc::max_reply_payload(copyrpc::internal_allowance(allowance))});
    ++stats_.calls;
  }

  void do_recv(uint32_t c) {
    Ctx& ctx = *ctxs_[c];
    copyrpc::RecvHandle h;
    const uint64_t n = 1 + rng_.below(8);
    for (uint64_t i = 0; i < n && ctx.recv(h); ++i) {
      // The payload is valid until the next flush: copy it now.
      held_[c].push_back(held_request(c, std::move(h)));
    }
  }

  void do_reply(uint32_t c) {
    if (held_[c].empty()) return;
    Ctx& ctx = *ctxs_[c];
    const uint64_t idx = rng_.below(held_[c].size());  // out of order
    Held held = std::move(held_[c][idx]);
    held_[c][idx] = std::move(held_[c].back());
    held_[c].pop_back();
    const uint64_t cap = copyrpc::max_reply_payload(held.h.allowance());
    const std::vector<std::byte> resp = expected_response(held.request, cap);
    const uint64_t wraps_before = ctx.stats().wraps;
    count_boundary(ctx, held.h.endpoint(), resp.size());
    INFO(where());
    REQUIRE(ctx.reply(std::move(held.h), resp) == copyrpc::CallStatus::kOk);
    stats_.wraps += ctx.stats().wraps - wraps_before;
    ++stats_.replies;
  }

  void check_invariants(uint64_t op) {
    for (size_t c = 0; c < ctxs_.size(); ++c) {
      for (const Held& held : held_[c]) {
        if (held.flush_count != flushes_[c]) continue;  // its context flushed since recv()
        const auto pl = held.h.payload();
        INFO(where() << " after op " << op << " context " << c << ": a held request's payload, before the next flush");
        REQUIRE(std::equal(pl.begin(), pl.end(), held.request.begin(), held.request.end()));
      }
      for (const Link& l : links_[c]) {
        const auto& e = ctxs_[c]->endpoint(l.ep);
        INFO(where() << " after op " << op << " context " << c << " endpoint " << l.ep << " in_flight "
                     << e.in_flight() << " R " << e.resp_reservation << " C " << e.remote_ring.length);
        REQUIRE(e.error == copyrpc::EndpointError::kNone);
        REQUIRE(e.credit_invariant_holds());
        REQUIRE(e.resp_committed <= e.resp_reservation);
      }
    }
  }

  void quiesce() {
    for (int round = 0; round < 100000; ++round) {
      bool busy = false;
      for (uint32_t c = 0; c < ctxs_.size(); ++c) {
        Ctx& ctx = *ctxs_[c];
        poll(c, on_response(c), on_failed_call(c));
        pump_();
        copyrpc::RecvHandle h;
        while (ctx.recv(h)) held_[c].push_back(held_request(c, std::move(h)));
        while (!held_[c].empty()) {
          do_reply_index(c, held_[c].size() - 1);
          busy = true;
        }
        flush(c);
        pump_();
        if (ctx.has_unflushed()) busy = true;
        check_invariants(~0ull);
      }
      if (!busy && outstanding_.empty()) break;
    }
    for (auto* ctx : ctxs_) stats_.reads_posted += ctx->stats().reads_posted;
    INFO(where() << " unanswered calls: " << outstanding_.size());
    REQUIRE(outstanding_.empty());
    for (auto* ctx : ctxs_) REQUIRE(ctx->calls_in_flight() == 0);
  }

  void do_reply_index(uint32_t c, size_t idx) {
    Held held = std::move(held_[c][idx]);
    held_[c].erase(held_[c].begin() + static_cast<std::ptrdiff_t>(idx));
    const std::vector<std::byte> resp = expected_response(held.request, copyrpc::max_reply_payload(held.h.allowance()));
    REQUIRE(ctxs_[c]->reply(std::move(held.h), resp) == copyrpc::CallStatus::kOk);
    ++stats_.replies;
  }

  std::vector<Ctx*> ctxs_;
  std::vector<std::vector<Link>> links_;
  Rng rng_;
  uint64_t seed_;
  std::function<void()> pump_;
  std::vector<std::vector<Held>> held_;
  std::vector<uint64_t> flushes_;  // per context: its flush() and poll() calls so far
  std::map<uint64_t, Outstanding> outstanding_;
  uint64_t next_token_ = 1;
  PropertyStats stats_;
};

}  // namespace bkv::test
