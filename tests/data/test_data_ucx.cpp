// data_put / data_get over the UCX transport (docs/data.md): the cases of
// test_data_instant (data_cases.hpp) with every transport a UCX worker in this process
// over shared memory (UCX_TLS=sm,self), where the owner's READs and WRITEs of the
// client's buffer go through ucp_get_nbx / ucp_put_nbx (transports/ucx/ucx_rma.hpp).
// Each test asserts on the RMA counters that they did.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include "tests/data/data_cases.hpp"
#include "transports/ucx/ucx_transport.hpp"

using namespace bkv;

namespace {

struct UcxNet {
  using Transport = ucx::UcxTransport;
  struct Options {
    bool rma = true;
  };
  Options opts;
  std::vector<Transport*> made;  // the transports outlive no Net: DataPair/DataCluster declare the Net first
  explicit UcxNet(const Options& o) : opts(o) {}
  std::unique_ptr<Transport> make() {
    ucx::Config c;
    c.tls = "sm,self";
    c.rma = opts.rma;
    auto t = std::make_unique<Transport>(c);
    made.push_back(t.get());
    return t;
  }
  void tick() {
    for (Transport* t : made) t->progress();
  }
  ucx::RmaCounters total() const {
    ucx::RmaCounters s;
    for (const Transport* t : made) {
      const ucx::RmaCounters c = t->rma_counters();
      s.gets += c.gets, s.puts += c.puts, s.flushes += c.flushes;
      s.am_not_announced += c.am_not_announced, s.am_outside_region += c.am_outside_region;
      s.am_behind_am += c.am_behind_am, s.announcements_rejected += c.announcements_rejected;
    }
    return s;
  }
};

}  // namespace

TEST_CASE("data over ucx rma: a get returns exactly the bytes of the completed put, up to 1 MiB", "[ucx][rma]") {
  const uint32_t size = GENERATE(1u, 64u, 4095u, 65536u, 1u << 20);
  test::DataPair<UcxNet> p({}, uint64_t{2} << 20, 1, 1u << 20, 4);
  p.send(p.announcement(1));
  p.fill(0, 0, size, 3);
  const uint64_t put = p.put(5, 0, 0, size);
  p.pump();
  REQUIRE(p.answers.at(put).kind == kv::DataResponseKind::kPutOk);
  std::memset(p.at(0, 0), 0, size);
  const uint64_t get = p.get(5, 0, uint64_t{1} << 20, 1u << 20);
  p.pump();
  REQUIRE(p.answers.at(get).kind == kv::DataResponseKind::kGetOk);
  CHECK(p.answers.at(get).length == size);
  CHECK(p.holds(0, uint64_t{1} << 20, size, 3));
  CHECK(p.at(0, 0)[0] == std::byte{0});  // the put's source, cleared, was not written back
  // The owner READ the value with ucp_get and WROTE it back with ucp_put (the requester's
  // copyrpc READs its consumer word with ucp_get too: at least one get each side).
  const ucx::RmaCounters owner = p.tb->rma_counters();
  CHECK(owner.gets >= 1);
  CHECK(owner.puts == 1);
  CHECK(owner.am_not_announced + owner.am_outside_region + owner.am_behind_am == 0);
  CHECK(p.tb->rendezvous_receives() + p.ta->rendezvous_receives() == 0);  // no value as an active message
  CHECK(p.server.counters().rejected_total() == 0);
}

// With rma off the same cases run over the active-message emulation (the path a READ or
// WRITE takes when its region is not announced).
TEST_CASE("data over ucx: the cases of the instant loopback, over RMA and over the AM emulation", "[ucx][rma]") {
  const UcxNet::Options o{GENERATE(true, false)};
  INFO("rma " << o.rma);
  SECTION("buffer offsets wrap around the slice") { test::data_case_wrap<UcxNet>(o); }
  SECTION("concurrent puts to one key") { test::data_case_concurrent_puts<UcxNet>(o); }
  SECTION("out-of-range requests and a foreign rkey are rejected and counted") { test::data_case_rejections<UcxNet>(o); }
  SECTION("a put larger than the largest value") { test::data_case_value_too_large<UcxNet>(o); }
  SECTION("parking for free blocks") { test::data_case_parking<UcxNet>(o); }
}

TEST_CASE("data over ucx rma: whole nodes of every backend, every request completes, values moved by ucp_get and ucp_put",
          "[ucx][rma]") {
  const auto backend = GENERATE(data::DataBackend::kDelegation, data::DataBackend::kMeta, data::DataBackend::kDirect);
  data::DataNodeConfig cfg;
  cfg.np = 2, cfg.clients = 2, cfg.queue_depth = 4, cfg.max_value_bytes = 65536, cfg.value_bytes = 40000;
  cfg.key_range = 16, cfg.backend = backend, cfg.remote_only = true;
  test::DataCluster<UcxNet> c({}, cfg);
  for (int i = 0; i < 3000; ++i) c.step();
  for (auto& cs : c.clients)
    for (auto& cl : cs) cl->stop_issuing();
  for (int i = 0; i < 2000 && c.sum(&data::DataClientCounters::completed) < c.sum(&data::DataClientCounters::issued); ++i)
    c.step();
  const uint64_t issued = c.sum(&data::DataClientCounters::issued);
  CHECK(issued > 100);
  CHECK(c.sum(&data::DataClientCounters::completed) == issued);
  CHECK(c.sum(&data::DataClientCounters::errors) == 0);
  uint64_t puts = 0, gets = 0, rejected = 0;
  for (auto& d : c.daemons) {
    puts += d->server_counters().puts;
    gets += d->server_counters().gets;
    rejected += d->server_counters().rejected_total();
    CHECK(d->protocol_errors() == 0);
  }
  CHECK(rejected == 0);
  const ucx::RmaCounters rma = c.net.total();
  INFO("ucp_get " << rma.gets << " ucp_put " << rma.puts << " not announced " << rma.am_not_announced
                  << " outside " << rma.am_outside_region << " behind AM " << rma.am_behind_am);
  // Every served put READ its value with ucp_get, every found get WROTE it with ucp_put.
  CHECK(rma.gets >= puts);
  CHECK(rma.puts >= gets);
  CHECK(puts > 0);
  CHECK(gets > 0);
  CHECK(rma.am_outside_region + rma.am_behind_am + rma.announcements_rejected == 0);
}
