// Dashboard: lays out the views in the window and runs the per-frame logic that is not a view's:
// the replay clock, following the live edge or the playhead, and the visible range's defaults.
// Draws into the current ImGui frame; owns nothing but the ViewState, so a test can drive it
// headlessly with any snapshot.
#pragma once

#include <imgui.h>

#include "ui/snapshot.h"
#include "ui/views.h"

namespace stallscope::ui {

// Where the last frame's build time went, per view (ms, CPU side).
struct ViewTimes {
  double header = 0, headline = 0, timeline = 0, queue = 0, workers = 0, side = 0;  // side: recommendations + batch
};

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
