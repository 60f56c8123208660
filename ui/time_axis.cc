// The shared time axis: mapping, ruler, zoom and pan; see time_axis.h.
#include "ui/time_axis.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ui/format.h"
#include "ui/palette.h"

namespace stallscope::ui {

TimeAxis view_time_axis(const Frame& f) {
  const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
  TimeAxis ax;
  ax.t0 = f.st->t0;
  ax.t1 = f.st->t1;
  ax.x0 = wp.x + kLabelWidth;
  ax.x1 = wp.x + ws.x - ImGui::GetStyle().ScrollbarSize - 2;
  ax.origin = f.origin_ns;
  return ax;
}

void draw_ruler(ImDrawList* dl, const TimeAxis& axis, float y0, float y1, float grid_y1) {
  const double npp = axis.ns_per_px();
  const double want = npp * 90;  // a label every ~90 px
  double step = 1;
  while (step < want) {
    if (step * 2 >= want) {
      step *= 2;
      break;
    }
    if (step * 5 >= want) {
      step *= 5;
      break;
    }
    step *= 10;
  }
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step / 1e9) - 1e-9)), 0, 9);
  dl->AddRectFilled(ImVec2(axis.x0, y0), ImVec2(axis.x1, y1), kPanelBg);
  const double first = std::ceil((axis.t0 - axis.origin) / step) * step + axis.origin;
  for (double t = first; t <= axis.t1; t += step) {
    const float x = axis.x(t);
    dl->AddLine(ImVec2(x, y1 - 6), ImVec2(x, y1), kTextDim);
    if (grid_y1 > y1) dl->AddLine(ImVec2(x, y1), ImVec2(x, grid_y1), kGrid);
    const std::string s = fmt_offset(t - axis.origin, decimals);  // negative before a run's start
    dl->AddText(ImVec2(x + 3, y0 + 2), kTextDim, s.c_str());
    // Minor ticks.
    for (int k = 1; k < 5; ++k) {
      const float xm = axis.x(t + step * k / 5);
      if (xm > axis.x1) break;
      dl->AddLine(ImVec2(xm, y1 - 3), ImVec2(xm, y1), kTextDim);
    }
  }
}

void set_range(Frame& f, double t0, double t1) {
  const double min_w = 1000;  // 1 us
  const double span = std::max(1.0, f.fit_t1 - f.fit_t0);
  double w = std::clamp(t1 - t0, min_w, span * 1.5);
  const double mid = (t0 + t1) / 2;
  t0 = mid - w / 2;
  t1 = mid + w / 2;
  // Keep some of the recording in view.
  const double margin = w * 0.25;
  if (t1 < f.fit_t0 + margin) {
    t0 = f.fit_t0 + margin - w;
    t1 = t0 + w;
  }
  if (t0 > f.fit_t1 - margin) {
    t0 = f.fit_t1 - margin;
    t1 = t0 + w;
  }
  f.st->t0 = t0;
  f.st->t1 = t1;
  f.st->range_set = true;
}

void handle_time_navigation(Frame& f, const TimeAxis& axis, const ImVec2& a0, const ImVec2& a1) {
  ImGuiIO& io = ImGui::GetIO();
  const bool hovered = ImGui::IsMouseHoveringRect(a0, a1) && ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
  if (!hovered) return;
  if (io.MouseWheel != 0) {
    const double factor = std::pow(0.8, static_cast<double>(io.MouseWheel));
    const double tm = axis.t(io.MousePos.x);
    set_range(f, tm - (tm - axis.t0) * factor, tm + (axis.t1 - tm) * factor);
    f.st->follow = false;
  }
  if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f) && io.MouseDelta.x != 0) {
    const double dt = -static_cast<double>(io.MouseDelta.x) * axis.ns_per_px();
    set_range(f, axis.t0 + dt, axis.t1 + dt);
    f.st->follow = false;
  }
  if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    set_range(f, f.fit_t0, f.fit_t1);
    f.st->follow = !f.replay;
  }
}

}  // namespace stallscope::ui
