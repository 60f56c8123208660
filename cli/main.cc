// `stallscope`: everything is in run_command_line (cli/app.cc), which the CLI fuzz target calls too.
#include "cli/command.h"

int main(int argc, char** argv) { return stallscope::cli::run_command_line(argc, argv); }
