// The tune set's table over the compare view; see views.h (draw_tune_table) and tune_set.h.
#include <algorithm>

#include "ui/format.h"
#include "ui/palette.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

// Column left edges, from the table's left.
constexpr float kBadgeX = 10, kNameX = 40, kSetX = 80, kRateX = 640, kPredX = 740, kStallX = 850, kPStallX = 930,
                kStatusX = 1030;
constexpr int kMaxRows = 8;  // visible without scrolling

std::string rate(const std::optional<double>& v) { return v ? fmt_double(*v, *v < 100 ? 1 : 0) : "-"; }
std::string share(const std::optional<double>& v) { return v ? fmt_double(*v * 100, 0) + "%" : "-"; }

std::string status_text(const TuneRun& r) {
  std::string s = r.status;
  if (r.status == "stopped early" || r.status == "budget" || r.status == "interrupted") {
    s += " (" + std::to_string(r.steps) + " steps)";
  }
  if (r.whole_samples_per_s) s += ", whole run " + rate(r.whole_samples_per_s) + "/s";
  if (r.winner) s += "  winner";
  return s;
}

void badge(ImDrawList* dl, ImVec2 p, const char* name, ImU32 col) {
  const ImVec2 ts = ImGui::CalcTextSize(name);
  dl->AddRectFilled(ImVec2(p.x, p.y - 1), ImVec2(p.x + ts.x + 10, p.y + ts.y + 1), col, 3.0f);
  dl->AddText(ImVec2(p.x + 5, p.y), IM_COL32(20, 20, 24, 255), name);
}

}  // namespace

float tune_table_height(const TuneSet& set) {
  const float line = ImGui::GetFontSize() + 4;
  const int rows = std::min(kMaxRows, static_cast<int>(set.runs.size()));
  return 10 + line * static_cast<float>(rows + 1);
}

int draw_tune_table(const TuneSet& set, int shown_b, LayoutDump* dump, const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kPanelBg);
  ImGui::BeginChild("tune", size, false, ImGuiWindowFlags_None);
  if (dump) dump->panels.push_back({"tune", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetFontSize() + 4;
  const ImVec2 origin = ImGui::GetCursorScreenPos();  // moves up as the rows scroll
  const float y0 = origin.y + 5;
  auto text = [&](float x, float y, ImU32 col, const std::string& s, float clip_x) {
    const ImVec4 clip(pos.x + x, pos.y, pos.x + clip_x - 8, pos.y + size.y);
    dl->AddText(nullptr, 0.0f, ImVec2(pos.x + x, y), col, s.c_str(), nullptr, 0.0f, &clip);
  };

  text(kBadgeX, y0, kAccent, "tune " + set.dir + " (" + std::to_string(set.runs.size()) + " runs)", kRateX);
  text(kRateX, y0, kTextDim, "samples/s", kPredX);
  text(kPredX, y0, kTextDim, "predicted", kStallX);
  text(kStallX, y0, kTextDim, "stall", kPStallX);
  text(kPStallX, y0, kTextDim, "predicted", kStatusX);
  text(kStatusX, y0, kTextDim, "status (click a row to show it as B)", size.x);
  int clicked = -1;
  for (size_t i = 0; i < set.runs.size(); ++i) {
    const TuneRun& r = set.runs[i];
    const int idx = static_cast<int>(i);
    const float y = y0 + line * static_cast<float>(i + 1);
    const ImVec2 a(pos.x, y - 2), b(pos.x + size.x, y + line - 2);
    const bool hovered = ImGui::IsWindowHovered() && ImGui::IsMouseHoveringRect(a, b);
    if (idx == shown_b && idx != 0) {
      dl->AddRectFilled(a, b, IM_COL32(190, 150, 255, 40));
    } else if (hovered && idx != 0) {
      dl->AddRectFilled(a, b, IM_COL32(255, 255, 255, 18));
    }
    if (hovered && idx != 0 && idx != shown_b && ImGui::IsMouseClicked(0)) clicked = idx;
    const char* side = idx == 0 ? "A" : idx == shown_b ? "B" : nullptr;
    if (side) badge(dl, ImVec2(pos.x + kBadgeX, y), side, idx == 0 ? kSideA : kSideB);
    const ImU32 col = r.winner ? kGood : r.samples_per_s ? kText : kTextDim;
    text(kNameX, y, col, r.name, kSetX);
    text(kSetX, y, col, r.baseline ? r.settings + " (the script's)" : r.settings, kRateX);
    text(kRateX, y, col, rate(r.samples_per_s), kPredX);
    text(kPredX, y, kTextDim, rate(r.predicted_samples_per_s), kStallX);
    text(kStallX, y, col, share(r.stall), kPStallX);
    text(kPStallX, y, kTextDim, share(r.predicted_stall), kStatusX);
    text(kStatusX, y, r.winner ? kGood : kTextDim, status_text(r), size.x);
    if (dump) {
      dump->tune_rows.push_back(std::string(side ? side : " ") + ": " + r.name + " | " +
                                (r.baseline ? r.settings + " (the script's)" : r.settings) + " | samples/s " +
                                rate(r.samples_per_s) + " | predicted " + rate(r.predicted_samples_per_s) +
                                " | stall " + share(r.stall) + " | " + status_text(r));
    }
  }
  if (dump) dump->tune_b = shown_b;
  // The rows' height, so that a long set (a sweep) scrolls.
  ImGui::SetCursorScreenPos(origin);
  ImGui::Dummy(ImVec2(1, 10 + line * static_cast<float>(set.runs.size() + 1)));
  ImGui::EndChild();
  ImGui::PopStyleColor();
  return clicked;
}

}  // namespace stallscope::ui
