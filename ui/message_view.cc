// A full-window message: why a recording could not be opened (corrupt, truncated, foreign,
// newer schema), or that it is still being read.
#include "ui/palette.h"
#include "ui/views.h"

namespace stallscope::ui {

void draw_message(const std::string& title, const std::string& message, LayoutDump* dump, const UiFonts& fonts,
                  const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kBackground);
  ImGui::BeginChild("message", size, true);
  if (dump) {
    dump->panels.push_back({"message", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
    dump->message = message;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float w = std::min(size.x - 80, 900.0f);
  const ImVec2 box0(pos.x + (size.x - w) * 0.5f, pos.y + size.y * 0.32f);
  const ImVec2 box1(box0.x + w, box0.y + 150);
  dl->AddRectFilled(box0, box1, kPanelBg, 6.0f);
  dl->AddRectFilled(box0, ImVec2(box0.x + 5, box1.y), kBad, 3.0f);
  ImFont* big = fonts.big ? fonts.big : ImGui::GetFont();
  const float big_size = fonts.big ? fonts.big->FontSize : ImGui::GetFontSize() * 1.6f;
  dl->AddText(big, big_size, ImVec2(box0.x + 24, box0.y + 18), kText, title.c_str());
  ImGui::SetCursorScreenPos(ImVec2(box0.x + 24, box0.y + 30 + big_size));
  ImGui::PushTextWrapPos(box1.x - 20);
  ImGui::TextUnformatted(message.c_str());
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

}  // namespace stallscope::ui
