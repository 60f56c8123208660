// Tests of `stallscope report`: text and --json output of a known recording, a live recording,
// bad inputs (one line on stderr, exit 1) and usage errors (exit 2).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>

#include "common/json.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::count_lines;
using testing::kMs;
using testing::ProcResult;
using testing::RecordingBuilder;
using testing::run_process;
using testing::SimConfig;

class ReportCliTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;

  // 100 steps of 30 ms wait + 70 ms compute, num_workers=0: stall 30%, 320 samples/s, 10 s.
  std::string known_recording() {
    const std::string p = dir_.file("known.db");
    RecordingBuilder b(p);
    testing::simulate(b, SimConfig{});
    return p;
  }
};

TEST_F(ReportCliTest, TextMentionsTheKeyFigures) {
  const std::string db = known_recording();
  ProcResult p = run_process({STALLSCOPE_BIN, "report", db});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  for (const char* s :
       {"Training window  10.000 s", "Steps            100", "320.0 samples/s", "30.0% of the window", "p50 100.0 ms",
        "batch_size 32", "num_workers 0", "increase_num_workers", "there is no queue"}) {
    EXPECT_NE(p.out.find(s), std::string::npos) << s << "\n" << p.out;
  }
}

TEST_F(ReportCliTest, JsonHasEveryRequiredKey) {
  const std::string db = known_recording();
  ProcResult p = run_process({STALLSCOPE_BIN, "report", "--json", db});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok()) << doc.status().message() << "\n" << p.out;
  const Json& d = *doc;
  EXPECT_EQ(json::get_string(d, "schema"), "stallscope.report/1");
  EXPECT_EQ(json::get_string(d, "mode"), "cpu");
  EXPECT_NEAR(*json::get_double(d, "wall_s"), 10.0, 1e-9);
  EXPECT_EQ(json::get_int(d, "steps"), 100);
  EXPECT_EQ(json::get_int(d, "samples"), 3200);
  EXPECT_NEAR(*json::get_double(d, "samples_per_s"), 320.0, 1e-6);
  ASSERT_TRUE(d.contains("step_time_ms"));
  const Json& st = d.at("step_time_ms");
  for (const char* k : {"p50", "p90", "p99"}) EXPECT_NEAR(*json::get_double(st, k), 100.0, 1e-9) << k;
  ASSERT_TRUE(d.contains("stall"));
  const Json& stall = d.at("stall");
  EXPECT_NEAR(*json::get_double(stall, "fraction"), 0.30, 1e-9);
  ASSERT_TRUE(stall.contains("by_cause"));
  EXPECT_NEAR(*json::get_double(stall.at("by_cause"), "data_wait"), 3.0, 1e-9);
  ASSERT_TRUE(d.contains("loader"));
  const Json& loader = d.at("loader");
  EXPECT_EQ(json::get_int(loader, "batch_size"), 32);
  EXPECT_EQ(json::get_int(loader, "num_workers"), 0);
  EXPECT_EQ(json::get_string(loader, "created_at"), "train.py:42");
  ASSERT_TRUE(d.contains("loaders"));
  EXPECT_EQ(d.at("loaders").size(), 1u);
  ASSERT_TRUE(d.contains("queue"));
  const Json& q = d.at("queue");
  ASSERT_TRUE(q.contains("mean_ready"));
  ASSERT_TRUE(q.contains("empty_fraction"));
  EXPECT_TRUE(q.at("mean_ready").is_null());  // num_workers=0: no queue
  ASSERT_TRUE(d.contains("workers"));
  EXPECT_TRUE(d.at("workers").is_array());
  ASSERT_TRUE(d.contains("recommendations"));
  const Json& recs = d.at("recommendations");
  ASSERT_FALSE(recs.empty());
  for (const Json& r : recs) {
    for (const char* k : {"id", "severity", "message"}) EXPECT_TRUE(json::get_string(r, k).has_value()) << k;
    ASSERT_TRUE(r.contains("evidence"));
    EXPECT_TRUE(r.at("evidence").is_object());
  }
  EXPECT_EQ(json::get_string(recs[0], "id"), "increase_num_workers");
}

TEST_F(ReportCliTest, JsonWorkersHaveEveryField) {
  const std::string db = dir_.file("workers.db");
  {
    RecordingBuilder b(db);
    SimConfig c;
    c.num_workers = 2;
    c.worker_cpu = 0.8;
    c.worker_runq = 0.1;
    c.worker_private_start = 1 << 20;
    c.worker_private_growth = 1 << 20;
    testing::simulate(b, c);
  }
  ProcResult p = run_process({STALLSCOPE_BIN, "report", "--json", db});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  ASSERT_TRUE(doc->contains("workers"));
  const Json& workers = doc->at("workers");
  ASSERT_EQ(workers.size(), 2u);
  for (const Json& w : workers) {
    for (const char* k : {"pid", "worker_id", "cpu_util", "runq_delay_fraction", "private_growth_bytes", "fetch_p50_ms",
                          "fetch_p99_ms"}) {
      ASSERT_TRUE(w.contains(k)) << k;
      EXPECT_TRUE(w.at(k).is_number()) << k;
    }
    EXPECT_NEAR(*json::get_double(w, "cpu_util"), 0.8, 1e-9);
    EXPECT_EQ(json::get_int(w, "private_growth_bytes"), 1 << 20);
  }
  const Json& q = doc->at("queue");
  EXPECT_TRUE(q.at("mean_ready").is_number());
  EXPECT_TRUE(q.at("empty_fraction").is_number());
}

TEST_F(ReportCliTest, NoDataLoaderSaysSo) {
  const std::string db = dir_.file("plain.db");
  {
    RecordingBuilder b(db);
    const int64_t proc = b.process(1000, 0);
    b.span(b.thread(proc, 1000), "work", 0, kMs);
    b.finish();
  }
  ProcResult p = run_process({STALLSCOPE_BIN, "report", db});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("no DataLoader was seen"), std::string::npos) << p.out;
  p = run_process({STALLSCOPE_BIN, "report", "--json", db});
  EXPECT_EQ(p.exit_code, 0);
  auto doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(json::get_int(*doc, "steps"), 0);
  EXPECT_TRUE(doc->at("samples_per_s").is_null());
}

TEST_F(ReportCliTest, LiveRecordingIsRead) {
  const std::string db = dir_.file("live.db");
  RecordingBuilder b(db);  // stays open: WAL, meta complete=0
  const int64_t proc = b.process(1000, 0);
  const int64_t th = b.thread(proc, 1000);
  b.instant(th, "dl.config", 0, 0, b.str(R"({"loader": 0, "batch_size": 8, "num_workers": 0})"));
  for (int i = 0; i < 7; ++i) b.span(th, "dl.next", i * 10 * kMs, 5 * kMs, 0, i, 0);
  b.commit();
  ProcResult p = run_process({STALLSCOPE_BIN, "report", "--json", db});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(json::get_int(*doc, "steps"), 7);
  EXPECT_EQ(json::get_bool(*doc, "complete"), false);
  p = run_process({STALLSCOPE_BIN, "report", db});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("not finished"), std::string::npos);
}

TEST_F(ReportCliTest, BadInputsGetOneLineAndExit1) {
  const std::string random = dir_.file("random.db");
  std::string bytes;
  for (int i = 0; i < 8192; ++i) bytes.push_back(static_cast<char>((i * 7919 + 13) & 0xFF));
  testing::write_file(random, bytes);
  const std::string empty = dir_.file("empty.db");
  testing::write_file(empty, "");
  const std::string other = dir_.file("other.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  // A finished recording cut in half (no WAL beside it).
  const std::string whole = dir_.file("whole.db");
  {
    RecordingBuilder b(whole);
    SimConfig c;
    c.batches_per_epoch = 2000;
    testing::simulate(b, c);
  }
  const std::string truncated = dir_.file("truncated.db");
  const std::string content = testing::read_file(whole);
  ASSERT_GT(content.size(), 8192u);
  testing::write_file(truncated, content.substr(0, content.size() / 2));
  const std::string missing = dir_.file("missing.db");
  const std::string directory = dir_.file("adir");
  ASSERT_EQ(::mkdir(directory.c_str(), 0700), 0);

  for (const std::string& f : {random, empty, other, truncated, missing, directory}) {
    for (bool as_json : {false, true}) {
      std::vector<std::string> argv = {STALLSCOPE_BIN, "report"};
      if (as_json) argv.push_back("--json");
      argv.push_back(f);
      ProcResult p = run_process(argv);
      EXPECT_EQ(p.exit_code, 1) << f << "\n" << p.err;
      EXPECT_EQ(count_lines(p.err), 1) << f << "\n" << p.err;
      EXPECT_EQ(p.err.rfind("stallscope: ", 0), 0u) << p.err;
      EXPECT_TRUE(p.out.empty()) << f << "\n" << p.out;
      // Says what to do next.
      EXPECT_TRUE(p.err.find("pass ") != std::string::npos || p.err.find("record") != std::string::npos) << p.err;
    }
  }
}

TEST_F(ReportCliTest, HelpAndUsageErrors) {
  ProcResult p = run_process({STALLSCOPE_BIN, "report", "--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("Usage: stallscope report"), std::string::npos);
  EXPECT_NE(p.out.find("--json"), std::string::npos);
  p = run_process({STALLSCOPE_BIN, "--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("report"), std::string::npos);

  const std::string db = known_recording();
  const std::vector<std::vector<std::string>> bad = {
      {STALLSCOPE_BIN, "report"},
      {STALLSCOPE_BIN, "report", "--bogus", db},
      {STALLSCOPE_BIN, "report", "-x"},
      {STALLSCOPE_BIN, "report", db, db},
  };
  for (const auto& argv : bad) {
    p = run_process(argv);
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    EXPECT_EQ(p.exit_code, 2) << cmd;
    EXPECT_EQ(count_lines(p.err), 1) << cmd << "\n" << p.err;
    EXPECT_EQ(p.err.rfind("stallscope: ", 0), 0u) << cmd;
    EXPECT_NE(p.err.find("--help"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace stallscope
