// libFuzzer target: the dashboard's reader of a recording (RecordingTail, polled in parts as the
// dashboard does, into the SnapshotBuilder that makes its timeline) on a database whose SQLite
// structure is sound but whose rows are not (recording_edits.h).
#include <cstdint>
#include <string>

#include "tests/fuzz/recording_edits.h"
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
  return 0;
}
