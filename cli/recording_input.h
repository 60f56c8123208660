// Reading a recording named on the command line (`stallscope report`, `stallscope compare`): load
// and analyse it, or say in one line on stderr why it cannot be read and what to do, with exit
// status 1. One wording for every command that reads recordings.
#pragma once

#include <optional>
#include <string>

#include "analysis/report.h"
#include "analysis/session.h"

namespace stallscope::cli {

// The Report of the recording at `path` (finished, or still being written), from as much of its
// detail as `budget` allows (a long recording's latest part; the "Over time" table covers all of
// it); nullopt after printing the one-line read error (read_error()).
std::optional<analysis::Report> analyze_recording(const std::string& path, const analysis::DetailBudget& budget = {});

// A finished recording made before summaries were kept (schema version 1) gets them, built from its
// rows and written back when the file can be written (storage/upgrade.h), with a progress line on
// stderr. Returns the warning line to print when building them failed (the recording is then read
// as it is), for the caller to print only if the recording can be read at all.
std::string upgrade_if_older(const std::string& path);

// Prints `stallscope: MSG` as one line on stderr, adding what to do when `msg` does not say it
// (pass another file, record again), and returns 1.
int read_error(std::string msg);

}  // namespace stallscope::cli
