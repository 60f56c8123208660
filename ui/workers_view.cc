// Worker contention heat strip: one strip per DataLoader worker (and the training process on
// top), coloured over time by the chosen metric: CPU use, run-queue delay (runnable but waiting
// for a core: oversubscription), resident memory, or mean fetch time. Shares the timeline's time
// axis. Cells are kCellPx wide; each is a time-weighted mean from prefix sums (counters) or a
// difference of prefix sums over the fetch row (fetch time), so a frame costs O(cells log n).
// Outside the detail held (a long recording), cells come from the overview's prefix sums.
#include <algorithm>
#include <cmath>

#include "ui/format.h"
#include "ui/overview.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/time_axis.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

constexpr float kCellPx = 4.0f;
constexpr float kStripH = 14.0f;
constexpr float kTopBar = 24.0f;
constexpr float kScaleRoom = 22.0f;  // below the strips: the colour scale
const char* const kMetricNames[] = {"CPU", "run queue", "RSS", "fetch time"};

// Dark blue -> purple -> orange -> yellow (inferno-like), t in [0, 1].
ImU32 ramp(float t) {
  static const ImU32 stops[] = {IM_COL32(20, 24, 60, 255), IM_COL32(96, 34, 120, 255), IM_COL32(190, 60, 80, 255),
                                IM_COL32(245, 140, 40, 255), IM_COL32(250, 235, 110, 255)};
  t = (t >= 0.0f ? std::min(t, 1.0f) : 0.0f) * 4.0f;  // NaN (a damaged file's values) as 0
  const int i = std::min(3, static_cast<int>(t));
  return mix(stops[i], stops[i + 1], t - static_cast<float>(i));
}

struct Strip {
  std::string name;
  const Lane* lane = nullptr;  // null: the training process (no fetch row)
  std::vector<int64_t> pids;
};

// The metric over [ta, tb) for one strip; false when there is no data there.
bool cell_value(const Frame& f, const Strip& s, int metric, int64_t ta, int64_t tb, double* out, int64_t* count) {
  *count = 0;
  if (metric == 3) {
    if (!s.lane) return false;
    int64_t busy = 0, n = 0;
    for (const Track& t : s.lane->tracks) {
      for (const Row& r : t.rows) {
        if (r.depth != 0) continue;
        const size_t i0 = r.first_starting_at_or_after(ta), i1 = r.first_starting_at_or_after(tb, i0);
        busy += r.busy(i0, i1);
        n += static_cast<int64_t>(i1 - i0);
      }
    }
    if (n == 0) return false;
    *out = static_cast<double>(busy) / static_cast<double>(n);
    *count = n;
    return true;
  }
  double sum = 0;
  int64_t covered_total = 0;
  for (int64_t pid : s.pids) {
    auto it = f.tl->counters.find(pid);
    if (it == f.tl->counters.end()) continue;
    double v = 0;
    int64_t covered = 0;
    if (it->second.series[metric].mean(ta, tb, &v, &covered)) {
      sum += v * static_cast<double>(covered);
      covered_total += covered;
    }
  }
  if (covered_total == 0) return false;
  *out = sum / static_cast<double>(covered_total);
  *count = 1;
  return true;
}

// The metric for every cell of one strip, left to right: each search starts where the previous
// cell's ended. values[c] < 0: no data in that cell.
void strip_values(const Frame& f, const Strip& s, int metric, const TimeAxis& ax, int ncells, double* values) {
  if (metric == 3) {
    if (!s.lane) return;
    std::vector<int64_t> busy(static_cast<size_t>(ncells), 0), count(static_cast<size_t>(ncells), 0);
    for (const Track& t : s.lane->tracks) {
      for (const Row& r : t.rows) {
        if (r.depth != 0 || r.size() == 0) continue;
        size_t i = r.first_starting_at_or_after(static_cast<int64_t>(ax.t(ax.x0)));
        for (int c = 0; c < ncells && i < r.size(); ++c) {
          const int64_t tb = static_cast<int64_t>(ax.t(ax.x0 + static_cast<float>(c + 1) * kCellPx));
          const size_t j = r.first_starting_at_or_after(tb, i);
          busy[static_cast<size_t>(c)] += r.busy(i, j);
          count[static_cast<size_t>(c)] += static_cast<int64_t>(j - i);
          i = j;
        }
      }
    }
    for (int c = 0; c < ncells; ++c) {
      if (count[static_cast<size_t>(c)] > 0) {
        values[c] =
            static_cast<double>(busy[static_cast<size_t>(c)]) / static_cast<double>(count[static_cast<size_t>(c)]);
      }
    }
    return;
  }
  std::vector<double> sum(static_cast<size_t>(ncells), 0);
  std::vector<int64_t> cov(static_cast<size_t>(ncells), 0);
  for (int64_t pid : s.pids) {
    auto it = f.tl->counters.find(pid);
    if (it == f.tl->counters.end()) continue;
    const CounterSeries& series = it->second.series[metric];
    size_t hint = 0;
    for (int c = 0; c < ncells; ++c) {
      const float x = ax.x0 + static_cast<float>(c) * kCellPx;
      double v = 0;
      int64_t covered = 0;
      if (series.mean(static_cast<int64_t>(ax.t(x)), static_cast<int64_t>(ax.t(x + kCellPx)), &v, &covered, &hint)) {
        sum[static_cast<size_t>(c)] += v * static_cast<double>(covered);
        cov[static_cast<size_t>(c)] += covered;
      }
    }
  }
  for (int c = 0; c < ncells; ++c) {
    if (cov[static_cast<size_t>(c)] > 0)
      values[c] = sum[static_cast<size_t>(c)] / static_cast<double>(cov[static_cast<size_t>(c)]);
  }
}

// Whether cell c's time lies in the detail held (all of a recording read whole).
bool held(const Frame& f, const TimeAxis& ax, int c) {
  const float x = ax.x0 + static_cast<float>(c) * kCellPx;
  const int64_t ta = static_cast<int64_t>(ax.t(x)), tb = static_cast<int64_t>(ax.t(x + kCellPx));
  return !f.tl->overview || (tb > f.tl->detail_t0 && ta < f.tl->detail_t1);
}

// Cells outside the detail held (a long recording's overview, from the summaries): the strip's
// processes' counters (its lane's, and those of the workers of earlier epochs that held its
// place), or its threads' fetches, over the buckets each cell touches.
void overview_values(const Frame& f, const Strip& s, int metric, const TimeAxis& ax, int ncells, double* values) {
  if (!f.tl || !f.tl->overview) return;
  const Overview& o = *f.tl->overview;
  std::vector<int64_t> threads, pids = s.pids;
  if (s.lane) {
    threads = s.lane->overview_threads;
    for (int64_t t : threads) {
      auto p = o.thread_pid.find(t);
      if (p != o.thread_pid.end() && std::find(pids.begin(), pids.end(), p->second) == pids.end()) {
        pids.push_back(p->second);
      }
    }
  }
  std::vector<const Overview::Prefix*> sources;
  if (metric == 3) {
    for (int64_t t : threads) {
      auto it = o.fetches.find(t);
      if (it != o.fetches.end()) sources.push_back(&it->second);
    }
  } else {
    for (int64_t pid : pids) {
      auto it = o.counters.find(pid);
      if (it != o.counters.end() && !it->second[static_cast<size_t>(metric)].n.empty()) {
        sources.push_back(&it->second[static_cast<size_t>(metric)]);
      }
    }
  }
  if (sources.empty()) return;
  for (int c = 0; c < ncells; ++c) {
    if (values[c] >= 0) continue;
    // Only where no detail is held: inside it, a cell without data had none.
    if (held(f, ax, c)) continue;
    const float x = ax.x0 + static_cast<float>(c) * kCellPx;
    const int64_t ta = static_cast<int64_t>(ax.t(x)), tb = static_cast<int64_t>(ax.t(x + kCellPx));
    size_t a = 0, b = 0;
    if (!o.buckets(ta, tb, &a, &b)) continue;
    double sum = 0, n = 0;
    for (const Overview::Prefix* p : sources) p->add(a, b, &sum, &n);
    if (n <= 0) continue;
    const double v = sum / n;                       // fetch time: ns per fetch, as the detail's (busy / count)
    if (std::isfinite(v) && v >= 0) values[c] = v;  // a damaged file's sums may be anything
  }
}

std::string value_text(int metric, double v) {
  switch (metric) {
    case 0: return fmt_double(v, 2) + " cores";
    case 1: return fmt_double(v * 100, 0) + "% of the time waiting for a CPU";
    case 2: return bytes_text(v);
    default: return fmt_duration(v) + " per fetch";
  }
}

}  // namespace

float workers_height(const Frame& f) {
  int strips = 0;  // the training process's and the workers' (draw_workers)
  if (f.tl) {
    for (const Lane& l : f.tl->lanes) strips += l.role == LaneRole::kWorker || l.role == LaneRole::kMain;
  }
  return std::clamp(kTopBar + (kStripH + 2) * static_cast<float>(std::max(strips, 2)) + kScaleRoom, 80.0f, 240.0f);
}

void draw_workers(Frame& f, const ImVec2& pos, const ImVec2& size) {
  begin_panel(f, "workers", pos, size, kBackground, true, ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
  const TimeAxis ax = view_time_axis(f);
  int& metric = f.st->heat_metric;
  metric = std::clamp(metric, 0, 3);

  // Metric selector.
  ImGui::SetCursorScreenPos(ImVec2(wp.x + 8, wp.y + 3));
  ImGui::TextUnformatted("workers");
  for (int m = 0; m < 4; ++m) {
    ImGui::SameLine(m == 0 ? kLabelWidth + 2 : 0);
    const bool on = metric == m;
    if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
    if (ImGui::SmallButton(kMetricNames[m])) metric = m;
    if (on) ImGui::PopStyleColor();
  }
  if (f.dump) f.dump->heat_metric = kMetricNames[metric];

  if (!f.tl) {
    end_panel();
    return;
  }
  std::vector<Strip> strips;
  for (const Lane& l : f.tl->lanes) {
    if (l.role == LaneRole::kMain) strips.push_back({l.name == "main thread" ? "trainer" : l.name, nullptr, {l.pid}});
  }
  for (const Lane& l : f.tl->lanes) {
    if (l.role == LaneRole::kWorker) strips.push_back({l.name, &l, l.pids});
  }
  if (strips.size() <= 1 && f.tl->lanes.empty()) {
    dl->AddText(ImVec2(ax.x0 + 10, wp.y + kTopBar + 10), kTextDim, "no processes recorded yet");
  } else if (strips.size() <= 1) {
    dl->AddText(ImVec2(ax.x0 + 10, wp.y + kTopBar + kStripH + 6), kTextDim, "no DataLoader workers (num_workers=0?)");
  }

  // Cell values of the strips in view (the panel scrolls when it is lower than they need: a compare
  // half), then colours (fetch time and RSS scale to the largest visible value).
  const int ncells = std::max(0, static_cast<int>((ax.x1 - ax.x0) / kCellPx));
  const size_t nvalues = strips.size() * static_cast<size_t>(ncells);
  const float y_start = wp.y + kTopBar - ImGui::GetScrollY();
  const auto first_in_view =
      static_cast<size_t>(std::max(0.0f, std::floor((wp.y + kTopBar - y_start) / (kStripH + 2))));
  const auto end_in_view =
      std::min(strips.size(), static_cast<size_t>(std::max(0.0f, std::ceil((wp.y + ws.y - y_start) / (kStripH + 2)))));
  std::vector<double> local;
  bool fresh = true;
  // The cell values depend on the snapshot, the range, the metric, the strips and which are in
  // view: kept across frames while those stay (hover frames).
  std::vector<double>& values = f.geo
                                    ? f.geo->values({&f.tl->lanes, ax.t0, ax.t1, ax.x0, ax.x1,
                                                     static_cast<float>(first_in_view), static_cast<float>(end_in_view),
                                                     static_cast<double>(metric), static_cast<double>(strips.size())},
                                                    &fresh)
                                    : local;
  if (fresh) {
    values.assign(nvalues, -1);
    for (size_t s = first_in_view; s < end_in_view; ++s) {
      double* row = values.data() + s * static_cast<size_t>(ncells);
      strip_values(f, strips[s], metric, ax, ncells, row);
      overview_values(f, strips[s], metric, ax, ncells, row);
    }
  }
  double vmax = metric == 0 ? 1.0 : metric == 1 ? 0.5 : 0.0;
  for (double v : values) vmax = std::max(vmax, v);
  int cells = 0, from_overview = 0;
  // Strips that do not all fit (a compare half) scroll above the colour scale, not under it.
  const bool overflow = kTopBar + static_cast<float>(strips.size()) * (kStripH + 2) + kScaleRoom > ws.y;
  const float strips_y1 = wp.y + ws.y - (overflow ? kScaleRoom - 2 : 0);
  dl->PushClipRect(ImVec2(wp.x, wp.y + kTopBar), ImVec2(wp.x + ws.x, strips_y1), true);
  for (size_t s = 0; s < strips.size(); ++s) {
    const float y0 = y_start + static_cast<float>(s) * (kStripH + 2), y1 = y0 + kStripH;
    const bool hl =
        f.st->highlight_pid != 0 && f.st->wall_s < f.st->highlight_until &&
        std::find(strips[s].pids.begin(), strips[s].pids.end(), f.st->highlight_pid) != strips[s].pids.end();
    dl->AddText(ImVec2(wp.x + 12, y0 - 1), hl ? kAccent : kText, strips[s].name.c_str());
    // The strip's mean over the visible cells, right-aligned in the label column.
    double sum = 0;
    int n = 0;
    for (int c = 0; c < ncells; ++c) {
      const double v = values[s * static_cast<size_t>(ncells) + static_cast<size_t>(c)];
      if (v >= 0) {
        sum += v;
        ++n;
      }
    }
    if (n > 0) {
      const double m = sum / n;
      const std::string t = metric == 0   ? fmt_double(m, 2)
                            : metric == 1 ? fmt_double(m * 100, 0) + "%"
                            : metric == 2 ? bytes_text(m)
                                          : fmt_duration(m);
      dl->AddText(ImVec2(ax.x0 - 8 - ImGui::CalcTextSize(t.c_str()).x, y0 - 1), kTextDim, t.c_str());
    }
    for (int c = 0; c < ncells; ++c) {
      const double v = values[s * static_cast<size_t>(ncells) + static_cast<size_t>(c)];
      if (v < 0) continue;
      const float x = ax.x0 + static_cast<float>(c) * kCellPx;
      dl->AddRectFilled(ImVec2(x, y0), ImVec2(x + kCellPx, y1), ramp(static_cast<float>(v / vmax)));
      ++cells;
      if (f.dump && !held(f, ax, c)) ++from_overview;
    }
    if (hl) dl->AddRect(ImVec2(ax.x0, y0 - 1), ImVec2(ax.x1, y1 + 1), kAccent, 0, 0, 2.0f);
  }
  dl->PopClipRect();
  ImGui::SetCursorScreenPos(ImVec2(wp.x, y_start + static_cast<float>(strips.size()) * (kStripH + 2)));
  ImGui::Dummy(ImVec2(1, overflow ? kScaleRoom : 4));
  // Scale: the ramp with its end values.
  const float sx = wp.x + 8, sy = wp.y + ws.y - 14;
  if (ws.y > kTopBar + 40) {
    for (int i = 0; i < 60; ++i) {
      dl->AddRectFilled(ImVec2(sx + static_cast<float>(i), sy), ImVec2(sx + static_cast<float>(i) + 1, sy + 8),
                        ramp(static_cast<float>(i) / 59.0f));
    }
    const std::string top = metric == 1   ? fmt_double(vmax * 100, 0) + "%"
                            : metric == 2 ? bytes_text(vmax)
                            : metric == 3 ? fmt_duration(vmax)
                                          : fmt_double(vmax, 1) + " cores";
    dl->AddText(ImVec2(sx + 64, sy - 4), kTextDim, top.c_str());
  }
  if (f.dump) {
    f.dump->heat_rows = static_cast<int>(strips.size());
    f.dump->heat_cells = cells;
    f.dump->heat_cells_overview = from_overview;
  }
  if (f.now_ns >= ax.t0 && f.now_ns <= ax.t1) {
    const float x = ax.x(f.now_ns);
    dl->AddLine(ImVec2(x, wp.y + kTopBar), ImVec2(x, wp.y + ws.y), f.replay ? IM_COL32(255, 255, 255, 200) : kGood,
                1.5f);
  }

  handle_time_navigation(f, ax, ImVec2(ax.x0, wp.y + kTopBar), ImVec2(ax.x1, wp.y + ws.y));
  const ImVec2 m = ImGui::GetIO().MousePos;
  if (ImGui::IsWindowHovered() && m.x >= ax.x0 && m.x <= ax.x1 && m.y >= wp.y + kTopBar) {
    const size_t s = static_cast<size_t>((m.y - y_start) / (kStripH + 2));
    if (s < strips.size()) {
      const float cx = ax.x0 + std::floor((m.x - ax.x0) / kCellPx) * kCellPx;
      const int64_t ta = static_cast<int64_t>(ax.t(cx)), tb = static_cast<int64_t>(ax.t(cx + kCellPx));
      ImGui::BeginTooltip();
      ImGui::Text("%s  (pid %lld)  %s", strips[s].name.c_str(), static_cast<long long>(strips[s].pids.back()),
                  fmt_time(static_cast<double>(ta), 3).c_str());
      for (int k = 0; k < 4; ++k) {
        double v = 0;
        int64_t n = 0;
        if (cell_value(f, strips[s], k, ta, tb, &v, &n)) {
          ImGui::Text("%-10s %s%s", kMetricNames[k], value_text(k, v).c_str(),
                      k == 3 ? (" (" + std::to_string(n) + " fetches)").c_str() : "");
        } else {
          ImGui::TextDisabled("%-10s -", kMetricNames[k]);
        }
      }
      ImGui::EndTooltip();
    }
  }
  end_panel();
}

}  // namespace stallscope::ui
