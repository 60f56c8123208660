// Dashboard: lays out the panels in the window from its panel table (name, draw function, place;
// dashboard.cc), draws and times them, and runs the per-frame logic that is not a view's: the
// replay clock, following the live edge or the playhead, and the visible range's defaults. Draws
// into the current ImGui frame; owns nothing but the ViewState, so a test can drive it headlessly
// with any snapshot.
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

class Dashboard {
 public:
  explicit Dashboard(UiFonts fonts = {}) : fonts_(fonts) {}

  // One frame of `snap`, filling the display. `dump` (optional) receives the layout.
  void draw(const Snapshot& snap, LayoutDump* dump = nullptr);

  ViewState& state() { return st_; }
  // Geometry kept across frames (on by default); off draws everything every frame.
  void keep_geometry(bool on) { keep_geometry_ = on; }
  const GeometryCache& geometry() const { return geo_; }
  const ViewTimes& last_times() const { return times_; }
  const UiFonts& fonts() const { return fonts_; }
  void set_fonts(const UiFonts& f) { fonts_ = f; }

 private:
  void update_clock(Frame& f);
  UiFonts fonts_;
  ViewState st_;
  GeometryCache geo_;
  bool keep_geometry_ = true;
  ViewTimes times_;
};

}  // namespace stallscope::ui
