// Which processes `stallscope attach` can record, found through /proc: the candidates `attach
// --list` shows, the checks a pid must pass before it is touched (attach_list and attach_precheck
// are declared in attach.h and defined in attach_targets.cc), and the processes a training process
// started (its DataLoader workers), which the attach joins too.
#pragma once

#include <sys/types.h>

#include <utility>
#include <vector>

namespace stallscope::attach {

// A Python interpreter: the executable is python* or libpython is mapped (embedded interpreters).
bool is_python(pid_t pid);

// Every process whose parent chain leads to `root` (DataLoader workers, their helpers), as
// (pid, parent pid), parents before their children.
std::vector<std::pair<pid_t, pid_t>> descendants(pid_t root);

// Whether a process the training process started is worth joining: a Python process that is not
// one of multiprocessing's helpers (resource tracker, fork server), which never run the worker loop.
bool worker_candidate(pid_t pid);

}  // namespace stallscope::attach
