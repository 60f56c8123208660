// Drawing helpers shared by the views: the palette, rows of items with sub-pixel merging (Tracy's
// way: lower_bound for the first visible item, runs of items under kMinPx folded into one
// rectangle), markers, the time ruler, sparklines, zoom and pan of the shared time axis, and the
// text of a batch's life.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

#include "ui/views.h"

namespace stallscope::ui {

inline constexpr float kMinPx = 3.0f;  // items narrower than this merge with their neighbours

ImU32 style_color(Style s);
ImU32 marker_color(uint8_t kind);
ImU32 role_color(LaneRole r);
ImU32 mix(ImU32 a, ImU32 b, float t);  // a..b
ImU32 with_alpha(ImU32 c, float a);

inline constexpr ImU32 kBackground = IM_COL32(24, 26, 31, 255);
inline constexpr ImU32 kPanelBg = IM_COL32(32, 35, 41, 255);
inline constexpr ImU32 kGrid = IM_COL32(255, 255, 255, 22);
inline constexpr ImU32 kText = IM_COL32(225, 228, 235, 255);
inline constexpr ImU32 kTextDim = IM_COL32(150, 156, 168, 255);
inline constexpr ImU32 kAccent = IM_COL32(95, 175, 255, 255);
inline constexpr ImU32 kGood = IM_COL32(90, 200, 120, 255);
inline constexpr ImU32 kWarn = IM_COL32(240, 170, 60, 255);
inline constexpr ImU32 kBad = IM_COL32(235, 85, 80, 255);

struct RowDraw {
  ImDrawList* dl = nullptr;
  const TimeAxis* axis = nullptr;
  float y0 = 0, y1 = 0;
  const Timeline* tl = nullptr;  // names for labels (null: no labels)
  bool labels = true;
  float alpha = 1.0f;            // translucent fills (stall shading)
  double dim_after_ns = -1;      // replay: items after the playhead are dimmed (-1: none)
  LayoutDump* dump = nullptr;
  int dump_lane = -1, dump_row = 0;
  DumpLane* dump_stats = nullptr;
  GeometryCache* cache = nullptr;  // replay what was drawn for the same row, range and place
};
// Draws the visible items of `row`; returns the rectangles submitted.
int64_t draw_row(const Row& row, const RowDraw& d);
// Draws markers (instants) as small ticks; dense runs fold into one tick per kMinPx.
int64_t draw_markers(const MarkerLog& m, const RowDraw& d);

// The label an item shows: "dl.next B12", "fetch B3", a kernel's name.
std::string item_label(const Timeline& tl, const Item& it);

// Ticks and times along the axis (the top of the timeline); vertical grid lines down to grid_y1.
void draw_ruler(ImDrawList* dl, const TimeAxis& axis, float y0, float y1, float grid_y1);
// A small line chart of `values` (already one per pixel-ish bucket), scaled to [0, vmax].
void draw_sparkline(ImDrawList* dl, const std::vector<float>& values, float vmax, ImVec2 p0, ImVec2 p1, ImU32 col);

// Wheel zooms around the mouse, drag pans, double-click fits the whole recording. Applies to the
// shared range in f.st; `area` is the time area of the calling view.
void handle_time_navigation(Frame& f, const TimeAxis& axis, const ImVec2& a0, const ImVec2& a1);
// Sets the visible range (clamped to a sane width); stops following.
void set_range(Frame& f, double t0, double t1);

// The life of a batch, one stage per line: "sent 12.345 s", "fetch 12.350 s -> 12.390 s (40 ms)
// by worker 3 (pid 1234)", ... Empty when the analysis has not run.
std::vector<std::string> batch_life(const Frame& f, const analysis::BatchInfo& b);
std::string batch_title(const analysis::BatchInfo& b);
const analysis::BatchInfo* find_batch(const Frame& f, const BatchKey& k);

// A view's panel: a child window at pos/size with background `bg`, recorded in the layout dump
// under `name`. Every begin_panel() is closed by end_panel().
void begin_panel(Frame& f, const char* name, const ImVec2& pos, const ImVec2& size, ImU32 bg, bool border,
                 ImGuiWindowFlags flags = 0);
void end_panel();
// The shared time axis of the time-based views, in the current window: from the label column to
// the scrollbar, over the range the user chose.
TimeAxis view_time_axis(const Frame& f);

}  // namespace stallscope::ui
