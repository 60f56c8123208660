// A view's panel: the child window a view draws into (its background and border, recorded in the
// layout dump under the panel's name, which the tests and --layout-dump read), and the panel
// table's row: a name, a draw function and where the panel sits. The dashboard walks its table
// to lay out, draw and time the panels (dashboard.cc); lay_out() turns the places into pixels.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <span>
#include <vector>

#include "ui/views.h"

namespace stallscope::ui {

// A child window at pos/size with background `bg`, recorded in the layout dump under `name`.
// Every begin_panel() is closed by end_panel().
void begin_panel(Frame& f, const char* name, const ImVec2& pos, const ImVec2& size, ImU32 bg, bool border,
                 ImGuiWindowFlags flags = 0);
void end_panel();

// The window (or one half of the compare view), top down: the bars, the wide panels, then two
// columns side by side. In its area a panel goes below the ones before it in the table.
enum class Area : uint8_t {
  kBar,   // the whole width, edge to edge (the header)
  kWide,  // the whole width inside the margins, below the bars
  kMain,  // the left column below them: the time-based views
  kSide,  // the right column beside it
};

// Where a panel sits: its area, and how tall it is there; and, in a half of the compare view (two
// recordings stacked, each with the whole table in half the height), how tall it is there.
struct Place {
  enum Height : uint8_t {
    kFixed,  // px
    kShare,  // a share of the column's height, rounded down to a pixel
    kRest,   // what the column has left after the others (at least px); columns only
    kFit,    // fit(frame): a height from the data (the worker strips)
  };
  Area area = Area::kMain;
  Height height = kFixed;
  float px = 0;
  float share = 0;
  float (*fit)(const Frame&) = nullptr;
  float compact_px = 0;  // in a compare half: the height (kFixed) or the most (kFit); 0: as above

  static constexpr Place fixed(Area a, float px) { return {a, kFixed, px, 0, nullptr, 0}; }
  static constexpr Place share_of(Area a, float share) { return {a, kShare, 0, share, nullptr, 0}; }
  // No minimum by default: a window too small for the others gets what is left, as it comes.
  static constexpr Place rest(Area a, float min_px = -1e30f) { return {a, kRest, min_px, 0, nullptr, 0}; }
  static constexpr Place fitted(Area a, float (*fit)(const Frame&)) { return {a, kFit, 0, 0, fit, 0}; }
  // The same place, `px` tall (at most, for kFit) in a compare half.
  constexpr Place compact(float px) const {
    Place p = *this;
    p.compact_px = px;
    return p;
  }
};

// Draws one panel into pos/size (opening its own child window with begin_panel).
using DrawPanel = void (*)(Frame& f, const ImVec2& pos, const ImVec2& size);

// One row of the panel table.
struct Panel {
  const char* name;  // as in the layout dump and the frame times
  DrawPanel draw;
  Place place;
};

struct PanelBox {
  ImVec2 pos, size;
};

// Where each of `panels` goes in the area at `pos`, `size` pixels large (one box per panel, in
// order); `compact`: in a half of the compare view, with the places' compact heights.
std::vector<PanelBox> lay_out(std::span<const Panel> panels, const Frame& f, const ImVec2& pos, const ImVec2& size,
                              bool compact = false);

}  // namespace stallscope::ui
