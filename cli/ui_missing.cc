// `stallscope ui` in a build without the dashboard (ImGui, GLFW or OpenGL were not found).
#include <cstdio>

#include "cli/commands.h"

int cmd_ui(int, char**) {
  std::fprintf(stderr,
               "stallscope: this build has no dashboard (ImGui, GLFW or OpenGL were missing at configure time); "
               "use `stallscope report FILE.db`\n");
  return 1;
}
