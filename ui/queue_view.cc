// Queue depth of the main DataLoader over time, on the timeline's time axis: batches in flight
// (sent to a worker, not yet put) and ready (put, not yet handed to the loop), the analysis's
// exact step functions. Periods when nothing was ready while the loop iterated are marked red:
// that is when next() has to wait. One pixel column costs two lower_bounds and a min/max pyramid
// query, whatever the zoom. Outside the detail held (a long recording), the overview's batches
// sent and not yet received at each summary interval's end.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ui/format.h"
#include "ui/overview.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/row_draw.h"
#include "ui/time_axis.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

constexpr ImU32 kReady = IM_COL32(104, 200, 120, 255);
constexpr ImU32 kFlight = IM_COL32(90, 150, 235, 255);
constexpr ImU32 kOutstanding = IM_COL32(150, 160, 190, 200);  // in flight or ready, from the summaries

// Draws one series as a min/max band per pixel column up to t_end (the end of the recording: the
// last value is not known to hold past it); returns the columns drawn.
int draw_series(ImDrawList* dl, const StepSeries& s, const TimeAxis& ax, double t_end, float ytop, float ybot,
                float vmax, ImU32 col) {
  if (s.empty()) return 0;
  int cols = 0;
  const float h = ybot - ytop;
  auto y = [&](double v) { return ybot - h * static_cast<float>(std::clamp(v / vmax, 0.0, 1.0)); };
  float prev_y = -1;
  size_t hint = 0;
  int64_t prev_ib = INT64_MIN;  // the previous column's end, and the first point after it
  size_t prev_i2 = 0;
  for (float x = std::floor(ax.x0); x < ax.x1; x += 1.0f) {
    const double ta = ax.t(x), tb = ax.t(x + 1.0f);
    if (tb < static_cast<double>(s.ts(0))) continue;
    if (ta > t_end) break;
    const int64_t ia = static_cast<int64_t>(ta), ib = static_cast<int64_t>(tb);
    // Columns go left to right: every search starts from the previous one, and a column that
    // starts where the previous one ended starts at the point found for that end.
    const size_t i0 = ia == prev_ib ? prev_i2 : s.lower_bound(ia + 1, hint);  // first point after the start
    const size_t i1 = s.lower_bound(ib, i0);
    const size_t i2 = s.lower_bound(ib + 1, i1);  // first point after the column's end
    hint = i1;
    prev_ib = ib;
    prev_i2 = i2;
    int32_t lo = i0 == 0 ? 0 : s.value(i0 - 1), hi = lo;
    if (i1 > i0) {
      const auto mm = s.minmax(i0, i1);
      lo = std::min(lo, mm.first);
      hi = std::max(hi, mm.second);
    }
    float y0 = y(hi), y1 = y(lo);
    // Join to the previous column so that a step reads as a line.
    if (prev_y >= 0) {
      y0 = std::min(y0, prev_y);
      y1 = std::max(y1, prev_y);
    }
    dl->AddRectFilled(ImVec2(x, y0 - 1), ImVec2(x + 1, y1 + 1), col);
    prev_y = y(i2 == 0 ? 0 : s.value(i2 - 1));
    ++cols;
  }
  return cols;
}

}  // namespace

void draw_queue(Frame& f, const ImVec2& pos, const ImVec2& size) {
  begin_panel(f, "queue", pos, size, kBackground, true,
              ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
  const TimeAxis ax = view_time_axis(f);
  const float ytop = wp.y + 8, ybot = wp.y + ws.y - 8;

  dl->AddRectFilled(wp, ImVec2(ax.x0 - 1, wp.y + ws.y), kPanelBg);
  dl->AddText(ImVec2(wp.x + 8, wp.y + 6), kText, "queue depth");
  dl->AddRectFilled(ImVec2(wp.x + 10, wp.y + 30), ImVec2(wp.x + 20, wp.y + 38), kReady);
  dl->AddText(ImVec2(wp.x + 26, wp.y + 26), kTextDim, "ready");
  dl->AddRectFilled(ImVec2(wp.x + 10, wp.y + 48), ImVec2(wp.x + 20, wp.y + 56), kFlight);
  dl->AddText(ImVec2(wp.x + 26, wp.y + 44), kTextDim, "in flight");
  dl->AddRectFilled(ImVec2(wp.x + 10, wp.y + 66), ImVec2(wp.x + 20, wp.y + 74), with_alpha(kBad, 0.6f));
  dl->AddText(ImVec2(wp.x + 26, wp.y + 62), kTextDim, "none ready");

  const AnalysisView* an = f.an;
  if (!an || !an->report.queue.available || an->ready.empty()) {
    std::string note =
        !an ? "waiting for the analysis..."
            : (an->report.queue.note.empty() ? "no queue events in this recording" : an->report.queue.note);
    dl->AddText(ImVec2(ax.x0 + 10, wp.y + ws.y * 0.5f - 8), kTextDim, note.c_str());
    end_panel();
    return;
  }
  // Outside the detail held (a long recording), from the overview (the summaries): the main
  // loader's batches ready and in flight per bucket (queue_summaries), else, in a recording made
  // before that table was kept, its batches sent and not yet received at each bucket's end.
  const std::vector<Overview::QueueBucket>* queue = nullptr;
  const std::vector<int32_t>* outstanding = nullptr;
  if (f.tl && f.tl->overview && an->report.main_loader) {
    auto q = f.tl->overview->queues.find(*an->report.main_loader);
    if (q != f.tl->overview->queues.end() && !q->second.empty()) {
      queue = &q->second;
    } else {
      auto it = f.tl->overview->outstanding.find(*an->report.main_loader);
      if (it != f.tl->overview->outstanding.end() && !it->second.empty()) outstanding = &it->second;
    }
  }
  int32_t outstanding_max = 0;
  if (outstanding) outstanding_max = *std::max_element(outstanding->begin(), outstanding->end());
  if (queue) {
    for (const Overview::QueueBucket& b : *queue)
      outstanding_max = static_cast<int32_t>(
          std::clamp<int64_t>(std::max({int64_t{outstanding_max}, b.ready_max, b.flight_max}), 0, INT32_MAX));
  }
  const float vmax =
      static_cast<float>(std::max({an->ready.max_value(), an->in_flight.max_value(), outstanding_max, 1}));
  dl->PushClipRect(ImVec2(ax.x0, wp.y), ImVec2(ax.x1, wp.y + ws.y), true);
  // Grid: a line per batch of depth (or a few lines when deep).
  const int step = vmax <= 8 ? 1 : static_cast<int>(std::ceil(vmax / 8));
  for (int v = 0; v <= static_cast<int>(vmax); v += step) {
    const float yy = ybot - (ybot - ytop) * static_cast<float>(v) / vmax;
    dl->AddLine(ImVec2(ax.x0, yy), ImVec2(ax.x1, yy), kGrid);
  }
  // Empty periods: the band behind the plot.
  RowDraw d;
  d.dl = dl;
  d.axis = &ax;
  d.y0 = ytop;
  d.y1 = ybot;
  d.labels = false;
  d.alpha = 0.28f;
  d.cache = f.dump ? nullptr : f.geo;
  const int64_t empty = draw_row(an->queue_empty, d);
  auto series = [&](const StepSeries& s, ImU32 col) {
    // (The end of the data is not in the key: new data forget the cache.)
    if (!d.cache) return draw_series(dl, s, ax, f.data_t1, ytop, ybot, vmax, col);
    const GeometryCache::Key k{&s, ax.t0, ax.t1, ax.x0, ax.x1, ytop, ybot, vmax, static_cast<double>(col)};
    return static_cast<int>(
        d.cache->draw(dl, k, [&] { return draw_series(dl, s, ax, f.data_t1, ytop, ybot, vmax, col); }));
  };
  const int cols = series(an->in_flight, kFlight) + series(an->ready, kReady);
  // Outside the detail: each pixel column the detail's plot does not cover, with the overview's
  // buckets a..b under it, to draw(x, a, b), which says whether it drew.
  auto overview_columns = [&](const auto& draw) {
    int n = 0;
    for (float x = std::floor(ax.x0); x < ax.x1; x += 1.0f) {
      const int64_t ta = static_cast<int64_t>(ax.t(x)), tb = static_cast<int64_t>(ax.t(x + 1.0f));
      if (tb > f.tl->detail_t0 && ta < f.tl->detail_t1) continue;  // the detail's own plot is there
      size_t a = 0, b = 0;
      if (f.tl->overview->buckets(ta, tb, &a, &b) && draw(x, a, b)) ++n;
    }
    return n;
  };
  auto y = [&](double v) { return ybot - (ybot - ytop) * std::clamp(static_cast<float>(v) / vmax, 0.0f, 1.0f); };
  int overview_queue_cols = 0, overview_cols = 0;
  if (queue) {
    // A band from the lowest to the highest count held in the buckets, a tick at the time-weighted
    // mean (in flight blue, ready green), and behind them red as strong as the share of the time
    // with none ready.
    overview_queue_cols = overview_columns([&](float x, size_t a, size_t b) {
      const Overview::QueueBucket q = Overview::combine(*queue, a, b);
      if (q.covered_ns <= 0) return false;
      const float empty = static_cast<float>(q.empty_fraction());
      if (empty > 0) dl->AddRectFilled(ImVec2(x, ytop), ImVec2(x + 1, ybot), with_alpha(kBad, 0.45f * empty));
      const double flight = q.in_flight_mean(), ready = q.ready_mean();
      dl->AddRectFilled(ImVec2(x, y(q.flight_max) - 1), ImVec2(x + 1, y(q.flight_min) + 1), with_alpha(kFlight, 0.35f));
      dl->AddRectFilled(ImVec2(x, y(q.ready_max) - 1), ImVec2(x + 1, y(q.ready_min) + 1), with_alpha(kReady, 0.35f));
      dl->AddRectFilled(ImVec2(x, y(flight) - 1), ImVec2(x + 1, y(flight) + 1), kFlight);
      dl->AddRectFilled(ImVec2(x, y(ready) - 1), ImVec2(x + 1, y(ready) + 1), kReady);
      return true;
    });
    overview_cols = overview_queue_cols;
  } else if (outstanding) {
    // The lowest and highest of the buckets' counts.
    overview_cols = overview_columns([&](float x, size_t a, size_t b) {
      int32_t lo = INT32_MAX, hi = 0;
      for (size_t i = a; i <= b; ++i) {
        lo = std::min(lo, (*outstanding)[i]);
        hi = std::max(hi, (*outstanding)[i]);
      }
      dl->AddRectFilled(ImVec2(x, y(hi) - 1), ImVec2(x + 1, y(lo) + 1), kOutstanding);
      return true;
    });
  }
  if (f.now_ns >= ax.t0 && f.now_ns <= ax.t1) {
    const float x = ax.x(f.now_ns);
    dl->AddLine(ImVec2(x, wp.y), ImVec2(x, wp.y + ws.y), f.replay ? IM_COL32(255, 255, 255, 200) : kGood, 1.5f);
  }
  dl->PopClipRect();
  char scale[32];
  std::snprintf(scale, sizeof scale, "%d", static_cast<int>(vmax));
  dl->AddText(ImVec2(ax.x0 - 8 - ImGui::CalcTextSize(scale).x, ytop - 6), kTextDim, scale);
  dl->AddText(ImVec2(ax.x0 - 16, ybot - 10), kTextDim, "0");
  if (f.dump) {
    f.dump->queue_columns = cols;
    f.dump->queue_overview_columns = overview_cols;
    f.dump->queue_overview_ready_columns = overview_queue_cols;
    f.dump->queue_empty_drawn = static_cast<int>(empty);
  }

  handle_time_navigation(f, ax, ImVec2(ax.x0, wp.y), ImVec2(ax.x1, wp.y + ws.y));
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (ImGui::IsWindowHovered() && m.x >= ax.x0 && m.x <= ax.x1 && m.y >= wp.y && m.y <= wp.y + ws.y) {
    const int64_t t = static_cast<int64_t>(ax.t(m.x));
    dl->AddLine(ImVec2(m.x, wp.y), ImVec2(m.x, wp.y + ws.y), IM_COL32(255, 255, 255, 60));
    ImGui::BeginTooltip();
    ImGui::Text("at %s", fmt_time(static_cast<double>(t), 4).c_str());
    size_t a = 0, b = 0;
    const bool outside = (queue || outstanding) && !(t >= f.tl->detail_t0 && t < f.tl->detail_t1) &&
                         f.tl->overview->buckets(t, t + 1, &a, &b);
    const Overview::QueueBucket q = outside && queue ? Overview::combine(*queue, b, b) : Overview::QueueBucket{};
    if (outside && queue && q.covered_ns > 0) {
      const Overview& o = *f.tl->overview;
      auto ll = [](int64_t v) { return static_cast<long long>(v); };
      ImGui::TextColored(ImColor(kReady), "ready      %.2f on average (%lld-%lld)", q.ready_mean(), ll(q.ready_min),
                         ll(q.ready_max));
      ImGui::TextColored(ImColor(kFlight), "in flight  %.2f on average (%lld-%lld)", q.in_flight_mean(),
                         ll(q.flight_min), ll(q.flight_max));
      ImGui::TextDisabled("none ready %.0f%% of the loader's %.1f s active in %s-%s (the summaries)",
                          100.0 * q.empty_fraction(), q.covered_s(),
                          fmt_time(static_cast<double>(o.bucket_start(b)), 0).c_str(),
                          fmt_time(static_cast<double>(o.bucket_start(b + 1)), 0).c_str());
    } else if (outside && outstanding) {
      const Overview& o = *f.tl->overview;
      ImGui::TextColored(ImColor(kOutstanding), "sent, not yet received  %d", (*outstanding)[b]);
      ImGui::TextDisabled("at the end of %s-%s (the summaries; the detail of this part is not read)",
                          fmt_time(static_cast<double>(o.bucket_start(b)), 0).c_str(),
                          fmt_time(static_cast<double>(o.bucket_start(b + 1)), 0).c_str());
    } else {
      ImGui::TextColored(ImColor(kReady), "ready      %d", an->ready.at(t));
      ImGui::TextColored(ImColor(kFlight), "in flight  %d", an->in_flight.at(t));
    }
    if (an->report.queue.empty_fraction) {
      ImGui::TextDisabled("nothing ready %.0f%% of the loop's time", *an->report.queue.empty_fraction * 100);
    }
    ImGui::EndTooltip();
  }
  end_panel();
}

}  // namespace stallscope::ui
