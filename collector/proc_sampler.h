// The /proc sampler: CPU time, run-queue wait, context switches, memory (RSS, PSS, private dirty)
// and read volume of a set of processes, as rates over the interval since the previous sample.
// It runs in the drainer's process (the launcher, or the recording process), never on the
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
  // Rates over the interval since this pid's previous sample (absent on the first sample).
  std::optional<double> cpu_cores;         // CPU seconds per wall second, all threads
  std::optional<double> runq_wait_ratio;   // run-queue wait seconds per wall second, all threads
  std::optional<double> ctxsw_voluntary;   // per second (main thread)
  std::optional<double> ctxsw_involuntary; // per second (main thread)
  std::optional<double> read_bytes_per_s;  // rchar per second
  // Levels.
  uint64_t rss_bytes = 0;
  std::optional<uint64_t> pss_bytes;            // when smaps_rollup was read this time
  std::optional<uint64_t> private_dirty_bytes;  // idem
};

class ProcSampler {
 public:
  // smaps_rollup walks every mapping and costs far more than the other files: read it every
  // `memory_every` samples only.
  explicit ProcSampler(int memory_every = 5) : memory_every_(memory_every) {}

  // Samples each pid that is still alive; forgets pids not in `pids`.
  std::vector<ProcSample> sample(const std::vector<int>& pids, uint64_t now_ns);

  // Parsers, exposed for tests.
  static bool parse_schedstat(const std::string& text, uint64_t* run_ns, uint64_t* wait_ns);
  static bool parse_status_ctxsw(const std::string& text, uint64_t* voluntary, uint64_t* involuntary);
  static bool parse_smaps_rollup(const std::string& text, uint64_t* pss, uint64_t* private_dirty);
  static bool parse_io_rchar(const std::string& text, uint64_t* rchar);

 private:
  struct Prev {
    uint64_t mono_ns = 0;
    std::map<int, std::pair<uint64_t, uint64_t>> tasks;  // tid -> (run_ns, wait_ns)
    uint64_t vcsw = 0, ivcsw = 0, rchar = 0;
    bool have_ctx = false, have_io = false;
    int count = 0;
  };
  std::map<int, Prev> prev_;
  int memory_every_;
};

}  // namespace stallscope
