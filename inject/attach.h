// `stallscope attach PID`: records a Python training process that is already running, started
// without stallscope. See docs/attach.md.
//
// The command makes the session (arena + database, as `stallscope run` does), loads
// libstallscope.so into the process through ptrace (inject/remote_call.h: dlopen, then
// ss_attach_begin on the stopped main thread), and lets it go at once; the library joins the
// session and starts a thread that takes the GIL and installs the DataLoader hooks, including on
// the iterators already running. The command then drains the session like the launcher, until the
// process exits, the duration is up, or the user presses Ctrl-C; then it detaches (ss_attach_end:
// recording stops, the Python side restores what it changed) and prints the summary.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace stallscope {

struct AttachOptions {
  pid_t pid = 0;
  std::string output;      // database path; empty: stallscope-<prog>-<time>.db
  bool overwrite = false;  // --force: replace `output` (and its -wal/-shm files) if it exists
  double duration_s = 0;   // 0: until the process exits or Ctrl-C
  bool quiet = false;
  unsigned ring_events = 16384;
  unsigned rings = 64;
  int64_t keep_detail_ns = 0;  // --keep-detail: full detail for the latest this much only (0: all)
  // Called with the recording's path once it is saved (not with quiet): the end-of-run summary.
  std::function<void(const std::string& db_path)> summary;
};

// Returns the exit status for the `stallscope attach` command (0: recorded and detached or the
// process ended; 1: could not attach, with one line on stderr saying why and what to do).
int attach_command(const AttachOptions& options);

// `stallscope attach --list`: prints the Python processes (this user's; everyone's for root) that
// have torch loaded, with their DataLoader-worker-like children, to pick a pid from. Returns 0.
int attach_list();

// Checks that `pid` can be attached to (exists, not a zombie, not traced, same user, a Python
// program). Empty when it can; else the one-line reason.
std::string attach_precheck(pid_t pid);

}  // namespace stallscope
