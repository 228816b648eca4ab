// delegationrpc's per-call instructions, one thread, for callgrind: one client makes 4
// calls (try_call), the server reads them (snapshot_head, recv, advance_tail) and
// replies, the client polls; 100000 rounds. The three steps are functions of their own
// so that callgrind_annotate --inclusive=yes gives each one's instructions per round:
//   valgrind --tool=callgrind --callgrind-out-file=OUT bench/bench_shm_delegation_calls
//   callgrind_annotate --inclusive=yes OUT | grep -E 'client_call|server_read|client_poll'
// client_call runs once per call (400000x), server_read and client_poll once per round
// of 4 calls. It uses only the API the ring has had from the start, so the same file
// compiled against an older core/shm/delegationrpc.hpp measures that one side by side.
#include <cstdio>

#include "core/shm/delegationrpc.hpp"
#include "core/shm/segment.hpp"

using namespace bkv::shm;

namespace {
struct Req {
  uint32_t client, pad;
  uint64_t seq, value;
};
struct Resp {
  uint64_t seq, value;
};
using Server = DelegationServer<Req, Resp>;
using Client = DelegationClient<Req, Resp>;

[[gnu::noinline]] bool client_call(Client& c, uint64_t i) {
  return c.try_call(Req{0, 0, i, i}, i).status == DelegationCallStatus::kOk;
}
[[gnu::noinline]] uint32_t server_read(Server& s, DelegationEntry<Req>* out) {
  uint32_t n = 0;
  s.snapshot_head();
  while (auto e = s.recv()) out[n++] = *e;
  s.advance_tail();
  return n;
}
[[gnu::noinline]] uint64_t client_poll(Client& c) {
  uint64_t sum = 0;
  c.poll([&](uint64_t t, const Resp& r) { sum += t + r.value; });
  return sum;
}
}  // namespace

int main() {
  const DelegationConfig cfg{1, 1024, 4};
  Segment seg = Segment::create_process(DelegationLayout<Req, Resp>::segment_size(cfg));
  Server server(seg.bytes(), cfg);
  Client c = Client::connect(seg.bytes(), 1);
  DelegationEntry<Req> buf[4];
  uint64_t sum = 0, calls = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    for (uint64_t k = 0; k < 4; ++k) calls += client_call(c, i * 4 + k) ? 1 : 0;
    const uint32_t n = server_read(server, buf);
    for (uint32_t j = 0; j < n; ++j)
      server.reply(buf[j].client_id, buf[j].resp_slot_idx, Resp{buf[j].payload.seq, 1});
    sum += client_poll(c);
  }
  if (calls != 400000) {
    std::fprintf(stderr, "bench_shm_delegation_calls: %llu of 400000 calls went through\n",
                 static_cast<unsigned long long>(calls));
    return 1;
  }
  std::printf("400000 calls, checksum %llu\n", static_cast<unsigned long long>(sum));
  return 0;
}
