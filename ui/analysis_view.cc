// The analysis as the dashboard draws it; see analysis_view.h.
#include "ui/analysis_view.h"

#include <algorithm>
#include <climits>

#include "analysis/over_time.h"
#include "analysis/session.h"
#include "common/json.h"
#include "ui/append_log.h"
#include "ui/format.h"

namespace stallscope::ui {

// ---------------------------------------------------------------------------------------------
// StepSeries
// ---------------------------------------------------------------------------------------------

StepSeries::StepSeries(const analysis::StepFunction& f) {
  ts_.reserve(f.size());
  v_.reserve(f.size());
  for (const analysis::StepPoint& p : f) {
    ts_.push_back(p.ts_ns);
    v_.push_back(static_cast<int32_t>(std::clamp<int64_t>(p.value, INT32_MIN, INT32_MAX)));
    max_ = std::max(max_, v_.back());
    if (ts_.size() % kBlock == 0) blocks_.push_back(ts_.back());
  }
  integral_.resize(ts_.size());
  for (size_t i = 1; i < ts_.size(); ++i) {
    integral_[i] = integral_[i - 1] + static_cast<double>(v_[i - 1]) * static_cast<double>(ts_[i] - ts_[i - 1]);
  }
  // Min/max pyramid: level 0 summarises blocks of kFan points, level k blocks of kFan^(k+1).
  std::vector<std::pair<int32_t, int32_t>> prev;
  for (size_t i = 0; i < v_.size(); ++i) prev.push_back({v_[i], v_[i]});
  while (prev.size() >= kFan) {
    std::vector<std::pair<int32_t, int32_t>> next;
    for (size_t i = 0; i + kFan <= prev.size(); i += kFan) {
      std::pair<int32_t, int32_t> mm{INT32_MAX, INT32_MIN};
      for (size_t j = i; j < i + kFan; ++j) {
        mm.first = std::min(mm.first, prev[j].first);
        mm.second = std::max(mm.second, prev[j].second);
      }
      next.push_back(mm);
    }
    levels_.push_back(next);
    prev = std::move(next);
  }
}

size_t StepSeries::lower_bound(int64_t t, size_t lo) const {
  const size_t n = ts_.size();
  if (lo >= n || ts_[lo] >= t) return std::min(lo, n);
  // Gallop over the block index (1/64 of the points) from the hint's block to the first block whose
  // last point is at or after t, then search that block.
  const size_t nb = blocks_.size();
  size_t b = lo / kBlock;
  if (b < nb && blocks_[b] < t) {
    const auto [first, last] = gallop_blocks(blocks_, b, t);
    b = static_cast<size_t>(std::lower_bound(blocks_.begin() + static_cast<ptrdiff_t>(first),
                                             blocks_.begin() + static_cast<ptrdiff_t>(last), t) -
                            blocks_.begin());
  }
  const size_t from = std::max(lo, b * kBlock), to = b < nb ? (b + 1) * kBlock : n;
  return static_cast<size_t>(
      std::lower_bound(ts_.begin() + static_cast<ptrdiff_t>(from), ts_.begin() + static_cast<ptrdiff_t>(to), t) -
      ts_.begin());
}

int32_t StepSeries::at(int64_t t) const {
  const size_t i = static_cast<size_t>(std::upper_bound(ts_.begin(), ts_.end(), t) - ts_.begin());
  return i == 0 ? 0 : v_[i - 1];
}

std::pair<int32_t, int32_t> StepSeries::minmax(size_t i0, size_t i1) const {
  std::pair<int32_t, int32_t> mm{INT32_MAX, INT32_MIN};
  auto take = [&mm](const std::pair<int32_t, int32_t>& b) {
    mm.first = std::min(mm.first, b.first);
    mm.second = std::max(mm.second, b.second);
  };
  // Bottom up: at each level take the unaligned ends of [lo, hi), then go up one level with what
  // is left (whole blocks of the level above); at most 2 x (kFan - 1) values per level.
  size_t lo = i0, hi = i1;
  for (; lo < hi && lo % kFan != 0; ++lo) take({v_[lo], v_[lo]});
  for (; hi > lo && hi % kFan != 0; --hi) take({v_[hi - 1], v_[hi - 1]});
  if (lo >= hi) return mm;
  lo /= kFan;
  hi /= kFan;
  for (size_t k = 0; k < levels_.size(); ++k) {
    const auto& level = levels_[k];
    hi = std::min(hi, level.size());  // blocks past the last whole one were taken as points
    if (k + 1 == levels_.size() || hi - lo < kFan) {
      for (size_t j = lo; j < hi; ++j) take(level[j]);
      return mm;
    }
    for (; lo < hi && lo % kFan != 0; ++lo) take(level[lo]);
    for (; hi > lo && hi % kFan != 0; --hi) take(level[hi - 1]);
    if (lo >= hi) return mm;
    lo /= kFan;
    hi /= kFan;
  }
  return mm;  // not reached: the last level takes what is left
}

double StepSeries::integral_to(int64_t t) const {
  const size_t i = static_cast<size_t>(std::upper_bound(ts_.begin(), ts_.end(), t) - ts_.begin());
  if (i == 0) return 0;
  return integral_[i - 1] + static_cast<double>(v_[i - 1]) * static_cast<double>(t - ts_[i - 1]);
}

double StepSeries::mean(int64_t t0, int64_t t1) const {
  if (t1 <= t0 || ts_.empty()) return 0;
  return (integral_to(t1) - integral_to(t0)) / static_cast<double>(t1 - t0);
}

// ---------------------------------------------------------------------------------------------
// Batch look-ups
// ---------------------------------------------------------------------------------------------

namespace {

// The batch a worker was fetching (or had just put) at `t`: by its loader thread when the track is
// one, else by its process.
const analysis::BatchInfo* by_fetch(const AnalysisView& v, const Track& track, int64_t t) {
  const std::vector<std::pair<int64_t, size_t>>* found = nullptr;
  if (auto th = v.fetch_by_thread.find(track.thread_id); th != v.fetch_by_thread.end()) {
    found = &th->second;
  } else if (auto p = v.fetch_by_pid.find(track.pid); p != v.fetch_by_pid.end()) {
    found = &p->second;
  }
  if (found == nullptr) return nullptr;
  const auto& list = *found;
  auto p = std::upper_bound(list.begin(), list.end(), std::make_pair(t, SIZE_MAX));
  if (p == list.begin()) return nullptr;
  --p;
  const analysis::BatchInfo& b = v.model.batches[p->second];
  if (b.fetch_end_ns && t > *b.fetch_end_ns && (!b.put_ns || t > *b.put_ns)) return nullptr;  // between fetches
  return &b;
}

const analysis::BatchInfo* by_key(const AnalysisView& v, int64_t loader, std::optional<int64_t> epoch, int64_t batch,
                                  int64_t t) {
  if (loader == Item::kNoArg || batch < 0) return nullptr;
  const int64_t e = epoch ? *epoch : v.model.epoch_at(loader, t);
  return v.model.batch(loader, e, batch);
}

}  // namespace

const analysis::BatchInfo* AnalysisView::batch_of(const Lane& lane, const Track& track, const Item& it) const {
  switch (it.style) {
    case Style::kNext:
      if (it.a1 == Item::kNoArg32 || it.a2 == Item::kNoArg32) return nullptr;
      return by_key(*this, it.a0, it.a2, it.a1, it.start_ns);
    case Style::kFetch:
    case Style::kCollate:
      if (lane.role == LaneRole::kWorker) return by_fetch(*this, track, it.start_ns);
      if (it.a1 == Item::kNoArg32) return nullptr;
      return by_key(*this, it.a0, std::nullopt, it.a1, it.start_ns);
    case Style::kPin:
      if (it.a1 == Item::kNoArg32) return nullptr;
      return by_key(*this, it.a0, std::nullopt, it.a1, it.start_ns);
    default: return nullptr;
  }
}

const analysis::BatchInfo* AnalysisView::batch_of(const Lane& lane, const Track& track, const Marker& m) const {
  switch (m.kind) {
    case kMarkSent:
    case kMarkRecv:
      if (m.a1 == Item::kNoArg32) return nullptr;
      return by_key(*this, m.a0, std::nullopt, m.a1, m.ts_ns);
    case kMarkPut:
      if (lane.role != LaneRole::kWorker) return nullptr;
      return by_fetch(*this, track, m.ts_ns);
    default: return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------
// Building
// ---------------------------------------------------------------------------------------------

namespace {

Style cause_style(const std::string& cause) {
  if (cause == analysis::kCauseH2d) return Style::kStallTransfer;
  if (cause == analysis::kCauseSync) return Style::kStallSync;
  if (cause == analysis::kCauseHostOther) return Style::kStallHost;
  return Style::kStallData;
}

}  // namespace

std::shared_ptr<AnalysisView> build_analysis_view(const analysis::Session& s) {
  auto v = std::make_shared<AnalysisView>();
  v->model = analysis::build_dataloader_model(s);
  v->report = analysis::analyze(s, v->model);
  v->data_end_ns = s.end_ns;
  const analysis::Report& r = v->report;

  for (const analysis::StallInterval& iv : r.stall.intervals) {
    Item it;
    it.start_ns = iv.start_ns;
    it.end_ns = iv.end_ns;
    it.style = cause_style(iv.cause);
    it.a0 = iv.loader;
    it.a1 = static_cast<int32_t>(iv.batch);
    it.a2 = static_cast<int32_t>(iv.epoch);
    if (v->stalls.size() > 0 && it.start_ns < v->stalls[v->stalls.size() - 1].end_ns) {
      it.start_ns = v->stalls[v->stalls.size() - 1].end_ns;  // overlapping causes: the first one keeps the time
      if (it.end_ns <= it.start_ns) continue;
    }
    v->stalls.try_append(it);
  }

  v->ready = StepSeries(r.queue.ready);
  v->in_flight = StepSeries(r.queue.in_flight);
  const analysis::LoaderStats* main = r.loader();
  if (main && main->config.batch_size) v->batch_size = *main->config.batch_size;
  const analysis::LoaderInfo* main_info = main ? v->model.loader(main->id) : nullptr;
  if (main_info && !v->ready.empty()) {
    std::vector<std::pair<int64_t, int64_t>> active;
    for (const auto& [e, info] : main_info->epochs) {
      if (info.first_next_ns && info.last_next_end_ns) active.push_back({*info.first_next_ns, *info.last_next_end_ns});
    }
    std::sort(active.begin(), active.end());
    // Walk the ready function: each zero segment, clipped to the loader's active epochs; adjacent
    // zero segments (points that kept the value at 0) become one interval.
    int64_t open0 = -1, open1 = -1;
    auto flush = [&] {
      if (open0 >= 0 && open1 > open0) {
        Item it;
        it.start_ns = open0;
        it.end_ns = open1;
        it.style = Style::kQueueEmpty;
        v->queue_empty.try_append(it);
      }
      open0 = open1 = -1;
    };
    for (const auto& [a0, a1] : active) {
      size_t i = v->ready.lower_bound(a0);
      int64_t t = a0;
      int32_t val = v->ready.at(a0);
      while (t < a1) {
        const int64_t next = i < v->ready.size() ? std::min(v->ready.ts(i), a1) : a1;
        if (val == 0 && next > t) {
          if (open1 != t) flush();
          if (open0 < 0) open0 = t;
          open1 = next;
        }
        if (i >= v->ready.size() || v->ready.ts(i) >= a1) break;
        t = v->ready.ts(i);
        val = v->ready.value(i);
        ++i;
      }
    }
    flush();
  }

  for (size_t i = 0; i < v->model.batches.size(); ++i) {
    const analysis::BatchInfo& b = v->model.batches[i];
    if (!b.fetch_start_ns) continue;
    if (b.worker_thread != 0) {
      v->fetch_by_thread[b.worker_thread].push_back({*b.fetch_start_ns, i});
    } else if (b.worker_pid > 0) {
      v->fetch_by_pid[b.worker_pid].push_back({*b.fetch_start_ns, i});
    }
  }
  for (auto& [pid, list] : v->fetch_by_pid) std::sort(list.begin(), list.end());
  for (auto& [thread, list] : v->fetch_by_thread) std::sort(list.begin(), list.end());

  // Where each recommendation's evidence is: the analysis says; the view only turns a counter
  // into the heat strip's metric.
  auto target = [](const analysis::EvidenceAt& e) {
    EvidenceTarget t;
    t.t0 = e.t0;
    t.t1 = e.t1;
    t.pid = e.pid;
    t.heat_metric = counter_metric(e.counter);
    t.what = e.what;
    return t;
  };
  if (r.longest_stall) v->longest_stall = target(*r.longest_stall);
  for (const analysis::Recommendation& rec : r.recommendations) v->targets.push_back(target(rec.where));
  return v;
}

Result<std::shared_ptr<const AnalysisView>> run_analysis(const std::string& path,
                                                         const analysis::DetailBudget& budget) {
  auto reader = Reader::open(path);
  if (!reader.ok()) return reader.status();
  // A long recording's latest part, as `stallscope report` reads it: each pass (they rerun while
  // following a live run) costs the same however long the run has gone on.
  auto from = analysis::choose_detail_from(**reader, budget);
  if (!from.ok()) return from.status();
  analysis::LoadOptions opt;
  budget.apply(*from, &opt);
  auto s = analysis::load_session(**reader, opt);
  if (!s.ok()) return s.status();
  auto view = build_analysis_view(*s);
  // The training loader over the whole run, from the summaries; never a reason the pass fails.
  auto over_time = analysis::over_time(**reader, view->report);
  if (over_time.ok()) view->report.over_time = std::move(*over_time);
  return std::shared_ptr<const AnalysisView>(std::move(view));
}

}  // namespace stallscope::ui
