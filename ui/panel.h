// A view's panel: the child window a view draws into, with its background and border, recorded
// in the layout dump under the panel's name (what the tests and --layout-dump read).
#pragma once

#include <imgui.h>

#include "ui/views.h"

namespace stallscope::ui {

// A child window at pos/size with background `bg`, recorded in the layout dump under `name`.
// Every begin_panel() is closed by end_panel().
void begin_panel(Frame& f, const char* name, const ImVec2& pos, const ImVec2& size, ImU32 bg, bool border,
                 ImGuiWindowFlags flags = 0);
void end_panel();

}  // namespace stallscope::ui
