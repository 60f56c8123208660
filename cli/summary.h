// The end-of-run summary that `stallscope run` and `stallscope attach` print on stderr once the
// recording is saved: the short report (analysis/report.h, short_summary).
#pragma once

#include <string>

// Analyses `db_path` and prints its short summary on stderr. A recording that cannot be analysed
// prints nothing: the summary never changes what the command reports or its exit status.
void print_summary(const std::string& db_path);
