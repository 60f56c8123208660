// The timeline: a ruler, then one lane per GPU stream, the training loop's main thread, the
// pin-memory thread, each DataLoader worker and any other thread that recorded spans. Stall
// intervals are shaded behind every lane by cause. Wheel zooms around the mouse, drag pans,
// double-click fits the whole run. Hovering an item shows what it is and, for a batch, its whole
// life (sent -> fetch -> put -> pin -> recv -> handed) drawn across the lanes; a click pins it.
//
// Cost per frame: for each visible row, a lower_bound to the first visible item, then one
// rectangle per item wider than kMinPx or per run of narrower ones (row_draw.cc).
#include <algorithm>
#include <cmath>

#include "storage/summaries.h"
#include "ui/batch_life.h"
#include "ui/format.h"
#include "ui/overview.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/row_draw.h"
#include "ui/time_axis.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

constexpr float kRulerH = 22.0f;
constexpr float kRowH = 18.0f;
constexpr float kLanePad = 5.0f;

struct LaneLayout {
  float y0 = 0, y1 = 0;  // in content coordinates (before scrolling)
  bool hidden = false;   // in a collapsed rank's group: no height, nothing drawn
};

float lane_height(const Lane& l) { return static_cast<float>(l.row_count) * kRowH + kLanePad; }

struct Hit {
  int lane = -1;
  const Track* track = nullptr;
  const Item* item = nullptr;
  const Marker* marker = nullptr;
  bool step = false;
};

// The item under time t (within tol ns) in visual row `vrow` of lane `l`.
Hit hit_test(const Lane& l, int lane_index, int vrow, double t, double tol) {
  Hit h;
  h.lane = lane_index;
  const int64_t lo = static_cast<int64_t>(t - tol), hi = static_cast<int64_t>(t + tol);
  for (const Track& tr : l.tracks) {
    for (size_t r = 0; r < tr.rows.size(); ++r) {
      if (tr.visual[r] != vrow) continue;
      const Row& row = tr.rows[r];
      size_t i = row.first_ending_at_or_after(lo);
      // Prefer the item that contains t exactly, else the nearest within tolerance.
      for (size_t k = 0; k < 3 && i < row.size() && row[i].start_ns <= hi; ++k, ++i) {
        if (!h.item || (row[i].start_ns <= static_cast<int64_t>(t) && row[i].end_ns >= static_cast<int64_t>(t))) {
          h.item = &row[i];
          h.track = &tr;
        }
      }
    }
  }
  if (h.item) return h;
  for (const Track& tr : l.tracks) {
    if (tr.marker_visual == vrow && tr.markers.size() > 0) {
      const size_t i = tr.markers.lower_bound(lo);
      if (i < tr.markers.size() && tr.markers[i].ts_ns <= hi) {
        h.marker = &tr.markers[i];
        h.track = &tr;
        return h;
      }
    }
    if (tr.steps_visual == vrow && tr.steps.size() > 0) {
      const size_t i = tr.steps.first_ending_at_or_after(lo);
      if (i < tr.steps.size() && tr.steps[i].start_ns <= hi) {
        h.item = &tr.steps[i];
        h.track = &tr;
        h.step = true;
        return h;
      }
    }
  }
  return h;
}

std::string arg_text(int64_t v) { return v == Item::kNoArg || v == Item::kNoArg32 ? "-" : std::to_string(v); }

// The first tooltip line and details of an item.
std::vector<std::string> describe(const Frame& f, const Lane& l, const Track& tr, const Item& it) {
  std::vector<std::string> out;
  const double dur = static_cast<double>(it.end_ns - it.start_ns);
  std::string name = item_label(*f.tl, it);
  if (it.style == Style::kStep) name = "step (the loop's own work between two next() calls)";
  out.push_back(name + "   " + fmt_duration(dur) + ((it.flags & kItemUnended) ? " (never ended)" : ""));
  out.push_back("at " + fmt_time(static_cast<double>(it.start_ns), 6) + "  on " + l.name + "  (pid " +
                std::to_string(tr.pid) + (tr.tid ? ", tid " + std::to_string(tr.tid) : std::string()) + ")");
  switch (it.style) {
    case Style::kNext:
      out.push_back("waiting for data: loader " + arg_text(it.a0) + ", epoch " + arg_text(it.a2) +
                    (it.a1 >= 0 ? ", handed batch " + arg_text(it.a1) : ", StopIteration"));
      break;
    case Style::kFetch:
    case Style::kCollate:
      if (l.role == LaneRole::kWorker) {
        out.push_back("batch " + arg_text(it.a0) + ", worker " + arg_text(it.a1) + ", generation " + arg_text(it.a2));
      } else {
        out.push_back("loader " + arg_text(it.a0) + ", batch " + arg_text(it.a1) + " (fetched in the main process)");
      }
      break;
    case Style::kPin: out.push_back("loader " + arg_text(it.a0) + ", batch " + arg_text(it.a1)); break;
    case Style::kKernel:
    case Style::kCopyPinned:
    case Style::kCopyPageable:
    case Style::kMemset:
    case Style::kGpuSync: {
      std::string s = std::string(style_name(it.style));
      if (it.a1 >= 0 && static_cast<size_t>(it.a1) < tr.gpu.size()) {
        const GpuDetail& g = tr.gpu[static_cast<size_t>(it.a1)];
        if (g.bytes > 0) s += ", " + bytes_text(static_cast<double>(g.bytes));
        if (g.copy_kind) s += std::string(", ") + copy_kind_name(g.copy_kind);
        if (g.src_kind || g.dst_kind)
          s += std::string(" ") + mem_kind_name(g.src_kind) + " -> " + mem_kind_name(g.dst_kind);
        if (g.bytes > 0 && dur > 0) s += ", " + fmt_double(static_cast<double>(g.bytes) / dur, 2) + " GB/s";
        s += ", correlation " + std::to_string(g.correlation_id);
      }
      out.push_back(s);
      break;
    }
    case Style::kCudaSync:
    case Style::kNvtx:
      if (it.a0 != Item::kNoArg || it.a1 != Item::kNoArg32) {
        out.push_back("args " + arg_text(it.a0) + ", " + arg_text(it.a1) + ", " + arg_text(it.a2));
      }
      break;
    default: break;
  }
  return out;
}

std::string marker_text(const Timeline& tl, const Marker& m) {
  std::string s = tl.str(m.name_id);
  if (s.empty()) s = "instant";
  s += "  at " + fmt_time(static_cast<double>(m.ts_ns), 6) + "  (" + arg_text(m.a0) + ", " + arg_text(m.a1) + ", " +
       arg_text(m.a2) + ")";
  return s;
}

// Lines across lanes that follow one batch: sent (main) -> fetch (worker) -> put -> pin -> recv
// and handed (main).
void draw_batch_path(const Frame& f, const analysis::BatchInfo& b, const std::vector<LaneLayout>& lay, float scroll_top,
                     const TimeAxis& ax, ImDrawList* dl) {
  int main_lane = -1, worker_lane = -1, pin_lane = -1;
  for (size_t i = 0; i < f.tl->lanes.size(); ++i) {
    const Lane& l = f.tl->lanes[i];
    if (lay[i].hidden) continue;
    if (l.role == LaneRole::kMain && (main_lane < 0 || l.pid == f.an->model.train_pid)) main_lane = static_cast<int>(i);
    if (l.role == LaneRole::kPin && pin_lane < 0) pin_lane = static_cast<int>(i);
    if (l.role == LaneRole::kWorker && std::find(l.pids.begin(), l.pids.end(), b.worker_pid) != l.pids.end()) {
      worker_lane = static_cast<int>(i);
    }
  }
  auto ymid = [&](int lane) { return scroll_top + (lay[static_cast<size_t>(lane)].y0 + kRowH * 0.5f); };
  std::vector<ImVec2> pts;
  const ImU32 col = IM_COL32(255, 235, 120, 255);
  auto point = [&](std::optional<int64_t> t, int lane) {
    if (!t || lane < 0) return;
    pts.push_back(ImVec2(ax.x(static_cast<double>(*t)), ymid(lane)));
  };
  point(b.sent_ns, main_lane);
  point(b.fetch_start_ns, worker_lane >= 0 ? worker_lane : main_lane);
  point(b.fetch_end_ns, worker_lane >= 0 ? worker_lane : main_lane);
  point(b.put_ns, worker_lane);
  point(b.recv_ns, main_lane);
  point(b.handed_ns, main_lane);
  if (b.fetch_start_ns && b.fetch_end_ns) {
    const int lane = worker_lane >= 0 ? worker_lane : main_lane;
    if (lane >= 0) {
      const float y = scroll_top + lay[static_cast<size_t>(lane)].y0;
      dl->AddRect(ImVec2(ax.x(static_cast<double>(*b.fetch_start_ns)) - 1, y - 1),
                  ImVec2(ax.x(static_cast<double>(*b.fetch_end_ns)) + 1, y + kRowH + 1), col, 0, 0, 2.0f);
    }
  }
  for (size_t i = 1; i < pts.size(); ++i) dl->AddLine(pts[i - 1], pts[i], col, 1.5f);
  for (const ImVec2& p : pts) dl->AddCircleFilled(p, 3.5f, col);
}

// The lanes' scrolled child window as this frame draws it.
struct LanesArea {
  ImDrawList* dl = nullptr;
  TimeAxis ax;
  ImVec2 cp, cs;                // the child window's screen position and size
  float top = 0;                // screen y of content y = 0 (scrolled)
  float vis0 = 0, vis1 = 0;     // the visible screen rows
  float content_h = 0;          // all lanes, before scrolling
  std::vector<LaneLayout> lay;  // one per lane
};

// The lanes stacked top down, each as tall as its rows (a collapsed rank's group as its first
// lane alone); returns the height of them all.
float stack_lanes(const std::vector<Lane>& lanes, const std::set<int64_t>& collapsed, std::vector<LaneLayout>& lay) {
  lay.assign(lanes.size(), {});
  float y = 0;
  for (size_t i = 0; i < lanes.size(); ++i) {
    lay[i].hidden = lanes[i].rank >= 0 && !lanes[i].rank_lead && collapsed.count(lanes[i].rank) != 0;
    lay[i].y0 = y + 2;
    if (!lay[i].hidden) y += lane_height(lanes[i]);
    lay[i].y1 = lay[i].hidden ? lay[i].y0 : y;
  }
  return y + 4;
}

// The ruler along the top (not scrolled), the panel's title, and zoom and pan over the ruler.
void draw_ruler_bar(Frame& f, const TimeAxis& ax, ImDrawList* dl, const ImVec2& wp) {
  draw_ruler(dl, ax, wp.y + 1, wp.y + kRulerH, wp.y + kRulerH);
  dl->AddText(ImVec2(wp.x + 8, wp.y + 3), kTextDim, "timeline");
  handle_time_navigation(f, ax, ImVec2(ax.x0, wp.y), ImVec2(ax.x1, wp.y + kRulerH));
}

// Scrolls the lane a recommendation pointed at (f.st->scroll_to_pid) into view, once.
void scroll_to_requested_lane(Frame& f, const std::vector<Lane>& lanes, const std::vector<LaneLayout>& lay) {
  if (!f.st->scroll_to_pid) return;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (std::find(lanes[i].pids.begin(), lanes[i].pids.end(), f.st->scroll_to_pid) != lanes[i].pids.end()) {
      ImGui::SetScrollY(std::max(0.0f, lay[i].y0 - 30));
      break;
    }
  }
  f.st->scroll_to_pid = 0;
}

// Every other lane lightly banded, a grid line under each.
void draw_lane_backgrounds(const LanesArea& a) {
  for (size_t i = 0; i < a.lay.size(); ++i) {
    const float y0 = a.top + a.lay[i].y0 - 2, y1 = a.top + a.lay[i].y1;
    if (a.lay[i].hidden || y1 < a.vis0 || y0 > a.vis1) continue;
    if (i % 2 == 1) a.dl->AddRectFilled(ImVec2(a.cp.x, y0), ImVec2(a.cp.x + a.cs.x, y1), IM_COL32(255, 255, 255, 6));
    a.dl->AddLine(ImVec2(a.cp.x, y1), ImVec2(a.cp.x + a.cs.x, y1), kGrid);
  }
}

// The analysis's stall intervals, shaded by cause behind the items, the full height of the lanes.
void draw_stall_shading(Frame& f, const LanesArea& a) {
  if (!f.an || f.an->stalls.size() == 0) return;
  RowDraw d;
  d.dl = a.dl;
  d.axis = &a.ax;
  d.y0 = std::max(a.vis0, a.top);
  d.y1 = std::min(a.vis1, a.top + a.content_h);
  d.labels = false;
  d.alpha = 0.16f;
  d.cache = f.geo;
  const int64_t n = draw_row(f.an->stalls, d);
  if (f.dump) f.dump->stall_rects += static_cast<int>(n);
}

// One lane's rows: the derived steps, the span rows (one per depth), the markers' row.
void draw_lane_rows(const Lane& l, float ly0, RowDraw& d) {
  for (const Track& tr : l.tracks) {
    if (tr.steps.size() > 0) {
      d.y0 = ly0 + static_cast<float>(tr.steps_visual) * kRowH + 1;
      d.y1 = d.y0 + kRowH - 2;
      d.dump_row = tr.steps_visual;
      draw_row(tr.steps, d);
    }
    for (size_t r = 0; r < tr.rows.size(); ++r) {
      d.y0 = ly0 + static_cast<float>(tr.visual[r]) * kRowH + 1;
      d.y1 = d.y0 + kRowH - 2;
      d.dump_row = tr.visual[r];
      draw_row(tr.rows[r], d);
    }
    if (tr.markers.size() > 0) {
      d.y0 = ly0 + static_cast<float>(tr.marker_visual) * kRowH;
      d.y1 = d.y0 + kRowH;
      draw_markers(tr.markers, d);
    }
  }
}

// The lanes' items (dimmed after a replay's playhead), each lane recorded in the layout dump
// (scrolled out or not), and the outline of the lane a recommendation points at.
void draw_lanes(Frame& f, const LanesArea& a) {
  const std::vector<Lane>& lanes = f.tl->lanes;
  const double dim_after = f.replay && f.now_ns < f.data_t1 ? f.now_ns : -1;
  const bool highlight = f.st->highlight_pid != 0 && f.st->wall_s < f.st->highlight_until;
  for (size_t i = 0; i < lanes.size(); ++i) {
    const Lane& l = lanes[i];
    if (a.lay[i].hidden) continue;  // in a collapsed rank: not in the dump either
    const float ly0 = a.top + a.lay[i].y0;
    DumpLane* dstat = nullptr;
    if (f.dump) {
      DumpLane dlane;
      dlane.name = l.name;
      dlane.role = role_name(l.role);
      dlane.rect = {a.cp.x, ly0, a.ax.x1, a.top + a.lay[i].y1};
      dlane.rows = l.row_count;
      dlane.pid = l.pid;
      dlane.worker = l.worker;
      f.dump->lanes.push_back(dlane);
      dstat = &f.dump->lanes.back();
    }
    if (a.top + a.lay[i].y1 < a.vis0 || ly0 > a.vis1) continue;  // scrolled out: nothing submitted
    RowDraw d;
    d.dl = a.dl;
    d.axis = &a.ax;
    d.tl = f.tl;
    d.dim_after_ns = dim_after;
    d.dump = f.dump;
    d.dump_lane = static_cast<int>(i);
    d.dump_stats = dstat;
    d.cache = f.geo;
    draw_lane_rows(l, ly0, d);
    if (highlight && std::find(l.pids.begin(), l.pids.end(), f.st->highlight_pid) != l.pids.end()) {
      a.dl->AddRect(ImVec2(a.ax.x0 + 1, ly0 - 2), ImVec2(a.ax.x1 - 1, a.top + a.lay[i].y1 - 1), kAccent, 0, 0, 2.0f);
    }
  }
}

// The shares of one overview row in [t0, t1], as bars in the lane row from y0 to y1 (bottom
// aligned, as tall as the share): one bar per bucket, or per pixel column where buckets are
// narrower (their mean). Returns the bars drawn.
int64_t draw_shares(const Overview& o, const Overview::Share& share, double t0, double t1, float y0, float y1,
                    const TimeAxis& ax, ImDrawList* dl) {
  if (share.busy.empty() || o.level_ns <= 0) return 0;
  t0 = std::clamp(t0, -static_cast<double>(kSaneNs), static_cast<double>(kSaneNs));
  t1 = std::clamp(t1, -static_cast<double>(kSaneNs), static_cast<double>(kSaneNs));
  const ImU32 col = with_alpha(style_color(share.style), 0.85f);
  const int64_t first = std::max<int64_t>(0, summary_bucket(static_cast<int64_t>(t0), o.level_ns) - o.first_bucket);
  const int64_t last = std::min<int64_t>(static_cast<int64_t>(share.busy.size()) - 1,
                                         summary_bucket(static_cast<int64_t>(t1), o.level_ns) - o.first_bucket);
  int64_t drawn = 0;
  float col_x = -1e9f, col_end = 0;
  double sum = 0;
  int n = 0;
  auto flush = [&] {
    if (n == 0) return;
    // At least a pixel where there was any: a thread that works a little still shows it did.
    const float h = sum > 0 ? std::max(1.0f, static_cast<float>(sum / n) * (y1 - y0)) : 0.0f;
    if (h > 0) {
      dl->AddRectFilled(ImVec2(col_x, y1 - h), ImVec2(std::max(col_end, col_x + 1.0f), y1), col);
      ++drawn;
    }
    sum = 0;
    n = 0;
  };
  for (int64_t b = first; b <= last; ++b) {
    const double b0 = std::max(t0, static_cast<double>(o.bucket_start(static_cast<size_t>(b))));
    const double b1 = std::min(t1, static_cast<double>(o.bucket_start(static_cast<size_t>(b) + 1)));
    const float x0 = ax.x(b0), x1 = ax.x(b1);
    if (x0 >= col_x + 1.0f) {  // a new pixel column
      flush();
      col_x = x0;
    }
    col_end = x1;
    sum += share.busy[static_cast<size_t>(b)];
    ++n;
  }
  flush();
  return drawn;
}

// A long recording's view outside the detail held: the parts of the visible range with no detail,
// shaded, each lane's overview bars (its main activity's share of each bucket) in its first row,
// and a note on how to see the detail there.
void draw_overview(Frame& f, const LanesArea& a) {
  if (!f.tl->overview) return;
  const Overview& o = *f.tl->overview;
  const double d0 = static_cast<double>(f.tl->detail_t0);
  const double d1 = f.tl->detail_t1 == INT64_MAX ? std::max(a.ax.t1, f.data_t1) : static_cast<double>(f.tl->detail_t1);
  std::vector<std::pair<double, double>> gaps;
  if (a.ax.t0 < d0) gaps.emplace_back(a.ax.t0, std::min(a.ax.t1, d0));
  if (a.ax.t1 > d1) gaps.emplace_back(std::max(a.ax.t0, d1), a.ax.t1);
  if (f.dump) {
    f.dump->windowed = true;
    f.dump->detail_t0 = f.tl->detail_t0;
    f.dump->detail_t1 = f.tl->detail_t1;
  }
  const std::vector<Lane>& lanes = f.tl->lanes;
  for (const auto& [g0, g1] : gaps) {
    if (!(g1 > g0)) continue;
    if (f.dump) f.dump->overview_ranges.emplace_back(g0, g1);
    const float x0 = a.ax.x(g0), x1 = a.ax.x(g1);
    a.dl->AddRectFilled(ImVec2(x0, a.vis0), ImVec2(x1, a.vis1), IM_COL32(255, 255, 255, 8));
    size_t dumped = 0;  // the lane's index in the dump (hidden lanes are not there)
    for (size_t i = 0; i < lanes.size(); ++i) {
      const Lane& l = lanes[i];
      if (a.lay[i].hidden) continue;
      const size_t di = dumped++;
      if (a.top + a.lay[i].y1 < a.vis0 || a.top + a.lay[i].y0 > a.vis1) continue;
      const float y0 = a.top + a.lay[i].y0 + 1, y1 = y0 + kRowH - 2;
      int64_t drawn = 0;
      if (l.role == LaneRole::kGpu) {
        auto it = o.devices.find(l.device);
        if (it != o.devices.end()) drawn += draw_shares(o, it->second, g0, g1, y0, y1, a.ax, a.dl);
      }
      for (int64_t thread : l.overview_threads) {
        auto it = o.threads.find(thread);
        if (it != o.threads.end()) drawn += draw_shares(o, it->second, g0, g1, y0, y1, a.ax, a.dl);
      }
      if (f.dump && di < f.dump->lanes.size()) f.dump->lanes[di].overview += drawn;
    }
    // Where the range is wide enough to say so: why there is no detail, and how to get it.
    if (x1 - x0 > 220) {
      const double sane = static_cast<double>(kSaneNs);
      const double view_rows = static_cast<double>(o.rows_in(static_cast<int64_t>(std::clamp(g0, -sane, sane)),
                                                             static_cast<int64_t>(std::clamp(g1, -sane, sane))));
      const std::string note = view_rows > static_cast<double>(f.tl->detail_rows)
                                   ? "summary: zoom in to read the detail here"
                                   : "summary: reading the detail...";
      a.dl->AddText(ImVec2(x0 + 6, a.vis1 - 18), kTextDim, note.c_str());
    }
  }
}

// The playhead (replay) or the newest data (live), across the lanes.
void draw_playhead(const Frame& f, const LanesArea& a) {
  if (f.now_ns < a.ax.t0 || f.now_ns > a.ax.t1) return;
  const float x = a.ax.x(f.now_ns);
  a.dl->AddLine(ImVec2(x, a.vis0), ImVec2(x, a.vis1), f.replay ? IM_COL32(255, 255, 255, 200) : kGood, 1.5f);
}

// The label column, drawn over anything that spilled left: each lane's role colour, name and a
// second line where there is room; hovering a name shows its pids and command line.
void draw_label_column(const Frame& f, const LanesArea& a) {
  const std::vector<Lane>& lanes = f.tl->lanes;
  a.dl->AddRectFilled(ImVec2(a.cp.x, a.vis0), ImVec2(a.ax.x0 - 1, a.vis1), kPanelBg);
  for (size_t i = 0; i < lanes.size(); ++i) {
    const Lane& l = lanes[i];
    const float y0 = a.top + a.lay[i].y0, y1 = a.top + a.lay[i].y1;
    if (a.lay[i].hidden || y1 < a.vis0 || y0 > a.vis1) continue;
    a.dl->AddRectFilled(ImVec2(a.cp.x + 2, y0), ImVec2(a.cp.x + 6, y1 - 3), role_color(l.role));
    const ImVec4 clip(a.cp.x, y0, a.ax.x0 - 4, y1);
    // A rank's first lane carries its group's [-] / [+]: a click collapses or expands the rank.
    std::string name = l.name;
    if (l.rank_lead) {
      const bool collapsed = f.st->collapsed_ranks.count(l.rank) != 0;
      name = (collapsed ? "[+] " : "[-] ") + name;
      if (ImGui::IsWindowHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
          ImGui::IsMouseHoveringRect(ImVec2(a.cp.x, std::max(y0, a.vis0)), ImVec2(a.ax.x0, std::min(y1, a.vis1)))) {
        if (collapsed) {
          f.st->collapsed_ranks.erase(l.rank);
        } else {
          f.st->collapsed_ranks.insert(l.rank);
        }
      }
    }
    a.dl->AddText(nullptr, 0.0f, ImVec2(a.cp.x + 12, y0 + 1), kText, name.c_str(), nullptr, 0.0f, &clip);
    // A second line where the lane has room: a worker's (latest) pid, or how much the lane holds.
    if (y1 - y0 > kRowH * 1.5f) {
      std::string sub = std::to_string(l.items) + " items";
      if (l.role == LaneRole::kWorker && !l.pids.empty()) {
        sub = "pid " + std::to_string(l.pids.back()) +
              (l.pids.size() > 1 ? " +" + std::to_string(l.pids.size() - 1) : "");
      }
      a.dl->AddText(nullptr, 0.0f, ImVec2(a.cp.x + 12, y0 + kRowH), kTextDim, sub.c_str(), nullptr, 0.0f, &clip);
    }
    if (ImGui::IsMouseHoveringRect(ImVec2(a.cp.x, std::max(y0, a.vis0)), ImVec2(a.ax.x0, std::min(y1, a.vis1))) &&
        ImGui::IsWindowHovered()) {
      ImGui::BeginTooltip();
      ImGui::TextUnformatted(l.name.c_str());
      ImGui::TextDisabled("%s", l.detail.c_str());
      ImGui::TextDisabled("%lld items", static_cast<long long>(l.items));
      ImGui::EndTooltip();
    }
  }
  a.dl->AddLine(ImVec2(a.ax.x0 - 1, a.vis0), ImVec2(a.ax.x0 - 1, a.vis1), kGrid);
}

// The tooltip of a hovered item or marker: what it is (`lines`), then the life of its batch `b`
// when it has one, or a note that the analysis, which finds batches, has not run yet.
void show_hover_tooltip(const Frame& f, const std::vector<std::string>& lines, const analysis::BatchInfo* b,
                        const std::vector<std::string>& life, bool life_pending) {
  ImGui::BeginTooltip();
  for (size_t k = 0; k < lines.size(); ++k) {
    if (k == 0) {
      ImGui::TextUnformatted(lines[k].c_str());
    } else {
      ImGui::TextDisabled("%s", lines[k].c_str());
    }
  }
  if (b) {
    ImGui::Separator();
    ImGui::TextColored(ImColor(kAccent), "%s", batch_title(*b).c_str());
    if (f.fonts && f.fonts->mono) ImGui::PushFont(f.fonts->mono);
    for (const std::string& s : life) ImGui::TextUnformatted(s.c_str());
    if (f.fonts && f.fonts->mono) ImGui::PopFont();
    ImGui::TextDisabled("click to pin this batch");
  } else if (life_pending) {
    ImGui::TextDisabled("batch life: analysis still running");
  }
  ImGui::EndTooltip();
}

// Hover and click over the lanes: the item under the mouse gets a tooltip (recorded in the layout
// dump) and sets this frame's hovered batch; a click, not a drag, pins that batch. Returns the
// hovered batch, if any.
const analysis::BatchInfo* hover_and_click(Frame& f, const LanesArea& a) {
  const std::vector<Lane>& lanes = f.tl->lanes;
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  f.st->hovered.reset();
  if (!ImGui::IsWindowHovered() || mouse.x < a.ax.x0 || mouse.x > a.ax.x1 || mouse.y < a.vis0 || mouse.y > a.vis1) {
    return nullptr;
  }
  const float cy = mouse.y - a.top;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (a.lay[i].hidden || cy < a.lay[i].y0 || cy >= a.lay[i].y1) continue;
    const int vrow = std::clamp(static_cast<int>((cy - a.lay[i].y0) / kRowH), 0, lanes[i].row_count - 1);
    const double t = a.ax.t(mouse.x);
    const Hit h = hit_test(lanes[i], static_cast<int>(i), vrow, t, 3 * a.ax.ns_per_px());
    if (!h.item && !h.marker) return nullptr;
    std::vector<std::string> lines;
    const analysis::BatchInfo* b = nullptr;
    if (h.item) {
      lines = describe(f, lanes[i], *h.track, *h.item);
      if (f.an && !h.step) b = f.an->batch_of(lanes[i], *h.track, *h.item);
    } else {
      lines.push_back(marker_text(*f.tl, *h.marker));
      if (f.an) b = f.an->batch_of(lanes[i], *h.track, *h.marker);
    }
    DumpHover dh;
    dh.lane = lanes[i].name;
    dh.item = lines.front();
    if (b) {
      f.st->hovered = BatchKey{b->loader, b->epoch, b->batch};
      dh.batch = true;
      dh.loader = b->loader;
      dh.epoch = b->epoch;
      dh.index = b->batch;
      dh.worker = b->worker;
      dh.worker_pid = b->worker_pid;
      dh.life = batch_life(f, *b);
    }
    const bool life_pending = !f.an && h.item && (h.item->style == Style::kNext || h.item->style == Style::kFetch);
    show_hover_tooltip(f, lines, b, dh.life, life_pending);
    if (f.dump) f.dump->hover = dh;
    if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && ImGui::GetMouseDragDelta(ImGuiMouseButton_Left).x == 0 && b) {
      f.st->pinned = BatchKey{b->loader, b->epoch, b->batch};
    }
    return b;
  }
  return nullptr;
}

}  // namespace

void draw_timeline(Frame& f, const ImVec2& pos, const ImVec2& size) {
  begin_panel(f, "timeline", pos, size, kBackground, true,
              ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 wp = ImGui::GetWindowPos();
  const ImVec2 ws = ImGui::GetWindowSize();
  const float sb = ImGui::GetStyle().ScrollbarSize;
  LanesArea a;
  a.ax = view_time_axis(f);
  if (!f.tl) {
    dl->AddText(ImVec2(wp.x + 12, wp.y + 30), kTextDim, "reading the recording...");
    end_panel();
    return;
  }
  draw_ruler_bar(f, a.ax, dl, wp);

  // Lanes (scrolled vertically; the wheel zooms, so scrolling is by the scrollbar or dragging).
  a.content_h = stack_lanes(f.tl->lanes, f.st->collapsed_ranks, a.lay);
  ImGui::SetCursorScreenPos(ImVec2(wp.x, wp.y + kRulerH));
  ImGui::BeginChild("lanes", ImVec2(ws.x, ws.y - kRulerH), false, ImGuiWindowFlags_NoScrollWithMouse);
  scroll_to_requested_lane(f, f.tl->lanes, a.lay);
  ImGui::Dummy(ImVec2(ws.x - sb, a.content_h));
  a.dl = ImGui::GetWindowDrawList();
  a.cp = ImGui::GetWindowPos();
  a.cs = ImGui::GetWindowSize();
  a.top = a.cp.y - ImGui::GetScrollY();
  a.vis0 = a.cp.y;
  a.vis1 = a.cp.y + a.cs.y;

  draw_lane_backgrounds(a);
  draw_stall_shading(f, a);
  a.dl->PushClipRect(ImVec2(a.ax.x0, a.vis0), ImVec2(a.ax.x1, a.vis1), true);
  draw_lanes(f, a);
  draw_overview(f, a);
  draw_playhead(f, a);
  a.dl->PopClipRect();
  draw_label_column(f, a);

  handle_time_navigation(f, a.ax, ImVec2(a.ax.x0, a.vis0), ImVec2(a.ax.x1, a.vis1));
  // The hovered batch, else the pinned one, followed across the lanes.
  const analysis::BatchInfo* shown = hover_and_click(f, a);
  if (!shown && f.st->pinned) shown = find_batch(f, *f.st->pinned);
  if (shown && f.an) {
    a.dl->PushClipRect(ImVec2(a.ax.x0, a.vis0), ImVec2(a.ax.x1, a.vis1), true);
    draw_batch_path(f, *shown, a.lay, a.top, a.ax, a.dl);
    a.dl->PopClipRect();
  }

  ImGui::EndChild();
  end_panel();
}

}  // namespace stallscope::ui
