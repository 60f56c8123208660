// libFuzzer target: every reader of a recording that `report` and `export` use (storage's Reader,
// the analysis behind `report`, its text and JSON, `export`'s Perfetto trace and CSV files) on a
// database whose SQLite structure is sound but whose rows are not (recording_edits.h); then the
// same rows as an older recording whose summaries `report` builds (storage/upgrade.h).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "analysis/over_time.h"
#include "analysis/report.h"
#include "analysis/session.h"
#include "export/csv.h"
#include "export/perfetto_json.h"
#include "storage/reader.h"
#include "storage/sqlite.h"
#include "storage/upgrade.h"
#include "tests/fuzz/recording_edits.h"
#include "tests/fuzz/scratch.h"

using namespace stallscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::mutated_recording(data, size, "recording");
  auto session = analysis::load_session(path);
  if (session.ok()) {
    analysis::Report r = analysis::analyze(*session);
    if (auto reader = Reader::open(path); reader.ok()) {  // the report's over-time table
      auto over_time = analysis::over_time(**reader, r);
      if (over_time.ok()) r.over_time = std::move(*over_time);
    }
    (void)analysis::render_text(r);
    (void)analysis::to_json(r).dump();
  }
  if (auto reader = Reader::open(path); reader.ok()) {  // a long recording's latest part
    analysis::DetailBudget budget;
    budget.max_rows = static_cast<int64_t>(size % 7);  // a few events: some drains are cut off
    auto from = analysis::choose_detail_from(**reader, budget);
    analysis::LoadOptions options;
    options.detail_from_ns = from.ok() && *from ? **from : int64_t{size % 3 == 0 ? INT64_MIN : 1'000'000'000};
    if (auto part = analysis::load_session(**reader, options); part.ok()) {
      analysis::Report r = analysis::analyze(*part);
      auto over_time = analysis::over_time(**reader, r);
      if (over_time.ok()) r.over_time = std::move(*over_time);
      (void)analysis::render_text(r);
      (void)analysis::to_json(r).dump();
    }
  }
  if (auto reader = Reader::open(path); reader.ok()) {
    static std::FILE* devnull = std::fopen("/dev/null", "w");
    auto sink = exporting::perfetto_json_sink(devnull);
    (void)exporting::export_recording(**reader, *sink);
  }
  if (auto reader = Reader::open(path); reader.ok()) {
    static const std::string csv_dir = [] {
      const std::string& d = fuzz::scratch_path("csv");
      std::filesystem::create_directories(d);
      return d;
    }();
    auto sink = exporting::csv_sink(csv_dir);
    (void)exporting::export_recording(**reader, *sink);
  }
  if (auto db = Db::open(path, Db::Mode::kReadWrite); db.ok()) {
    (void)(*db)->exec(
        "DROP TABLE span_summaries; DROP TABLE instant_summaries; DROP TABLE counter_summaries; "
        "DROP TABLE gpu_summaries; DROP TABLE handoff_summaries; DROP TABLE queue_summaries; PRAGMA user_version = 1; "
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('complete', '1')");
  }
  if (auto reader = Reader::open(path); reader.ok()) {  // read-only: summaries for the read
    (void)(*reader)->build_temporary_summaries();
  }
  (void)upgrade_to_summaries(path);
  return 0;
}
