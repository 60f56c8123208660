// The dashboard's background threads; see snapshot_source.h.
#include "ui/snapshot_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/procfs.h"
#include "ui/analysis_view.h"
#include "ui/overview.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_builder.h"

namespace stallscope::ui {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int64_t default_detail_rows(const std::vector<std::string>& paths) {
  const bool remote = std::any_of(paths.begin(), paths.end(), [](const std::string& p) { return Reader::is_uri(p); });
  return remote ? kRemoteDetailRows : SourceOptions{}.detail_rows;
}

SnapshotSource::SnapshotSource(std::string path, SourceOptions opt) : path_(std::move(path)), opt_(opt) {
  auto first = std::make_shared<Snapshot>();
  first->path = path_;
  current_ = std::move(first);
  reader_ = std::thread([this] { reader_loop(); });
  if (opt_.analysis) analyzer_ = std::thread([this] { analysis_loop(); });
}

SnapshotSource::~SnapshotSource() {
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (analyzer_.joinable()) analyzer_.join();
}

bool SnapshotSource::settled(const Snapshot& s) {
  if (s.state == SourceState::kLoading) return false;
  if (s.state == SourceState::kError) return true;
  return !s.analysis_pending;
}

bool SnapshotSource::wait_until(const std::function<bool(const Snapshot&)>& pred, int timeout_ms) {
  std::unique_lock<std::mutex> lock(parts_mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return pred(*current()); });
}

void SnapshotSource::publish_locked() {
  auto s = std::make_shared<Snapshot>();
  s->generation = ++generation_;
  s->path = path_;
  s->state = state_;
  s->error = error_;
  s->link_error = link_error_;
  s->timeline = timeline_;
  s->analysis = analysis_;
  s->analysis_pending = opt_.analysis && state_ != SourceState::kError &&
                        (analyzed_version_ != data_version_ || analyzed_window_version_ != window_version_);
  // Still running on the latest data counts as pending too: analyzed_version_ is set when a pass
  // starts, so a pass in flight is flagged by analysis_seconds_ < 0.
  if (analysis_seconds_ < 0) s->analysis_pending = true;
  s->analysis_error = analysis_error_;
  s->open_seconds = open_seconds_;
  s->first_timeline_seconds = first_timeline_seconds_;
  s->load_fraction = load_fraction_;
  s->file_bytes = file_bytes_;
  s->analysis_seconds = analysis_seconds_ < 0 ? last_analysis_seconds_ : analysis_seconds_;
  if (opt_.on_publish) opt_.on_publish(*s);
  std::shared_ptr<const Snapshot> next = std::move(s);
  {
    std::lock_guard<std::mutex> lock(current_mu_);
    current_.swap(next);
  }
  next.reset();  // the previous snapshot, released outside the lock
  cv_.notify_all();
}

void SnapshotSource::request_detail(int64_t t0, int64_t t1) {
  if (t1 < t0) return;
  {
    std::lock_guard<std::mutex> lock(parts_mu_);
    if (!windowed_) return;
    const bool held = t0 >= held_t0_ && (t1 <= held_t1_ || held_t1_ == INT64_MAX);
    if (held || (requested_ && requested_->first == t0 && requested_->second == t1)) return;
    requested_ = std::make_pair(t0, t1);
  }
  cv_.notify_all();
}

namespace {

// Where a long recording's detail comes from: its latest part, followed (`following`), or a window
// of the past, read once.
struct Detail {
  std::unique_ptr<RecordingTail> tail;
  std::unique_ptr<SnapshotBuilder> builder = std::make_unique<SnapshotBuilder>();
  bool following = true;
  int64_t t0 = INT64_MIN, t1 = INT64_MAX;
};

// A long recording's overview and where its latest `rows` rows begin; nullopt when the recording
// is read whole (small enough, or without summary tables).
struct LongRecording {
  std::shared_ptr<const Overview> overview;
  int64_t cut = 0;
  bool complete = false;  // the recording was complete when read: its overview is final
};
Result<std::optional<LongRecording>> plan_long(Reader& r, int64_t rows) {
  if (rows <= 0) return std::optional<LongRecording>{};
  Reader::Snapshot snapshot(r);
  // Over a link, this plan's calls and the overview's first cost one round trip.
  r.expect([&](Reader& x) {
    (void)x.has_summaries();
    (void)x.time_of_last_rows(rows);
    (void)x.end_ns_of_flushes_and_processes();
    (void)x.string_ids(kOverviewNames);
    (void)x.meta();
  });
  auto has = r.has_summaries();
  if (!has.ok()) return has.status();
  if (!*has) return std::optional<LongRecording>{};
  auto cut = r.time_of_last_rows(rows);
  if (!cut.ok()) return cut.status();
  if (!*cut) return std::optional<LongRecording>{};
  auto end = r.end_ns_of_flushes_and_processes();
  if (!end.ok()) return end.status();
  auto overview = read_overview(r, *end);
  if (!overview.ok()) return overview.status();
  auto meta = r.meta();
  if (!meta.ok()) return meta.status();
  auto c = meta->find("complete");
  return std::optional<LongRecording>{LongRecording{std::move(*overview), **cut, c != meta->end() && c->second == "1"}};
}

}  // namespace

void SnapshotSource::reader_loop() {
  const auto t0 = Clock::now();
  auto fail = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(parts_mu_);
    state_ = SourceState::kError;
    error_ = s.message();
    publish_locked();
  };
  // A remote recording's link went down (a transient error): what was read stays shown, the
  // header says so, and the reader tries again every second; true when the loop should go on.
  // Any other error ends the reading as `fail`.
  auto lost = [&](const Status& s) {
    if (!s.transient()) {
      fail(s);
      return false;
    }
    std::unique_lock<std::mutex> lock(parts_mu_);
    if (link_error_ != s.message()) {
      link_error_ = s.message();
      publish_locked();
    }
    return !cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });
  };
  auto link_up = [&] {
    std::lock_guard<std::mutex> lock(parts_mu_);
    if (link_error_.empty()) return;
    link_error_.clear();
    publish_locked();
  };
  auto opened = RecordingTail::open(path_);
  if (!opened.ok()) return fail(opened.status());
  Detail d;
  d.tail = std::move(*opened);

  std::unique_ptr<Reader> side;  // the overview's and the cuts' reads
  std::shared_ptr<const Overview> overview;
  auto overview_at = Clock::now();
  double overview_s = 0;
  bool overview_final = false;  // read once the recording was complete: nothing will change it
  bool fine = false;            // the overview is at the fine level (read once the detail is in)

  // Puts a new window in place of the one held: the latest part from t0 (t1 = INT64_MAX), polled
  // from here on, or [t0, t1], read at once.
  auto switch_to = [&](int64_t w0, int64_t w1) -> Status {
    auto tail = RecordingTail::open(path_);
    if (!tail.ok()) return tail.status();
    Detail next;
    next.tail = std::move(*tail);
    next.t0 = w0;
    next.t1 = w1;
    next.following = w1 == INT64_MAX;
    next.builder->set_window(overview, w0, w1, opt_.detail_rows);
    if (next.following) {
      if (Status s = next.tail->start_from(w0); !s.ok()) return s;
    } else {
      auto read = next.tail->read_window(*next.builder, w0, w1);
      if (!read.ok()) return read.status();
    }
    d = std::move(next);
    std::lock_guard<std::mutex> lock(parts_mu_);
    windowed_ = true;
    held_t0_ = w0;
    held_t1_ = w1;
    // The analysis follows: a window of the past is analysed as such, the latest part as usual.
    const std::optional<std::pair<int64_t, int64_t>> analysed =
        w1 == INT64_MAX ? std::nullopt : std::optional<std::pair<int64_t, int64_t>>(std::make_pair(w0, w1));
    if (analysed != analysis_window_) {
      analysis_window_ = analysed;
      ++window_version_;
    }
    return Status::Ok();
  };
  // A recording with more than detail_rows rows (at open, or grown to twice that while followed):
  // the overview of the whole run and the detail of its latest detail_rows rows; `*cut` says
  // whether it was cut (a recording that fits is read whole).
  auto cut_to_latest = [&](bool* cut) -> Status {
    *cut = false;
    if (!side) {
      auto r = Reader::open(path_);
      if (!r.ok()) return r.status();
      side = std::move(*r);
    }
    overview_at = Clock::now();
    auto plan = plan_long(*side, opt_.detail_rows);
    if (!plan.ok()) return plan.status();
    if (!*plan || (d.following && (*plan)->cut <= d.t0)) return Status::Ok();
    overview = (*plan)->overview;
    overview_s = seconds_since(overview_at);
    overview_final = (*plan)->complete;
    fine = false;
    *cut = true;
    return switch_to((*plan)->cut, INT64_MAX);
  };
  if (opt_.detail_rows > 0) {
    bool cut = false;
    if (Status s = cut_to_latest(&cut); !s.ok()) return fail(in_file(path_, s));
  }

  bool first = true;    // the first poll
  bool loading = true;  // until the reader has caught up with what was committed at open
  bool fresh = false;   // a new window is in place: publish it even if nothing arrived
  int64_t rows_read = 0;
  int64_t recheck_rows = 2 * opt_.detail_rows;  // the followed rows past which the part is cut again
  while (true) {
    std::optional<std::pair<int64_t, int64_t>> want;
    {
      std::lock_guard<std::mutex> lock(parts_mu_);
      want.swap(requested_);
      if (want) {
        held_t0_ = want->first;
        held_t1_ = want->second;
      }
    }
    if (want && overview) {
      if (Status s = switch_to(want->first, want->second); !s.ok()) {
        if (!lost(in_file(path_, s))) return;
        std::lock_guard<std::mutex> lock(parts_mu_);
        if (!requested_) requested_ = want;  // asked again once the link is back
        continue;
      }
      fresh = true;
    }
    PollStats polled;
    if (d.following) {
      auto p = d.tail->poll(*d.builder, opt_.load_part_rows);
      // A poll failed after a good open (file removed, damaged while written): keep what was read,
      // say why, and stop following. A remote one whose link dropped: the same poll again later.
      if (!p.ok()) {
        if (!lost(p.status())) return;
        continue;
      }
      polled = *p;
      link_up();
    }
    const bool more = polled.pending > 0;
    // The followed part has grown to twice the budget: cut to the latest detail_rows (again).
    if (opt_.detail_rows > 0 && d.following && !more && d.builder->rows() > recheck_rows) {
      bool cut = false;
      if (Status s = cut_to_latest(&cut); !s.ok()) {
        if (!lost(in_file(path_, s))) return;
        continue;
      }
      // Not cut (no summary tables, or drains too coarse to cut later): asked again only once
      // another half of the budget has come.
      recheck_rows = cut ? 2 * opt_.detail_rows : d.builder->rows() + opt_.detail_rows / 2;
      if (cut) {
        fresh = true;
        continue;  // read the new part at once
      }
    }
    // Once the detail is in and shown, the overview at a finer level (kMaxFineBuckets); while
    // live, it follows the summaries as they grow (at most every second, and at most a tenth of
    // the time), and once more when the recording is complete.
    const bool complete = d.builder->complete();
    const bool due = complete || seconds_since(overview_at) > std::max(1.0, 10 * overview_s);
    if (overview && !more && !loading && (!fine || (!overview_final && due))) {
      overview_at = Clock::now();
      fine = true;
      auto end = [&]() -> Result<std::shared_ptr<Overview>> {
        Reader::Snapshot snapshot(*side);
        auto e = side->end_ns_of_flushes_and_processes();
        if (!e.ok()) return e.status();
        return read_overview(*side, *e, Overview::kMaxFineBuckets);
      }();
      if (!end.ok()) {
        if (!lost(in_file(path_, end.status()))) return;
        fine = false;
        continue;
      }
      overview = std::move(*end);
      overview_s = seconds_since(overview_at);
      overview_final = complete;
      fresh = true;
      d.builder->set_window(overview, d.t0, d.t1, opt_.detail_rows);
    }
    SourceState state;
    std::shared_ptr<const Timeline> tl;
    if (d.builder->dirty() || first || fresh) tl = d.builder->publish();
    // Another window or overview of the same data: the analysis, which reads the file itself, has
    // nothing new to run on.
    const bool same_data = fresh && polled.rows == 0 && !first;
    fresh = false;
    rows_read += polled.rows;
    {
      std::lock_guard<std::mutex> lock(parts_mu_);
      if (tl || first) file_bytes_ = d.tail->file_bytes();
      if (tl) {
        timeline_ = tl;
        if (!same_data) ++data_version_;
        if (first_timeline_seconds_ < 0) first_timeline_seconds_ = seconds_since(t0);
      }
      if (loading) {
        load_fraction_ = more ? static_cast<double>(rows_read) / static_cast<double>(rows_read + polled.pending) : 1.0;
        open_seconds_ = seconds_since(t0);
        loading = more;
      }
      if (loading) {
        state_ = SourceState::kLoading;  // with the timeline so far
      } else if (timeline_ && timeline_->complete) {
        state_ = SourceState::kFinished;
      } else if (timeline_ && !timeline_->complete) {
        state_ = d.tail->recorder_alive(timeline_->meta) ? SourceState::kLive : SourceState::kCutOff;
      }
      if (tl || first) publish_locked();
      first = false;
      state = state_;
    }
    if (more) {  // the next part at once
      std::lock_guard<std::mutex> lock(parts_mu_);
      if (stop_) return;
      continue;
    }
    std::unique_lock<std::mutex> lock(parts_mu_);
    if (state == SourceState::kFinished) {
      // Read to the end: nothing more will come. A long recording reads its fine overview, then
      // waits for the view's requests.
      if (!overview) return;
      if (!fine) continue;
      cv_.wait(lock, [&] { return stop_ || requested_.has_value(); });
      if (stop_) return;
      continue;
    }
    const int wait = state == SourceState::kLive ? opt_.poll_ms : opt_.cut_off_poll_ms;
    if (cv_.wait_for(lock, std::chrono::milliseconds(wait), [&] { return stop_ || requested_.has_value(); })) {
      if (stop_) return;
    }
  }
}

void SnapshotSource::analysis_loop() {
  auto last_start = Clock::now() - std::chrono::hours(1);
  Clock::duration last_duration{};
  while (true) {
    uint64_t version = 0;
    analysis::DetailBudget budget;
    {
      std::unique_lock<std::mutex> lock(parts_mu_);
      // Not while a large recording is still being read: both would share the same cores.
      cv_.wait(lock, [&] {
        return stop_ || ((data_version_ != analyzed_version_ || window_version_ != analyzed_window_version_) &&
                         state_ != SourceState::kError && state_ != SourceState::kLoading);
      });
      if (stop_) return;
      // Rate limit while live: at most one pass per analysis_interval_ms, and at most a fifth of
      // one core over time (the training job shares the machine). A window the view moved to is
      // analysed at once: the user is waiting for it.
      const auto gap = std::max<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(opt_.analysis_interval_ms), last_duration * 4);
      const auto due = last_start + gap;
      if (window_version_ == analyzed_window_version_ && Clock::now() < due) {
        if (cv_.wait_until(lock, due, [&] { return stop_; })) return;
      }
      version = data_version_;
      analyzed_version_ = version;
      analyzed_window_version_ = window_version_;
      budget.window = analysis_window_;
      analysis_seconds_ = -1;  // running
      publish_locked();
    }
    last_start = Clock::now();
    // A long recording's window of the past is analysed as `report --detail T0:T1` would; else its
    // latest part, as `report` reads it.
    auto view = run_analysis(path_, budget);
    std::lock_guard<std::mutex> lock(parts_mu_);
    if (view.ok()) {
      analysis_ = *view;
      analysis_error_.clear();
    } else if (view.status().transient()) {
      // The link to the node is down: the last analysis stays, and runs again once it is back.
      analyzed_version_ = data_version_ - 1;
    } else {
      analysis_error_ = view.status().message();
    }
    analysis_seconds_ = seconds_since(last_start);
    last_analysis_seconds_ = analysis_seconds_;
    last_duration = Clock::now() - last_start;
    publish_locked();
  }
}

}  // namespace stallscope::ui
