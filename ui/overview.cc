// The dashboard's overview of a whole run from the summaries; see overview.h.
#include "ui/overview.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/vocabulary.h"
#include "storage/summaries.h"

namespace stallscope::ui {

int64_t overview_level(int64_t run_ns, int64_t max_buckets) {
  for (int64_t level : kSummaryLevelsNs) {
    if (run_ns / level < max_buckets) return level;
  }
  return kSummaryLevelsNs.back();
}

int64_t Overview::rows_in(int64_t t0, int64_t t1) const {
  if (rows.empty() || t1 < t0) return 0;
  const int64_t b0 = std::max<int64_t>(summary_bucket(t0, level_ns) - first_bucket, 0);
  const int64_t b1 =
      std::min<int64_t>(summary_bucket(t1, level_ns) - first_bucket, static_cast<int64_t>(rows.size()) - 1);
  int64_t n = 0;
  for (int64_t b = b0; b <= b1; ++b) n += rows[static_cast<size_t>(b)];
  return n;
}

bool Overview::Prefix::add(size_t a, size_t b, double* sum_out, double* n_out) const {
  if (b + 1 >= n.size() || a > b) return false;
  const double k = n[b + 1] - n[a];
  if (k <= 0) return false;
  *sum_out += sum[b + 1] - sum[a];
  *n_out += k;
  return true;
}

bool Overview::buckets(int64_t t0, int64_t t1, size_t* a, size_t* b) const {
  if (rows.empty() || t1 <= t0 || t1 <= first_ns || t0 >= end_ns) return false;
  const int64_t lo = std::max<int64_t>(summary_bucket(t0, level_ns) - first_bucket, 0);
  const int64_t hi =
      std::min<int64_t>(summary_bucket(t1 - 1, level_ns) - first_bucket, static_cast<int64_t>(rows.size()) - 1);
  if (hi < lo) return false;
  *a = static_cast<size_t>(lo);
  *b = static_cast<size_t>(hi);
  return true;
}

std::optional<std::pair<int64_t, int64_t>> wanted_detail(const Timeline& tl, double v0, double v1) {
  if (!tl.overview || !(v1 > v0) || tl.end_ns < tl.first_ns) return std::nullopt;
  // A damaged recording's ends can be anywhere in int64: its window stays within kSaneNs.
  if (tl.first_ns < -kSaneNs || tl.end_ns > kSaneNs) return std::nullopt;
  // Whole nanoseconds inside the run (a view may reach past both ends).
  const double lo = static_cast<double>(tl.first_ns), hi = static_cast<double>(tl.end_ns);
  const int64_t a = static_cast<int64_t>(std::clamp(v0, lo, hi)), b = static_cast<int64_t>(std::clamp(v1, lo, hi));
  const bool held = a >= tl.detail_t0 && (b <= tl.detail_t1 || tl.detail_t1 == INT64_MAX);
  if (held) return std::nullopt;
  const Overview& o = *tl.overview;
  const int64_t budget = tl.detail_rows > 0 ? tl.detail_rows : INT64_MAX;
  if (o.rows_in(a, b) > budget) return std::nullopt;
  // The widest margin that keeps the window within half the budget (zooming out a step or panning
  // a little then needs no new read, and a read stays well under a second), else the view alone.
  const int64_t w = std::max<int64_t>(b - a, 1);
  for (double k : {64.0, 16.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.0}) {
    const double margin = std::min(static_cast<double>(w) * k, static_cast<double>(tl.end_ns - tl.first_ns));
    const int64_t m = static_cast<int64_t>(margin);
    const int64_t w0 = std::max(tl.first_ns, a - m), w1 = std::min(tl.end_ns, b + m);
    if (o.rows_in(w0, w1) > (k > 0 ? budget / 2 : budget)) continue;
    // Reaching the last bucket: the latest part, followed from w0.
    if (w1 >= tl.end_ns || summary_bucket(w1, o.level_ns) >= o.first_bucket + static_cast<int64_t>(o.size()) - 1) {
      return std::make_pair(w0, INT64_MAX);
    }
    return std::make_pair(w0, w1);
  }
  return std::nullopt;
}

Overview::QueueBucket Overview::combine(const std::vector<QueueBucket>& q, size_t a, size_t b) {
  QueueBucket out;
  for (size_t i = a; i <= b && i < q.size(); ++i) out.merge(q[i]);
  return out;
}

Result<std::shared_ptr<Overview>> read_overview(Reader& r, int64_t run_ns, int64_t max_buckets) {
  auto o = std::make_shared<Overview>();
  o->level_ns = overview_level(std::max<int64_t>(run_ns, 0), max_buckets);
  // The names looked for first, then every other call at once (Reader::expect): over a link, two
  // round trips rather than twelve.
  auto ids = r.string_ids(kOverviewNames);
  if (!ids.ok()) return ids.status();
  auto id_of = [&](const char* name) -> int64_t {
    auto it = ids->find(name);
    return it == ids->end() ? -1 : static_cast<int64_t>(it->second);
  };
  const bool flow = id_of("dl.sent") >= 0 && id_of("dl.recv") >= 0;
  const std::vector<uint32_t> flow_names =
      flow ? std::vector<uint32_t>{ids->at("dl.sent"), ids->at("dl.recv")} : std::vector<uint32_t>{};
  r.expect([&](Reader& x) {
    (void)x.rows_per_bucket(o->level_ns);
    (void)x.span_totals(o->level_ns);
    (void)x.processes();
    (void)x.threads();
    (void)x.counter_tracks();
    (void)x.counter_totals(o->level_ns);
    if (flow) (void)x.instant_summaries(o->level_ns, flow_names);
    (void)x.queue_summaries(o->level_ns);
    (void)x.gpu_totals(o->level_ns);
  });
  auto per_bucket = r.rows_per_bucket(o->level_ns);
  if (!per_bucket.ok()) return per_bucket.status();
  // A bucket whose time is not within a few years of the session start is a damaged row's: left
  // out (its start would not fit in int64 arithmetic), as are those past max_buckets x 4 from the
  // first (a clock jump's), rather than allocated for.
  const int64_t sane = kSaneNs / o->level_ns;
  std::erase_if(*per_bucket, [&](const auto& b) { return b.first < -sane || b.first > sane; });
  // In bucket order as read here: a damaged file's buckets need not be integers, and SQLite orders
  // those apart from the numbers it reads them as.
  std::sort(per_bucket->begin(), per_bucket->end());
  if (per_bucket->empty()) return o;
  o->first_bucket = per_bucket->front().first;
  const int64_t last = std::min(per_bucket->back().first, o->first_bucket + 4 * max_buckets);
  o->rows.assign(static_cast<size_t>(last - o->first_bucket + 1), 0);
  auto index = [&](int64_t bucket) -> int64_t {
    return bucket < o->first_bucket || bucket > last ? -1 : bucket - o->first_bucket;
  };
  for (const auto& [bucket, n] : *per_bucket) {
    const int64_t i = index(bucket);
    if (i < 0) continue;
    const int64_t rows = std::clamp<int64_t>(n, 0, int64_t{1} << 40);  // a damaged count's, held
    o->rows[static_cast<size_t>(i)] += rows;
    o->total_rows += rows;
  }
  o->first_ns = o->bucket_start(0);
  o->end_ns = o->bucket_start(o->rows.size());
  const double level = static_cast<double>(o->level_ns);

  // Each thread's main activity: the loop's wait, a worker's fetch, the pin thread's pin, else the
  // name with the most time over the run.
  const std::pair<int64_t, Style> kPreferred[] = {
      {id_of("dl.next"), Style::kNext}, {id_of("dl.fetch"), Style::kFetch}, {id_of("dl.pin"), Style::kPin}};
  auto totals = r.span_totals(o->level_ns);
  if (!totals.ok()) return totals.status();
  std::map<int64_t, std::map<uint32_t, double>> by_thread;  // thread -> name -> total (ns)
  for (const Reader::SpanTotal& t : *totals) {
    by_thread[t.thread_id][t.name_id] += static_cast<double>(std::max<int64_t>(t.total_ns, 0));
  }
  std::map<int64_t, uint32_t> main_name;
  for (const auto& [thread, names] : by_thread) {
    Overview::Share share;
    share.style = Style::kNvtx;
    uint32_t pick = 0;
    double best = -1;
    for (const auto& [id, style] : kPreferred) {
      if (id >= 0 && names.count(static_cast<uint32_t>(id))) {
        pick = static_cast<uint32_t>(id);
        share.style = style;
        best = 1e300;
        break;
      }
    }
    if (best < 0) {
      for (const auto& [name, total] : names) {
        if (total > best) best = total, pick = name;
      }
    }
    main_name[thread] = pick;
    share.busy.assign(o->rows.size(), 0.0f);
    o->threads.emplace(thread, std::move(share));
  }
  // Prefix sums of per-bucket values (NaN-free: each bucket's sum and count).
  const size_t nb = o->rows.size();
  auto prefix_of = [nb](const std::vector<double>& sum, const std::vector<double>& n) {
    Overview::Prefix p;
    p.sum.assign(nb + 1, 0.0);
    p.n.assign(nb + 1, 0.0);
    for (size_t i = 0; i < nb; ++i) {
      p.sum[i + 1] = p.sum[i] + sum[i];
      p.n[i + 1] = p.n[i] + n[i];
    }
    return p;
  };
  std::map<int64_t, std::pair<std::vector<double>, std::vector<double>>> fetch_sums;  // thread -> (ns, count)
  for (const Reader::SpanTotal& t : *totals) {
    const int64_t i = index(t.bucket);
    if (i < 0 || main_name[t.thread_id] != t.name_id) continue;
    Overview::Share& share = o->threads[t.thread_id];
    const double total = static_cast<double>(std::max<int64_t>(t.total_ns, 0));
    float& b = share.busy[static_cast<size_t>(i)];
    b = std::min(1.0f, b + static_cast<float>(total / level));
    if (share.style == Style::kFetch && t.count > 0) {
      auto& [ns, n] = fetch_sums[t.thread_id];
      if (ns.empty()) {
        ns.assign(nb, 0.0);
        n.assign(nb, 0.0);
      }
      ns[static_cast<size_t>(i)] += total;
      n[static_cast<size_t>(i)] += static_cast<double>(std::min<int64_t>(t.count, int64_t{1} << 40));
    }
  }
  for (const auto& [thread, sums] : fetch_sums) o->fetches.emplace(thread, prefix_of(sums.first, sums.second));

  // The processes of the threads, and their /proc counters.
  auto processes = r.processes();
  if (!processes.ok()) return processes.status();
  auto threads = r.threads();
  if (!threads.ok()) return threads.status();
  std::map<int64_t, int64_t> pid_of_process;
  for (const ProcessRow& p : *processes) pid_of_process[p.id] = p.pid;
  for (const ThreadRow& t : *threads) {
    auto p = pid_of_process.find(t.process_id);
    if (p != pid_of_process.end() && o->threads.count(t.id)) o->thread_pid[t.id] = p->second;
  }
  auto tracks = r.counter_tracks();
  if (!tracks.ok()) return tracks.status();
  std::map<int64_t, std::pair<int64_t, int>> track_of;  // track id -> (pid, metric)
  for (const CounterTrackRow& t : *tracks) {
    const int metric = counter_metric(vocab::counter_of(t.name));
    if (metric >= 0) track_of[t.id] = {t.pid, metric};
  }
  if (!track_of.empty()) {
    auto counters = r.counter_totals(o->level_ns);
    if (!counters.ok()) return counters.status();
    using Sums = std::array<std::pair<std::vector<double>, std::vector<double>>, kCounterMetricCount>;
    std::map<int64_t, Sums> counter_sums;  // pid -> metric -> (sum, count)
    for (const Reader::CounterTotal& c : *counters) {
      const int64_t i = index(c.bucket);
      auto t = track_of.find(c.track_id);
      if (i < 0 || t == track_of.end() || c.count <= 0 || !std::isfinite(c.sum)) continue;
      auto& [sum, n] = counter_sums[t->second.first][static_cast<size_t>(t->second.second)];
      if (sum.empty()) {
        sum.assign(nb, 0.0);
        n.assign(nb, 0.0);
      }
      sum[static_cast<size_t>(i)] += c.sum;
      n[static_cast<size_t>(i)] += static_cast<double>(std::min<int64_t>(c.count, int64_t{1} << 40));
    }
    for (auto& [pid, sums] : counter_sums) {
      auto& out = o->counters[pid];
      for (size_t m = 0; m < sums.size(); ++m) {
        if (!sums[m].first.empty()) out[m] = prefix_of(sums[m].first, sums[m].second);
      }
    }
  }

  // Batches sent and not yet received, per loader, at each bucket's end.
  if (flow) {
    const uint32_t sent = flow_names[0];
    auto rows = r.instant_summaries(o->level_ns, flow_names);
    if (!rows.ok()) return rows.status();
    std::map<int64_t, std::vector<int64_t>> delta;  // loader -> per bucket
    for (const InstantSummaryRow& row : *rows) {
      const int64_t i = index(row.bucket);
      if (i < 0 || row.grp < 0) continue;
      auto& d = delta[row.grp];
      if (d.empty()) d.assign(nb, 0);
      const int64_t n = std::clamp<int64_t>(row.count, 0, int64_t{1} << 40);
      d[static_cast<size_t>(i)] += row.name_id == sent ? n : -n;
    }
    for (const auto& [loader, d] : delta) {
      std::vector<int32_t>& out = o->outstanding[loader];
      out.resize(nb);
      int64_t run = 0;
      for (size_t i = 0; i < nb; ++i) {
        run += d[i];
        out[i] = static_cast<int32_t>(std::clamp<int64_t>(run, 0, INT32_MAX));
      }
    }
  }

  // The loaders' queues, where the recording keeps them (several processes with the same loader
  // id, ranks of a merged job: their time and batch-time added up, the lowest and highest of all).
  auto queues = r.queue_summaries(o->level_ns);
  if (!queues.ok()) return queues.status();
  if (*queues) {
    for (const QueueSummaryRow& row : **queues) {
      const int64_t i = index(row.bucket);
      if (i < 0 || row.covered_ns <= 0) continue;
      auto& q = o->queues[row.loader];
      if (q.empty()) q.assign(nb, Overview::QueueBucket{});
      QueueFigures one = row;  // a damaged file's negative figures drawn as none
      for (int64_t* v : {&one.ready_ns, &one.flight_ns, &one.empty_ns, &one.ready_min, &one.ready_max, &one.flight_min,
                         &one.flight_max})
        *v = std::max<int64_t>(*v, 0);
      q[static_cast<size_t>(i)].merge(one);
    }
  }

  auto gpu = r.gpu_totals(o->level_ns);
  if (!gpu.ok()) return gpu.status();
  for (const Reader::GpuTotal& g : *gpu) {
    const int64_t i = index(g.bucket);
    if (i < 0) continue;
    Overview::Share& d = o->devices[g.device];
    if (d.busy.empty()) {
      d.style = Style::kKernel;
      d.busy.assign(o->rows.size(), 0.0f);
    }
    float& b = d.busy[static_cast<size_t>(i)];
    b = std::min(1.0f, b + static_cast<float>(static_cast<double>(std::max<int64_t>(g.total_ns, 0)) / level));
  }
  return o;
}

}  // namespace stallscope::ui
