// benchkv on the real path (--transport ucx / mlx5 / verbs): bad input is rejected before
// anything runs, with a message naming the problem and a non-zero status (2 for a missing
// RDMA device), and no output file written.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>
#include <vector>

#include "e2e/benchkv_run.hpp"

using namespace bkv::e2e;

namespace {

void require_rejected(const Outcome& o, const TempDir& dir, std::initializer_list<std::string> fragments,
                      int status = -1) {
  INFO(describe(o));
  if (status >= 0) CHECK(o.status == status);
  CHECK(o.status != 0);
  CHECK(o.status < 126);  // benchkv itself said no (not exec failure, not a signal)
  for (const auto& f : fragments) CHECK_THAT(o.err, Catch::Contains(f));
  CHECK_FALSE(fs::exists(dir / "out.csv"));
  CHECK_FALSE(fs::exists(dir / "out.summary.json"));
}

const std::vector<std::string> kShort = {"-d", "0.3", "--interval-ms", "50", "--trim", "1", "-r", "1", "-o", "out.csv"};

std::vector<std::string> args(std::vector<std::string> a) {
  a.insert(a.begin(), kShort.begin(), kShort.end());
  return a;
}

}  // namespace

TEST_CASE("real path: an unknown option", "[real-run][bad-input]") {
  TempDir dir;
  require_rejected(run_benchkv(args({"--transport", "ucx", "--no-such-option", "delegation"}), dir.path()), dir,
                   {"--no-such-option"});
}

TEST_CASE("real path: a malformed JSON config", "[real-run][bad-input]") {
  TempDir dir;
  write_file(dir / "exp.json", "{\"transport\": \"ucx\",\n \"backend\": ");
  require_rejected(run_benchkv({"--config", "exp.json", "-o", "out.csv"}, dir.path()), dir, {"exp.json", "JSON"});
}

TEST_CASE("real path: an unknown key in the config", "[real-run][bad-input]") {
  TempDir dir;
  write_file(dir / "exp.json", R"({"transport": "ucx", "backend": "ucx-am", "client_thread": 2})");
  require_rejected(run_benchkv({"--config", "exp.json", "-o", "out.csv"}, dir.path()), dir, {"\"client_thread\""});
}

TEST_CASE("real path: queue depth not a power of two", "[real-run][bad-input]") {
  TempDir dir;
  require_rejected(run_benchkv(args({"--transport", "ucx", "--queue-depth", "12", "ucx-am"}), dir.path()), dir,
                   {"--queue-depth", "power of two"});
}

TEST_CASE("real path: no RDMA device gives status 2 and says so", "[real-run][bad-input]") {
  TempDir dir;
  SECTION("--transport mlx5") {
    require_rejected(run_benchkv(args({"--transport", "mlx5", "delegation"}), dir.path()), dir,
                     {"--transport mlx5", "RDMA"}, 2);
  }
  SECTION("--transport verbs with a device name") {
#if BKV_REAL_RDMA  // built with rdma-core and MPI: the device lookup itself says what is missing
    require_rejected(run_benchkv(args({"--transport", "verbs", "--device", "nosuch0", "meta"}), dir.path()), dir,
                     {"--transport verbs", "nosuch0"}, 2);
#else
    require_rejected(run_benchkv(args({"--transport", "verbs", "--device", "nosuch0", "meta"}), dir.path()), dir,
                     {"--transport verbs", "RDMA"}, 2);
#endif
  }
  SECTION("benchkv data --transport mlx5 and verbs") {
    // The data benchmark is wired to both (real/rdma.cpp): here the device lookup refuses,
    // not a "not supported" message.
    for (const char* t : {"mlx5", "verbs"}) {
      const Outcome o = run_benchkv(args({"data", "--transport", t, "--value-size", "64"}), dir.path());
      require_rejected(o, dir, {std::string("--transport ") + t, "RDMA"}, 2);
      CHECK_THAT(o.err, !Catch::Contains("not wired"));
    }
  }
}

TEST_CASE("real path: ucx-am needs the UCX transport", "[real-run][bad-input]") {
  TempDir dir;
  require_rejected(run_benchkv(args({"--transport", "mlx5", "ucx-am"}), dir.path()), dir, {"ucx-am", "ucx"}, 2);
}
