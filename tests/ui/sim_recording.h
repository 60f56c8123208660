// Synthetic recordings for the dashboard's tests and benchmark: a DataLoader training loop
// simulated the way torch runs it (prefetch of prefetch_factor x num_workers indices, workers
// fetching their indices in order, a pin-memory thread, next() handing batches in order), written
// with storage's Writer using the dl.* vocabulary of docs/events.md, plus /proc counters and,
// optionally, GPU activities. Rows are written epoch by epoch in the order a drainer would write
// them (by end time), so memory stays bounded for very large recordings.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stallscope::testing {

inline constexpr int64_t kUs = 1000;
inline constexpr int64_t kMsNs = 1000 * 1000;

struct SimOptions {
  int64_t main_pid = 1000;
  int workers = 4;
  int epochs = 2;
  int batches = 40;  // per epoch
  int batch_size = 8;
  int prefetch = 2;
  bool pin = true;                 // a pin-memory thread pins each batch
  bool persistent = false;         // false: new worker processes every epoch
  int64_t start_ns = 100 * kMsNs;  // the first dl.epoch_begin
  int64_t step_ns = 10 * kMsNs;    // the loop's work after each hand-off
  int64_t pin_ns = 500 * kUs;
  int64_t worker_boot_ns = 20 * kMsNs;
  int64_t epoch_gap_ns = 5 * kMsNs;
  std::function<int64_t(int epoch, int batch)> fetch_ns = [](int, int) { return 30 * kMsNs; };
  bool counters = true;
  bool all_counter_tracks = false;  // also the 5 other proc.* tracks the sampler writes
  int64_t sample_ns = 50 * kMsNs;
  std::function<double(int worker)> runq = [](int w) { return 0.05 * w; };
  bool gpu = false;              // a kernel per step and an HtoD copy per batch on stream 7
  bool complete = true;          // meta complete = 1
  bool config = true;            // the dl.config instant
  int64_t commit_rows = 200000;  // rows per transaction (and flush row)
  // Called after each epoch's rows are committed (the recording is not complete yet): a test
  // follows a recording as it grows. `end_ns`: the epoch's last event.
  std::function<void(int epoch, int64_t end_ns)> after_epoch;
};

struct SimBatch {
  int epoch = 0, batch = 0, worker = 0;
  int64_t worker_pid = 0;
  int64_t sent = 0, fetch_start = 0, fetch_end = 0, put = 0, pin_start = 0, pin_end = 0, recv = 0, next_start = 0,
          handed = 0;
};

// What write_sim_recording wrote. Not the analysis fixture's SimTruth (tests/analysis/fixture.h):
// both are linked into analysis_tests, and one name for two layouts breaks the one-definition rule
// (AddressSanitizer caught the destructor of one run on the other).
struct RecordingTruth {
  std::vector<SimBatch> batches;  // every batch, epoch by epoch
  std::vector<int64_t> worker_pids;
  int64_t end_ns = 0;
  int64_t first_epoch_begin_ns = 0;  // the first dl.epoch_begin: where the training window starts
  int64_t stall_ns = 0;              // sum of dl.next durations
  int64_t events = 0;                // spans + instants + counter samples + GPU activities
  int64_t spans = 0;
  const SimBatch* find(int epoch, int batch) const;
};

// The benchmarks' recording (bench/ui_bench, bench/export_bench): an hour of training with 8
// persistent workers, pin memory and every /proc counter track at 20 Hz, as many epochs as make
// about `events` events (~7 rows per batch and 1440 samples/s: 10 M events fill about an hour).
SimOptions hour_of_training(int64_t events);

// Writes the recording at `path` (which must not exist). Aborts the test on a write error.
RecordingTruth write_sim_recording(const std::string& path, const SimOptions& o);

// A data-parallel job (bench/ui_bench --job, the job view's tests): `ranks` ranks on `nodes` nodes
// (node-00, node-01, ...; ranks numbered node by node), each with its own recording as `stallscope
// run -o DIR/part-{rank}.db` under torchrun makes one: meta rank/world_size/job/host, each host's
// recordings started a few ms apart on its clock. Every rank runs the same loop in lockstep: next()
// (its DataLoader of `workers` persistent workers, prefetch `prefetch`, fetching a batch in
// `fetch_ns` give or take 10 %), its step (`compute_ns`, give or take 2 %), then a synchronous
// all_reduce (`dist.collective`) that returns `comm_ns` after the last rank called it, and the
// optimizer (`optim_ns`). From `slow_from_ns` of job time on, the fetches of node `slow_node`'s
// ranks take `slow_x` times as long. One epoch, stopped once `duration_ns` of training has passed.
struct JobSimOptions {
  int ranks = 16, nodes = 4;
  int64_t duration_ns = 600'000 * kMsNs;
  int workers = 4, prefetch = 2, batch_size = 32;
  int64_t fetch_ns = 1200 * kMsNs, compute_ns = 400 * kMsNs, comm_ns = 30 * kMsNs, optim_ns = 5 * kMsNs;
  int slow_node = -1;  // none
  int64_t slow_from_ns = 0;
  double slow_x = 3.0;
  std::string job = "sim-job";
  int64_t commit_rows = 4000;  // rows per transaction (and flush row)
  int threads = 2;             // recordings written at once
};

struct JobSimTruth {
  std::vector<std::string> paths;  // by rank
  std::vector<std::string> nodes;  // by rank
  int64_t steps = 0;               // every rank's
  int64_t start_ns = 0;            // job time of the first dl.epoch_begin (the earliest recording starts at 0)
};

// The tests' job: 16 ranks on 4 nodes for `minutes`, node-02's input 3x slower from `slow_from_min`,
// written by one thread.
JobSimOptions small_job(int minutes, int slow_from_min);

// Writes the job's recordings into `dir` (which must exist; part-{rank}.db must not).
JobSimTruth write_sim_job(const std::string& dir, const JobSimOptions& o);

}  // namespace stallscope::testing
