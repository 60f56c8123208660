// Subcommands of the `stallscope` command that live outside cli/main.cc. Each takes the arguments
// after its name and returns the process exit status (0 ok, 1 failure, 2 usage error). Declared
// at global scope beside main.cc's own cmd_run.
#pragma once

// `stallscope report [--json] FILE.db`: see cli/report_command.cc and docs/report.md.
int cmd_report(int argc, char** argv);
// `stallscope ui [OPTIONS] [FILE.db]`: the dashboard; see cli/ui_command.cc and docs/dashboard.md.
int cmd_ui(int argc, char** argv);
