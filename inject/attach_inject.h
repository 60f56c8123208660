// Loading the collector into a running process and calling its attach entry points, through
// ptrace remote calls (inject/remote_call.h): inject() runs dlopen("libstallscope.so"), dlsym and
// ss_attach_begin on one stopped thread of the target, eject() runs ss_attach_end. Each stops
// the thread only for its calls and puts it back as it was.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace stallscope::attach {

// What goes into every process of one attach: the collector library, the folder that holds the
// stallscope Python package beside it, and the session's shared-memory name.
struct Payload {
  std::string lib;
  std::string python_dir;
  std::string shm;
};

// The library's attach entry points as mapped in one target, found by inject().
struct EntryPoints {
  uint64_t begin = 0;    // ss_attach_begin
  uint64_t end = 0;      // ss_attach_end, for eject()
  double paused_ms = 0;  // how long the target's thread was stopped for the injection
};

// Loads `payload.lib` into process `pid` and runs ss_attach_begin(payload.shm, code), `code` being
// the Python source its thread runs (attach_python.h). Fills *entries. Empty on success, else the
// reason in one line (the library's own words when ss_attach_begin refuses, e.g. "already recorded
// by stallscope").
std::string inject(pid_t pid, const Payload& payload, const std::string& code, EntryPoints* entries);

// Runs ss_attach_end(code) in `pid` (`end_fn` from inject()): recording stops, and the Python side
// runs `code` ("" for none). Empty on success, else the reason.
std::string eject(pid_t pid, uint64_t end_fn, const std::string& code);

}  // namespace stallscope::attach
