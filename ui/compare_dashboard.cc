// The compare view: two dashboards on one time axis under the comparison strip; see
// compare_dashboard.h.
#include "ui/compare_dashboard.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "ui/analysis_view.h"
#include "ui/palette.h"

namespace stallscope::ui {
namespace {

constexpr float kStripH = 64;  // the comparison strip: headings and a row per run
constexpr float kGap = 3;      // between the strip and the halves
const char* const kSideNames[2] = {"A", "B"};
// How far into a row the first dl.next is looked for (rows of the training thread hold little
// else before it; a run without a DataLoader falls back to its first event).
constexpr size_t kNextScan = 4096;

std::string base_name(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// The first dl.next of the training loop in `tl`: the earliest next() on a main thread.
std::optional<int64_t> first_next(const Timeline& tl) {
  std::optional<int64_t> best;
  for (const Lane& l : tl.lanes) {
    if (l.role != LaneRole::kMain) continue;
    for (const Track& t : l.tracks) {
      for (const Row& r : t.rows) {
        for (size_t i = 0; i < r.size() && i < kNextScan; ++i) {
          if (best && r[i].start_ns >= *best) break;
          if (r[i].style == Style::kNext) {
            best = r[i].start_ns;
            break;
          }
        }
      }
    }
  }
  return best;
}

// The part of a ViewState that the two sides share, as one side sees it.
struct AxisFields {
  double t0 = 0, t1 = 0, playhead = -1, live_span_ns = 0;
  float speed = 1;
  bool range_set = false, follow = false, playing = false;
  bool operator==(const AxisFields&) const = default;
};

AxisFields read_axis(const ViewState& st) {
  return {st.t0, st.t1, st.playhead, st.live_span_ns, st.speed, st.range_set, st.follow, st.playing};
}

void write_axis(ViewState& st, const AxisFields& a) {
  st.t0 = a.t0;
  st.t1 = a.t1;
  st.playhead = a.playhead;
  st.live_span_ns = a.live_span_ns;
  st.speed = a.speed;
  st.range_set = a.range_set;
  st.follow = a.follow;
  st.playing = a.playing;
}

// The shared axis moved by `shift` (axis coordinates to a side's: + origin - kAxisZero, and back);
// the playhead's -1 stays -1.
AxisFields shifted(AxisFields a, double shift) {
  a.t0 += shift;
  a.t1 += shift;
  if (a.playhead >= 0) a.playhead += shift;
  return a;
}

}  // namespace

CompareDashboard::CompareDashboard(UiFonts fonts) { set_fonts(fonts); }

void CompareDashboard::set_fonts(const UiFonts& f) {
  fonts_ = f;
  for (Side& s : sides_) s.dash.set_fonts(f);
}

void CompareDashboard::keep_geometry(bool on) {
  keep_geometry_ = on;
  for (Side& s : sides_) s.dash.keep_geometry(on);
}

void CompareDashboard::set_tune(TuneSet set, int b) {
  tune_ = std::move(set);
  tune_b_ = b;
}

void CompareDashboard::set_tune_b(int b) {
  tune_b_ = b;
  Side& s = sides_[1];
  s.dash = Dashboard(fonts_);
  s.origin = 0;
  s.scanned.reset();
  s.first_next.reset();
  s.analysed.reset();
  s.figures.reset();
  sides_[1].dash.keep_geometry(keep_geometry_);
  comparison_.reset();
}

void CompareDashboard::set_range(double t0, double t1) {
  axis_.t0 = t0 + kAxisZero;
  axis_.t1 = t1 + kAxisZero;
  axis_.range_set = true;
  axis_.follow = false;
}

// The training-window start: the analysis's once it ran (the training loader's first
// DataLoader.__iter__; of the whole run for a long recording read from a part), the first dl.next
// found in the timeline before (the same time, less the worker start-up of that first __iter__),
// the first event of a run with no DataLoader.
double CompareDashboard::origin_of(const Snapshot& s, Side& side) {
  if (s.analysis) {
    const analysis::Report& r = s.analysis->report;
    // A long recording analysed from a part of it: the whole run's training start, from the
    // summaries, so that both runs are measured from where they began.
    if (r.detail_from_ns && r.over_time.available && r.over_time.total.t1_ns > r.over_time.total.t0_ns)
      return static_cast<double>(r.over_time.total.t0_ns);
    if (r.dataloader_seen && r.window_end_ns > r.window_start_ns) return static_cast<double>(r.window_start_ns);
  }
  if (!s.timeline) return 0;
  if (s.timeline != side.scanned) {
    side.scanned = s.timeline;
    side.first_next = first_next(*s.timeline);
  }
  return static_cast<double>(side.first_next.value_or(std::min(s.timeline->first_ns, s.timeline->end_ns)));
}

// Each run's figures and compare()'s verdict, computed again only when an analysis changed.
void CompareDashboard::update_comparison(const Snapshot& a, const Snapshot& b) {
  const Snapshot* snaps[2] = {&a, &b};
  bool changed = false;
  for (int i = 0; i < 2; ++i) {
    Side& s = sides_[i];
    if (s.analysed == snaps[i]->analysis) continue;
    s.analysed = snaps[i]->analysis;
    s.figures.reset();
    if (s.analysed) s.figures = analysis::compare_side(s.analysed->report);
    changed = true;
  }
  if (!changed) return;
  comparison_.reset();
  if (a.analysis && b.analysis) comparison_ = analysis::compare(a.analysis->report, b.analysis->report);
}

void CompareDashboard::draw(const Snapshot& a, const Snapshot& b, LayoutDump* dump) {
  const Snapshot* snaps[2] = {&a, &b};
  ImGuiIO& io = ImGui::GetIO();
  axis_.dt = io.DeltaTime;
  axis_.wall_s += static_cast<double>(io.DeltaTime);
  const ImVec2 display = io.DisplaySize;
  begin_window();
  if (fonts_.regular) ImGui::PushFont(fonts_.regular);
  if (dump) {
    dump->state = "compare";
    dump->sides.assign(2, LayoutDump{});
    for (int i = 0; i < 2; ++i) {
      dump->sides[static_cast<size_t>(i)].record_items = dump->record_items;
      dump->sides[static_cast<size_t>(i)].side = kSideNames[i];
    }
  }

  // Each side's frame and origin, then one clock over both runs in axis coordinates: their data
  // measured from their origins, the union of the two.
  Frame f[2];
  ClockInput in;
  in.replay = true;
  in.loaded = true;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (int i = 0; i < 2; ++i) {
    Side& s = sides_[i];
    LayoutDump* d = dump ? &dump->sides[static_cast<size_t>(i)] : nullptr;
    f[i] = s.dash.begin_frame(*snaps[i], d);
    f[i].side = kSideNames[i];
    s.origin = origin_of(*snaps[i], s);
    f[i].origin_ns = s.origin;
    if (d) d->origin_ns = s.origin;
    if (!f[i].tl) {
      // A side still opening holds the clock back; one that cannot be read is left out of it.
      if (snaps[i]->state != SourceState::kError) in.replay = in.loaded = false;
      continue;
    }
    lo = std::min(lo, f[i].data_t0 - s.origin + kAxisZero);
    hi = std::max(hi, f[i].data_t1 - s.origin + kAxisZero);
    in.replay = in.replay && f[i].replay;
    in.live = in.live || snaps[i]->state == SourceState::kLive;
    in.loaded = in.loaded && snaps[i]->state != SourceState::kLoading;
  }
  if (!(lo < hi)) {  // nothing read yet
    lo = kAxisZero;
    hi = kAxisZero + 1e6;
    in.replay = in.loaded = false;
  }
  in.data_t0 = lo;
  in.data_t1 = hi;
  advance_clock(axis_, in);

  // The tune set's table, the strip, then A and B in the two halves below them.
  const float table_h = tune_ ? tune_table_height(*tune_) + kGap : 0;
  if (tune_) {
    const int clicked = draw_tune_table(*tune_, tune_b_, dump, ImVec2(0, 0), ImVec2(display.x, table_h - kGap));
    if (clicked >= 0) pick_ = clicked;
  }
  const float strip_y = table_h;
  const float half = std::floor((display.y - strip_y - kStripH - 2 * kGap) / 2);
  const ImVec2 side_pos[2] = {ImVec2(0, strip_y + kStripH + kGap), ImVec2(0, strip_y + kStripH + 2 * kGap + half)};
  const ImVec2 side_size[2] = {ImVec2(display.x, half), ImVec2(display.x, display.y - side_pos[1].y)};
  {
    const auto t = std::chrono::steady_clock::now();
    update_comparison(a, b);
    CompareStrip c;
    for (int i = 0; i < 2; ++i) {
      c.name[i] = base_name(snaps[i]->path);
      c.side[i] = sides_[i].figures ? &*sides_[i].figures : nullptr;
    }
    c.comparison = comparison();
    if (!c.comparison) {
      std::string waiting;
      for (int i = 0; i < 2; ++i) {
        const Snapshot& s = *snaps[i];
        std::string why;
        if (s.state == SourceState::kError && !s.timeline) {
          why = s.error;
        } else if (!s.analysis_error.empty()) {
          why = "the analysis failed: " + s.analysis_error;
        } else if (!s.analysis) {
          why = "analysing...";
        }
        if (!why.empty()) waiting += (waiting.empty() ? "" : "  ") + std::string(kSideNames[i]) + ": " + why;
      }
      c.waiting = waiting;
    }
    draw_compare_strip(c, dump, ImVec2(0, strip_y), ImVec2(display.x, kStripH));
    strip_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  }
  for (int i = 0; i < 2; ++i) {
    Side& s = sides_[i];
    ViewState& st = s.dash.state();
    const double shift = s.origin - kAxisZero;
    // The shared axis into this side: the same span from its origin, "fit" showing both runs.
    const AxisFields written = shifted(read_axis(axis_), shift);
    write_axis(st, written);
    f[i].fit_t0 = lo + shift;
    f[i].fit_t1 = hi + shift;
    if (f[i].replay && f[i].tl) {
      f[i].now_ns = st.playhead < 0 ? f[i].data_t1 : std::clamp(st.playhead, f[i].data_t0, f[i].data_t1);
    }
    ImGui::PushID(kSideNames[i]);
    s.dash.draw_panels(f[i], side_pos[i], side_size[i], true);
    ImGui::PopID();
    if (dump) {
      dump->panels.push_back(
          {kSideNames[i],
           {side_pos[i].x, side_pos[i].y, side_pos[i].x + side_size[i].x, side_pos[i].y + side_size[i].y}});
    }
    // What its panels changed moves both (the other side sees it when it draws, this frame or next).
    const AxisFields now = read_axis(st);
    if (now != written) {
      const AxisFields back = shifted(now, -shift);
      write_axis(axis_, back);
    }
  }
  if (dump) {
    dump->view_t0 = axis_.t0 - kAxisZero;
    dump->view_t1 = axis_.t1 - kAxisZero;
  }
  if (fonts_.regular) ImGui::PopFont();
  end_window();
}

}  // namespace stallscope::ui
