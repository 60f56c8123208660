// The run over time from the summary tables; see over_time.h.
#include "analysis/over_time.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_set>

#include "analysis/report.h"
#include "common/sketch.h"
#include "storage/summaries.h"

namespace stallscope::analysis {
namespace {

constexpr int64_t kS = 1'000'000'000;

// a + b, held at the int64 limits: the counts of a damaged file can be anything.
int64_t add_held(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

// Accumulated per period: the sketches of the fetch durations merge across buckets and threads.
struct Acc {
  OverTimePeriod p;
  DurationSketch fetch, step;
};

}  // namespace

PeriodChoice choose_period(int64_t window_ns, int max_periods) {
  static constexpr std::array<int64_t, 18> kNice = {1,   2,   5,    10,   20,   30,    60,    120,   300,
                                                    600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400};
  const int64_t n = std::max(1, max_periods);
  int64_t period = 0;
  for (int64_t s : kNice) {
    if (s * kS * n >= window_ns) {
      period = s * kS;
      break;
    }
  }
  if (period == 0) {  // longer than max_periods days: whole days
    const int64_t day = kNice.back() * kS;
    const int64_t days = (window_ns / n + day - 1) / day;
    period = std::max<int64_t>(1, days) * day;
  }
  int64_t level = kSummaryLevelsNs.front();
  for (int64_t l : kSummaryLevelsNs) {
    if (period % l == 0) level = std::max(level, l);
  }
  return {period, level};
}

Result<OverTime> over_time(Reader& reader, const Report& r, int max_periods) {
  OverTime out;
  if (!r.main_loader) {
    out.note = "no training loader";
    return out;
  }
  if (r.window_end_ns <= r.window_start_ns) {
    out.note = "no training window";
    return out;
  }
  Reader::Snapshot snapshot(reader);
  auto has = reader.has_summaries();
  if (!has.ok()) return has.status();
  if (!*has) {
    out.note = "the recording has no summaries (made before they were kept, and read-only)";
    return out;
  }

  auto strings = reader.strings();
  if (!strings.ok()) return strings.status();
  std::optional<uint32_t> next_id, step_id, fetch_id, start_id, begin_id, end_id;
  for (const auto& [id, value] : *strings) {
    if (value == "dl.next") next_id = id;
    if (value == "dl.epoch_begin") begin_id = id;
    if (value == "dl.epoch_end") end_id = id;
    if (value == "dl.step") step_id = id;
    if (value == "dl.fetch") fetch_id = id;
    if (value == "dl.worker_start") start_id = id;
  }

  // The training process's threads, and its loader's worker processes' threads.
  auto processes = reader.processes();
  if (!processes.ok()) return processes.status();
  auto threads = reader.threads();
  if (!threads.ok()) return threads.status();
  std::unordered_set<int64_t> worker_pids;
  for (const WorkerStats& w : r.workers) {
    if (w.loader == *r.main_loader && !w.thread) worker_pids.insert(w.pid);
  }
  std::unordered_set<int64_t> train_processes, worker_processes;
  for (const ProcessRow& p : *processes) {
    if (p.pid == r.train_pid) train_processes.insert(p.id);
    if (worker_pids.count(p.pid) != 0) worker_processes.insert(p.id);
  }
  std::unordered_set<int64_t> train_threads;
  for (const ThreadRow& t : *threads) {
    if (train_processes.count(t.process_id) != 0) train_threads.insert(t.id);
  }
  // Read from a later point (detail_from_ns), the report knows the workers whose dl.worker_start it
  // read: not those of every epoch before. A child of the training process that started in a 100-s
  // interval where only the training loader started workers (the instant summaries) is one of them.
  if (r.detail_from_ns && start_id) {
    auto starts = reader.instant_summaries(kSummaryLevelsNs.back(), {*start_id});
    if (!starts.ok()) return starts.status();
    std::map<int64_t, std::set<int64_t>> starters;  // bucket -> loaders that started workers in it
    for (const InstantSummaryRow& row : *starts) {
      if (train_threads.count(row.thread_id) != 0) starters[row.bucket].insert(row.grp);
    }
    std::unordered_set<int64_t> known;  // every loader's workers the report has
    for (const WorkerStats& w : r.workers) known.insert(w.pid);
    for (const ProcessRow& p : *processes) {
      if (!p.ppid || *p.ppid != r.train_pid || !p.start_ns || known.count(p.pid) != 0) continue;
      const int64_t b = summary_bucket(*p.start_ns, kSummaryLevelsNs.back());
      bool main_only = false, other = false;
      for (int64_t near : {b - 1, b, b + 1}) {
        auto it = starters.find(near);
        if (it == starters.end()) continue;
        for (int64_t loader : it->second) (loader == *r.main_loader ? main_only : other) = true;
      }
      if (main_only && !other) worker_processes.insert(p.id);
    }
  }
  std::unordered_set<int64_t> worker_threads;
  for (const ThreadRow& t : *threads) {
    if (worker_processes.count(t.process_id) != 0) worker_threads.insert(t.id);
  }

  // Recorded with --keep-detail, or read from a later point: the report's window is what was read;
  // the summaries go back to the training loader's first next() call.
  int64_t start = r.window_start_ns;
  if (r.detail_from_ns && next_id) {
    auto first = reader.first_span_bucket(kSummaryLevelsNs.front(), *next_id, *r.main_loader);
    if (!first.ok()) return first.status();
    constexpr int64_t kMaxBucket = (int64_t{1} << 60) / kS;  // times past +-2^60 ns cannot be
    if (*first && **first > -kMaxBucket && **first < kMaxBucket) {
      const int64_t b0 = **first * kSummaryLevelsNs.front(), b1 = b0 + kSummaryLevelsNs.front() - 1;
      // Exactly where training_window() would start it: the loader's first next() call (in that
      // second), or the dl.epoch_begin just before it.
      auto nexts = reader.spans_named_in({*next_id}, b0, b1);
      if (!nexts.ok()) return nexts.status();
      std::optional<int64_t> first_next;
      for (const SpanRow& sp : *nexts) {
        if (sp.arg0 == *r.main_loader && sp.start_ns >= b0 && sp.start_ns <= b1 &&
            (!first_next || sp.start_ns < *first_next))
          first_next = sp.start_ns;
      }
      int64_t exact = first_next.value_or(b0);
      if (first_next && begin_id) {
        constexpr int64_t kBefore = int64_t{60} * kS;  // __iter__ comes just before the first next()
        auto begins = reader.instants_named_in({*begin_id}, *first_next - kBefore, *first_next);
        if (!begins.ok()) return begins.status();
        std::optional<int64_t> latest;
        for (const InstantRow& in : *begins) {
          if (in.arg0 == *r.main_loader && in.ts_ns <= *first_next && (!latest || in.ts_ns > *latest))
            latest = in.ts_ns;
        }
        if (latest) exact = *latest;
      }
      start = std::min(start, exact);
    }
  }
  // A window of the past (report --detail T0:T1): the whole run goes on to where training_window()
  // would end it, exactly: the latest end of a next() call (any loader's) or of an epoch, found in
  // the last second that holds one.
  int64_t end = r.window_end_ns;
  if (r.detail_to_ns && next_id) {
    constexpr int64_t kMaxBucket = (int64_t{1} << 60) / kS;
    auto sane = [&](const std::optional<int64_t>& b) { return b && *b > -kMaxBucket && *b < kMaxBucket; };
    auto last_next = reader.first_span_bucket(kS, *next_id, std::nullopt, true);
    if (!last_next.ok()) return last_next.status();
    if (sane(*last_next)) {
      const int64_t b0 = **last_next * kS, b1 = b0 + kS - 1;
      auto nexts = reader.spans_named_in({*next_id}, b0, b1);
      if (!nexts.ok()) return nexts.status();
      for (const SpanRow& sp : *nexts) {
        if (sp.start_ns < b0 || sp.start_ns > b1 || !sp.dur_ns || *sp.dur_ns < 0) continue;
        if (sp.start_ns <= INT64_MAX - *sp.dur_ns) end = std::max(end, sp.start_ns + *sp.dur_ns);
      }
    }
    if (end_id) {
      auto last_end = reader.edge_instant_bucket(kS, *end_id, true);
      if (!last_end.ok()) return last_end.status();
      if (sane(*last_end)) {
        auto ends = reader.instants_named_in({*end_id}, **last_end * kS, **last_end * kS + kS - 1);
        if (!ends.ok()) return ends.status();
        for (const InstantRow& in : *ends) end = std::max(end, in.ts_ns);
      }
    }
  }
  const PeriodChoice choice = choose_period(end - start, max_periods);
  out.loader = *r.main_loader;
  out.period_ns = choice.period_ns;
  out.level_ns = choice.level_ns;
  const int64_t first = summary_bucket(start, choice.period_ns);
  const int64_t last = summary_bucket(end - 1, choice.period_ns);
  std::map<int64_t, Acc> acc;  // by period index
  for (int64_t k = first; k <= last; ++k) {
    OverTimePeriod& p = acc[k].p;
    p.t0_ns = std::max(k * choice.period_ns, start);
    p.t1_ns = std::min((k + 1) * choice.period_ns, end);
  }
  // A period is a whole number of buckets: no time is computed from a bucket (a damaged file's
  // could overflow).
  const int64_t buckets_per_period = choice.period_ns / choice.level_ns;
  auto period_of = [&](int64_t bucket) -> Acc* {
    auto it = acc.find(summary_bucket(bucket, buckets_per_period));
    return it == acc.end() ? nullptr : &it->second;
  };

  std::vector<uint32_t> span_names;
  if (next_id) span_names.push_back(*next_id);
  if (fetch_id && !worker_threads.empty()) span_names.push_back(*fetch_id);
  auto spans = reader.span_summaries(choice.level_ns, span_names);
  if (!spans.ok()) return spans.status();
  for (const SpanSummaryRow& row : *spans) {
    Acc* a = period_of(row.bucket);
    if (a == nullptr) continue;
    if (next_id && row.name_id == *next_id) {
      if (row.grp != out.loader || train_threads.count(row.thread_id) == 0) continue;
      a->p.next_calls = add_held(a->p.next_calls, row.count);
      a->p.wait_s += static_cast<double>(row.total_ns) / 1e9;
    } else if (worker_threads.count(row.thread_id) != 0) {
      auto sketch = DurationSketch::decode(row.sketch);
      if (!sketch.ok()) return Status::Error(reader.path() + ": span_summaries: " + sketch.status().message());
      a->p.fetches = add_held(a->p.fetches, row.count);
      a->fetch.merge(*sketch);
    }
  }
  if (step_id) {
    auto instants = reader.instant_summaries(choice.level_ns, {*step_id});
    if (!instants.ok()) return instants.status();
    for (const InstantSummaryRow& row : *instants) {
      Acc* a = period_of(row.bucket);
      if (a == nullptr || row.grp != out.loader || train_threads.count(row.thread_id) == 0) continue;
      a->p.steps = add_held(a->p.steps, row.count);
    }
  }
  auto handoffs = reader.handoff_summaries(choice.level_ns);
  if (!handoffs.ok()) return handoffs.status();
  if (*handoffs) {
    // A batch whose collated size the recording does not hold counts as the loader's batch_size,
    // as the report counts it.
    std::optional<int64_t> batch_size;
    for (const LoaderStats& l : r.loaders) {
      if (l.id == out.loader) batch_size = l.config.batch_size;
    }
    for (auto& [k, a] : acc) a.p.batches = 0;
    for (const HandoffSummaryRow& row : **handoffs) {
      Acc* a = period_of(row.bucket);
      if (a == nullptr || row.loader != out.loader || train_threads.count(row.thread_id) == 0) continue;
      a->p.batches = add_held(*a->p.batches, row.batches);
      a->p.samples = add_held(a->p.samples, row.samples);
      a->p.starts = add_held(a->p.starts, row.starts);
      a->p.start_s += static_cast<double>(row.start_total_ns) / 1e9;
      if (row.unsized > 0) {
        if (batch_size && *batch_size > 0) {
          int64_t n = 0;
          a->p.samples = add_held(a->p.samples, __builtin_mul_overflow(row.unsized, *batch_size, &n) ? INT64_MAX : n);
        } else {
          a->p.samples = add_held(a->p.samples, row.unsized);
          a->p.samples_unknown = add_held(a->p.samples_unknown, row.unsized);
        }
      }
      if (row.steps > 0) {
        auto sketch = DurationSketch::decode(row.step_sketch);
        if (!sketch.ok()) return Status::Error(reader.path() + ": handoff_summaries: " + sketch.status().message());
        a->step.merge(*sketch);
      }
    }
  }
  auto queues = reader.queue_summaries(choice.level_ns);
  if (!queues.ok()) return queues.status();
  if (*queues) {
    for (const QueueSummaryRow& row : **queues) {
      Acc* a = period_of(row.bucket);
      if (a == nullptr || row.loader != out.loader || train_processes.count(row.process_id) == 0 || row.covered_ns <= 0)
        continue;
      if (!a->p.queue) a->p.queue = QueuePeriod{};
      a->p.queue->merge(row);
    }
  }
  Acc total;
  auto finish = [](Acc& a) {
    if (!a.fetch.empty()) {
      a.p.fetch_p50_ms = static_cast<double>(a.fetch.quantile(0.5)) / 1e6;
      a.p.fetch_p99_ms = static_cast<double>(a.fetch.quantile(0.99)) / 1e6;
    }
    if (!a.step.empty()) {
      a.p.step_p50_ms = static_cast<double>(a.step.quantile(0.5)) / 1e6;
      a.p.step_p90_ms = static_cast<double>(a.step.quantile(0.9)) / 1e6;
      a.p.step_p99_ms = static_cast<double>(a.step.quantile(0.99)) / 1e6;
    }
  };
  for (auto& [k, a] : acc) {
    if (total.p.t1_ns == total.p.t0_ns) total.p.t0_ns = a.p.t0_ns;
    total.p.t1_ns = a.p.t1_ns;
    total.p.next_calls = add_held(total.p.next_calls, a.p.next_calls);
    total.p.wait_s += a.p.wait_s;
    total.p.steps = add_held(total.p.steps, a.p.steps);
    total.p.fetches = add_held(total.p.fetches, a.p.fetches);
    total.fetch.merge(a.fetch);
    if (a.p.batches) {
      total.p.batches = add_held(total.p.batches.value_or(0), *a.p.batches);
      total.p.samples = add_held(total.p.samples, a.p.samples);
      total.p.samples_unknown = add_held(total.p.samples_unknown, a.p.samples_unknown);
      total.p.starts = add_held(total.p.starts, a.p.starts);
      total.p.start_s += a.p.start_s;
      total.step.merge(a.step);
    }
    if (a.p.queue) {
      if (!total.p.queue) total.p.queue = QueuePeriod{};
      total.p.queue->merge(*a.p.queue);
    }
    finish(a);
    out.periods.push_back(a.p);
  }
  finish(total);
  out.total = total.p;
  out.available = true;
  return out;
}

}  // namespace stallscope::analysis
