// The dashboard is its own executable, stallscope-ui (cli/ui_main.cc), so that `stallscope` links
// no GUI library: kUiDashboardCommand (cli/ui_command.cc) is the `ui` command that parses the
// dashboard's options and opens the window, linked into stallscope-ui only; kUiCommand in
// `stallscope` (cli/ui_launcher.cc) checks that a window can open here and hands its command line
// on to stallscope-ui.
#pragma once

#include "cli/command.h"

namespace stallscope::cli {

// `ui`'s line in `stallscope --help`: the same in both executables.
inline constexpr char kUiSummary[] = "open the dashboard: live sessions, a recording to replay, or two to compare";

// The dashboard's file name, beside `stallscope` in bin/ (the build's and the installed one).
inline constexpr char kUiExecutable[] = "stallscope-ui";

extern const Command kUiDashboardCommand;

}  // namespace stallscope::cli
