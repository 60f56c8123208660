// Helpers shared by the tests: temporary directories, running child processes with a deadline.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace stallscope::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ProcResult {
  int exit_code = -1;   // when exited
  int term_signal = 0;  // when killed by a signal
  bool timed_out = false;
  std::string out, err;
};

// Runs argv to completion (killed after timeout_ms), capturing stdout and stderr.
ProcResult run_process(const std::vector<std::string>& argv, int timeout_ms = 60000,
                       const std::map<std::string, std::string>& env = {});

// Starts argv in the background with stdout/stderr to files in `dir`; returns its pid.
pid_t start_process(const std::vector<std::string>& argv, const std::string& dir,
                    const std::map<std::string, std::string>& env = {});
// Waits for pid up to timeout_ms; fills exit_code/term_signal/timed_out.
ProcResult wait_process(pid_t pid, int timeout_ms);

std::string unique_name(const std::string& prefix);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
// How many lines s holds (its '\n's): a command's error must be one line.
int count_lines(const std::string& s);

// SQL that makes a recording one of format version 1, as written before the summaries were kept:
// no summary tables, no units of theirs.
inline constexpr const char* kAsVersion1Sql =
    "DROP TABLE span_summaries; DROP TABLE instant_summaries; DROP TABLE counter_summaries; "
    "DROP TABLE gpu_summaries; DROP TABLE handoff_summaries; DROP TABLE queue_summaries; DELETE FROM units WHERE "
    "table_name LIKE '%_summaries'; "
    "PRAGMA user_version = 1;";

}  // namespace stallscope::testing
