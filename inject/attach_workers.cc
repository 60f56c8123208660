// Joining the workers a training process already runs; see attach_workers.h.
#include "inject/attach_workers.h"

#include <algorithm>
#include <cstdio>

#include "collector/arena.h"
#include "common/procfs.h"
#include "inject/attach_python.h"
#include "inject/attach_targets.h"

namespace stallscope::attach {

void RunningWorkers::say(const std::string& msg) const {
  if (!quiet_) std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
}

void RunningWorkers::join(pid_t training_pid, const Payload& payload, Arena* arena) {
  for (const auto& [child, parent] : descendants(training_pid)) {
    bool joined = false;
    if (worker_candidate(child)) {
      Joined j{child, {}, StatusFile::create(child)};
      const std::string code =
          python_source(payload.python_dir, "begin_worker",
                        {payload.shm, payload.lib, payload.python_dir, j.status.path()}, j.status.path());
      const std::string err = inject(child, payload, code, &j.entries);
      if (err.empty()) {
        joined = true;
        joined_.push_back(std::move(j));
      } else if (err.find("already recorded by stallscope") != std::string::npos) {
        joined = true;  // forked from the training process after its attach: in the session already
        j.status.remove();
      } else {
        j.status.remove();
        std::fprintf(stderr, "stallscope: process %d (started by %d) is sampled only: %s\n", static_cast<int>(child),
                     static_cast<int>(parent), err.c_str());
      }
    }
    if (!joined) {  // the /proc sampler follows the processes of the session's table
      std::string cmd = procfs::read_file(procfs::path(child, "cmdline"), 500);
      arena->register_process(child, parent, cmd.data(), cmd.size());
    }
  }
}

void RunningWorkers::poll(bool last) {
  for (Joined& j : joined_) {
    if (j.resolved) continue;
    const std::string st = j.status.read();
    if (st.empty()) {
      if (!last && procfs::alive(j.pid)) continue;
      j.resolved = true;
      if (procfs::alive(j.pid)) {
        std::fprintf(stderr, "stallscope: no word from the Python side of process %d; it is sampled only\n",
                     static_cast<int>(j.pid));
      }
      continue;
    }
    j.resolved = true;
    if (st.rfind("ok worker", 0) == 0) {
      ++instrumented_;
      j.worker = true;
    } else if (st.rfind("error ", 0) == 0) {
      std::fprintf(stderr, "stallscope: process %d is sampled only: %s\n", static_cast<int>(j.pid),
                   st.substr(6).c_str());
    } else {
      say("process " + std::to_string(j.pid) + " (" + procfs::cmdline(j.pid) +
          ") is sampled only: " + st.substr(st.find(' ') + 1));
    }
  }
  const bool all = std::all_of(joined_.begin(), joined_.end(), [](const Joined& j) { return j.resolved; });
  if (!reported_ && all && instrumented_ > 0) {
    say("instrumented " + std::to_string(instrumented_) + " DataLoader worker process" +
        (instrumented_ == 1 ? " that was" : "es that were") + " running already");
  }
  if (all) reported_ = true;
}

void RunningWorkers::finish(bool detach) {
  for (Joined& j : joined_) {
    j.status.remove();
    if (detach && j.worker && procfs::alive(j.pid)) {
      const std::string err = eject(j.pid, j.entries.end, "");
      if (!err.empty()) {
        std::fprintf(stderr, "stallscope: cannot detach cleanly from process %d (%s)\n", static_cast<int>(j.pid),
                     err.c_str());
      }
    }
  }
}

}  // namespace stallscope::attach
