// `stallscope attach`, the command: the session set-up (arena, recording, the collector loaded
// into the training process), the wait while it records, the detach and the tear-down. See
// attach.h; the pieces it is built from are attach_targets (which processes, attach --list,
// attach_precheck), attach_python (the source run inside), attach_status (the file the Python side
// reports into), attach_inject (the ptrace calls) and attach_workers (the workers already running).
#include "inject/attach.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <random>

#include "collector/arena.h"
#include "common/procfs.h"
#include "inject/attach_inject.h"
#include "inject/attach_python.h"
#include "inject/attach_status.h"
#include "inject/attach_workers.h"
#include "inject/launcher.h"
#include "storage/recorder.h"
#include "storage/session_registry.h"
#include "storage/writer.h"

namespace stallscope {
namespace {

void say(bool quiet, const std::string& msg) {
  if (!quiet) std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
}

// The name a default recording is given: the script of "python train.py ...", else the program.
std::string program_name(const std::string& target_cmd) {
  std::string prog = target_cmd.substr(0, target_cmd.find(' '));
  if (const size_t sp = target_cmd.find(' '); sp != std::string::npos && prog.find("python") != std::string::npos) {
    std::string script = target_cmd.substr(sp + 1);
    script = script.substr(0, script.find(' '));
    if (!script.empty() && script[0] != '-') prog = script;
  }
  return prog;
}

// SIGINT, SIGTERM and SIGHUP, held from the set-up on and taken with sigtimedwait() while waiting:
// never while a call runs in the target, which would leave its thread half-way through the call.
// A failed set-up returns with them still held, so a Ctrl-C meanwhile only ends the command then.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
    ::sigprocmask(SIG_BLOCK, &set_, &old_mask_);
  }
  // Whether one came within `timeout_ms`.
  bool wait(long timeout_ms) {
    timespec tick{0, timeout_ms * 1000000L};
    return ::sigtimedwait(&set_, nullptr, &tick) > 0;
  }
  void restore() { ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr); }

 private:
  sigset_t set_, old_mask_;
};

// One attach: the training process, the session it records into, and its collector's entry points.
struct Attachment {
  pid_t pid = 0;
  std::string target_cmd;  // its command line
  std::string output;      // the database
  attach::Payload payload;
  Arena* arena = nullptr;
  std::unique_ptr<Recorder> recorder;
  attach::StatusFile status;  // the training process's Python side reports here
  attach::EntryPoints entries;
};

// Makes the session's shared-memory arena and starts recording it into a.output. False after
// saying why.
bool start_recording(const AttachOptions& opt, Attachment* a) {
  report_stale_arenas_removed(opt.quiet);
  std::random_device rd;
  a->payload.shm = "stallscope-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  ArenaConfig cfg;
  cfg.ring_capacity = opt.ring_events;
  cfg.ring_count = opt.rings;
  if (opt.overwrite) {
    if (Status s = Writer::remove(a->output); !s.ok()) {
      std::fprintf(stderr, "stallscope: %s; remove it yourself or choose another -o\n", s.message().c_str());
      return false;
    }
  }
  std::string why;
  a->arena = Arena::create(a->payload.shm, cfg, &why);
  if (a->arena == nullptr) {
    std::fprintf(stderr, "stallscope: cannot make the session's shared memory (%s)\n", why.c_str());
    return false;
  }
  std::map<std::string, std::string> meta = {
      {"mode", "attach"}, {"command", a->target_cmd}, {"attached_pid", std::to_string(a->pid)}};
  if (opt.keep_detail_ns > 0) meta["keep_detail_ns"] = std::to_string(opt.keep_detail_ns);
  auto rec = Recorder::start(a->arena, a->output, meta);
  if (!rec.ok()) {
    Arena::unlink(a->payload.shm);
    std::fprintf(stderr, "stallscope: cannot record to %s (%s)\n", a->output.c_str(), rec.status().message().c_str());
    return false;
  }
  a->recorder = std::move(*rec);
  return true;
}

// Loads the collector into the training process, whose Python side then installs the DataLoader
// hooks. When that fails the recording is deleted, with its shared memory, and the reason said.
bool load_collector(Attachment* a) {
  a->status = attach::StatusFile::create(a->pid);
  const attach::Payload& p = a->payload;
  const std::string code =
      attach::python_source(p.python_dir, "begin", {p.shm, p.lib, p.python_dir, a->status.path()}, a->status.path());
  const std::string failure = attach::inject(a->pid, p, code, &a->entries);
  if (failure.empty()) return true;
  (void)a->recorder->stop();  // the recording is deleted below
  Arena::unlink(p.shm);
  (void)Writer::remove(a->output);  // best effort: the attach failed, which is the news
  a->status.remove();
  std::fprintf(stderr, "stallscope: cannot attach to process %d: %s\n", static_cast<int>(a->pid), failure.c_str());
  return false;
}

// Lists the session for `stallscope ui`, says the attach is made, and waits (up to 10 s) for
// what the Python side did about the DataLoader hooks.
void announce(const AttachOptions& opt, const Attachment& a) {
  char real[PATH_MAX];
  SessionEntry entry;
  entry.launcher_pid = ::getpid();
  entry.db_path = ::realpath(a.output.c_str(), real) ? std::string(real) : a.output;
  entry.command = a.target_cmd;
  entry.started_unix = static_cast<int64_t>(::time(nullptr));
  register_live_session(entry);
  char paused[32];
  std::snprintf(paused, sizeof paused, "%.1f", a.entries.paused_ms);
  say(opt.quiet, "attached to process " + std::to_string(a.pid) + " (" + a.target_cmd + ", stopped " + paused +
                     " ms to load the collector), recording to " + a.output +
                     (opt.duration_s > 0 ? "" : "; Ctrl-C detaches"));
  const std::string hooks = a.status.wait(10000, a.pid);
  if (hooks.rfind("ok ", 0) == 0) {
    say(opt.quiet, hooks.substr(3));
  } else if (hooks.rfind("error ", 0) == 0) {
    std::fprintf(stderr, "stallscope: the DataLoader hooks could not be installed (%s); recording the rest\n",
                 hooks.substr(6).c_str());
  } else if (procfs::alive(a.pid)) {
    std::fprintf(stderr,
                 "stallscope: no word yet from the Python side of process %d (its interpreter may be "
                 "busy in C code without releasing the GIL); recording goes on\n",
                 static_cast<int>(a.pid));
  }
}

// Records until the process ends, the duration is up or a stop signal comes, hearing from the
// workers meanwhile. True when the command is to detach (the process still runs).
bool record_until_stop(const AttachOptions& opt, pid_t pid, StopSignals& stop, attach::RunningWorkers& workers) {
  timespec start;
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  while (procfs::alive(pid)) {
    const bool signalled = stop.wait(100);
    workers.poll(false);
    if (signalled) return true;
    if (opt.duration_s > 0) {
      timespec now;
      ::clock_gettime(CLOCK_MONOTONIC, &now);
      const double el = static_cast<double>(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) * 1e-9;
      if (el >= opt.duration_s) return true;
    }
  }
  return false;
}

// Runs ss_attach_end in the training process and waits for its Python side to restore what it
// changed. False when the call could not be made (the process keeps running, unrecorded).
bool detach_training_process(const AttachOptions& opt, Attachment& a) {
  a.status.clear();
  const std::string end_code = attach::python_source(a.payload.python_dir, "end", {a.status.path()}, a.status.path());
  const std::string err = attach::eject(a.pid, a.entries.end, end_code);
  if (!err.empty()) {
    std::fprintf(stderr, "stallscope: cannot detach cleanly from process %d (%s); it keeps running, unrecorded\n",
                 static_cast<int>(a.pid), err.c_str());
    return false;
  }
  const std::string done = a.status.wait(3000, a.pid);
  if (done.rfind("error ", 0) == 0) {
    std::fprintf(stderr, "stallscope: the Python side did not clean up (%s)\n", done.substr(6).c_str());
  }
  say(opt.quiet, "detached from process " + std::to_string(a.pid) + "; it goes on unrecorded");
  return true;
}

// Drains and closes the recording, removes the session's shared memory and its entry in the
// list of live sessions, and says what was saved. False when the recording did not close cleanly.
bool close_session(const AttachOptions& opt, Attachment& a) {
  const Status s = a.recorder->stop();
  Arena::unlink(a.payload.shm);
  a.status.remove();
  finish_live_session(::getpid(), static_cast<int64_t>(::time(nullptr)));
  if (!s.ok()) {
    std::fprintf(stderr, "stallscope: the recording %s did not close cleanly\n", a.output.c_str());
    return false;
  }
  if (!opt.quiet) {
    const IngestStats st = a.recorder->stats();
    std::fprintf(stderr, "stallscope: recording saved to %s (%llu events, %llu spans, %llu dropped)\n",
                 a.output.c_str(), static_cast<unsigned long long>(st.events),
                 static_cast<unsigned long long>(st.spans), static_cast<unsigned long long>(st.dropped));
    if (opt.summary) opt.summary(a.output);
  }
  return true;
}

}  // namespace

int attach_command(const AttachOptions& opt) {
  Attachment a;
  a.pid = opt.pid;
  if (std::string why = attach_precheck(a.pid); !why.empty()) {
    std::fprintf(stderr, "stallscope: %s\n", why.c_str());
    return 1;
  }
  a.payload.lib = find_preload_library();
  a.payload.python_dir = find_python_dir();
  if (a.payload.lib.empty() || a.payload.python_dir.empty()) {
    std::fprintf(stderr, "stallscope: %s not found beside the stallscope executable (set %s)\n",
                 a.payload.lib.empty() ? "libstallscope.so" : "the stallscope Python package",
                 a.payload.lib.empty() ? "STALLSCOPE_LIBRARY" : "STALLSCOPE_PYTHONPATH");
    return 1;
  }
  a.target_cmd = procfs::cmdline(a.pid);
  a.output = opt.output.empty() ? default_output_name(program_name(a.target_cmd)) : opt.output;

  StopSignals stop;
  if (!start_recording(opt, &a) || !load_collector(&a)) return 1;
  announce(opt, a);

  attach::RunningWorkers workers(opt.quiet);
  workers.join(a.pid, a.payload, a.arena);
  workers.poll(false);
  const bool detach = record_until_stop(opt, a.pid, stop, workers);
  workers.poll(true);
  workers.finish(detach);

  int rc = 0;
  if (detach && procfs::alive(a.pid)) {
    if (!detach_training_process(opt, a)) rc = 1;
  } else if (!detach) {
    say(opt.quiet, "process " + std::to_string(a.pid) + " ended");
  }
  if (!close_session(opt, a)) rc = 1;
  stop.restore();
  return rc;
}

}  // namespace stallscope
