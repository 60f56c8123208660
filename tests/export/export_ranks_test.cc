// The Perfetto export of a multi-rank job: each rank's process is named by its rank, in rank
// order, so the ranks read as groups of tracks in the trace viewer.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/json.h"
#include "export/perfetto_json.h"
#include "storage/reader.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::testing {
namespace {

TEST(PerfettoExportRanksTest, EachRankIsAProcessNamedByItsRankInRankOrder) {
  TempDir dir;
  const std::string db = dir.file("job.db"), out = dir.file("job.json");
  {
    RecordingBuilder b(db);
    for (int r = 1; r >= 0; --r) {  // rank 1 recorded first: the order must come from the ranks
      SimConfig c;
      c.main_pid = 1000 + 100 * r;
      c.first_worker_pid = 5000 + 100 * r;
      c.num_workers = 1;
      c.finish = false;
      const SimTruth t = simulate(b, c);
      b.instant(t.main_thread, "dist.rank", 500 * kMs, r, b.str(R"({"rank":)" + std::to_string(r) + "}"), 2);
    }
    b.finish();
  }
  auto reader = Reader::open(db);
  ASSERT_TRUE(reader.ok());
  std::FILE* f = std::fopen(out.c_str(), "w");
  auto sink = exporting::perfetto_json_sink(f);
  ASSERT_TRUE(exporting::export_recording(**reader, *sink).ok());
  std::fclose(f);
  auto doc = json::parse(read_file(out));
  ASSERT_TRUE(doc.ok());
  std::map<int64_t, std::string> names;
  std::map<int64_t, int64_t> order;
  for (const Json& e : (*doc)["traceEvents"]) {
    if (e["ph"] != "M") continue;
    if (e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
    if (e["name"] == "process_sort_index") order[e["pid"]] = e["args"]["sort_index"];
  }
  EXPECT_EQ(names[1000], "rank 0 (pid 1000)");
  EXPECT_EQ(names[1100], "rank 1 (pid 1100)");
  EXPECT_LT(order[1000], order[1100]);
  EXPECT_EQ(names[5000].rfind("worker 0", 0), 0u) << names[5000];
}

}  // namespace
}  // namespace stallscope::testing
