// Which recordings exist on this machine: `stallscope run` registers each session while it runs
// (so that `stallscope ui` can list live sessions) and remembers finished ones (recent
// recordings). Files live in $XDG_RUNTIME_DIR/stallscope (or /tmp/stallscope-UID), mode 0700.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace stallscope {

struct SessionEntry {
  pid_t launcher_pid = 0;  // the `stallscope run` process (0 for recent entries)
  std::string db_path;     // absolute path of the recording
  std::string command;     // the recorded command line
  int64_t started_unix = 0;
  int64_t ended_unix = 0;  // 0 while live
};

// The registry folder (created if needed); empty if it cannot be made.
std::string registry_dir();
// Registers a live session; returns false (and leaves nothing behind) on failure.
bool register_live_session(const SessionEntry& e);
// Moves the session to the recent list.
void finish_live_session(pid_t launcher_pid, int64_t ended_unix);
// Live sessions whose launcher still runs (stale entries are removed).
std::vector<SessionEntry> list_live_sessions();
// Finished recordings, newest first, at most `limit`, only those whose file still exists.
std::vector<SessionEntry> list_recent_sessions(size_t limit = 20);

}  // namespace stallscope
