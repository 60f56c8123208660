// Session picker (`stallscope ui` with no file): live sessions on this machine (their recorder
// still runs) and recent recordings, newest first. A click opens one.
#include <ctime>

#include "ui/format.h"
#include "ui/palette.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

std::string when(int64_t unix_s) {
  if (unix_s <= 0) return "";
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S", &tm);
  return b;
}

void entries(ViewState& st, const std::vector<SessionEntry>& list, bool live, LayoutDump* dump) {
  for (size_t i = 0; i < list.size(); ++i) {
    const SessionEntry& e = list[i];
    ImGui::PushID(static_cast<int>(i) + (live ? 0 : 100000));
    const std::string label = (e.command.empty() ? e.db_path : e.command) + "##entry";
    if (ImGui::Selectable(label.c_str(), false, 0, ImVec2(0, 0))) st.open_request = e.db_path;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", e.db_path.c_str());
    ImGui::SameLine(ImGui::GetWindowWidth() * 0.62f);
    if (live) {
      ImGui::TextColored(ImColor(kGood), "live since %s (pid %d)", when(e.started_unix).c_str(),
                         static_cast<int>(e.launcher_pid));
    } else {
      ImGui::TextDisabled("%s  %s", when(e.ended_unix).c_str(), e.db_path.c_str());
    }
    if (dump) dump->sessions.push_back(std::string(live ? "live: " : "recent: ") + e.db_path);
    ImGui::PopID();
  }
}

}  // namespace

void draw_session_list(ViewState& st, const std::vector<SessionEntry>& live, const std::vector<SessionEntry>& recent,
                       const std::string& notice, LayoutDump* dump, const UiFonts& fonts, const ImVec2& pos,
                       const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::BeginChild("sessions", size, true);
  if (dump) dump->panels.push_back({"sessions", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
  if (fonts.big) ImGui::PushFont(fonts.big);
  ImGui::TextColored(ImColor(kAccent), "stallscope");
  if (fonts.big) ImGui::PopFont();
  ImGui::TextDisabled("pick a session to open, or run: stallscope ui FILE.db");
  if (!notice.empty()) ImGui::TextColored(ImColor(kBad), "%s", notice.c_str());
  ImGui::Spacing();
  ImGui::TextUnformatted("Live sessions");
  ImGui::Separator();
  if (live.empty()) ImGui::TextDisabled("none running (start one with: stallscope run -- python train.py)");
  entries(st, live, true, dump);
  ImGui::Spacing();
  ImGui::Spacing();
  ImGui::TextUnformatted("Recent recordings");
  ImGui::Separator();
  if (recent.empty()) ImGui::TextDisabled("none yet");
  entries(st, recent, false, dump);
  ImGui::EndChild();
}

}  // namespace stallscope::ui
