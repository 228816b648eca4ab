// Fuzzes ipc over corrupted shared memory: a server formats a segment, then the input
// interleaves forged writes anywhere in it (header, claim lines, request and response
// rings) with attaches, client call/poll and server poll/recv/reply and poll/serve (the
// one-pass recv and reply of a server that answers at once). Nothing may read
// or write outside the segment, a bad header must be refused with ShmError, and each
// client gets back only tokens of calls it made, each at most once.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "core/shm/ipc.hpp"
#include "core/shm/segment.hpp"
#include "fuzz/fuzz_input.hpp"
#include "fuzz/shm_fuzz.hpp"

using namespace bkv::shm;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {
using Req = bkv::fuzz::ShmReq;
using Resp = bkv::fuzz::ShmResp;
using Server = IpcServer<Req, Resp>;
using Client = IpcClient<Req, Resp>;
using Layout = IpcLayout<Req, Resp>;
using TrackedClient = bkv::fuzz::TrackedClient<Client>;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  IpcConfig cfg;
  cfg.max_clients = 1 + in.below(4);
  cfg.depth = 1u << in.below(4);
  IpcSkipConfig skip;
  skip.idle_after = 1 + in.below(4);
  skip.period = 1u << in.below(3);
  Segment seg = Segment::create_process(Layout::segment_size(cfg));
  const std::span<std::byte> mem = seg.bytes();
  Server server(mem, cfg, skip);
  std::vector<TrackedClient> clients;
  std::vector<IpcHandle> received;
  uint64_t next_token = 1;

  for (uint32_t step = 0; step < 512 && !in.empty(); ++step) {
    switch (in.below(9)) {
      case 0:  // a forged write: mostly into the header
        bkv::fuzz::forged_write(in, mem, 256);
        break;
      case 1: {
        try {
          const bool any = in.take<uint8_t>() & 1;
          Client c = any ? Client::connect(mem) : Client::connect(mem, in.take<uint32_t>() % 8);
          if (clients.size() < 4) clients.push_back(TrackedClient{std::move(c), {}});
        } catch (const ShmError&) {
        }
        break;
      }
      case 2:  // attach to a segment of another length
        bkv::fuzz::attach_to_prefix<Layout>(in, mem, validate_ipc_segment<Req, Resp>,
                                            "an ipc header accepted for a segment of another size");
        break;
      case 3: {
        if (clients.empty()) break;
        TrackedClient& t = clients[in.below(static_cast<uint32_t>(clients.size()))];
        const uint64_t tok = next_token++;
        if (t.c.call(Req{tok, in.take<uint64_t>()}, tok) == IpcCallStatus::kOk) t.open[tok] = true;
        if (t.c.in_flight() > t.c.config().depth) violated("client in flight beyond its depth");
        break;
      }
      case 4:
        for (auto& t : clients) t.c.poll([&](uint64_t tok, const Resp&) { t.end_call(tok); });
        break;
      case 5:
        if (in.take<uint8_t>() & 1) {
          (void)server.poll_with_skip();
        } else {
          (void)server.poll();
        }
        while (auto r = server.recv()) {
          if (r->handle.client >= cfg.max_clients || r->handle.token >= cfg.depth)
            violated("recv returned a handle outside the layout");
          received.push_back(r->handle);
        }
        break;
      case 6:
        if (!received.empty()) {
          const size_t i = in.below(static_cast<uint32_t>(received.size()));
          (void)server.reply(received[i], Resp{in.take<uint64_t>()});
          received.erase(received.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          (void)server.reply(IpcHandle{in.take<uint32_t>(), in.take<uint32_t>()}, Resp{0});
        }
        break;
      case 7: {  // poll, then answer everything found in one serve() pass
        (void)((in.take<uint8_t>() & 1) ? server.poll_with_skip() : server.poll());
        std::vector<uint32_t> outstanding_before(cfg.max_clients);
        for (uint32_t c = 0; c < cfg.max_clients; ++c) outstanding_before[c] = server.outstanding(c);
        uint32_t responded = 0, answered = 0;
        const uint32_t n = server.serve(
            [&](const Req& r) {
              ++responded;
              return Resp{r.a};
            },
            [&](uint32_t client) {
              ++answered;
              if (client >= cfg.max_clients) violated("serve answered a client outside the layout");
            });
        if (n != responded || n != answered) violated("serve's count differs from the requests it answered");
        for (uint32_t c = 0; c < cfg.max_clients; ++c)
          if (server.outstanding(c) != outstanding_before[c]) violated("serve changed a client's outstanding count");
        if (server.recv()) violated("recv found a request that serve had already taken");
        break;
      }
      default:
        if (in.take<uint8_t>() == 0xFF) server.shutdown();
        break;
    }
  }
  return 0;
}
