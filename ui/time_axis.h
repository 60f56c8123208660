// The shared time axis of the time-based views (timeline, queue depth, worker strips): the small
// POD that maps time to pixels, the axis of the view being drawn (right of the label column, over
// the range the user chose), its ruler, and navigation: wheel zoom around the pointer, drag to
// pan, double-click to fit. The views share one range (ViewState::t0/t1), so zooming one zooms
// all three and their axes line up.
#pragma once

#include <imgui.h>

#include "ui/views.h"

namespace stallscope::ui {

// Visible time range and pixels: a small POD passed to everything that draws against time.
struct TimeAxis {
  double t0 = 0, t1 = 1;  // ns since the session start
  float x0 = 0, x1 = 1;   // pixels
  double origin = 0;      // the ruler's zero (Frame::origin_ns)
  double ns_per_px() const { return (t1 - t0) / static_cast<double>(x1 - x0 > 1 ? x1 - x0 : 1); }
  float x(double t) const { return x0 + static_cast<float>((t - t0) / ns_per_px()); }
  double t(float px) const { return t0 + static_cast<double>(px - x0) * ns_per_px(); }
};

// Width of the label column of the time-based views, so their time axes line up.
inline constexpr float kLabelWidth = 150.0f;

// The shared time axis of the time-based views, in the current window: from the label column to
// the scrollbar, over the range the user chose.
TimeAxis view_time_axis(const Frame& f);

// Ticks and times along the axis (the top of the timeline), counted from axis.origin; vertical grid
// lines down to grid_y1.
void draw_ruler(ImDrawList* dl, const TimeAxis& axis, float y0, float y1, float grid_y1);

// Wheel zooms around the mouse, drag pans, double-click fits (f.fit_t0/t1). Applies to the
// shared range in f.st; `area` is the time area of the calling view.
void handle_time_navigation(Frame& f, const TimeAxis& axis, const ImVec2& a0, const ImVec2& a1);
// Sets the visible range (clamped to a sane width, some of f.fit_t0/t1 kept in view); stops
// following.
void set_range(Frame& f, double t0, double t1);

}  // namespace stallscope::ui
