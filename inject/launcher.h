// `stallscope run`: starts a program with the collector preloaded, drains its session into a
// database while it runs, forwards signals, and ends with the program's own exit status.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace stallscope {

struct RunOptions {
  std::string output;                 // database path; empty: stallscope-<prog>-<time>.db
  std::vector<std::string> command;   // program and its arguments
  unsigned ring_events = 16384;       // events per thread ring (power of two)
  unsigned rings = 64;                // threads that can record at once
  bool quiet = false;                 // no messages on stderr but errors
  // Called with the recording's path once it is saved (not with --quiet): the command's
  // end-of-run summary. Empty: nothing is printed beyond the "recording saved" line.
  std::function<void(const std::string& db_path)> summary;
};

// Runs the program; returns the exit code stallscope should exit with. If the program was killed
// by a signal, kills this process with the same signal instead of returning.
int run_command(const RunOptions& options);

// The default recording name for a program, e.g. stallscope-python-20261122-093512.db.
std::string default_output_name(const std::string& program);

// Path of libstallscope.so beside this executable (or $STALLSCOPE_LIBRARY); empty if not found.
std::string find_preload_library();
// Folder holding the `stallscope` Python package (python/ beside bin/ and lib/, or
// $STALLSCOPE_PYTHONPATH); empty if not found.
std::string find_python_dir();

}  // namespace stallscope
