// TopSource: the live figures each refresh, the analysis when due; see top_source.h.
#include "cli/top_source.h"

#include <algorithm>
#include <map>
#include <utility>

#include "analysis/report.h"
#include "analysis/session.h"

namespace stallscope::cli {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;
// A recording not marked complete that has grown in this long is live; else it is quiet.
constexpr double kQuietAfterS = 5;
// Queue rows reach the summaries once no earlier event can come: up to ~5 s after their time
// (storage/summaries.h). Seconds that recent without a row are not written yet, not empty.
constexpr int64_t kQueueHorizonS = 6;

bool same(const TableHeads& a, const TableHeads& b) {
  return a.spans == b.spans && a.instants == b.instants && a.counters == b.counters &&
         a.gpu_activities == b.gpu_activities;
}

}  // namespace

TopSource::TopSource(std::unique_ptr<Reader> reader, bool live, std::optional<int64_t> pid, double interval_s)
    : reader_(std::move(reader)), registered_live_(live) {
  frame_.source = reader_->path();
  frame_.pid = pid;
  frame_.interval_s = interval_s;
}

const TopFrame& TopSource::refresh(Clock::time_point now) {
  frame_.error.clear();
  if (auto meta = reader_->meta(); meta.ok()) {
    if (auto it = meta->find("command"); it != meta->end()) frame_.command = it->second;
    auto c = meta->find("complete");
    complete_ = c != meta->end() && c->second == "1";
  } else {
    frame_.error = meta.status().message();
  }
  if (!complete_ || !analysed_complete_) {  // a finished recording read once is read
    if (Status s = state_.update(*reader_); !s.ok()) frame_.error = s.message();
  }
  frame_.figures = state_.figures();
  if (auto heads = reader_->heads(); heads.ok()) {
    if (!last_growth_ || !same(*heads, last_heads_)) last_growth_ = now;
    last_heads_ = *heads;
  }
  int64_t end_ns = frame_.figures.training_end_ns;
  if (auto flush = reader_->last_flush(); flush.ok() && *flush) end_ns = std::max(end_ns, (*flush)->ts_ns);
  frame_.recorded_s = static_cast<double>(end_ns) / 1e9;
  const double quiet = last_growth_ ? std::chrono::duration<double>(now - *last_growth_).count() : 0;
  if (complete_) {
    frame_.state = TopFrame::State::kFinished;
  } else if (quiet < kQuietAfterS || (registered_live_ && frame_.state == TopFrame::State::kOpening)) {
    frame_.state = TopFrame::State::kLive;
  } else {
    frame_.state = TopFrame::State::kQuiet;
    frame_.quiet_s = quiet;
  }
  read_queue_history();
  if (frame_.analysis && analysed_at_) {
    frame_.analysis->age_s = std::chrono::duration<double>(now - *analysed_at_).count();
  }
  return frame_;
}

void TopSource::read_queue_history() {
  frame_.ready_history.clear();
  const metrics::Figures& f = frame_.figures;
  if (!f.queue_seen || !f.training_loader) return;
  const int64_t now_bucket = f.training_end_ns / kSecondNs;
  const int64_t first = now_bucket - (kTopHistoryS - 1) - kQueueHorizonS;
  auto rows = reader_->queue_summaries(kSecondNs, first, now_bucket);
  if (!rows.ok()) {
    frame_.error = rows.status().message();
    return;
  }
  if (!*rows) return;  // a recording made before queue summaries were kept
  std::map<int64_t, QueueFigures> by_bucket;
  for (const QueueSummaryRow& r : **rows) {
    if (r.loader == *f.training_loader) by_bucket[r.bucket].merge(r);
  }
  // The line ends at the newest second summarised when that is recent (the rest is not written
  // yet), else now (the loader has been idle since).
  int64_t last = now_bucket;
  if (!by_bucket.empty() && by_bucket.rbegin()->first >= now_bucket - kQueueHorizonS) last = by_bucket.rbegin()->first;
  for (int64_t b = last - (kTopHistoryS - 1); b <= last; ++b) {
    auto it = by_bucket.find(b);
    if (it == by_bucket.end() || it->second.covered_ns <= 0) {
      frame_.ready_history.push_back(std::nullopt);
    } else {
      frame_.ready_history.push_back(it->second.ready_mean());
    }
  }
}

bool TopSource::analyse_if_due(Clock::time_point now, bool force) {
  if (!force) {
    if (complete_ && analysed_complete_) return false;
    if (next_analysis_ && now < *next_analysis_) return false;
  }
  const auto t0 = Clock::now();
  // A finished recording: the report's own budget (its latest part when long); a live one: the
  // latest minute, what the loop does now.
  analysis::DetailBudget budget;
  if (!complete_) budget.last_ns = kAnalysisWindowNs;
  const bool was_complete = complete_;
  auto from = analysis::choose_detail_from(*reader_, budget);
  std::optional<analysis::Report> report;
  if (from.ok()) {
    analysis::LoadOptions load;
    budget.apply(*from, &load);
    auto session = analysis::load_session(*reader_, load);
    if (session.ok()) {
      report = analysis::analyze(*session);
    } else {
      frame_.error = session.status().message();
    }
  } else {
    frame_.error = from.status().message();
  }
  const double cost_s = std::chrono::duration<double>(Clock::now() - t0).count();
  next_analysis_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                      std::max(kAnalysisMinIntervalS, cost_s / kAnalysisCostShare)));
  if (!report) return false;
  analysed_at_ = now;
  analysed_complete_ = was_complete;
  TopFrame::Analysis a;
  a.mode = report->mode;
  a.window_s = report->wall_s;
  a.stall_fraction = report->stall.fraction;
  for (const auto& [cause, s] : report->stall.by_cause_s) {
    if (s > 0 && report->stall.seconds > 0) a.causes.emplace_back(cause, s / report->stall.seconds);
  }
  std::stable_sort(a.causes.begin(), a.causes.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  if (!report->recommendations.empty()) {
    const analysis::Recommendation& r = report->recommendations.front();
    a.severity = r.severity;
    a.advice = r.action.empty() ? r.message : r.action + ": " + r.message;
    for (char& c : a.advice) {
      if (c == '\n' || c == '\t') c = ' ';
    }
  }
  auto process = [&](int64_t pid, const char* role, std::optional<double> cpu, std::optional<double> runq) {
    metrics::Figures::Process p;
    p.role = role;
    p.pid = pid;
    p.cpu_cores = cpu;
    p.runq_wait_ratio = runq;
    a.processes.push_back(std::move(p));
  };
  if (report->train_pid != 0) {
    process(report->train_pid, "train", report->train_cpu_util, report->train_runq_delay_fraction);
  }
  for (const analysis::WorkerStats& w : report->workers) {
    if (!w.thread) process(w.pid, "worker", w.cpu_util, w.runq_delay_fraction);
  }
  frame_.analysis = std::move(a);
  return true;
}

}  // namespace stallscope::cli
