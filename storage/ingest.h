// The drainer: reads every ring of a session arena and writes what it finds into the session
// database, one transaction per drain. Begin/end events become complete span rows (a per-thread
// stack pairs them), ticks become nanoseconds since the session start (piecewise-linear between
// clock anchors taken at each drain), rings of exited threads and dead processes are recycled.
// Exactly one Ingest exists per arena; it runs in the `stallscope run` launcher or, when a process
// records in-process, on a thread of that process.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "collector/arena.h"
#include "collector/clock.h"
#include "collector/proc_sampler.h"
#include "common/status.h"
#include "common/vocabulary.h"
#include "storage/writer.h"

namespace stallscope {

// Converts raw ticks to ns since the session start using anchors (ticks, monotonic ns).
class TickConverter {
 public:
  TickConverter(bool uses_tsc, ClockAnchor start);
  void add_anchor(ClockAnchor a);
  int64_t to_session_ns(uint64_t ticks) const;
  // For timestamps that are already CLOCK_MONOTONIC ns (GPU records).
  int64_t mono_to_session_ns(uint64_t ns) const { return static_cast<int64_t>(ns - start_.ns); }
  uint64_t start_mono_ns() const { return start_.ns; }
  bool uses_tsc() const { return uses_tsc_; }
  // The newest anchor's ticks: up to there, conversions interpolate between two anchors and no
  // later anchor changes them.
  uint64_t last_anchor_ticks() const { return anchors_.back().ticks; }

 private:
  bool uses_tsc_;
  ClockAnchor start_;
  std::deque<ClockAnchor> anchors_;  // increasing; the last ~10 s
  // The segment the last conversion fell in (its upper anchor's index): a ring's events come in
  // time order, so most conversions fall in the same one.
  mutable size_t hint_ = 1;
};

struct IngestStats {
  uint64_t events = 0;
  uint64_t spans = 0;
  uint64_t instants = 0;
  uint64_t counters = 0;
  uint64_t gpu_activities = 0;
  uint64_t dropped = 0;  // events lost in the collector (full rings, no free ring)
  uint64_t drains = 0;
};

class Ingest {
 public:
  Ingest(Arena* arena, Writer* writer);

  // Writes the session's metadata (command line, host, versions, clock).
  Status write_meta(const std::map<std::string, std::string>& extra);
  // One drain: every event stamped before it began becomes rows in one transaction.
  // `final` also closes spans still open (dur NULL) and marks unfinished processes ended.
  Status drain(bool final);
  // The same with the drain's clock anchor taken by the caller (tests). Tick-stamped events after
  // the anchor wait for the next drain, whose anchor converts them by interpolation: a tick rate
  // extrapolated past the last anchor would differ from the next segment's, and events either side
  // of a drain could swap order.
  Status drain(bool final, ClockAnchor anchor);
  // The fullest ring's events not drained yet, over its capacity (0..1): a few atomic loads.
  double fullest_ring() const;
  // Copies what the rings hold into memory and gives their space back to the threads recording,
  // so that a drain held up by the disk (a checkpoint's sync) does not make them drop events; the
  // next drain writes the copies first. Called from a second thread, also while drain() runs.
  // Holds at most kSpillCapEvents; past that the rings fill and drop as before. Returns the events
  // copied.
  size_t spill();
  static inline constexpr size_t kSpillCapEvents = size_t{1} << 21;  // 64 MiB of 32-byte events
  size_t spilled_events() const;
  // How far before a drain's start its queue horizon lies: room for a thread preempted between
  // stamping an event and publishing it.
  static inline constexpr int64_t kHorizonMarginNs = 100'000'000;
  void set_spill_cap(size_t events) { spill_cap_ = events; }  // tests
  // Queues /proc samples; the next drain writes them as proc.* counters (docs/events.md).
  void add_samples(std::vector<ProcSample> samples);
  // Pids of the session's processes that have not ended, for the sampler.
  static std::vector<int> live_pids(const Arena& arena);
  // Records how a process ended when the caller knows it (the launcher knows its child's status).
  void set_exit_status(int pid, std::optional<int> exit_code, std::optional<int> exit_signal);
  const IngestStats& stats() const { return stats_; }

 private:
  struct OpenSpan {
    int64_t start_ns;
    uint32_t name;
    uint8_t flags;
    int64_t a0;
    int32_t a1, a2;
  };
  struct ThreadTrack {
    uint32_t uid = 0;
    int64_t row = 0;
    std::vector<OpenSpan> stack;
    Event gpu_first{};  // first slot of a GPU activity, until its second slot
    bool gpu_pending = false;
  };
  struct ProcessTrack {
    int64_t row = 0;
    int pid = 0;
    bool ended = false;
    std::optional<int> exit_code, exit_signal;  // from on_exit or the launcher
    int64_t entry = -1;                         // index in the arena's process table
    int64_t end_ns = 0;
    uint32_t execs = 0;  // exec count already written
  };

  void sync_processes(bool final, int64_t now_ns);
  int64_t process_row_for(int pid);
  void drain_ring(uint32_t index, bool final);
  // Appends the ring's events not taken yet to `out` (at most `room`) and gives their slots back.
  // With spill_mu_ held.
  size_t take_ring(Ring* r, std::vector<Event>& out, size_t room);
  void close_open_spans(ThreadTrack& t);
  void sync_strings();
  // The time after which every dl.next row still to come begins (Summaries::set_queue_horizon).
  int64_t queue_horizon(int64_t drain_start_ns) const;
  int64_t counter_track(uint32_t name, int pid);
  int64_t named_track(vocab::Counter counter, int pid);
  void write_samples();
  void write_span(const ThreadTrack& t, const OpenSpan& o, std::optional<int64_t> dur, const OpenSpan& args);

  Arena* arena_;
  Writer* writer_;
  TickConverter clock_;
  std::vector<ThreadTrack> rings_;  // by ring index
  // (process row, tid, name) -> thread row: a thread that gets a second ring (its process exec'd
  // itself: same pid, same tid, a fresh collector) stays one thread of the recording.
  std::map<std::tuple<int64_t, int, std::string>, int64_t> thread_rows_;
  std::vector<ProcessTrack> processes_;  // by process table index
  std::map<std::pair<uint32_t, int>, int64_t> tracks_;
  std::map<std::pair<vocab::Counter, int>, int64_t> named_tracks_;
  std::vector<ProcSample> samples_;
  std::unordered_map<int, size_t> pid_latest_;  // pid -> index in processes_
  std::vector<uint64_t> ring_dropped_seen_;     // drops already counted per ring life
  uint32_t strings_written_ = 0;
  uint32_t arena_entries_seen_ = 0;
  uint64_t dropped_retired_ = 0;  // drops of rings already recycled
  std::map<int, std::pair<std::optional<int>, std::optional<int>>> pending_exit_;
  IngestStats stats_;
  // Events taken from the rings by spill() and not written yet, by ring index, and their count;
  // guarded by spill_mu_, which also covers taking from a ring and giving a ring back.
  mutable std::mutex spill_mu_;
  std::vector<std::vector<Event>> spilled_;
  size_t spilled_count_ = 0;
  size_t spill_cap_ = kSpillCapEvents;
  std::vector<Event> batch_;  // the drain's events of one ring (the drain thread's only)
  // this drain's span id range and time bounds (the flushes table indexes spans by time)
  std::optional<int64_t> first_span_, last_span_, min_start_, max_end_;
  bool open_ended_ = false;
};

}  // namespace stallscope
