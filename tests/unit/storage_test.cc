// Tests for the session database: writer/reader round trip of every row type, the time-window
// query, schema version checks, and foreign, empty, random and truncated files.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "collector/event.h"
#include "storage/reader.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/writer.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

class StorageTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::string db_path() const { return dir_.file("run.db"); }

  // A small recording with one of every row type.
  void write_sample() {
    auto w = Writer::create(db_path());
    ASSERT_TRUE(w.ok()) << w.status().message();
    Writer& wr = **w;
    ASSERT_TRUE(wr.begin().ok());
    ASSERT_TRUE(wr.set_meta("command", "python train.py").ok());
    wr.add_string(1, "step");
    wr.add_string(2, "fetch");
    ProcessRow p;
    p.pid = 100;
    p.ppid = 1;
    p.cmdline = "python train.py";
    p.start_ns = 0;
    const int64_t proc = wr.add_process(p);
    const int64_t th = wr.add_thread(ThreadRow{0, proc, 101, "MainThread"});
    SpanRow s;
    s.thread_id = th;
    s.start_ns = 1000;
    s.dur_ns = 500;
    s.name_id = 1;
    s.depth = 0;
    s.arg0 = 3;
    const int64_t span1 = wr.add_span(s);
    s.start_ns = 5000;
    s.dur_ns.reset();  // never ended
    s.name_id = 2;
    s.arg0.reset();
    s.arg1 = -9;
    const int64_t span2 = wr.add_span(s);
    wr.add_instant(InstantRow{0, th, 1200, 2, 5, std::nullopt, 7});
    const int64_t track = wr.add_counter_track(CounterTrackRow{0, "queue_depth", "batches", 100});
    wr.add_counter(CounterRow{track, 1100, 2.0});
    wr.add_counter(CounterRow{track, 1300, 3.5});
    FlushRow f;
    f.ts_ns = 6000;
    f.events = 7;
    f.first_span_id = span1;
    f.last_span_id = span2;
    f.min_start_ns = 1000;
    // max_end_ns stays NULL: span2 never ended
    wr.add_flush(f);
    wr.update_process_end(proc, 7000, 0, std::nullopt);
    ASSERT_TRUE(wr.commit().ok());
    ASSERT_TRUE(wr.finish().ok());
  }
};

TEST_F(StorageTest, RoundTripOfEveryRowType) {
  write_sample();
  auto r = Reader::open(db_path());
  ASSERT_TRUE(r.ok()) << r.status().message();
  Reader& rd = **r;
  auto meta = rd.meta();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ((*meta)["command"], "python train.py");
  auto strings = rd.strings();
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ((*strings)[1], "step");
  auto procs = rd.processes();
  ASSERT_TRUE(procs.ok());
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].pid, 100);
  EXPECT_EQ((*procs)[0].end_ns, 7000);
  EXPECT_EQ((*procs)[0].exit_code, 0);
  EXPECT_FALSE((*procs)[0].exit_signal.has_value());
  auto threads = rd.threads();
  ASSERT_TRUE(threads.ok());
  ASSERT_EQ(threads->size(), 1u);
  EXPECT_EQ((*threads)[0].name, "MainThread");
  auto spans = rd.all_spans();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ((*spans)[0].dur_ns, 500);
  EXPECT_EQ((*spans)[0].arg0, 3);
  EXPECT_FALSE((*spans)[0].arg1.has_value());
  EXPECT_FALSE((*spans)[1].dur_ns.has_value());
  EXPECT_EQ((*spans)[1].arg1, -9);
  auto inst = rd.instants();
  ASSERT_TRUE(inst.ok());
  ASSERT_EQ(inst->size(), 1u);
  EXPECT_EQ((*inst)[0].ts_ns, 1200);
  EXPECT_EQ((*inst)[0].arg0, 5);
  EXPECT_FALSE((*inst)[0].arg1.has_value());
  EXPECT_EQ((*inst)[0].arg2, 7);
  auto tracks = rd.counter_tracks();
  ASSERT_TRUE(tracks.ok());
  ASSERT_EQ(tracks->size(), 1u);
  EXPECT_EQ((*tracks)[0].unit, "batches");
  auto values = rd.counters((*tracks)[0].id);
  ASSERT_TRUE(values.ok());
  ASSERT_EQ(values->size(), 2u);
  EXPECT_DOUBLE_EQ((*values)[1].value, 3.5);
  auto flushes = rd.flushes();
  ASSERT_TRUE(flushes.ok());
  ASSERT_EQ(flushes->size(), 1u);
  EXPECT_EQ((*flushes)[0].events, 7);
}

TEST_F(StorageTest, TimeWindowFindsOverlappingSpans) {
  write_sample();
  auto r = Reader::open(db_path());
  ASSERT_TRUE(r.ok());
  auto in = (*r)->spans(1400, 1600);  // overlaps the first span's end only
  ASSERT_TRUE(in.ok());
  ASSERT_EQ(in->size(), 1u);
  EXPECT_EQ((*in)[0].start_ns, 1000);
  auto open_ended = (*r)->spans(90000, 100000);  // the unended span reaches to the end
  ASSERT_TRUE(open_ended.ok());
  ASSERT_EQ(open_ended->size(), 1u);
  EXPECT_EQ((*open_ended)[0].name_id, 2u);
  auto none = (*r)->spans(0, 999);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Spans go to the file 32 to a statement inside a batch, the rest one by one at commit, and each at
// once outside a batch; add_span() returns the id the row gets, args and NULLs kept, in order.
TEST_F(StorageTest, SpansWrittenManyToAStatementKeepTheirIdsAndValues) {
  auto w = Writer::create(db_path());
  ASSERT_TRUE(w.ok()) << w.status().message();
  Writer& wr = **w;
  std::vector<int64_t> ids;
  auto add = [&](int i) {
    SpanRow s;
    s.thread_id = 1;
    s.start_ns = 1000 * i;
    if (i % 7 != 0) s.dur_ns = i;  // every 7th never ended
    s.name_id = static_cast<uint32_t>(i % 3 + 1);
    s.depth = i % 2;
    if (i % 2 == 0) s.arg0 = -i;
    if (i % 5 == 0) s.arg2 = i * 10;
    ids.push_back(wr.add_span(s));
  };
  ASSERT_TRUE(wr.begin().ok());
  for (int i = 0; i < 70; ++i) add(i);  // two statements of 32, then 6 pending
  {
    // Not committed yet: the 6 pending are not in the file, and a reader sees no batch at all.
    auto r = Reader::open(db_path());
    ASSERT_TRUE(r.ok());
    auto spans = (*r)->all_spans();
    ASSERT_TRUE(spans.ok());
    EXPECT_TRUE(spans->empty());
  }
  ASSERT_TRUE(wr.commit().ok());
  add(70);  // outside a batch: written at once
  {
    auto r = Reader::open(db_path());
    ASSERT_TRUE(r.ok());
    auto spans = (*r)->all_spans();
    ASSERT_TRUE(spans.ok());
    ASSERT_EQ(spans->size(), 71u);
  }
  ASSERT_TRUE(wr.begin().ok());
  for (int i = 71; i < 100; ++i) add(i);
  ASSERT_TRUE(wr.commit().ok());
  ASSERT_TRUE(wr.finish().ok());
  auto r = Reader::open(db_path());
  ASSERT_TRUE(r.ok());
  auto spans = (*r)->all_spans();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 100u);
  for (int i = 0; i < 100; ++i) {
    const SpanRow& s = (*spans)[static_cast<size_t>(i)];
    EXPECT_EQ(s.id, ids[static_cast<size_t>(i)]) << i;
    EXPECT_EQ(s.id, i + 1) << i;
    EXPECT_EQ(s.start_ns, 1000 * i) << i;
    EXPECT_EQ(s.dur_ns.has_value(), i % 7 != 0) << i;
    if (s.dur_ns) {
      EXPECT_EQ(*s.dur_ns, i) << i;
    }
    EXPECT_EQ(s.name_id, static_cast<uint32_t>(i % 3 + 1)) << i;
    EXPECT_EQ(s.depth, i % 2) << i;
    EXPECT_EQ(s.arg0.has_value(), i % 2 == 0) << i;
    EXPECT_FALSE(s.arg1.has_value()) << i;
    EXPECT_EQ(s.arg2.has_value(), i % 5 == 0) << i;
    if (s.arg2) {
      EXPECT_EQ(*s.arg2, i * 10) << i;
    }
  }
}

TEST_F(StorageTest, FileIsPrivateAndSelfDescribing) {
  write_sample();
  struct stat st;
  ASSERT_EQ(::stat(db_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto r = Reader::open(db_path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*(*r)->db().query_int("SELECT count(*) FROM event_kinds"), static_cast<int64_t>(EventKind::kCount));
  EXPECT_EQ(*(*r)->db().query_int("SELECT count(*) FROM event_kinds WHERE id = 6 AND name = 'gpu_activity'"), 1);
  EXPECT_EQ(*(*r)->db().query_int("SELECT count(*) FROM units WHERE table_name = 'spans'"), 2);
  EXPECT_EQ(*(*r)->db().query_int("SELECT count(*) FROM span_view WHERE name = 'step' AND pid = 100"), 1);
}

TEST_F(StorageTest, WriterRefusesToOverwrite) {
  write_sample();
  auto w = Writer::create(db_path());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("File exists"), std::string::npos) << w.status().message();
}

// remove() takes the file and its side files, so that create() makes a new one there (--force);
// a file that is not there is no error.
TEST_F(StorageTest, RemoveTakesTheSideFilesToo) {
  write_sample();
  for (const char* suffix : {"-wal", "-shm"}) testing::write_file(db_path() + suffix, "left over");
  ASSERT_TRUE(Writer::remove(db_path()).ok());
  for (const char* suffix : {"", "-wal", "-shm"}) EXPECT_NE(::access((db_path() + suffix).c_str(), F_OK), 0) << suffix;
  EXPECT_TRUE(Writer::remove(db_path()).ok());
  EXPECT_TRUE(Writer::create(db_path()).ok());
}

TEST_F(StorageTest, NewerSchemaIsRefusedWithAnUpgradeHint) {
  write_sample();
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto r = Reader::open(db_path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("schema version 99"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("upgrade"), std::string::npos);
}

TEST_F(StorageTest, ForeignSqliteFileIsRefused) {
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto r = Reader::open(db_path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a stallscope recording"), std::string::npos) << r.status().message();
}

TEST_F(StorageTest, EmptyRandomAndMissingFilesAreRefused) {
  testing::write_file(db_path(), "");
  auto r = Reader::open(db_path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("empty"), std::string::npos) << r.status().message();

  std::string junk;
  for (int i = 0; i < 10000; ++i) junk.push_back(static_cast<char>((i * 7919) % 251));
  testing::write_file(db_path(), junk);
  r = Reader::open(db_path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a stallscope recording"), std::string::npos) << r.status().message();

  r = Reader::open(dir_.file("missing.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no such file"), std::string::npos) << r.status().message();

  r = Reader::open(dir_.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos) << r.status().message();
}

TEST_F(StorageTest, TruncatedFileIsRefused) {
  // Enough rows for several pages, so that cutting the file loses some.
  {
    auto w = Writer::create(db_path());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->begin().ok());
    for (int i = 0; i < 20000; ++i) {
      SpanRow s;
      s.thread_id = 1;
      s.start_ns = i * 10;
      s.dur_ns = 5;
      s.name_id = 1;
      (*w)->add_span(s);
    }
    ASSERT_TRUE((*w)->commit().ok());
    ASSERT_TRUE((*w)->finish().ok());
  }
  const auto size = std::filesystem::file_size(db_path());
  std::filesystem::resize_file(db_path(), size / 2);
  auto r = Reader::open(db_path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace stallscope
