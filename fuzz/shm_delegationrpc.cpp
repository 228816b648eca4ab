// Fuzzes delegationrpc over corrupted shared memory: a server formats a segment, then
// the input interleaves forged writes anywhere in it (header, ring control, request
// slots, response slots) with attaches (connect validates the header), client
// try_call/poll and server poll/recv/reply/advance_tail. Nothing may read or write
// outside the segment, a bad header must be refused with ShmError, and each client
// gets back only tokens of calls it made, each at most once (answered, or failed on a
// response carrying another call's tag). The call tags' key comes from the input, so a
// run replays exactly.
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "core/shm/delegationrpc.hpp"
#include "core/shm/segment.hpp"
#include "fuzz/fuzz_input.hpp"
#include "fuzz/shm_fuzz.hpp"

using namespace bkv::shm;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {
using Req = bkv::fuzz::ShmReq;
using Resp = bkv::fuzz::ShmResp;
using Server = DelegationServer<Req, Resp>;
using Client = DelegationClient<Req, Resp>;
using Layout = DelegationLayout<Req, Resp>;
using TrackedClient = bkv::fuzz::TrackedClient<Client>;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  DelegationConfig cfg;
  cfg.max_clients = 1 + in.below(4);
  cfg.ring_depth = 1u << in.below(5);
  cfg.resp_depth = 1u << in.below(4);
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  const std::span<std::byte> mem = seg.bytes();
  Server server(mem, cfg);
  std::vector<TrackedClient> clients;
  std::vector<Server::Entry> received;
  uint64_t next_token = 1;

  for (uint32_t step = 0; step < 512 && !in.empty(); ++step) {
    switch (in.below(8)) {
      case 0:  // a forged write: mostly into the header and ring control
        bkv::fuzz::forged_write(in, mem, 320);
        break;
      case 1: {  // attach: validates whatever the header says now
        try {
          Client c = Client::connect(mem, in.take<uint32_t>());
          if (clients.size() < 4) clients.push_back(TrackedClient{std::move(c), {}});
        } catch (const ShmError&) {
        }
        break;
      }
      case 2:  // attach to a segment of another length
        bkv::fuzz::attach_to_prefix<Layout>(in, mem, validate_delegation_segment<Req, Resp>,
                                            "a delegationrpc header accepted for a segment of another size");
        break;
      case 3: {
        if (clients.empty()) break;
        TrackedClient& t = clients[in.below(static_cast<uint32_t>(clients.size()))];
        const uint64_t tok = next_token++;
        const auto r = t.c.try_call(Req{tok, in.take<uint64_t>()}, tok);
        if (r.status == DelegationCallStatus::kOk) t.open[tok] = true;
        if (t.c.in_flight() > t.c.config().resp_depth) violated("client in flight beyond its response slots");
        break;
      }
      case 4:
        for (auto& t : clients) {
          auto end_call = [&](uint64_t tok) { t.end_call(tok); };
          t.c.poll([&](uint64_t tok, const Resp&) { end_call(tok); }, end_call);
        }
        break;
      case 5:
        (void)server.poll();
        while (auto e = server.recv()) {
          if (e->client_id >= cfg.max_clients || e->resp_slot_idx >= cfg.resp_depth)
            violated("recv returned an entry outside the layout");
          received.push_back(*e);
        }
        break;
      case 6:
        if (!received.empty()) {
          const size_t i = in.below(static_cast<uint32_t>(received.size()));
          (void)server.reply(received[i].client_id, received[i].resp_slot_idx, Resp{in.take<uint64_t>()});
          received.erase(received.begin() + static_cast<std::ptrdiff_t>(i));
        } else {  // a reply naming any (client, slot): must be refused unless awaited
          (void)server.reply(in.take<uint32_t>(), in.take<uint32_t>(), Resp{0});
        }
        break;
      default:
        server.advance_tail();
        break;
    }
  }
  return 0;
}
