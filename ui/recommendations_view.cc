// "What to do" from the analysis Report (Report::actions), most useful first: each action's line
// and predicted speed-up, its why and its recommendations' evidence folded under it. Clicking one
// jumps the shared time axis to its evidence (the longest stall, the worker with the most run-queue delay, the slowest
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
  ImGui::TextColored(ImColor(kAccent), "What to do");
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
  // "What to do", as the report opens: each action's line and its predicted speed-up first; its
  // why and each recommendation's evidence folded under it.
  for (size_t k = 0; k < r.actions.size(); ++k) {
    const analysis::Action& act = r.actions[k];
    if (act.recommendations.empty()) continue;
    const size_t first = act.recommendations.front();  // the recommendation it jumps to
    const analysis::Recommendation& lead = r.recommendations[first];
    ImGui::PushID(static_cast<int>(k));
    const int rank = vocab::severity_rank(lead.severity);
    const ImU32 sev = rank == 0 ? kBad : rank == 1 ? kWarn : kTextDim;
    const bool selected = f.st->selected_recommendation == static_cast<int>(first);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImGui::BeginGroup();
    ImGui::TextColored(ImColor(sev), "%zu.", k + 1);
    ImGui::SameLine();
    ImGui::TextWrapped("%s", act.line.c_str());
    ImGui::TextColored(
        ImColor(act.basis == "model" || act.basis == "bound" || act.basis == "estimate" ? kGood : kTextDim), "%s",
        act.gain_text.c_str());
    const bool open = ImGui::TreeNodeEx("why and evidence", ImGuiTreeNodeFlags_SpanAvailWidth);
    if (f.dump) {
      const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
      f.dump->recommendation_folds.push_back({a.x, a.y, b.x, b.y});
    }
    if (open) {
      for (const std::string& why : act.why) {
        ImGui::TextWrapped("%s", why.c_str());
        if (f.dump) f.dump->recommendation_details.push_back(why);
      }
      for (size_t i : act.recommendations) {
        const analysis::Recommendation& rec = r.recommendations[i];
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
        ImGui::TextWrapped("[%s] %s: %s", rec.severity.c_str(), rec.id.c_str(), rec.message.c_str());
        ImGui::PopStyleColor();
        if (f.dump) f.dump->recommendation_details.push_back(rec.id + ": " + rec.message);
      }
      ImGui::TreePop();
    }
    const EvidenceTarget* target = first < an->targets.size() ? &an->targets[first] : nullptr;
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
    if (hovered && !ImGui::IsItemHovered()) ImGui::SetTooltip("click: show the evidence on the timeline");
    if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && target) {
      f.st->selected_recommendation = static_cast<int>(first);
      set_range(f, static_cast<double>(target->t0), static_cast<double>(target->t1));
      f.st->follow = false;
      if (f.replay) f.st->playing = false;
      f.st->highlight_pid = target->pid;
      f.st->scroll_to_pid = target->pid;
      f.st->highlight_until = f.st->wall_s + 6;
      if (target->heat_metric >= 0) f.st->heat_metric = target->heat_metric;
      f.st->evidence_note = target->what;
    }
    if (f.dump) f.dump->recommendations.push_back(std::to_string(k + 1) + ". " + act.line + "  " + act.gain_text);
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
