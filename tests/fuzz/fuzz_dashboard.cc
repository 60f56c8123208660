// libFuzzer target: the dashboard's reader of a recording (RecordingTail, polled in parts as the
// dashboard does, into the SnapshotBuilder that makes its timeline) on a database whose SQLite
// structure is sound but whose rows are not (recording_edits.h); then a long recording's reads:
// the overview from the summaries, the latest part from a cut, a window of the past, and the
// window a view would ask for.
#include <cstdint>
#include <string>

#include "storage/reader.h"
#include "tests/fuzz/recording_edits.h"
#include "ui/overview.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_builder.h"

using namespace stallscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::mutated_recording(data, size, "dashboard");
  auto tail = ui::RecordingTail::open(path);
  if (!tail.ok()) return 0;
  ui::SnapshotBuilder builder;
  for (int i = 0; i < 64; ++i) {  // parts of 50 rows, as a large recording is read
    auto polled = (*tail)->poll(builder, 50);
    if (!polled.ok() || polled->pending == 0) break;
  }
  (void)builder.publish();

  auto reader = Reader::open(path);
  if (!reader.ok()) return 0;
  auto end = (*reader)->end_ns_of_flushes_and_processes();
  auto overview = ui::read_overview(**reader, end.ok() ? *end : 0);
  if (!overview.ok()) return 0;
  const ui::Overview& o = **overview;
  const int64_t mid = o.first_ns / 2 + o.end_ns / 2;
  ui::SnapshotBuilder latest;
  latest.set_window(*overview, mid, INT64_MAX, 100);
  auto from = ui::RecordingTail::open(path);
  if (from.ok() && (*from)->start_from(mid).ok()) (void)(*from)->poll(latest, 0);
  const auto tl = latest.publish();
  (void)ui::wanted_detail(*tl, static_cast<double>(o.first_ns), static_cast<double>(mid));
  ui::SnapshotBuilder past;
  past.set_window(*overview, o.first_ns, mid, 100);
  auto window = ui::RecordingTail::open(path);
  if (window.ok()) (void)(*window)->read_window(past, o.first_ns, mid);
  (void)past.publish();
  return 0;
}
