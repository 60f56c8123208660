// NVTX ranges from a program that knows nothing of stallscope land in the recording, with their
// domain, both under `stallscope run` and with LD_PRELOAD alone.
#include <gtest/gtest.h>

#include "storage/reader.h"
#include "storage/sqlite.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

void check_nvtx_recording(const std::string& db) {
  auto r = Reader::open(db);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Db& d = (*r)->db();
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM span_view WHERE name = 'outer' AND depth = 0 AND arg0 = 0"), 10);
  // Domain ranges carry the domain's name (a string id) and category.
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM span_view s JOIN strings dn ON dn.id = s.arg0 "
                         "WHERE s.name = 'inner' AND s.depth = 1 AND dn.value = 'my_library' AND s.arg1 = 7"),
            10);
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM span_view WHERE name = 'registered_range' AND depth = 1"), 10);
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM span_view WHERE name = 'inner' AND dur_ns >= 100000"), 10);
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM instant_view WHERE name = 'checkpoint'"), 1);
  // A start/end range: a start and an end instant with the same range id, on different threads.
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM instant_view s JOIN instant_view e ON e.arg0 = s.arg0 "
                         "JOIN strings m ON m.id = s.arg1 "
                         "WHERE s.name = 'nvtx.start' AND e.name = 'nvtx.end' AND m.value = 'async_range' "
                         "AND s.tid != e.tid"),
            1);
  EXPECT_EQ(*d.query_int("SELECT count(*) FROM threads WHERE name = 'nvtx-main'"), 1);
}

TEST(NvtxTest, RangesAreRecordedUnderTheLauncher) {
  testing::TempDir dir;
  const std::string db = dir.file("nvtx.db");
  testing::ProcResult p = testing::run_process({STALLSCOPE_BIN, "run", "-o", db, "--", NVTX_EMITTER_BIN});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("unmatched pop negative"), std::string::npos) << p.out;
  check_nvtx_recording(db);
}

TEST(NvtxTest, RangesAreRecordedWithPreloadAlone) {
  testing::TempDir dir;
  const std::string db = dir.file("nvtx-preload.db");
  testing::ProcResult p =
      testing::run_process({NVTX_EMITTER_BIN}, 60000, {{"LD_PRELOAD", PRELOAD_LIB}, {"STALLSCOPE_OUTPUT", db}});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  check_nvtx_recording(db);
}

TEST(NvtxTest, WithoutStallscopeNvtxCallsAreHarmless) {
  testing::ProcResult p = testing::run_process({NVTX_EMITTER_BIN});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("nvtx_emitter: done"), std::string::npos);
}

}  // namespace
}  // namespace stallscope
