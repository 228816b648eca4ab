// Fuzzes flux with forged ring contents: besides the nodes' own calls and replies, the
// input publishes messages of any tag and any lap stamp (through the ring's own
// publish, so every byte a consumer reads, stamp, tag and payload, is chosen by the
// input) into any ordered-pair ring. Nodes must stay in bounds, count bad messages,
// and hand each caller only tokens of calls it made, each at most once.
#include <cstdint>
#include <map>
#include <vector>

#include "core/shm/flux.hpp"
#include "fuzz/fuzz_input.hpp"

using namespace bkv::shm;
using bkv::fuzz::FuzzInput;
using bkv::fuzz::violated;

namespace {
struct Msg {
  uint64_t v;
};
using Net = FluxNetwork<Msg, uint64_t>;
using Node = FluxNode<Msg, uint64_t>;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint32_t n = 1 + in.below(3);
  FluxConfig cfg;
  cfg.max_inflight = 1 + in.below(4);
  cfg.capacity = 8;
  Net net(n, cfg);
  std::vector<Node> nodes;
  for (uint32_t i = 0; i < n; ++i) nodes.push_back(net.node(i));
  std::vector<std::map<uint64_t, bool>> open(n);  // tokens issued per node, not yet answered
  std::vector<std::vector<FluxReplyToken>> to_answer(n);
  uint64_t next_token = 1;

  for (uint32_t step = 0; step < 512 && !in.empty(); ++step) {
    const uint32_t me = in.below(n);
    switch (in.below(5)) {
      case 0: {  // forged message: any position (so any lap stamp), any tag
        const uint32_t from = in.below(n), to = in.below(n);
        net.ring(from, to).publish(in.take<uint64_t>() % 64, in.take<uint32_t>(), Msg{in.take<uint64_t>()});
        break;
      }
      case 1: {
        const uint64_t tok = next_token++;
        const uint32_t target = in.below(n + 1);  // n: a bad target
        if (nodes[me].call(target, Msg{tok}, tok) == FluxCallStatus::kOk) open[me][tok] = true;
        if (target < n && nodes[me].in_flight(target) > cfg.max_inflight) violated("in flight beyond max_inflight");
        break;
      }
      case 2:
        nodes[me].poll([&](const uint64_t& tok, const Msg&) {
          auto it = open[me].find(tok);
          if (it == open[me].end()) violated("a node was handed a token it never issued or already got back");
          open[me].erase(it);
        });
        break;
      case 3:
        while (auto r = nodes[me].try_recv()) {
          if (r->token.source >= n || r->token.slot >= cfg.max_inflight) violated("a request outside the network");
          to_answer[me].push_back(r->token);
        }
        break;
      default:
        if (!to_answer[me].empty()) {
          (void)nodes[me].reply(to_answer[me].back(), Msg{0});
          to_answer[me].pop_back();
        } else {
          (void)nodes[me].reply(FluxReplyToken{in.take<uint32_t>(), in.take<uint32_t>()}, Msg{0});
        }
        break;
    }
  }
  return 0;
}
