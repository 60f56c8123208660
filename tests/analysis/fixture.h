// Synthetic recordings for the analysis tests: a builder over Writer (processes, threads,
// interned names, spans, instants, counters as docs/events.md describes them), and a small
// DataLoader simulator that writes a training loop whose every figure is known by construction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/writer.h"

namespace stallscope::testing {

inline constexpr int64_t kMs = 1000000;  // ns

class RecordingBuilder {
 public:
  using Arg = std::optional<int64_t>;

  explicit RecordingBuilder(const std::string& path);
  ~RecordingBuilder();

  uint32_t str(std::string_view s);  // interns; ids from 1
  int64_t process(int64_t pid, std::optional<int64_t> start_ns = 0, std::optional<int64_t> end_ns = std::nullopt,
                  std::string cmdline = "python train.py", int64_t ppid = 1);
  void end_process(int64_t process_row, int64_t end_ns);
  int64_t thread(int64_t process_row, int64_t tid, std::string name = "MainThread");
  int64_t span(int64_t thread, std::string_view name, int64_t start_ns, std::optional<int64_t> dur_ns, Arg a0 = {},
               Arg a1 = {}, Arg a2 = {}, int depth = 0);
  void instant(int64_t thread, std::string_view name, int64_t ts_ns, Arg a0 = {}, Arg a1 = {}, Arg a2 = {});
  void counter(int64_t pid, std::string_view name, std::string_view unit, int64_t ts_ns, double value);
  void meta(std::string_view key, std::string_view value);
  // Commits what was written so far (visible to readers) and opens the next transaction.
  void commit();
  // Marks the recording complete (meta complete=1), commits and checkpoints the WAL.
  void finish();

  Writer& writer() { return *w_; }

 private:
  std::unique_ptr<Writer> w_;
  std::map<std::string, uint32_t, std::less<>> strings_;
  std::map<std::pair<std::string, int64_t>, int64_t> tracks_;
  bool open_ = false;
};

// A DataLoader training loop, simulated the way torch runs it: at __iter__ the loader sends
// prefetch_factor x num_workers indices round-robin to its workers; each hand-off sends one more;
// a worker fetches its indices in order; next() hands batches in order, waiting for the put of
// the batch it needs. With num_workers=0, next() fetches the batch itself.
struct SimConfig {
  int64_t loader = 0;
  int epochs = 1;
  int batches_per_epoch = 100;
  int batch_size = 32;
  std::optional<int> last_batch_size;  // a smaller last batch (drop_last=False)
  int num_workers = 0;
  int prefetch_factor = 2;
  bool persistent_workers = false;
  std::string start_method = "fork";
  int64_t start_ns = 1000 * kMs;                         // the first dl.epoch_begin
  int64_t compute_ns = 70 * kMs;                         // the loop's work per step, after each hand-off
  std::function<int64_t(int epoch, int batch)> step_ns;  // when set: the step after `batch`, in place of compute_ns
  std::function<int64_t(int epoch, int batch)> fetch_ns = [](int, int) { return 30 * kMs; };
  int64_t iter_ns = 0;                        // time inside __iter__ (epoch_begin -> first next())
  int64_t worker_boot_ns = 0;                 // worker_start -> worker ready, for each new worker
  int64_t worker_birth_gap_ns = 0;            // worker i's process starts i x this after dl.epoch_begin
  std::vector<int64_t> worker_boot_extra_ns;  // more of it for worker i (spawned workers differ)
  int64_t epoch_gap_ns = 0;                   // epoch_end -> next epoch_begin
  int64_t shutdown_ns = 0;                    // non-persistent workers: shutting them down in the last next()
  bool write_config = true;
  bool write_worker_start = true;  // false: as if recording began after the workers started
  // Worker /proc counters (none when unset), sampled every sample_period_ns over each life.
  std::optional<double> worker_cpu, worker_runq;
  std::optional<int64_t> worker_private_start, worker_private_growth;
  int64_t sample_period_ns = 50 * kMs;
  int64_t main_pid = 1000;
  int64_t first_worker_pid = 2000;
  // dl.cpu marks (none when unset): the share of each fetch spent on a CPU, and the cores the
  // training process uses while it computes between next() calls; torch_threads in dl.config.
  std::optional<double> fetch_cpu, compute_cpu;
  int mark_every = 1;  // the training thread's marks on every n-th batch only (the hooks' sampling)
  int torch_threads = 1;
  int64_t others_cpu_us = 0;  // the training process's other threads' CPU in each marked next()
  // dl.parallel after each marked dl.cpu that has a step before it (none when unset): torch's
  // parallel regions in that step, their wall and their bodies' time, as shares of the step's wall.
  std::optional<std::pair<double, double>> parallel;
  int64_t worker_put_cpu_us = 0;  // a worker's CPU between its fetches (dl.cpu's "before")
  // dl.batch (tensors, bytes) as the hooks write it: in the first epoch without workers, after
  // each worker process's first collate with them.
  std::optional<std::pair<int64_t, int64_t>> batch_layout;
  // meta usable_cores (not written when unset): the cores the what-if model shares out.
  std::optional<int> usable_cores = 16;
  bool finish = true;   // mark complete and checkpoint
  std::string command;  // meta command, as `stallscope run` writes it (empty: none)
};

// What the simulation wrote, computed independently of the analysis.
struct SimTruth {
  int64_t window_start_ns = 0, window_end_ns = 0;
  int64_t stall_ns = 0;
  int64_t steps = 0;
  int64_t samples = 0;
  std::vector<int64_t> handoffs;
  std::vector<int64_t> worker_pids;
  int64_t main_thread = 0;              // threads.id of the training thread
  std::vector<int64_t> epoch_start_ns;  // per epoch: epoch_begin -> first batch handed
  std::vector<double> fetch_ms;         // every fetch
  int64_t fetch_busy_ns = 0;
  double wall_s() const { return static_cast<double>(window_end_ns - window_start_ns) / 1e9; }
  double stall_fraction() const {
    return static_cast<double>(stall_ns) / static_cast<double>(window_end_ns - window_start_ns);
  }
};

SimTruth simulate(RecordingBuilder& b, const SimConfig& c);

// The dl.config document for `c`.
std::string config_json(const SimConfig& c);

}  // namespace stallscope::testing
