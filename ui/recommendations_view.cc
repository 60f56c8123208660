// Recommendations from the analysis Report, most useful first. Clicking one jumps the shared time
// axis to its evidence (the longest stall, the worker with the most run-queue delay, the slowest
// epoch start, the worker whose memory grew) and points at the lane. The report's notes follow.
#include <algorithm>

#include "common/vocabulary.h"
#include "ui/format.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/time_axis.h"
#include "ui/views.h"

namespace stallscope::ui {

void draw_recommendations(Frame& f, const ImVec2& pos, const ImVec2& size) {
  // Always a scrollbar: long messages wrap to the same width whether or not they overflow, so the
  // content height does not flip between frames.
  begin_panel(f, "recommendations", pos, size, kPanelBg, true, ImGuiWindowFlags_AlwaysVerticalScrollbar);
  ImGui::TextColored(ImColor(kAccent), "Recommendations");
  ImGui::Separator();
  const AnalysisView* an = f.an;
  if (!an) {
    ImGui::TextDisabled(f.snap->analysis_error.empty() ? "analysing the recording..." : "the analysis failed:");
    if (!f.snap->analysis_error.empty()) ImGui::TextWrapped("%s", f.snap->analysis_error.c_str());
    end_panel();
    return;
  }
  const analysis::Report& r = an->report;
  if (r.recommendations.empty()) {
    if (r.dataloader_seen && r.window_end_ns > r.window_start_ns) {
      ImGui::TextWrapped("No change suggested: the loop waited for input %.0f%% of the time.",
                         r.input_wait_fraction * 100);
    } else {
      ImGui::TextWrapped("No recommendation.");
    }
    if (f.dump) f.dump->recommendations.push_back("(none)");
  }
  for (size_t i = 0; i < r.recommendations.size(); ++i) {
    const analysis::Recommendation& rec = r.recommendations[i];
    ImGui::PushID(static_cast<int>(i));
    const int rank = vocab::severity_rank(rec.severity);
    const ImU32 sev = rank == 0 ? kBad : rank == 1 ? kWarn : kTextDim;
    const bool selected = f.st->selected_recommendation == static_cast<int>(i);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::BeginGroup();
    ImGui::TextColored(ImColor(sev), "%s", rec.severity.c_str());
    if (rec.expected_speedup > 1.01) {
      ImGui::SameLine();
      ImGui::TextColored(ImColor(kGood), "up to %.2fx faster", rec.expected_speedup);
    }
    ImGui::TextWrapped("%s", rec.action.empty() ? rec.id.c_str() : rec.action.c_str());
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", rec.message.c_str());
    ImGui::PopStyleColor();
    const EvidenceTarget* target = i < an->targets.size() ? &an->targets[i] : nullptr;
    if (target && !target->what.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(kAccent));
      ImGui::TextWrapped("%s %s", f.fonts->unicode ? "\xe2\x86\x92" : "->", target->what.c_str());
      ImGui::PopStyleColor();
    }
    ImGui::EndGroup();
    const ImVec2 p1(pos.x + size.x - 8, ImGui::GetItemRectMax().y + 2);
    const bool hovered = ImGui::IsMouseHoveringRect(p0, p1) && ImGui::IsWindowHovered();
    if (hovered || selected) {
      ImGui::GetWindowDrawList()->AddRect(ImVec2(p0.x - 4, p0.y - 2), p1, selected ? kAccent : kGrid, 3.0f);
    }
    if (hovered) ImGui::SetTooltip("click: show the evidence on the timeline");
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && target) {
      f.st->selected_recommendation = static_cast<int>(i);
      set_range(f, static_cast<double>(target->t0), static_cast<double>(target->t1));
      f.st->follow = false;
      if (f.replay) f.st->playing = false;
      f.st->highlight_pid = target->pid;
      f.st->scroll_to_pid = target->pid;
      f.st->highlight_until = f.st->wall_s + 6;
      if (target->heat_metric >= 0) f.st->heat_metric = target->heat_metric;
      f.st->evidence_note = target->what;
    }
    if (f.dump) f.dump->recommendations.push_back(rec.id + ": " + rec.action);
    ImGui::Spacing();
    ImGui::PopID();
  }
  if (an->longest_stall) {
    ImGui::Separator();
    if (ImGui::SmallButton("show the longest stall")) {
      set_range(f, static_cast<double>(an->longest_stall->t0), static_cast<double>(an->longest_stall->t1));
      f.st->follow = false;
      f.st->evidence_note = an->longest_stall->what;
    }
  }
  if (!r.notes.empty()) {
    ImGui::Separator();
    for (const std::string& n : r.notes) ImGui::TextWrapped("note: %s", n.c_str());
  }
  end_panel();
}

}  // namespace stallscope::ui
