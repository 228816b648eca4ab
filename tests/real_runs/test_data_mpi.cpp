// `mpirun -np 2 benchkv data --transport ucx` (docs/data.md): the four data backends over UCX
// shared memory, two value sizes. Each run must exit 0 with every operation completed,
// nothing rejected, bytes moved at every size, and rows from both ranks in the CSV.
#include <catch2/catch.hpp>

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
