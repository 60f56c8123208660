// SnapshotSource: one recording, followed by two background threads, published as immutable
// snapshots. The render thread calls current() and never touches SQLite.
//
//   reader thread:   RecordingTail::poll (new rows since the last poll) -> SnapshotBuilder ->
//                    publish. Live recordings are polled every poll_ms; a finished one is read
//                    once. This is what makes new data visible within a quarter of a second.
//                    A large backlog is read in parts (load_part_rows), each published: the
//                    state stays kLoading, with the timeline so far, until the reader caught up.
//   analysis thread: load_session + analyze on its own read-only connection whenever the data
//                    changed (at most every analysis_interval_ms; not while loading) -> publish.
//                    Large recordings show their timeline first and the analysis when it is ready.
//
// Live and replay are one code path: a recording whose meta says complete=1 is simply not polled
// again. complete=0 with the recorder process gone is a recording that was cut off: what was
// flushed is shown (and polled slowly, in case it was only paused).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ui/snapshot.h"

namespace stallscope::ui {

// A remote recording's detail window, in rows (the dashboard's and --detail-rows's default for
// ssh:// and tcp://): what a 10 MB/s link brings in about a second.
constexpr int64_t kRemoteDetailRows = 250'000;

struct SourceOptions {
  int poll_ms = 50;                // live polling period
  int cut_off_poll_ms = 500;       // polling period of a recording whose recorder is gone
  int analysis_interval_ms = 250;  // the analysis reruns at most this often while live, and never
                                   // more than a fifth of the time: a pass that took 2 s waits 8 s
  bool analysis = true;            // run the analysis thread at all
  // A backlog larger than this (opening a big recording, or joining a long live one) is read in
  // parts of about this many rows, each published as it lands: the timeline shows within a part's
  // read time and fills in. 0: one read.
  int64_t load_part_rows = 1'000'000;
  // A recording with more rows than this (and the summary tables) is held a window at a time: its
  // overview from the summaries, and the detail of its latest detail_rows rows, followed while
  // live (cut again to the latest detail_rows when it has grown to twice that), or of the window
  // the view asks for (request_detail). Memory then stays bounded whatever the length. 0: every
  // row is read, whatever the size.
  int64_t detail_rows = 2'000'000;
  // Called with every snapshot published, on the publishing thread, under the source's lock:
  // keep it short and do not call back into the source. For tests.
  std::function<void(const Snapshot&)> on_publish;
};

// The detail window for these recordings when the user gives none (--detail-rows): a remote
// recording's detail crosses a network, so where any is read over a link (ssh://, tcp://) a
// smaller one (kRemoteDetailRows), else SourceOptions' own.
int64_t default_detail_rows(const std::vector<std::string>& paths);

class SnapshotSource {
 public:
  explicit SnapshotSource(std::string path, SourceOptions opt = {});
  ~SnapshotSource();
  SnapshotSource(const SnapshotSource&) = delete;
  SnapshotSource& operator=(const SnapshotSource&) = delete;

  // The latest snapshot (never null).
  std::shared_ptr<const Snapshot> current() const {
    std::lock_guard<std::mutex> lock(current_mu_);
    return current_;
  }
  // Waits until `pred` holds for the current snapshot or `timeout_ms` passed; true if it held.
  bool wait_until(const std::function<bool(const Snapshot&)>& pred, int timeout_ms);
  // Settled: first read done (or failed) and, unless disabled, the analysis ran on the latest data.
  static bool settled(const Snapshot& s);
  const std::string& path() const { return path_; }
  // A long recording (Timeline::windowed): read the detail of [t0, t1] in place of the window held
  // now, or, with t1 = INT64_MAX, the part from t0 on, followed while live. Ignored when that lies
  // within the window held or being read, and for recordings read whole. Any thread; returns at
  // once (the reader thread reads it and publishes).
  void request_detail(int64_t t0, int64_t t1);

 private:
  void reader_loop();
  void analysis_loop();
  // Builds and stores a new snapshot from the latest parts; callers hold parts_mu_.
  void publish_locked();

  std::string path_;
  SourceOptions opt_;
  // The published snapshot behind a small lock of its own (held only to copy the pointer).
  // libstdc++ 12's std::atomic<std::shared_ptr> unlocks with relaxed order in load(), which
  // ThreadSanitizer reports as a race with the next store.
  mutable std::mutex current_mu_;
  std::shared_ptr<const Snapshot> current_;

  std::mutex parts_mu_;  // guards the parts below and the condition variable
  std::condition_variable cv_;
  std::shared_ptr<const Timeline> timeline_;
  std::shared_ptr<const AnalysisView> analysis_;
  SourceState state_ = SourceState::kLoading;
  std::string error_;
  std::string link_error_;  // a remote recording whose link is down, while the reader retries
  std::string analysis_error_;
  int64_t file_bytes_ = -1;
  double open_seconds_ = 0, analysis_seconds_ = 0;  // analysis_seconds_ < 0: a pass is running
  double first_timeline_seconds_ = -1;
  double load_fraction_ = 0;
  double last_analysis_seconds_ = 0;  // the last finished pass
  uint64_t generation_ = 0;
  uint64_t data_version_ = 0;      // bumped by the reader when the data changed
  uint64_t analyzed_version_ = 0;  // the data version the analysis last started on
  // A long recording held a window of the past: the analysis covers that window (not the latest
  // part); bumped when it changes.
  std::optional<std::pair<int64_t, int64_t>> analysis_window_;
  uint64_t window_version_ = 0, analyzed_window_version_ = 0;
  bool stop_ = false;
  // Long recordings: the window asked for and not yet taken up by the reader, and the one held (or
  // being read).
  std::optional<std::pair<int64_t, int64_t>> requested_;
  int64_t held_t0_ = INT64_MIN, held_t1_ = INT64_MAX;
  bool windowed_ = false;

  std::thread reader_, analyzer_;
};

}  // namespace stallscope::ui
