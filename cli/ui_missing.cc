// `stallscope ui` in a build without the dashboard (ImGui, GLFW or stb were not found): its
// --help says so, and any other use is one line on stderr and exit 1, whatever the arguments.
#include <cstdio>

#include "cli/command.h"

namespace stallscope::cli {
namespace {

Body define(CLI::App& app) {
  app.allow_extras();  // the dashboard's options: accepted, to answer them with the line below
  return [] {
    std::fprintf(stderr,
                 "stallscope: this build has no dashboard (ImGui, GLFW or stb were missing at configure time); "
                 "use `stallscope report FILE.db`\n");
    return 1;
  };
}

}  // namespace

const Command kUiCommand = {
    "ui",
    "open the dashboard (not in this build: ImGui, GLFW or stb were missing)",
    "stallscope ui [OPTIONS] [A.db [B.db]]",
    "Opens the dashboard, which is not in this build: ImGui, GLFW or stb were missing at\n"
    "configure time. Install them (scripts/setup.sh), configure and build again, or read a\n"
    "recording with `stallscope report FILE.db`.",
    "Exit status: 1, saying the above in one line on stderr.",
    define,
};

}  // namespace stallscope::cli
