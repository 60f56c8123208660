// Reading a recording named on the command line (`stallscope report`, `stallscope compare`): load
// and analyse it, or say in one line on stderr why it cannot be read and what to do, with exit
// status 1. One wording for every command that reads recordings.
#pragma once

#include <optional>
#include <string>

#include "analysis/report.h"

namespace stallscope::cli {

// The Report of the recording at `path` (finished, or still being written); nullopt after printing
// the one-line read error (read_error()).
std::optional<analysis::Report> analyze_recording(const std::string& path);

// Prints `stallscope: MSG` as one line on stderr, adding what to do when `msg` does not say it
// (pass another file, record again), and returns 1.
int read_error(std::string msg);

}  // namespace stallscope::cli
