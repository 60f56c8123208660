// Building the summaries of an older recording; see upgrade.h.
#include "storage/upgrade.h"

#include <unistd.h>

#include <filesystem>
#include <memory>

#include "storage/row_decode.h"
#include "storage/rows.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/summaries.h"

namespace stallscope {
namespace {

constexpr int64_t kRowsPerWrite = 200'000;  // buckets written (and forgotten) this often

bool writable(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  // The journal goes beside the file.
  return ::access(path.c_str(), W_OK) == 0 && ::access(dir.empty() ? "." : dir.c_str(), W_OK | X_OK) == 0;
}

Result<std::string> meta_value(Db& db, const char* key) {
  auto st = db.prepare("SELECT value FROM meta WHERE key = ?");
  if (!st.ok()) return st.status();
  (*st)->bind(1, std::string_view(key));
  if ((*st)->step()) return (*st)->text(0);
  if (!(*st)->status().ok()) return (*st)->status();
  return std::string();
}

// Streams `sql`'s rows into `add`, writing the summaries every kRowsPerWrite rows.
Status feed(Db& db, Summaries& sums, std::string_view sql, const std::function<void(Stmt&)>& add, int64_t& done,
            int64_t total, const UpgradeProgress& progress) {
  auto st = db.prepare(sql);
  if (!st.ok()) return st.status();
  while ((*st)->step()) {
    add(**st);
    if (++done % kRowsPerWrite == 0) {
      if (Status s = sums.write(); !s.ok()) return s;
      if (progress) progress(done, total);
    }
  }
  return (*st)->status();
}

// Builds the summary tables (TEMP ones with `temporary`) from the detail rows, inside the caller's
// transaction.
Status build(Db& db, bool temporary, int64_t& done, const UpgradeProgress& progress) {
  if (Status s = create_summary_tables(db, temporary); !s.ok()) return s;
  Summaries sums(db);
  if (Status s = sums.prepare(); !s.ok()) return s;
  sums.set_queue_from_rows(false);  // rows come table by table: the queues read them in time order below
  {
    auto st = db.prepare("SELECT id, value FROM strings");
    if (!st.ok()) return st.status();
    while ((*st)->step()) sums.on_string(static_cast<uint32_t>((*st)->int64(0)), (*st)->text(1));
    if (!(*st)->status().ok()) return (*st)->status();
  }
  {
    auto st = db.prepare("SELECT id, pid FROM processes");
    if (!st.ok()) return st.status();
    while ((*st)->step()) sums.on_process((*st)->int64(0), (*st)->int64(1));
    if (!(*st)->status().ok()) return (*st)->status();
    auto th = db.prepare("SELECT id, process_id FROM threads");
    if (!th.ok()) return th.status();
    while ((*th)->step()) sums.on_thread((*th)->int64(0), (*th)->int64(1));
    if (!(*th)->status().ok()) return (*th)->status();
  }
  auto total = db.query_int(
      "SELECT (SELECT count(*) FROM spans) + (SELECT count(*) FROM instants) + (SELECT count(*) FROM counters) + "
      "(SELECT count(*) FROM gpu_activities)");
  if (!total.ok()) return total.status();
  // In id order: the order they were written in, close to time order, so buckets are forgotten
  // as the rows move on and memory stays small.
  const std::string spans = std::string("SELECT ") + kSpanColumns + " FROM spans ORDER BY id";
  const std::string instants = std::string("SELECT ") + kInstantColumns + " FROM instants ORDER BY id";
  const std::string gpu = std::string("SELECT ") + kGpuActivityColumns + " FROM gpu_activities ORDER BY id";
  // Instants first: a worker's dl.worker_start then comes before its collates, which size the
  // hand-offs of handoff_summaries.
  Status s = feed(
      db, sums, instants, [&sums](Stmt& r) { sums.add_instant(decode_instant(r)); }, done, *total, progress);
  if (!s.ok()) return s;
  s = feed(
      db, sums, spans, [&sums](Stmt& r) { sums.add_span(decode_span(r)); }, done, *total, progress);
  if (!s.ok()) return s;
  s = feed(
      db, sums, "SELECT track_id, ts_ns, value FROM counters ORDER BY rowid",
      [&sums](Stmt& r) {
        sums.add_counter(CounterRow{r.int64(0), r.int64(1), r.real(2)});
      },
      done, *total, progress);
  if (!s.ok()) return s;
  s = feed(
      db, sums, gpu, [&sums](Stmt& r) { sums.add_gpu(decode_gpu_activity(r)); }, done, *total, progress);
  if (!s.ok()) return s;
  if (Status q = sums.build_queues([](int64_t) { return true; }); !q.ok()) return q;
  if (Status w = sums.write(); !w.ok()) return w;
  if (progress) progress(done, *total);
  if (temporary) return Status::Ok();
  if (Status m = db.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('summaries_built_on_open', '1')"); !m.ok()) {
    return m;
  }
  return db.exec("PRAGMA user_version = 2");
}

}  // namespace

Result<UpgradeOutcome> upgrade_to_summaries(const std::string& path, const UpgradeProgress& progress) {
  UpgradeOutcome out;
  {
    auto db = Db::open(path, Db::Mode::kReadOnly);
    auto ver = db.ok() && check_schema(**db).ok() ? (*db)->query_int("PRAGMA user_version")
                                                  : Result<int64_t>(Status::Error("unreadable"));
    if (!ver.ok()) {
      out.what = UpgradeOutcome::What::kUnreadable;
      return out;
    }
    if (*ver >= 2) return out;
    auto complete = meta_value(**db, "complete");
    if (!complete.ok()) return complete.status();
    if (*complete != "1") {
      out.what = UpgradeOutcome::What::kNotFinished;
      return out;
    }
  }
  if (!writable(path)) {
    out.what = UpgradeOutcome::What::kNotWritable;
    return out;
  }
  auto db = Db::open(path, Db::Mode::kReadWrite);
  if (!db.ok()) return db.status();
  if (Status s = (*db)->exec("BEGIN IMMEDIATE"); !s.ok())
    return Status::Error("cannot write " + path + ": " + s.message());
  // Another reader may have upgraded it in between.
  auto ver = (*db)->query_int("PRAGMA user_version");
  if (ver.ok() && *ver >= 2) {
    (void)(*db)->exec("ROLLBACK");
    return out;
  }
  Status s = ver.ok() ? build(**db, false, out.rows, progress) : ver.status();
  if (s.ok()) s = (*db)->exec("COMMIT");
  if (!s.ok()) {
    (void)(*db)->exec("ROLLBACK");  // the file stays as it was
    return Status::Error("cannot build the summaries of " + path + ": " + s.message());
  }
  out.what = UpgradeOutcome::What::kUpgraded;
  return out;
}

Status build_temporary_summaries(Db& db, const UpgradeProgress& progress) {
  if (Status s = db.exec("BEGIN"); !s.ok()) return s;
  int64_t done = 0;
  Status s = build(db, true, done, progress);
  if (s.ok()) s = db.exec("COMMIT");
  if (!s.ok()) {
    (void)db.exec("ROLLBACK");
    return Status::Error("cannot build the summaries of " + db.path() + " for reading: " + s.message());
  }
  return s;
}

}  // namespace stallscope
