// libstallscope.so entry points: the constructor that joins a session when the library is
// preloaded (LD_PRELOAD), and in-process sessions (ss_session_start/stop, or STALLSCOPE_OUTPUT).
//
// Environment read at load time:
//   STALLSCOPE_SHM=NAME       join the session whose arena is /dev/shm/NAME (set by `stallscope run`)
//   STALLSCOPE_OUTPUT=FILE    no launcher: record in-process into FILE (this process drains)
// Nothing here may throw across the C boundary or change how the program ends: failures print one
// line on stderr and leave the program unrecorded.
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>

#include "collector/collector.h"
#include "collector/gpu_hooks.h"
#include "stallscope/stallscope.h"
#include "storage/recorder.h"

using namespace stallscope;

namespace {

std::mutex g_mu;
Recorder* g_recorder = nullptr;  // the in-process session's recorder, owner process only
pid_t g_owner_pid = 0;
std::string g_shm_name;
bool g_exit_hook = false;
struct sigaction g_prev[NSIG];
bool g_installed[NSIG];

void write_error(char* err, size_t len, const std::string& msg) {
  if (err != nullptr && len > 0) {
    std::strncpy(err, msg.c_str(), len - 1);
    err[len - 1] = '\0';
  }
}

void on_process_exit(int status, void*) {
  Collector::mark_exit(status);
  if (::getpid() == g_owner_pid) ss_session_stop();
}

void install_exit_hook() {
  if (!g_exit_hook) {
    g_exit_hook = true;
    ::on_exit(on_process_exit, nullptr);
  }
}

// SIGTERM (and SIGINT/SIGHUP where the program left them at their default) would end the process
// without exit handlers: flush the in-process session first, then let the signal do what it would
// have done. Only installed over SIG_DFL, so a program's own handlers are never replaced.
void on_terminating_signal(int sig) {
  const int saved_errno = errno;
  Recorder* r = g_recorder;
  if (r != nullptr && ::getpid() == g_owner_pid && static_cast<pid_t>(::syscall(SYS_gettid)) != r->thread_tid()) {
    Collector::mark_exit(128 + sig);
    r->finish_from_signal(2000);
  }
  ::sigaction(sig, &g_prev[sig], nullptr);
  errno = saved_errno;
  ::raise(sig);
}

void install_signal_flush() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction cur;
    if (::sigaction(sig, nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)) continue;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_terminating_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (::sigaction(sig, &sa, &g_prev[sig]) == 0) g_installed[sig] = true;
  }
}

void uninstall_signal_flush() {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (!g_installed[sig]) continue;
    struct sigaction cur;
    // Restore only if nobody replaced our handler since.
    if (::sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler == on_terminating_signal) {
      ::sigaction(sig, &g_prev[sig], nullptr);
    }
    g_installed[sig] = false;
  }
}

std::string new_shm_name() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "stallscope-%d-%08x", static_cast<int>(::getpid()), rd());
  return buf;
}

int start_session(const char* db_path, char* err, size_t err_len) {
  std::lock_guard<std::mutex> g(g_mu);
  if (db_path == nullptr || *db_path == '\0') {
    write_error(err, err_len, "no database path given");
    return -1;
  }
  if (g_generation.load() != 0) {
    write_error(err, err_len, "this process is already recording (stop the current session first)");
    return -1;
  }
  std::string error;
  const std::string name = new_shm_name();
  Arena* arena = Arena::create(name, ArenaConfig{}, &error);
  if (arena == nullptr) {
    write_error(err, err_len, error);
    return -1;
  }
  auto rec = Recorder::start(arena, db_path, {{"mode", "in-process"}});
  if (!rec.ok()) {
    Arena::unlink(name);
    write_error(err, err_len, rec.status().message());
    return -1;
  }
  Collector::join(arena);
  g_recorder = rec->release();
  g_owner_pid = ::getpid();
  g_shm_name = name;
  ::setenv("STALLSCOPE_SHM", name.c_str(), 1);  // exec'd and spawned children join
  install_exit_hook();
  install_signal_flush();
  return 0;
}

// NVTX finds its injection library through NVTX_INJECTION64_PATH at the first NVTX call, and the
// CUDA driver through CUDA_INJECTION64_PATH when the process initialises CUDA (that is when CUPTI
// starts); point both here unless the user chose another tool.
void offer_nvtx_injection() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&offer_nvtx_injection), &info) == 0 || info.dli_fname == nullptr) return;
  if (nvtx_injection_available()) ::setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
  if (cuda_injection_available()) ::setenv("CUDA_INJECTION64_PATH", info.dli_fname, 0);
}

__attribute__((constructor)) void stallscope_preload_init() {
  try {
    const char* shm = std::getenv("STALLSCOPE_SHM");
    if (shm != nullptr && *shm != '\0') {
      std::string error;
      Arena* arena = Arena::attach(shm, &error);
      if (arena == nullptr) {
        std::fprintf(stderr, "stallscope: cannot join the recording session (%s); this process is not recorded\n",
                     error.c_str());
        return;
      }
      Collector::join(arena);
      install_exit_hook();
      offer_nvtx_injection();
      return;
    }
    const char* out = std::getenv("STALLSCOPE_OUTPUT");
    if (out != nullptr && *out != '\0') {
      char err[512];
      if (start_session(out, err, sizeof err) != 0) {
        std::fprintf(stderr, "stallscope: cannot record to %s (%s); the program runs unrecorded\n", out, err);
      } else {
        offer_nvtx_injection();
      }
      ::unsetenv("STALLSCOPE_OUTPUT");  // children join through STALLSCOPE_SHM instead
    }
  } catch (...) {
    std::fprintf(stderr, "stallscope: internal error at start-up; the program runs unrecorded\n");
  }
}

}  // namespace

extern "C" {

int ss_session_start(const char* db_path, char* err, size_t err_len) {
  try {
    return start_session(db_path, err, err_len);
  } catch (const std::exception& e) {
    write_error(err, err_len, e.what());
  } catch (...) {
    write_error(err, err_len, "internal error");
  }
  return -1;
}

int ss_session_stop(void) {
  try {
    std::lock_guard<std::mutex> g(g_mu);
    if (g_recorder == nullptr || ::getpid() != g_owner_pid) return -1;
    Collector::leave();
    Status s = g_recorder->stop();
    delete g_recorder;
    g_recorder = nullptr;
    g_owner_pid = 0;
    Arena::unlink(g_shm_name);
    ::unsetenv("STALLSCOPE_SHM");
    uninstall_signal_flush();
    return s.ok() ? 0 : -1;
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
