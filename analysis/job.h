// The job view: a multi-rank job read from its ranks' summary tables (storage/summaries.h), not from
// every event, so that a job of hundreds of ranks recorded for hours is read in seconds and a few
// hundred MB (docs/multi-rank.md, "The job view"). Its inputs are the ranks' own recordings where
// they lie (one file per rank, `stallscope run -o part-{rank}.db` under torchrun) or a recording
// that holds several ranks (`stallscope merge`, or one launcher over the whole job).
//
// Per rank, over the job's periods (at most `max_periods`, of the lengths the "Over time" table
// uses): its training loader's data stall (waiting in next() and starting the loader, as the
// report's), the time it spent in synchronous collectives (`dist.collective`), its samples and
// steps. From them: the ranks slowest first (by data stall), the nodes whose every rank is slow, the
// period the job's samples/s fell in and the ranks whose data stall rose first.
//
// Waiting for other ranks: DDP reduces its gradients asynchronously (`dist.issue` .. `dist.done`),
// which the summaries count but do not time. In a data-parallel job every rank takes the same
// steps, so in each period a rank that waited less for its data than the rank that waited most
// waited about the difference for that rank in the next collective: `behind_s`, an estimate that
// holds when the ranks compute at the same speed. Where a rank recorded synchronous collectives,
// their measured time is given beside it (`collective_s`); the text shows the measured time for a
// rank whose every collective was synchronous, the estimate otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace stallscope::analysis {

struct JobRank {
  int64_t rank = 0;
  std::string node;    // host name (dist.rank's "node", else the recording's meta host)
  std::string source;  // the recording it was read from
  // Its training window, in job time (ns since the earliest recording's start): the training
  // loader's first dl.epoch_begin (else first next() call) to the end of its last next() call.
  int64_t start_ns = 0, end_ns = 0;
  int64_t steps = 0, batches = 0, samples = 0;
  double data_s = 0;              // waiting in next() and starting the loader
  double collective_s = 0;        // in synchronous collectives (measured)
  int64_t collectives = 0;        // how many
  int64_t async_collectives = 0;  // asynchronous ones (dist.issue: DDP's buckets), counted, not timed
  double behind_s = 0;            // waiting for the rank that waited most for its data (estimate; see above)
  // Its input pipeline's own speed: the batches fetched in its processes (its DataLoader workers, or
  // inside next() with num_workers=0) and their mean time; `fetch_x`, that mean over the job's
  // median rank's, over the periods from the job's slowdown on (the whole run when it did not slow).
  // In lockstep only the rank last to get its batch waits for it; a slow node's other ranks, whose
  // queues the pace lets fill, show their slow input here rather than in their data stall.
  int64_t fetches = 0;
  double fetch_s = 0;
  std::optional<double> fetch_x;
  std::vector<double> stall;     // per period: data stall as a share of the rank's time in it (-1: none)
  std::vector<double> fetch_ms;  // per period: mean fetch time (-1: no fetch)
  std::optional<int> worst_period;
  // The period from which its data stall or its fetch time stayed higher (kRise, kFetchRise over
  // the periods before; the one split that fits its series best); nullopt when neither rose.
  std::optional<int> rose_at;
  bool slow = false;  // see JobView::slow

  double window_s() const { return static_cast<double>(end_ns - start_ns) / 1e9; }
  double data_share() const { return window_s() > 0 ? data_s / window_s() : 0.0; }
  double behind_share() const { return window_s() > 0 ? behind_s / window_s() : 0.0; }
  double collective_share() const { return window_s() > 0 ? collective_s / window_s() : 0.0; }
  std::optional<double> samples_per_s() const {
    if (window_s() <= 0 || batches == 0) return std::nullopt;
    return static_cast<double>(samples) / window_s();
  }
};

struct JobNode {
  std::string name;
  std::vector<int64_t> ranks;     // by rank
  double data_share = 0;          // mean of its ranks'
  std::optional<double> fetch_x;  // median of its ranks'
  int slow_ranks = 0;             // of its ranks, those marked slow (JobView::slow)
};

struct JobSlowdown {
  int period = 0;                        // the first period of the slower part
  double before = 0, after = 0;          // the job's samples/s (median of the periods before and after)
  std::vector<int64_t> first_ranks;      // the ranks whose data stall rose first (at or before `period`)
  std::vector<std::string> first_nodes;  // nodes all of whose ranks are among them
};

struct JobView {
  std::string job;  // the job id the recordings carry (empty where none)
  int64_t world_size = 0;
  int64_t start_ns = 0, end_ns = 0;  // the job's training window in job time
  int64_t period_ns = 0, level_ns = 0;
  int periods = 0;
  std::vector<JobRank> ranks;  // slowest first: slow ones first, then by data stall share, fetch_x, rank
  std::vector<JobNode> nodes;  // slowest first: by slow ranks, then data stall, then fetch_x
  // Ranks whose data stall share stands out (kSlowBy over the median rank's), or whose fetches are
  // kSlowFetchX times the median rank's or more: over the whole run, or from the job's slowdown on.
  std::vector<int64_t> slow;
  std::vector<std::string> slow_nodes;  // nodes all of whose ranks (two or more) are slow
  std::vector<double> samples_per_s;    // the job's, per period (summed over its ranks)
  std::vector<double> median_fetch_ms;  // per period, the median rank's mean fetch time (-1: no fetch)
  std::optional<JobSlowdown> slowdown;
  std::vector<std::string> notes;  // inputs left out, and why

  double period_s() const { return static_cast<double>(period_ns) / 1e9; }
};

// A rank is slow when its data stall share is at least this much above the job's median.
inline constexpr double kSlowBy = 0.05;
// A rank's data stall rose in a period when the periods from it on stall at least this much more
// than the periods before it.
inline constexpr double kRise = 0.05;
// A rank's fetches are slow at this multiple of the median rank's, and rose at this multiple of
// its own before.
inline constexpr double kSlowFetchX = 1.5;
inline constexpr double kFetchRise = 1.3;
// The job slowed when the samples/s of its later periods fell at least this share below the earlier.
inline constexpr double kJobDrop = 0.10;

// Reads the ranks of the recordings `paths` (files; a folder is expanded by the caller). Errors: a
// path that is not a readable recording, no rank in any of them, or one rank twice.
Result<JobView> job_view(const std::vector<std::string>& paths, int max_periods = 60);

// The recordings of a job folder: its *.db files, sorted by name. Error: none there.
Result<std::vector<std::string>> job_folder(const std::string& dir);

// "3, 8-11, 14": ranks sorted, runs of consecutive ones as ranges.
std::string rank_list(std::vector<int64_t> ranks);

std::string render_job_text(const JobView& v, size_t max_ranks = 10);
Json job_to_json(const JobView& v);  // schema "stallscope.job/1" (docs/report.md, "Job view")

}  // namespace stallscope::analysis
