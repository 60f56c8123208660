// The dashboard's background threads; see snapshot_source.h.
#include "ui/snapshot_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "common/procfs.h"
#include "ui/analysis_view.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_builder.h"

namespace stallscope::ui {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Whether the process that drains the recording still runs (on this machine).
bool recorder_alive(const std::map<std::string, std::string>& meta) {
  auto pid_it = meta.find("owner_pid");
  if (pid_it == meta.end()) return false;
  auto host_it = meta.find("host");
  if (host_it != meta.end()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && host_it->second != host) return false;
  }
  char* end = nullptr;
  const long pid = std::strtol(pid_it->second.c_str(), &end, 10);
  if (end == pid_it->second.c_str() || pid <= 0) return false;
  return procfs::alive(static_cast<int>(pid));
}

// The database's size with its write-ahead log (most of a live recording's newest rows); -1 when
// the file cannot be read.
int64_t database_bytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  int64_t bytes = st.st_size;
  if (::stat((path + "-wal").c_str(), &st) == 0) bytes += st.st_size;
  return bytes;
}

}  // namespace

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
  s->timeline = timeline_;
  s->analysis = analysis_;
  s->analysis_pending = opt_.analysis && state_ != SourceState::kError && analyzed_version_ != data_version_;
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

void SnapshotSource::reader_loop() {
  const auto t0 = Clock::now();
  auto tail = RecordingTail::open(path_);
  if (!tail.ok()) {
    std::lock_guard<std::mutex> lock(parts_mu_);
    state_ = SourceState::kError;
    error_ = tail.status().message();
    publish_locked();
    return;
  }
  SnapshotBuilder builder;
  bool first = true;    // the first poll
  bool loading = true;  // until the reader has caught up with what was committed at open
  int64_t rows_read = 0;
  while (true) {
    auto polled = (*tail)->poll(builder, opt_.load_part_rows);
    const bool more = polled.ok() && polled->pending > 0;
    SourceState state;
    std::shared_ptr<const Timeline> tl;
    if (polled.ok() && (builder.dirty() || first)) tl = builder.publish();
    if (polled.ok()) rows_read += polled->rows;
    {
      std::lock_guard<std::mutex> lock(parts_mu_);
      if (!polled.ok()) {
        // A poll failed after a good open (file removed, damaged while written): keep what was
        // read, say why, and stop following.
        state_ = SourceState::kError;
        error_ = polled.status().message();
        publish_locked();
        return;
      }
      if (tl || first) file_bytes_ = database_bytes(path_);
      if (tl) {
        timeline_ = tl;
        ++data_version_;
        if (first_timeline_seconds_ < 0) first_timeline_seconds_ = seconds_since(t0);
      }
      if (loading) {
        load_fraction_ = more ? static_cast<double>(rows_read) / static_cast<double>(rows_read + polled->pending) : 1.0;
        open_seconds_ = seconds_since(t0);
        loading = more;
      }
      if (loading) {
        state_ = SourceState::kLoading;  // with the timeline so far
      } else if (tl && tl->complete) {
        state_ = SourceState::kFinished;
      } else if (timeline_ && !timeline_->complete) {
        state_ = recorder_alive(timeline_->meta) ? SourceState::kLive : SourceState::kCutOff;
      }
      if (tl || first) publish_locked();
      first = false;
      state = state_;
    }
    if (state == SourceState::kFinished) return;
    if (more) {  // the next part at once
      std::lock_guard<std::mutex> lock(parts_mu_);
      if (stop_) return;
      continue;
    }
    std::unique_lock<std::mutex> lock(parts_mu_);
    const int wait = state == SourceState::kLive ? opt_.poll_ms : opt_.cut_off_poll_ms;
    if (cv_.wait_for(lock, std::chrono::milliseconds(wait), [&] { return stop_; })) return;
  }
}

void SnapshotSource::analysis_loop() {
  auto last_start = Clock::now() - std::chrono::hours(1);
  Clock::duration last_duration{};
  while (true) {
    uint64_t version = 0;
    {
      std::unique_lock<std::mutex> lock(parts_mu_);
      // Not while a large recording is still being read: both would share the same cores.
      cv_.wait(lock, [&] {
        return stop_ ||
               (data_version_ != analyzed_version_ && state_ != SourceState::kError && state_ != SourceState::kLoading);
      });
      if (stop_) return;
      // Rate limit while live: at most one pass per analysis_interval_ms, and at most a fifth of
      // one core over time (the training job shares the machine).
      const auto gap = std::max<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(opt_.analysis_interval_ms), last_duration * 4);
      const auto due = last_start + gap;
      if (Clock::now() < due) {
        if (cv_.wait_until(lock, due, [&] { return stop_; })) return;
      }
      version = data_version_;
      analyzed_version_ = version;
      analysis_seconds_ = -1;  // running
      publish_locked();
    }
    last_start = Clock::now();
    auto view = run_analysis(path_);
    std::lock_guard<std::mutex> lock(parts_mu_);
    if (view.ok()) {
      analysis_ = *view;
      analysis_error_.clear();
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
