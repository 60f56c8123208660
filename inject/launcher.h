// `stallscope run`: starts a program with the collector preloaded, drains its session into a
// database while it runs, forwards signals, and ends with the program's own exit status.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/vocabulary.h"

namespace stallscope {

struct RunOptions {
  std::string output;                // database path; empty: stallscope-<prog>-<time>.db
  bool overwrite = false;            // --force: replace `output` (and its -wal/-shm files) if it exists
  std::vector<std::string> command;  // program and its arguments
  unsigned ring_events = 16384;      // events per thread ring (power of two)
  unsigned rings = 64;               // threads that can record at once
  bool quiet = false;                // no messages on stderr but errors
  int64_t keep_detail_ns = 0;        // --keep-detail: full detail for the latest this much only (0: all)
  // `--loader`: which DataLoader the program's Python processes run: "torch" (as the script made
  // it), "tuned" or "reference". Passed to them in STALLSCOPE_LOADER, with `loader_tuned` (the
  // tuned settings as JSON, analysis/loader_tuning.h) in STALLSCOPE_LOADER_TUNED; both are kept in
  // the recording's meta (`loader`, `loader_tuned`).
  std::string loader = vocab::kLoaderTorch;
  std::string loader_tuned;
  // Called with the recording's path once it is saved (not with --quiet): the command's
  // end-of-run summary. Empty: nothing is printed beyond the "recording saved" line.
  std::function<void(const std::string& db_path)> summary;
};

// Runs the program; returns the exit code stallscope should exit with. If the program was killed
// by a signal, kills this process with the same signal instead of returning.
int run_command(const RunOptions& options);

// The default recording name for a program, e.g. stallscope-python-20261122-093512.db; with
// RANK in the environment (one `stallscope run` per rank under torchrun), the rank too:
// stallscope-python-rank1-20261122-093512.db, so that ranks started together never pick one name.
std::string default_output_name(const std::string& program);
// `output` with each "{rank}" replaced by RANK from the environment ("0" without one).
std::string with_rank(std::string output);

// Path of libstallscope.so beside this executable (or $STALLSCOPE_LIBRARY); empty if not found.
std::string find_preload_library();
// Folder holding the `stallscope` Python package (python/ beside bin/ and lib/, or
// $STALLSCOPE_PYTHONPATH); empty if not found.
std::string find_python_dir();
// Removes the shared-memory arenas of dead sessions (Arena::remove_stale) and, unless `quiet`,
// says so in one line when there were any. `run` and `attach` call it before making their own.
void report_stale_arenas_removed(bool quiet);

}  // namespace stallscope
