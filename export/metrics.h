// Live metrics of a recording for Prometheus: MetricsState follows a session database while it is
// written (Reader::heads + for_each_*: only the rows new since its last read), keeps running totals
// and a recent window of fixed size, and renders them in the Prometheus text exposition format
// (version 0.0.4). docs/metrics.md lists every metric; the causes and event names are the
// vocabulary's (common/vocabulary.h), measured the way the report measures CPU mode
// (docs/report.md), without the report's whole-run model: what one pass over the rows can keep.
//
// Memory stays bounded whatever the run's length: per loader (capped), per live process (ended
// processes are dropped), a ring of one-second buckets, and the samples of batches in flight.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/vocabulary.h"
#include "storage/reader.h"

namespace stallscope::metrics {

// The labels every series carries (docs/metrics.md).
struct Labels {
  std::string job, rank, host;
};

// The recent window: samples/s and the recent stall fraction cover the last kRecentSeconds of the
// training loop's time (recording time, not scrape time).
inline constexpr int kRecentSeconds = 10;

// What a scrape shows, computed from MetricsState (tests read it directly).
struct Figures {
  bool training_seen = false;  // any dl.next of a training loop
  double training_s = 0;       // the training window: its loader's first __iter__ (or next()) to its latest event
  double stall_s = 0;          // data_wait + loader_start
  std::map<std::string, double> stall_by_cause_s;  // vocab::kCauseDataWait, vocab::kCauseLoaderStart
  double stall_fraction = 0;                       // stall_s / training_s
  std::optional<double> recent_stall_fraction;     // over the recent window
  int64_t steps = 0;                               // batches the training loader handed to the loop
  int64_t optimizer_steps = 0;                     // dl.step instants
  int64_t samples = 0;                             // samples of those batches
  std::optional<double> samples_per_s;             // over the recent window
  std::optional<double> recent_step_ms;            // the recent window / the batches handed in it
  std::optional<int64_t> training_loader;          // its loader id (as in dl.* arg0)
  int64_t training_end_ns = 0;                     // the training loader's latest event (session time)
  bool queue_seen = false;                         // the training loader has workers (dl.sent seen)
  int64_t batches_ready = 0, batches_in_flight = 0;
  // The live processes' /proc figures, one series per place a process holds rather than per pid, so
  // that a job's series stay as many however often its workers are started again (every epoch,
  // without persistent_workers): the training process; each DataLoader worker by its loader and
  // index (a worker started again for the next epoch continues its series); and the rank's other
  // processes summed into one. Where two processes hold one place at once (an epoch's workers
  // starting as the last one's end), their figures are summed.
  struct Process {
    int64_t pid = 0;   // the latest of the processes summed into it
    std::string role;  // "train", "worker" or "other"
    std::optional<double> cpu_cores, runq_wait_ratio;
    std::optional<double> sys_cpu_cores, minor_faults_per_s;  // proc.sys_cpu, proc.minor_faults
    std::optional<int64_t> private_growth_bytes;
    std::optional<int64_t> loader, worker;  // a worker's loader and index (dl.worker_start); unknown: none
    int pids = 1;                           // live processes summed into it
  };
  std::vector<Process> processes;  // train, the workers by (loader, index), other
  int64_t dropped_events = 0;
  std::optional<double> gpu_busy_fraction;  // only where GPU activities were recorded
};

class MetricsState {
 public:
  // Reads what `r` has committed since the previous update (one read transaction).
  Status update(Reader& r);
  Figures figures() const;
  // The exposition text: every metric with its HELP and TYPE lines. `up` is stallscope_up's value
  // (0 when the recording cannot be read).
  static std::string render(const Figures& f, const Labels& labels, bool up);

 private:
  // The per-loader figures, for whichever loader turns out to be the training loader.
  struct Bucket {
    int64_t second = -1;  // recording time / 1 s
    int64_t wait_ns = 0, samples = 0, handed = 0;
  };
  struct Loader {
    int64_t first_ns = -1, last_ns = -1;  // the window
    int64_t wait_ns = 0, start_ns = 0;    // data_wait, loader_start
    int64_t handed = 0, samples = 0, steps = 0;
    int64_t epoch = -1, epoch_begin_ns = -1;  // the latest epoch, and its __iter__ until its first next()
    int64_t sent = 0, put = 0, handed_in_epoch = 0;
    bool has_workers = false;
    std::optional<int64_t> batch_size;
    std::array<Bucket, kRecentSeconds + 2> buckets;
    int64_t touched = 0;  // update count when last seen (the cap drops the longest unused)
  };
  struct Proc {
    int64_t pid = 0, ppid = 0;
    std::optional<double> cpu, runq, sys, faults;
    std::optional<double> private_first, private_last;
  };

  Loader& loader(int64_t id);
  void add_wait(Loader& l, int64_t start_ns, int64_t end_ns);
  void add_samples(Loader& l, int64_t ts_ns, int64_t samples);  // and one batch handed
  Bucket& bucket(Loader& l, int64_t ts_ns);
  const std::pair<const int64_t, Loader>* training_loader() const;  // (id, loader)
  void on_span(const SpanRow& s);
  void on_instant(const InstantRow& i);
  void on_counter(const CounterRow& c);
  void on_gpu(const GpuActivityRow& g);
  bool in_worker(int64_t thread_id) const;
  int64_t pid_of_thread(int64_t thread_id) const;

  TableHeads last_;
  int64_t last_string_ = 0;
  int64_t updates_ = 0;
  vocab::NameTable names_;
  std::map<uint32_t, std::string> configs_;                 // string id -> a dl.config document's text
  std::map<int64_t, std::pair<int64_t, int64_t>> threads_;  // thread row id -> (process row id, pid)
  std::map<int64_t, int64_t> process_pid_;                  // process row id -> pid
  int64_t train_pid_ = 0;                                   // the process whose thread calls next()
  std::map<int64_t, Loader> loaders_;
  std::map<int64_t, int64_t> worker_loader_;                      // worker pid -> loader (dl.worker_start)
  std::map<int64_t, int64_t> worker_index_;                       // worker pid -> its index (dl.worker_start)
  std::map<std::pair<int64_t, int64_t>, int64_t> batch_samples_;  // (loader, batch) -> samples, until handed
  std::map<int64_t, std::pair<vocab::Counter, int64_t>> tracks_;  // counter track -> (counter, pid)
  std::map<int64_t, Proc> procs_;                                 // live processes by pid
  int64_t optimizer_steps_ = 0;
  int64_t dropped_ = 0;
  bool gpu_seen_ = false;
  int64_t gpu_first_ns_ = 0, gpu_covered_until_ = 0, gpu_busy_ns_ = 0;
};

}  // namespace stallscope::metrics
