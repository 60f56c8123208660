// Per-worker figures: /proc counters over each worker's working life (from its dl.worker_ready to
// its end; its start-up before that apart) and its dl.fetch spans.
#include <algorithm>
#include <unordered_map>

#include "analysis/report.h"
#include "analysis/stats.h"

namespace stallscope::analysis {
namespace {

constexpr double kNsPerMs = 1e6;
constexpr int64_t kSampleIntervalNs = 100'000'000;  // the /proc sampler's period (docs/events.md)

// Samples of every `counter` track of `pid` whose time lies in [t0, t1].
std::vector<double> samples_in(const Session& s,
                               const std::unordered_map<int64_t, std::vector<const CounterTrackRow*>>& tracks,
                               int64_t pid, vocab::Counter counter, int64_t t0, int64_t t1) {
  std::vector<std::pair<int64_t, double>> v;
  auto it = tracks.find(pid);
  if (it == tracks.end()) return {};
  for (const CounterTrackRow* t : it->second) {
    if (vocab::counter_of(t->name) != counter) continue;
    auto [b, e] = s.samples(t->id);
    for (const CounterRow* c = b; c != e; ++c) {
      if (c->ts_ns >= t0 && c->ts_ns <= t1) v.emplace_back(c->ts_ns, c->value);
    }
  }
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> out;
  out.reserve(v.size());
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

}  // namespace

std::vector<WorkerStats> worker_stats(const Session& s, const DataLoaderModel& m) {
  std::unordered_map<int64_t, std::vector<const CounterTrackRow*>> tracks;  // by pid
  for (const CounterTrackRow& t : s.counter_tracks) tracks[t.pid].push_back(&t);

  std::vector<WorkerStats> out;
  out.reserve(m.workers.size());
  for (const WorkerInfo& w : m.workers) {
    WorkerStats ws;
    ws.pid = w.pid;
    ws.loader = w.loader;
    ws.worker_id = w.worker_id;
    ws.start_epoch = w.start_epoch;
    // The working life starts at the worker's first dl.worker_ready (imports, the dataset's copy and
    // worker_init_fn done): what a spawned worker spends importing torch is start-up, not work.
    const int64_t ready = w.ready_ns
                              ? std::clamp(*w.ready_ns, w.life_begin_ns, std::max(w.life_begin_ns, w.life_end_ns))
                              : w.life_begin_ns;
    ws.ready_seen = w.ready_ns.has_value();
    ws.startup_s = static_cast<double>(ready - w.life_begin_ns) / 1e9;
    // Of a recording read from a later point (a long one's latest part, --keep-detail), the life
    // from there: its fetches and samples before it are not read.
    const int64_t seen_from = std::clamp(s.detail_from_ns(), ready, std::max(ready, w.life_end_ns));
    ws.life_s = static_cast<double>(w.life_end_ns - seen_from) / 1e9;
    ws.thread = w.thread_id != 0;
    // /proc figures are per process: a loader thread's would be the whole training process's.
    // A rate sample covers the sampling interval before it: after a long start-up (spawn), the
    // samples of the first interval after the ready instant, which mix in the end of the import,
    // are left out.
    using vocab::Counter;
    const int64_t sampled = ws.thread ? -1 : w.pid;
    const int64_t rates_from = ready + 1 + (ready - w.life_begin_ns > kSampleIntervalNs ? kSampleIntervalNs : 0);
    ws.cpu_util = mean(samples_in(s, tracks, sampled, Counter::kCpu, rates_from, w.life_end_ns));
    ws.runq_delay_fraction = mean(samples_in(s, tracks, sampled, Counter::kRunqWait, rates_from, w.life_end_ns));
    const std::vector<double> priv = samples_in(s, tracks, sampled, Counter::kPrivateDirty, ready, w.life_end_ns);
    if (!priv.empty()) {
      ws.private_first_bytes = saturated_int64(priv.front());
      ws.private_last_bytes = saturated_int64(priv.back());
      ws.private_growth_bytes = *ws.private_last_bytes - *ws.private_first_bytes;
    }
    std::vector<double> durations;
    durations.reserve(w.fetches.size());
    for (size_t i : w.fetches) {
      const FetchInfo& f = m.fetches[i];
      const double d = static_cast<double>(f.end_ns - f.start_ns);
      durations.push_back(d / kNsPerMs);
      ws.busy_s += d / 1e9;
    }
    std::sort(durations.begin(), durations.end());
    ws.batches = static_cast<int64_t>(durations.size());
    ws.fetch_p50_ms = percentile(durations, 50);
    ws.fetch_p99_ms = percentile(durations, 99);
    ws.fetch_mean_ms = mean(durations);
    if (ws.life_s > 0) ws.busy_fraction = std::min(1.0, ws.busy_s / ws.life_s);
    out.push_back(std::move(ws));
  }
  return out;
}

}  // namespace stallscope::analysis
