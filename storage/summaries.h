// Multi-resolution summaries of a recording, kept by the writer as rows go in (docs/schema.md,
// "Summaries"): per interval of 1 s, 10 s and 100 s, spans (count, total, min, max and a quantile
// sketch of their durations), instants (count), counters (count, sum, min, max, last) and GPU
// activities (count, busy time, bytes). What reads a whole day then reads a few thousand rows
// instead of hundreds of millions.
//
// A span counts in the interval where it starts, an instant, a counter value and a GPU activity
// where they happen. Names whose arg0 is a loader id wherever they are recorded (kGroupedByLoader)
// are summarised per loader (`grp` = arg0); other names have grp -1.
//
// Hand-offs (handoff_summaries): each `dl.next` that handed a batch counts in the interval where it
// ended, per thread and loader, with the batch's collated size and the step time that ended there
// (the gap since that loader's previous hand-off on the thread). The size comes from the batch's
// `dl.collate`: on the same thread, inside the call (num_workers=0), or in a worker process of the
// loader (dl.worker_start names its pid) for the same batch index, whichever of the two rows
// arrives first; a batch whose collate never comes is counted `unsized`. The same rows hold the
// loader's starts: from a dl.epoch_begin to the loader's next dl.next on that thread.
//
// Queues (queue_summaries): per process and loader, the batches ready (put, not yet handed) and in
// flight (sent, not yet put) while the loader is active, as step functions: their integrals, lowest
// and highest values and the time with none ready. Their events go through in time order, once no
// earlier row can come (set_queue_horizon), or at the latest after 5 s of later rows.
//
// Buckets are written in the transaction of the rows they summarise, so a reader (or a recording
// cut off mid-run) sees summaries that agree with the detail rows committed with them. Recent
// buckets stay in memory; a row that arrives for a bucket already forgotten (a long span ending,
// a merge going back in time) reads the bucket back first.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "common/sketch.h"
#include "common/status.h"
#include "storage/rows.h"
#include "storage/sqlite.h"

namespace stallscope {

inline constexpr std::array<int64_t, 3> kSummaryLevelsNs = {1'000'000'000, 10'000'000'000, 100'000'000'000};
// Span and instant names summarised per loader: their arg0 is the loader id on every thread.
inline constexpr std::array<std::string_view, 10> kGroupedByLoader = {
    "dl.next", "dl.step", "dl.epoch_begin", "dl.epoch_end",    "dl.sent",
    "dl.recv", "dl.pin",  "dl.config",      "dl.worker_start", "dl.worker_stop"};

// The floor of t / level: the bucket a time falls in (negative times too).
int64_t summary_bucket(int64_t t_ns, int64_t level_ns);

class Summaries {
 public:
  explicit Summaries(Db& db);
  ~Summaries();
  Status prepare();

  // Every string the writer interns: names in kGroupedByLoader are noted by id.
  void on_string(uint32_t id, std::string_view value);
  void add_span(const SpanRow& row);  // spans that never ended (dur NULL) are not summarised
  void add_instant(const InstantRow& row);
  void add_counter(const CounterRow& row);
  void add_gpu(const GpuActivityRow& row);
  // The processes and threads the writer adds (their row ids): a hand-off's batch size is looked
  // up among the collates of its process's workers.
  void on_process(int64_t process_id, int64_t pid);
  void on_thread(int64_t thread_id, int64_t process_id);

  // Rows of another recording's summary tables (already in this recording's ids and buckets),
  // added to the same buckets' aggregates: `merge` carries the summaries of an input whose older
  // detail was deleted. A row of a level this build does not keep is left out.
  void add_summary(const SpanSummaryRow& row);
  void add_summary(const InstantSummaryRow& row);
  void add_summary(const CounterSummaryRow& row);
  void add_summary(const GpuSummaryRow& row);
  void add_summary(const HandoffSummaryRow& row);
  void add_summary(const QueueSummaryRow& row);

  // Queues (queue_summaries) need their events in time order. By default the rows feed them as
  // they come, each event waiting until no earlier row can come (set_queue_horizon) or 5 s of
  // later rows have come.
  // Where rows come table by table (an upgrade, a merge), set_queue_from_rows(false) leaves them
  // out and build_queues() reads the database's own rows in time order instead, those of the
  // threads `include` accepts; it needs the processes, threads and dl.worker_start instants
  // already added. finish_queues() lets every waiting event through: the end of the recording.
  void set_queue_from_rows(bool on) { queue_from_rows_ = on; }
  Status build_queues(const std::function<bool(int64_t thread_id)>& include);
  void finish_queues();
  // From a live recording's drainer: every queue row still to come has its time after `t` (the
  // drain's start less a margin, or the start of a dl.next call begun and not ended), so the
  // events up to `t` can go through at the next write() instead of waiting kQueueLagNs.
  void set_queue_horizon(int64_t t) { queue_horizon_ = t; }
  int64_t queue_events_late() const;    // came after their time had gone through (see summaries.cc)
  size_t queue_events_waiting() const;  // held until their time can go through in order

  // Writes every bucket changed since the last call, inside the caller's open transaction, then
  // forgets those that end more than one of their own lengths before the latest time their table
  // has seen.
  Status write();
  size_t buckets_in_memory() const;

 private:
  void add_start(const SpanRow& row);
  void add_handoff(const SpanRow& row);
  void add_collate(const SpanRow& row);
  void queue_span(const SpanRow& row);
  void queue_instant(const InstantRow& row);
  bool is_queue_instant(uint32_t name_id) const;
  struct Impl;
  Db& db_;
  std::unique_ptr<Impl> impl_;
  std::unordered_set<uint32_t> grouped_names_;
  std::unordered_set<uint32_t> next_names_, collate_names_, worker_start_names_, epoch_begin_names_, epoch_end_names_,
      sent_names_, put_names_;
  bool queue_from_rows_ = true;
  int64_t queue_horizon_ = std::numeric_limits<int64_t>::min();
};

}  // namespace stallscope
