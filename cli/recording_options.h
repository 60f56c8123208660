// The options that every command which records shares (`stallscope run`, `stallscope attach`):
// where the recording goes, how much each thread buffers, and --quiet. Declared once so that they
// read, check and explain themselves the same way in each command.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace stallscope::cli {

// Where the parsed values go: the fields of the command's options (inject/launcher.h RunOptions,
// inject/attach.h AttachOptions).
struct RecordingSettings {
  std::string& output;
  unsigned& ring_events;
  unsigned& rings;
  bool& quiet;
};

// Adds -o/--output FILE, --ring-events N, --rings N and -q/--quiet to `app`.
void add_recording_options(CLI::App& app, RecordingSettings settings);

}  // namespace stallscope::cli
