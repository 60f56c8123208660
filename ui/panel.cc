// A view's panel and the layout of the panel table; see panel.h.
#include "ui/panel.h"

#include <algorithm>
#include <cmath>

namespace stallscope::ui {
namespace {

constexpr float kMargin = 6;  // around and between panels
// The side column: a quarter of the window, within these bounds.
constexpr float kSideShare = 0.25f, kSideMin = 300, kSideMax = 440;

// A panel's height when it does not depend on its neighbours (kRest is worked out by the column).
float own_height(const Place& p, const Frame& f, float column_h, bool compact) {
  const bool small = compact && p.compact_px > 0;
  switch (p.height) {
    case Place::kFixed: return small ? p.compact_px : p.px;
    case Place::kShare: return std::floor(column_h * p.share);
    case Place::kFit: {
      const float h = p.fit ? p.fit(f) : 0;
      return small ? std::min(h, p.compact_px) : h;
    }
    case Place::kRest: return p.px;  // outside a column: its minimum
  }
  return 0;
}

// Stacks the panels of `area` in a column from y = top to the bottom margin.
void lay_out_column(std::span<const Panel> panels, Area area, const Frame& f, float x, float w, float top, float H,
                    bool compact, std::vector<PanelBox>& out) {
  const float column_h = H - top - kMargin;
  // What the kRest panels share: the height below `top`, less the other panels and a margin below each.
  float left = H - top;
  int n = 0, rests = 0;
  for (const Panel& p : panels) {
    if (p.place.area != area) continue;
    ++n;
    if (p.place.height == Place::kRest) {
      ++rests;
    } else {
      left -= own_height(p.place, f, column_h, compact);
    }
  }
  left -= static_cast<float>(n) * kMargin;
  float y = top;
  for (size_t i = 0; i < panels.size(); ++i) {
    const Place& pl = panels[i].place;
    if (pl.area != area) continue;
    const float h = pl.height == Place::kRest ? std::max(pl.px, left / static_cast<float>(rests))
                                              : own_height(pl, f, column_h, compact);
    out[i] = {ImVec2(x, y), ImVec2(w, h)};
    y += h;
    y += kMargin;
  }
}

}  // namespace

void begin_panel(Frame& f, const char* name, const ImVec2& pos, const ImVec2& size, ImU32 bg, bool border,
                 ImGuiWindowFlags flags) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, bg);
  ImGui::BeginChild(name, size, border, flags);
  if (f.dump) f.dump->panels.push_back({name, {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
}

void end_panel() {
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

std::vector<PanelBox> lay_out(std::span<const Panel> panels, const Frame& f, const ImVec2& pos, const ImVec2& size,
                              bool compact) {
  const float X = pos.x, W = size.x, H = pos.y + size.y;  // H: the bottom edge
  std::vector<PanelBox> out(panels.size());
  // Bars and wide panels, top down.
  float y = pos.y;
  for (size_t i = 0; i < panels.size(); ++i) {
    const Place& pl = panels[i].place;
    if (pl.area == Area::kBar) {
      const float h = own_height(pl, f, size.y, compact);
      out[i] = {ImVec2(X, y), ImVec2(W, h)};
      y += h;
    } else if (pl.area == Area::kWide) {
      const float h = own_height(pl, f, size.y, compact);
      y += kMargin;
      out[i] = {ImVec2(X + kMargin, y), ImVec2(W - 2 * kMargin, h)};
      y += h;
    }
  }
  // The two columns below them.
  const float top = y + kMargin;
  const float side_w = std::clamp(W * kSideShare, kSideMin, kSideMax);
  const float main_w = W - side_w - 3 * kMargin;
  lay_out_column(panels, Area::kMain, f, X + kMargin, main_w, top, H, compact, out);
  lay_out_column(panels, Area::kSide, f, X + kMargin * 2 + main_w, side_w, top, H, compact, out);
  return out;
}

}  // namespace stallscope::ui
