// The /proc sampler: CPU time (and its part in the kernel), run-queue wait, context switches, minor
// page faults, memory (RSS, PSS, private dirty) and read volume of a set of processes, as rates over the interval since
// the previous sample. It runs in the drainer's process (the launcher, or the recording process), never on the
// training's hot path. These are the worker-contention signals; names in docs/events.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stallscope {

struct ProcSample {
  int pid = 0;
  uint64_t mono_ns = 0;  // CLOCK_MONOTONIC time of the sample
  // Rates over the interval since this pid's previous sample. On the first sample they are absent,
  // unless the process was born less than a second earlier: then they cover its life so far.
  std::optional<double> cpu_cores;           // CPU seconds per wall second, all threads
  std::optional<double> runq_wait_ratio;     // run-queue wait seconds per wall second, all threads
  std::optional<double> ctxsw_voluntary;     // per second (main thread)
  std::optional<double> ctxsw_involuntary;   // per second (main thread)
  std::optional<double> read_bytes_per_s;    // rchar per second
  std::optional<double> sys_cpu_cores;       // CPU seconds in the kernel per wall second (stime), all threads
  std::optional<double> minor_faults_per_s;  // minflt per second, all threads
  // Levels.
  uint64_t rss_bytes = 0;
  std::optional<uint64_t> pss_bytes;            // when smaps_rollup was read this time
  std::optional<uint64_t> private_dirty_bytes;  // idem
};

class ProcSampler {
 public:
  // smaps_rollup walks every mapping of the process under its mmap lock: about 5 ms for a process
  // that imported torch, against ~20 us for the other files. It is read at a process's first
  // sample, then as often as keeps all those reads within `memory_budget` of one core (and at
  // most once per `memory_min_interval_ns`).
  explicit ProcSampler(double memory_budget = 0.01, uint64_t memory_min_interval_ns = 1000000000ull)
      : memory_budget_(memory_budget), memory_min_interval_ns_(memory_min_interval_ns) {}

  // Samples each pid that is still alive; forgets pids not in `pids`.
  std::vector<ProcSample> sample(const std::vector<int>& pids, uint64_t now_ns);

  // Parsers, exposed for tests. parse_status_rss reads VmRSS (bytes).
  static bool parse_status_rss(const std::string& text, uint64_t* rss);
  static bool parse_schedstat(const std::string& text, uint64_t* run_ns, uint64_t* wait_ns);
  static bool parse_status_ctxsw(const std::string& text, uint64_t* voluntary, uint64_t* involuntary);
  static bool parse_smaps_rollup(const std::string& text, uint64_t* pss, uint64_t* private_dirty);
  static bool parse_io_rchar(const std::string& text, uint64_t* rchar);
  // starttime (field 22 of /proc/PID/stat), in clock ticks since boot.
  static bool parse_stat_starttime(const std::string& text, uint64_t* ticks);
  // minflt (field 10) and stime (field 15, clock ticks) of /proc/PID/stat: the page faults served
  // without I/O and the CPU time spent in the kernel, over all the process's threads.
  static bool parse_stat_faults(const std::string& text, uint64_t* minflt, uint64_t* stime_ticks);

 private:
  struct Prev {
    uint64_t mono_ns = 0;
    std::map<int, std::pair<uint64_t, uint64_t>> tasks;  // tid -> (run_ns, wait_ns)
    std::vector<int> tids;                               // listed every kListEvery samples
    uint64_t vcsw = 0, ivcsw = 0, rchar = 0, minflt = 0, stime = 0;
    bool have_ctx = false, have_io = false, have_stat = false;
    int count = 0;
    uint64_t next_memory_ns = 0;  // when smaps_rollup is due
  };
  // Seconds since `pid` started when that lies within [young_min_s_, young_max_s_], else 0. starttime
  // has a 10 ms grain, hence the floor.
  double young_age_s(int pid) const;
  double young_min_s_ = 0.05, young_max_s_ = 1.0;
  static constexpr int kListEvery = 10;  // threads come and go rarely: list /proc/PID/task at 1 Hz
  std::map<int, Prev> prev_;
  double memory_budget_;
  uint64_t memory_min_interval_ns_;
};

}  // namespace stallscope
