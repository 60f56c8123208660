// `stallscope-ui`: the dashboard's executable, the only one that links ImGui, GLFW and (at run
// time) OpenGL. `stallscope ui ARGS...` execs it as `stallscope-ui ARGS...` (cli/ui_launcher.cc);
// run directly it behaves the same. Its command line is `stallscope ui`'s, parsed by the same app
// as every other command (cli/app.cc) with the dashboard's command alone, so its --help and usage
// errors read `stallscope ui`.
#include <vector>

#include "cli/command.h"
#include "cli/ui_command.h"

int main(int argc, char** argv) {
  using namespace stallscope::cli;
  static constexpr const Command* kOnlyUi[] = {&kUiDashboardCommand};
  // argv as `stallscope ui ARGS...`: the top-level app's name and the command's word.
  char stallscope[] = "stallscope";
  char ui[] = "ui";
  std::vector<char*> args = {stallscope, ui};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  return run_commands(kOnlyUi, static_cast<int>(args.size()) - 1, args.data());
}
