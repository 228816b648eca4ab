// `mpirun -np 2 benchkv data --transport ucx` (docs/data.md): the four data backends over UCX
// shared memory, two value sizes. Each run must exit 0 with every operation completed,
// nothing rejected, bytes moved at every size, and rows from both ranks in the CSV.
#include <catch2/catch.hpp>
#include <signal.h>

#include <string>
#include <vector>

#include "real_runs/real_run.hpp"

using namespace bkv;
using namespace bkv::real_runs;

TEST_CASE("mpirun -np 2: benchkv data over UCX shared memory", "[real-run][mpi][data]") {
  const std::string backend = GENERATE(as<std::string>{}, "delegation", "meta", "direct", "ucx-am");
  INFO("backend " << backend);
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv(2,
                                   {"data", "--transport", "ucx", "--data-backend", backend, "--client-threads", "2",
                                    "--queue-depth", "4", "--key-range", "16", "--value-size", "64,65536", "-d", "0.2",
                                    "--interval-ms", "50", "--trim", "1", "-r", "1", "--no-progress", "-o", "out.csv"},
                                   dir.path(), "sm,self");
  INFO(e2e::describe(o));
  REQUIRE(o.status == 0);
  // Over shared memory only, no endpoint asks for the peer error handling UCX refuses
  // there (each refusal would print a UCX error line).
  CHECK_THAT(o.out + o.err, !Catch::Contains("UCX  ERROR"));
  const e2e::json s = e2e::read_json(dir / "out.summary.json");
  CHECK(s["totals"]["issued"] == s["totals"]["completed"]);
  CHECK(s["totals"]["errors"] == 0);
  CHECK(s["data"]["rejected"] == 0);
  CHECK(s["real"]["ranks"] == 2);
  REQUIRE(s["data"]["runs"].size() == 2);
  for (const auto& r : s["data"]["runs"]) {
    CHECK(r["ops"].get<uint64_t>() > 0);
    CHECK(r["bytes"].get<uint64_t>() > 0);
    CHECK(r["bytes"].get<uint64_t>() <= r["ops"].get<uint64_t>() * r["value_size"].get<uint64_t>());
  }
  if (backend != "ucx-am") {  // the owner READ and WROTE the values with UCX RMA
    INFO(s["real"].dump());
    CHECK(s["real"]["ucx_rma"]["ucp_get"].get<uint64_t>() > 0);
    CHECK(s["real"]["ucx_rma"]["ucp_put"].get<uint64_t>() > 0);
  }
  uint64_t per_rank[2] = {0, 0};
  for (const e2e::CsvRow& row : e2e::read_csv(dir / "out.csv")) per_rank[row.rank] += row.requests;
  CHECK(per_rank[0] > 0);
  CHECK(per_rank[1] > 0);
}

TEST_CASE("mpirun -np 2: benchkv data progress lines count each size's runs, from 1", "[real-run][mpi][data]") {
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv(2,
                                   {"data", "--transport", "ucx", "--client-threads", "1", "--queue-depth", "4",
                                    "--key-range", "16", "--value-size", "64,128", "-d", "0.2", "--interval-ms", "50",
                                    "--trim", "1", "-r", "1", "--progress", "-o", "out.csv"},
                                   dir.path(), "sm,self");
  INFO(e2e::describe(o));
  REQUIRE(o.status == 0);
  for (const char* line : {"value size 64: run 1/1 epoch 1/4", "value size 64: run 1/1 epoch 4/4",
                           "value size 128: run 1/1 epoch 1/4", "value size 128: run 1/1 epoch 4/4"})
    CHECK_THAT(o.err, Catch::Contains(line));
  CHECK_THAT(o.err, !Catch::Contains("run 2/"));
  CHECK_THAT(o.err, !Catch::Contains("run 0"));
}

// Rank 1 is sent SIGTERM in the second value size's measurement (each size: 25 epochs
// of 200 ms, then a 2 s drain), once rank 0's progress line of its fourth epoch came: it
// writes its own epochs under out.rank1.* and
// ends; mpirun then sends rank 0 SIGTERM. Rank 0 keeps the first size whole (both ranks'
// rows) and the second up to its last finished epoch (its own rows); rank 1 keeps both
// sizes with its own rows; each marked interrupted and incomplete as the KV modes mark
// them, with its own rank reported.
TEST_CASE("mpirun -np 2: SIGTERM to a rank in the second value size: rank 0 keeps the first whole, the second cut, "
          "and rank 1 keeps its own",
          "[real-run][mpi][data][faults]") {
  e2e::TempDir dir;
  const Outcome o = mpirun_benchkv_signalled(
      2, {1, SIGTERM, "value size 128: run 1/1 epoch 4/25"},
      {"data", "--transport", "ucx", "--client-threads", "1", "--queue-depth", "4", "--key-range", "16",
       "--value-size", "64,128", "-d", "5", "--interval-ms", "200", "--trim", "1", "-r", "1", "--progress", "-o",
       "out.csv"},
      dir.path(), "sm,self");
  INFO(e2e::describe(o));
  CHECK(o.status != 0);
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 1: interrupted by SIGTERM"));
  CHECK_THAT(o.err, Catch::Contains("wrote out.rank1.csv and out.rank1.summary.json"));
  CHECK_THAT(o.err, !Catch::Contains("no outputs written by this rank"));
  CHECK_THAT(o.err, Catch::Contains("benchkv: rank 0: interrupted by SIGTERM; rank 1 died before it (its process is gone)"));
  const e2e::json s = interrupted_summary(dir.path(), "SIGTERM", e2e::json::array({1}));
  CHECK(s["interrupted"]["run"] == 1);  // the run index counts over the sizes
  const uint64_t done = s["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(done >= 2);
  CHECK(done < 25);
  REQUIRE(s["runs"].size() == 2);
  CHECK_FALSE(s["runs"][0].contains("epochs_done"));  // whole
  CHECK(s["runs"][1]["epochs_done"] == done);
  REQUIRE(s["data"]["runs"].size() == 2);
  CHECK(s["data"]["runs"][0]["value_size"] == 64);
  CHECK(s["data"]["runs"][1]["value_size"] == 128);
  uint64_t rows[2][2] = {{0, 0}, {0, 0}};  // [run][rank] requests
  for (const e2e::CsvRow& row : e2e::read_csv(dir.path() / "out.csv")) {
    REQUIRE(row.run < 2);
    rows[row.run][row.rank] += row.requests;
    CHECK(row.value_size == (row.run == 0 ? 64u : 128u));
    if (row.run == 1) CHECK(row.epoch < done);
  }
  CHECK(rows[0][0] > 0);
  CHECK(rows[0][1] > 0);  // gathered from rank 1 when the first size ended
  CHECK(rows[1][0] > 0);
  CHECK(rows[1][1] == 0);  // rank 1's epochs of the cut size never reached rank 0
  for (int r = 0; r < 2; ++r) {
    INFO("run " << r);
    CHECK(s["runs"][r]["requests"] == rows[r][0] + rows[r][1]);
    CHECK(s["data"]["runs"][r]["ops"] == rows[r][0] + rows[r][1]);
    CHECK(s["data"]["runs"][r]["bytes"].get<uint64_t>() > 0);
  }
  const e2e::json& t = s["totals"];
  CHECK(t["errors"] == 0);
  CHECK(t["issued"].get<uint64_t>() == t["completed"].get<uint64_t>() + t["unanswered"].get<uint64_t>());

  // Rank 1's own: both sizes, its rows alone, the cut one up to its own last epoch.
  REQUIRE(e2e::fs::exists(dir / "out.rank1.summary.json"));
  const e2e::json s1 = e2e::read_json(dir / "out.rank1.summary.json");
  CHECK(s1["incomplete"]["ranks_reported"] == e2e::json::array({1}));
  CHECK(s1["interrupted"]["signal"] == "SIGTERM");
  CHECK(s1["interrupted"]["run"] == 1);
  const uint64_t done1 = s1["interrupted"]["epochs_done"].get<uint64_t>();
  CHECK(done1 >= 2);
  CHECK(done1 < 25);
  REQUIRE(s1["runs"].size() == 2);
  CHECK_FALSE(s1["runs"][0].contains("epochs_done"));
  REQUIRE(s1["data"]["runs"].size() == 2);
  uint64_t own[2][2] = {{0, 0}, {0, 0}};
  for (const e2e::CsvRow& row : e2e::read_csv(dir / "out.rank1.csv")) {
    REQUIRE(row.run < 2);
    own[row.run][row.rank] += row.requests;
    if (row.run == 1) CHECK(row.epoch < done1);
  }
  for (int r = 0; r < 2; ++r) {
    INFO("rank 1's run " << r);
    CHECK(own[r][0] == 0);
    CHECK(own[r][1] > 0);
    CHECK(s1["data"]["runs"][r]["ops"] == own[r][1]);
  }
  CHECK(own[0][1] == rows[0][1]);  // the same epochs rank 0 gathered from it
  const e2e::json& t1 = s1["totals"];
  CHECK(t1["errors"] == 0);
  CHECK(t1["issued"].get<uint64_t>() == t1["completed"].get<uint64_t>() + t1["unanswered"].get<uint64_t>());
}
