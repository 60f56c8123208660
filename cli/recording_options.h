// The options that every command which records shares (`stallscope run`, `stallscope attach`):
// where the recording goes, how much each thread buffers, and --quiet. Declared once so that they
// read, check and explain themselves the same way in each command, and the check that an existing
// recording is only replaced when asked to.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace stallscope::cli {

// Where the parsed values go: the fields of the command's options (inject/launcher.h RunOptions,
// inject/attach.h AttachOptions).
struct RecordingSettings {
  std::string& output;
  bool& force;  // --force: replace an existing -o file
  unsigned& ring_events;
  unsigned& rings;
  bool& quiet;
  int64_t& keep_detail_ns;  // --keep-detail DURATION
};

// Adds -o/--output FILE, --force, --ring-events N, --rings N, --keep-detail DURATION and -q/--quiet
// to `app`.
void add_recording_options(CLI::App& app, RecordingSettings settings);

// A duration: a positive number with s, m (or min), h or d after it (seconds without): "90s",
// "30m", "1.5h", "2d". nullopt for anything else, zero, or more than ~290 years.
std::optional<int64_t> parse_duration_ns(const std::string& v);
inline constexpr int64_t kMinKeepDetailNs = 10'000'000'000;

// Before anything starts: 0 when `output` can be written (empty: the default name, which is new;
// a file that does not exist; or `force`), else the usage error (exit status 2) that says the file
// exists and what to do. A recording is never replaced by accident, and the old one is not left
// for `report` to read as if it were the new run.
int check_output(const CLI::App& app, const std::string& output, bool force);

}  // namespace stallscope::cli
