// Batch: the life of the batch under the mouse (or the one pinned by a click) as a table of stages
// with times, plus a small Gantt bar of those stages; and the stall breakdown of the run.
#include <algorithm>

#include "ui/batch_life.h"
#include "ui/format.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/views.h"

namespace stallscope::ui {

void draw_batch(Frame& f, const ImVec2& pos, const ImVec2& size) {
  begin_panel(f, "batch", pos, size, kPanelBg, true);
  ImGui::TextColored(ImColor(kAccent), "Batch life");
  ImGui::Separator();
  const analysis::BatchInfo* b = nullptr;
  bool pinned = false;
  if (f.st->hovered) b = find_batch(f, *f.st->hovered);
  if (!b && f.st->pinned) {
    b = find_batch(f, *f.st->pinned);
    pinned = b != nullptr;
  }
  if (!b) {
    ImGui::TextWrapped(
        "Hover a next, fetch or pin span on the timeline to follow its batch from sent to handed; click "
        "to pin it here.");
  } else {
    ImGui::TextUnformatted(batch_title(*b).c_str());
    if (pinned) {
      ImGui::SameLine();
      if (ImGui::SmallButton("unpin")) f.st->pinned.reset();
    }
    const std::vector<std::string> life = batch_life(f, *b);
    if (f.fonts->mono) ImGui::PushFont(f.fonts->mono);
    ImGui::PushTextWrapPos(0.0f);
    for (const std::string& s : life) ImGui::TextUnformatted(s.c_str());
    ImGui::PopTextWrapPos();
    if (f.fonts->mono) ImGui::PopFont();
    // Stages as a bar: fetch (blue), waiting to be taken (yellow), in the loop's hands (red: the
    // next() that handed it).
    const std::optional<int64_t> origin = b->sent_ns ? b->sent_ns : b->fetch_start_ns;
    if (origin && b->handed_ns && *b->handed_ns > *origin) {
      ImDrawList* dl = ImGui::GetWindowDrawList();
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const float w = ImGui::GetContentRegionAvail().x - 4, h = 10;
      const double span = static_cast<double>(*b->handed_ns - *origin);
      auto x = [&](int64_t t) { return p.x + w * static_cast<float>(static_cast<double>(t - *origin) / span); };
      dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), IM_COL32(60, 64, 72, 255));
      if (b->fetch_start_ns && b->fetch_end_ns) {
        dl->AddRectFilled(ImVec2(x(*b->fetch_start_ns), p.y), ImVec2(x(*b->fetch_end_ns), p.y + h),
                          style_color(Style::kFetch));
      }
      if (b->put_ns)
        dl->AddRectFilled(ImVec2(x(*b->put_ns), p.y), ImVec2(x(*b->handed_ns), p.y + h), IM_COL32(230, 200, 90, 255));
      ImGui::Dummy(ImVec2(w, h + 4));
      ImGui::TextDisabled("blue: fetching   yellow: ready, waiting for the loop");
    }
  }
  if (f.an) {
    const analysis::Report& r = f.an->report;
    ImGui::Separator();
    ImGui::TextDisabled("stalled %s of %s (%.1f%%)", fmt_duration(r.stall.seconds * 1e9).c_str(),
                        fmt_duration(r.wall_s * 1e9).c_str(), r.stall.fraction * 100);
    for (const auto& [cause, sec] : r.stall.by_cause_s) {
      if (sec <= 0) continue;
      ImGui::TextDisabled("  %-14s %s", cause.c_str(), fmt_duration(sec * 1e9).c_str());
    }
    if (!f.st->evidence_note.empty()) {
      ImGui::Separator();
      ImGui::TextWrapped("showing: %s", f.st->evidence_note.c_str());
    }
  }
  end_panel();
}

}  // namespace stallscope::ui
