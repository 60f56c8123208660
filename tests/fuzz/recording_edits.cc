// The mutated recordings of the recording fuzz targets (recording_edits.h).
#include "tests/fuzz/recording_edits.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/analysis/fixture.h"
#include "tests/fuzz/scratch.h"

namespace stallscope::fuzz {
namespace {

constexpr const char* kTables[] = {"meta",     "strings",        "processes", "threads",        "spans",
                                   "instants", "counter_tracks", "counters",  "span_summaries", "instant_summaries"};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::string& template_bytes() {
  static const std::string bytes = [] {
    const std::string& path = scratch_path("template.db");
    ::unlink(path.c_str());
    {
      testing::RecordingBuilder b(path);
      testing::SimConfig c;
      c.epochs = 2;
      c.batches_per_epoch = 6;
      c.num_workers = 2;
      c.worker_cpu = 0.8;
      c.worker_runq = 0.1;
      c.worker_private_start = 100 << 20;
      c.worker_private_growth = 10 << 20;
      c.fetch_cpu = 0.7;
      c.compute_cpu = 1.0;
      testing::simulate(b, c);
    }
    std::string out = read_all(path);
    ::unlink(path.c_str());
    return out;
  }();
  return bytes;
}

struct Cursor {
  const uint8_t* p;
  size_t n;
  bool take(void* out, size_t k) {
    if (n < k) return false;
    std::memcpy(out, p, k);
    p += k;
    n -= k;
    return true;
  }
};

void apply_edits(sqlite3* db, Cursor in) {
  uint8_t head[4], kind;
  while (in.take(head, 4) && in.take(&kind, 1)) {
    const std::string table = kTables[head[0] % (sizeof kTables / sizeof kTables[0])];
    std::vector<std::string> columns;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, ("PRAGMA table_info(" + table + ")").c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW)
        columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
    }
    sqlite3_finalize(st);
    if (columns.empty()) continue;
    // The summary tables have no rowid (WITHOUT ROWID): an edit there hits every row of a bucket.
    const std::string key = table == "meta"                                 ? "key"
                            : table.find("_summaries") != std::string::npos ? "bucket"
                                                                            : "rowid";
    const int row = head[1] | (head[2] << 8);
    const std::string pick =
        "(SELECT " + key + " FROM " + table + " LIMIT 1 OFFSET (?1 % max(1, (SELECT count(*) FROM " + table + "))))";
    std::string sql;
    if (kind % 5 == 4) {
      sql = "DELETE FROM " + table + " WHERE " + key + " = " + pick;
    } else {
      sql = "UPDATE " + table + " SET " + columns[head[3] % columns.size()] + " = ?2 WHERE " + key + " = " + pick;
    }
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) continue;
    sqlite3_bind_int(st, 1, row);
    switch (kind % 5) {
      case 1: {
        int64_t v = 0;
        in.take(&v, 8);
        sqlite3_bind_int64(st, 2, v);
        break;
      }
      case 2: {
        double v = 0;
        in.take(&v, 8);
        sqlite3_bind_double(st, 2, v);
        break;
      }
      case 3: {
        uint8_t len = 0;
        in.take(&len, 1);
        const size_t k = std::min<size_t>(len, in.n);
        sqlite3_bind_text(st, 2, reinterpret_cast<const char*>(in.p), static_cast<int>(k), SQLITE_TRANSIENT);
        in.p += k;
        in.n -= k;
        break;
      }
      default: sqlite3_bind_null(st, 2);
    }
    (void)sqlite3_step(st);  // a constraint may refuse it: that edit is skipped
    sqlite3_finalize(st);
  }
}

}  // namespace

std::string mutated_recording(const uint8_t* data, size_t size, const std::string& tag) {
  const std::string& path = scratch_path(tag + ".db");
  const std::string& bytes = template_bytes();
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) apply_edits(db, Cursor{data, size});
  sqlite3_close(db);
  return path;
}

}  // namespace stallscope::fuzz
