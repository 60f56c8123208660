// The compare view's strip: the two runs' key figures in one row each, aligned in columns so that A
// and B read one above the other (samples/s, stall, step p50, loader), and analysis::compare()'s
// verdict line beside them, coloured by what it says; hovering the verdict shows it whole with what
// qualifies it. The figures are compare()'s own (CompareSide), so they match `stallscope compare`.
#include <algorithm>

#include "ui/format.h"
#include "ui/palette.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

// Column left edges, from the strip's left; the verdict takes the rest.
constexpr float kNameX = 10, kRateX = 300, kStallX = 430, kStepX = 545, kLoaderX = 665, kVerdictX = 880;
const char* const kSideName[2] = {"A", "B"};

struct Figures {
  std::string rate, stall, step, loader;
};

Figures figures(const analysis::CompareSide* s) {
  Figures f{"-", "-", "-", "-"};
  if (!s) {
    f.loader = "analysing...";
    return f;
  }
  if (s->samples_per_s) f.rate = fmt_double(*s->samples_per_s, *s->samples_per_s < 100 ? 1 : 0);
  if (s->dataloader_seen) f.stall = fmt_double(s->stall_fraction * 100, 1) + "%";
  if (s->step_time.p50_ms) f.step = fmt_duration(*s->step_time.p50_ms * 1e6);
  if (!s->loader.present) {
    f.loader = "no DataLoader";
  } else {
    f.loader = s->loader.kind.empty() ? "torch" : s->loader.kind;
    if (s->workers.count) {
      f.loader += ", " + std::to_string(*s->workers.count) + (s->workers.threads ? " threads" : " workers");
    }
  }
  return f;
}

ImU32 verdict_color(const std::string& v) {
  if (v == analysis::kVerdictFaster) return kGood;
  if (v == analysis::kVerdictSlower) return kBad;
  if (v == analysis::kVerdictNoDifference) return kText;
  return kWarn;
}

void side_badge(ImDrawList* dl, ImVec2 p, int side) {
  const ImVec2 ts = ImGui::CalcTextSize(kSideName[side]);
  dl->AddRectFilled(ImVec2(p.x, p.y - 1), ImVec2(p.x + ts.x + 10, p.y + ts.y + 1), side ? kSideB : kSideA, 3.0f);
  dl->AddText(ImVec2(p.x + 5, p.y), IM_COL32(20, 20, 24, 255), kSideName[side]);
}

}  // namespace

void draw_compare_strip(const CompareStrip& c, LayoutDump* dump, const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kPanelBg);
  ImGui::BeginChild("compare", size, false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (dump) dump->panels.push_back({"compare", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float line = ImGui::GetFontSize() + 4;
  const float y0 = pos.y + 5;
  auto text = [&](float x, float y, ImU32 col, const std::string& s, float clip_x) {
    const ImVec4 clip(pos.x + x, pos.y, pos.x + clip_x - 8, pos.y + size.y);
    dl->AddText(nullptr, 0.0f, ImVec2(pos.x + x, y), col, s.c_str(), nullptr, 0.0f, &clip);
  };

  // Headings, then one row per run.
  text(kNameX, y0, kAccent, "compare", kRateX);
  text(kRateX, y0, kTextDim, "samples/s", kStallX);
  text(kStallX, y0, kTextDim, "stalled", kStepX);
  text(kStepX, y0, kTextDim, "step p50", kLoaderX);
  text(kLoaderX, y0, kTextDim, "loader", kVerdictX);
  text(kVerdictX, y0, kTextDim, "verdict (B against A)", size.x);
  for (int i = 0; i < 2; ++i) {
    const float y = y0 + line * static_cast<float>(i + 1);
    side_badge(dl, ImVec2(pos.x + kNameX, y), i);
    const Figures fg = figures(c.side[i]);
    text(kNameX + 24, y, kText, c.name[i], kRateX);
    text(kRateX, y, kText, fg.rate, kStallX);
    text(kStallX, y, kText, fg.stall, kStepX);
    text(kStepX, y, kText, fg.step, kLoaderX);
    text(kLoaderX, y, kText, fg.loader, kVerdictX);
    if (dump) {
      dump->compare_figures.push_back(std::string(kSideName[i]) + ": " + c.name[i] + " | samples/s " + fg.rate +
                                      " | stalled " + fg.stall + " | step p50 " + fg.step + " | loader " + fg.loader);
    }
  }
  dl->AddLine(ImVec2(pos.x + kVerdictX - 12, pos.y + 4), ImVec2(pos.x + kVerdictX - 12, pos.y + size.y - 4), kGrid);

  // The verdict, wrapped in its column; whole, with what qualifies it, under the mouse.
  const std::string verdict = c.comparison ? c.comparison->verdict_text : c.waiting;
  const ImU32 col = c.comparison ? verdict_color(c.comparison->verdict) : kTextDim;
  ImGui::SetCursorScreenPos(ImVec2(pos.x + kVerdictX, y0 + line));
  ImGui::PushTextWrapPos(size.x - 10);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(col));
  ImGui::TextUnformatted(verdict.c_str());
  ImGui::PopStyleColor();
  ImGui::PopTextWrapPos();
  if (c.comparison && !c.comparison->problems.empty()) {
    const size_t cautions =
        static_cast<size_t>(std::count_if(c.comparison->problems.begin(), c.comparison->problems.end(),
                                          [](const analysis::CompareProblem& p) { return !p.blocking; }));
    if (cautions > 0) {
      const std::string note = std::to_string(cautions) + (cautions == 1 ? " caution" : " cautions") + " (hover)";
      text(size.x - 10 - ImGui::CalcTextSize(note.c_str()).x, y0, kWarn, note, size.x + 8);
    }
  }
  if (ImGui::IsMouseHoveringRect(ImVec2(pos.x + kVerdictX, pos.y), ImVec2(pos.x + size.x, pos.y + size.y)) &&
      ImGui::IsWindowHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
    ImGui::TextUnformatted(verdict.c_str());
    if (c.comparison) {
      for (const analysis::CompareProblem& p : c.comparison->problems) {
        ImGui::TextDisabled("%s%s", p.blocking ? "cannot compare: " : "caution: ", p.message.c_str());
      }
    }
    ImGui::TextDisabled("the same as `stallscope compare A.db B.db`");
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
  if (dump) {
    dump->verdict = c.comparison ? c.comparison->verdict : "";
    dump->verdict_text = verdict;
  }
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

}  // namespace stallscope::ui
