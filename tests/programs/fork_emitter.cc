// A test program for the end-to-end tests: a parent that forks (or spawns, via exec of itself)
// children; every process emits spans through the C API.
//   fork_emitter [--children N] [--spans M] [--exit C] [--spawn] [--hang] [--sleep-us U]
//   --hang: after emitting, keep emitting one span every 10 ms forever (for kill tests)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stallscope/stallscope.h"

namespace {

void work(const char* name, int index, int spans, int sleep_us) {
  const uint32_t id = ss_intern(name);
  const uint32_t inner = ss_intern("inner");
  const uint32_t track = ss_counter_track("progress", "spans");
  for (int i = 0; i < spans; ++i) {
    ss_span_begin_args(id, index, i, 0);
    ss_span_begin(inner);
    if (sleep_us > 0) usleep(static_cast<useconds_t>(sleep_us));
    ss_span_end();
    ss_span_end();
    ss_counter(track, i + 1);
  }
  ss_instant(ss_intern("done"), index, spans, 0);
}

}  // namespace

int main(int argc, char** argv) {
  int children = 2, spans = 100, exit_code = 0, sleep_us = 0, child_index = -1;
  bool spawn = false, hang = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--children")
      children = next();
    else if (a == "--spans")
      spans = next();
    else if (a == "--exit")
      exit_code = next();
    else if (a == "--sleep-us")
      sleep_us = next();
    else if (a == "--spawn")
      spawn = true;
    else if (a == "--hang")
      hang = true;
    else if (a == "--child")
      child_index = next();
  }
  if (child_index >= 0) {  // a spawned child
    ss_thread_name("spawned-child");
    work("child_work", child_index, spans, sleep_us);
    return 0;
  }
  ss_thread_name("parent-main");
  for (int c = 0; c < children; ++c) {
    pid_t pid = fork();
    if (pid == 0) {
      if (spawn) {
        std::string idx = std::to_string(c), n = std::to_string(spans), us = std::to_string(sleep_us);
        execl("/proc/self/exe", argv[0], "--child", idx.c_str(), "--spans", n.c_str(), "--sleep-us", us.c_str(),
              static_cast<char*>(nullptr));
        _exit(126);
      }
      ss_thread_name("forked-child");
      work("child_work", c, spans, sleep_us);
      _exit(0);
    }
  }
  work("parent_work", -1, spans, sleep_us);
  for (int c = 0; c < children; ++c) wait(nullptr);
  std::printf("fork_emitter: parent %d done\n", getpid());
  std::fflush(stdout);
  if (hang) {
    const uint32_t id = ss_intern("heartbeat");
    for (int i = 0;; ++i) {
      ss_span_begin_args(id, i, 0, 0);
      usleep(10000);
      ss_span_end();
    }
  }
  return exit_code;
}
