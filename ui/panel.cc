// A view's panel; see panel.h.
#include "ui/panel.h"

namespace stallscope::ui {

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

}  // namespace stallscope::ui
