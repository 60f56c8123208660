// Drawing rows of timeline items and markers against the time axis, Tracy's way: lower_bound to
// the first visible item, one rectangle per item at least kMinPx wide, and runs of narrower items
// folded into one rectangle whose shade says how busy that stretch was; dense markers fold into
// one tick per kMinPx. Labels inside wide items. Used by the timeline (lanes, stall shading) and
// the queue view (empty-queue bands); what was drawn can be replayed from the GeometryCache.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>

#include "ui/geometry_cache.h"
#include "ui/layout_dump.h"
#include "ui/snapshot.h"
#include "ui/time_axis.h"

namespace stallscope::ui {

inline constexpr float kMinPx = 3.0f;  // items narrower than this merge with their neighbours

struct RowDraw {
  ImDrawList* dl = nullptr;
  const TimeAxis* axis = nullptr;
  float y0 = 0, y1 = 0;
  const Timeline* tl = nullptr;  // names for labels (null: no labels)
  bool labels = true;
  float alpha = 1.0f;        // translucent fills (stall shading)
  double dim_after_ns = -1;  // replay: items after the playhead are dimmed (-1: none)
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

}  // namespace stallscope::ui
