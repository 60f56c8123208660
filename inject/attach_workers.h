// Joining the processes a training process had started before the attach: its DataLoader
// workers, mostly. Each Python one (not multiprocessing's helpers) gets the collector loaded like
// the training process, with stallscope._attach.begin_worker, whose thread instruments torch's
// worker loop if the process runs it and otherwise leaves the session again; a process that could
// not be joined is registered in the session's process table, so that the /proc sampler follows
// it. What each worker's Python side found comes in while recording: a spawned worker that is
// still starting up is joined when it reaches the worker loop (its Python side waits up to 30 s).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "inject/attach_inject.h"
#include "inject/attach_status.h"

namespace stallscope {

class Arena;

namespace attach {

class RunningWorkers {
 public:
  explicit RunningWorkers(bool quiet) : quiet_(quiet) {}

  // Joins (or registers for sampling) every process `training_pid` started before now.
  void join(pid_t training_pid, const Payload& payload, Arena* arena);

  // Reads the reports of the workers not heard from yet and says what they were. With `last`
  // (recording is over) a worker that has said nothing is given up on: it was only sampled.
  // Once every worker is heard from, says how many were instrumented.
  void poll(bool last);

  // Deletes the status files; with `detach`, runs ss_attach_end in each instrumented worker that
  // still runs. Reports a worker that could not be detached cleanly.
  void finish(bool detach);

 private:
  struct Joined {
    pid_t pid = 0;
    EntryPoints entries;
    StatusFile status;
    bool worker = false;    // its Python side instrumented torch's worker loop
    bool resolved = false;  // its status has been read (or it ended without one)
  };
  void say(const std::string& msg) const;

  bool quiet_;
  std::vector<Joined> joined_;
  int instrumented_ = 0;
  bool reported_ = false;  // the "instrumented N" line was said (or there was nothing to say)
};

}  // namespace attach
}  // namespace stallscope
