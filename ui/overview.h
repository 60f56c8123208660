// The whole run at a glance, from the summary tables (docs/schema.md, "Summaries"): what the
// dashboard draws where it holds no detail rows. A long recording's detail is read a window at a
// time (snapshot_source.h); the overview covers all of it, and reads in well under a second
// whatever the length, as a day is a few thousand buckets.
//
// Per bucket of one summary level (1 s, 10 s or 100 s: see kMaxBuckets): how many rows every table holds there (what a
// window read would cost), and per thread the share of the bucket its main activity took: dl.next on a training loop
// (waiting for data), dl.fetch on a worker, dl.pin on the pin-memory thread, else its busiest span name. GPU busy per
// device likewise.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/reader.h"
#include "ui/snapshot.h"

namespace stallscope::ui {

// Times further than this from the session start (about 73 years) are a damaged row's.
inline constexpr int64_t kSaneNs = int64_t{1} << 61;

struct Overview {
  // At open, the finest level with at most kMaxBuckets over the run (a day: the 100-s level,
  // under 0.1 s to read); then, once the detail is in, the finest with at most kMaxFineBuckets
  // (a day: the 10-s level, about 0.3 s), so that a view of an hour has bars of 10 s.
  static constexpr int64_t kMaxBuckets = 4000;
  static constexpr int64_t kMaxFineBuckets = 20000;

  int64_t level_ns = 0;
  int64_t first_bucket = 0;   // rows[i] and every share[i] are bucket first_bucket + i
  std::vector<int64_t> rows;  // rows of all detail tables per bucket
  struct Share {
    Style style = Style::kOther;
    std::vector<float> busy;  // per bucket, 0..1
  };
  std::map<int64_t, Share> threads;  // by threads.id
  std::map<int64_t, Share> devices;  // GPU busy by device

  // Sums over buckets as prefix arrays (size() + 1 entries each): the mean over the buckets a..b
  // is (sum[b + 1] - sum[a]) / (n[b + 1] - n[a]), in constant time whatever the zoom.
  struct Prefix {
    std::vector<double> sum, n;
    // Adds to the sums of buckets a..b; false when they hold nothing.
    bool add(size_t a, size_t b, double* sum_out, double* n_out) const;
  };
  // What the workers panel shows where no detail is held:
  //  - per process (pid), the samples of its /proc counters by CounterMetric (proc.cpu,
  //    proc.runq_wait, proc.rss; the mean of a bucket's samples);
  //  - per thread whose main activity is a fetch (Style::kFetch), its fetches' time and count;
  //  - every thread's process.
  std::map<int64_t, std::array<Prefix, kCounterMetricCount>> counters;
  std::map<int64_t, Prefix> fetches;
  std::map<int64_t, int64_t> thread_pid;
  // What the queue panel shows there: per loader (the L of dl.sent and dl.recv), the batches sent
  // and not yet received at the end of each bucket, counted from the start of the recording (in
  // flight or ready). Exact at the buckets' ends: the summaries count every dl.sent and dl.recv.
  std::map<int64_t, std::vector<int32_t>> outstanding;
  // And where the recording has queue_summaries (docs/schema.md): per loader and bucket, the batches
  // ready and in flight while the loader was active (their time integrals, lowest and highest
  // values), and the time with none ready. Buckets where it was not active hold covered_ns 0.
  using QueueBucket = QueueFigures;
  std::map<int64_t, std::vector<QueueBucket>> queues;
  // Over the buckets a..b of one loader's: their figures merged (covered_ns 0: none).
  static QueueBucket combine(const std::vector<QueueBucket>& q, size_t a, size_t b);

  // The buckets a..b that [t0, t1) touches, clamped to the overview; false when it misses it.
  bool buckets(int64_t t0, int64_t t1, size_t* a, size_t* b) const;
  int64_t first_ns = 0, end_ns = 0;  // the buckets that hold rows: first start, last end
  int64_t total_rows = 0;

  size_t size() const { return rows.size(); }
  int64_t bucket_start(size_t i) const { return (first_bucket + static_cast<int64_t>(i)) * level_ns; }
  // Rows of the buckets that [t0, t1] touches: what reading its detail would cost, about.
  int64_t rows_in(int64_t t0, int64_t t1) const;
};

// What a view of [v0, v1] over a windowed timeline asks the source for (request_detail): nothing
// while the detail held covers it, or while even the view alone holds more rows than the timeline's
// detail_rows (the overview shows it then); else a window around it, as wide as half the budget
// allows (up to 64 view widths each side), reaching to INT64_MAX (the latest part, followed) when
// it gets to the end of the data.
std::optional<std::pair<int64_t, int64_t>> wanted_detail(const Timeline& tl, double v0, double v1);

// The names read_overview looks up first (string_ids): the loop's wait, a worker's fetch, the pin
// thread's pin, a batch sent and received.
inline const std::vector<std::string> kOverviewNames = {"dl.next", "dl.fetch", "dl.pin", "dl.sent", "dl.recv"};

// The finest summary level with at most `max_buckets` buckets over `run_ns`.
int64_t overview_level(int64_t run_ns, int64_t max_buckets = Overview::kMaxBuckets);

// Reads the overview of a recording that has summary tables (Reader::has_summaries); `run_ns`
// (the recording's length, about) and `max_buckets` pick the level.
Result<std::shared_ptr<Overview>> read_overview(Reader& r, int64_t run_ns, int64_t max_buckets = Overview::kMaxBuckets);

}  // namespace stallscope::ui
