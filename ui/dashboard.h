// Dashboard: lays out the panels in the window from its panel table (name, draw function, place;
// dashboard.cc), draws and times them, and runs the per-frame logic that is not a view's: the
// replay clock, following the live edge or the playhead, and the visible range's defaults. Draws
// into the current ImGui frame; owns nothing but the ViewState, so a test can drive it headlessly
// with any snapshot. The compare view (compare_dashboard.h) draws two of them, one per recording,
// from the same pieces: begin_frame(), advance_clock() on a shared axis, draw_panels().
#pragma once

#include <imgui.h>

#include <span>
#include <vector>

#include "ui/panel.h"
#include "ui/snapshot.h"
#include "ui/views.h"

namespace stallscope::ui {

// Where the last frame's build time went, per panel (CPU side), in the panel table's order; empty
// when the frame showed a message instead of the panels.
struct PanelTime {
  const char* name;  // the panel table's name
  double ms;
};
struct ViewTimes {
  std::vector<PanelTime> panels;
};

// The panel table: every panel of the dashboard, in drawing order.
std::span<const Panel> dashboard_panels();

// What the clock of a view needs to know of the data it shows.
struct ClockInput {
  bool replay = false;  // a finished (or cut off) recording: the playhead plays over it
  bool live = false;    // being written: follow the newest data
  bool loaded = false;  // read to the end at open: the default range is final from now on
  double data_t0 = 0, data_t1 = 1;
};
// One frame of the clock, on `st`: replay playback (playhead += dt x speed, stopping at the end),
// the default range (the whole run; while live, the newest live_span_ns), following the live edge
// or the playhead. Returns "now": the playhead (the end when it is -1), or the newest data.
double advance_clock(ViewState& st, const ClockInput& in);

// The borderless window over the whole display that the dashboard (and the compare view) draws
// its panels in; every begin_window() is closed by end_window().
void begin_window();
void end_window();

class Dashboard {
 public:
  explicit Dashboard(UiFonts fonts = {}) : fonts_(fonts) {}

  // One frame of `snap`, filling the display. `dump` (optional) receives the layout.
  void draw(const Snapshot& snap, LayoutDump* dump = nullptr);

  // The pieces of draw(), for the compare view. A frame of `snap`: its data and range, the
  // geometry kept for it, this dashboard's state; no clock yet (f.now_ns is the newest data).
  Frame begin_frame(const Snapshot& snap, LayoutDump* dump);
  // The panels of `f` in the area at `pos`, `size` large, of the current window (`compact`: with
  // the places' compact heights), timed; a recording that could not be read shows why instead.
  void draw_panels(Frame& f, const ImVec2& pos, const ImVec2& size, bool compact = false);

  ViewState& state() { return st_; }
  // Geometry kept across frames (on by default); off draws everything every frame.
  void keep_geometry(bool on) { keep_geometry_ = on; }
  const GeometryCache& geometry() const { return geo_; }
  const ViewTimes& last_times() const { return times_; }
  const UiFonts& fonts() const { return fonts_; }
  void set_fonts(const UiFonts& f) { fonts_ = f; }

 private:
  UiFonts fonts_;
  ViewState st_;
  GeometryCache geo_;
  bool keep_geometry_ = true;
  ViewTimes times_;
};

}  // namespace stallscope::ui
