// libstallscope.so entry points: the constructor that joins a session when the library is
// preloaded (LD_PRELOAD), and in-process sessions (ss_session_start/stop, or STALLSCOPE_OUTPUT).
//
// Environment read at load time:
//   STALLSCOPE_SHM=NAME       join the session whose arena is /dev/shm/NAME (set by `stallscope run`)
//   STALLSCOPE_OUTPUT=FILE    no launcher: record in-process into FILE (this process drains)
// Nothing here may throw across the C boundary or change how the program ends: failures print one
// line on stderr and leave the program unrecorded.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collector/collector.h"
#include "collector/gpu_choice.h"
#include "collector/gpu_hooks.h"
#include "collector/gpu_light.h"
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
  gpu_marks_stop();  // light mode's reader, if it runs (normally stopped already by its atexit)
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

int start_session(const char* db_path, int64_t keep_detail_ns, char* err, size_t err_len) {
  std::lock_guard<std::mutex> g(g_mu);
  if (db_path == nullptr || *db_path == '\0') {
    write_error(err, err_len, "no database path given");
    return -1;
  }
  constexpr int64_t kMinKeepDetailNs = 10'000'000'000;  // as `stallscope run --keep-detail`
  if (keep_detail_ns != 0 && keep_detail_ns < kMinKeepDetailNs) {
    write_error(err, err_len, "keep_detail must be at least 10 s (or 0 to keep every event)");
    return -1;
  }
  if (g_generation.load() != 0) {
    write_error(err, err_len, "this process is already recording (stop the current session first)");
    return -1;
  }
  std::string error;
  Arena* arena = Arena::create_anonymous(ArenaConfig{}, &error);
  const std::string name = arena != nullptr ? arena->name() : std::string();
  if (arena == nullptr) {
    write_error(err, err_len, error);
    return -1;
  }
  std::map<std::string, std::string> meta = {{"mode", "in-process"}};
  if (keep_detail_ns > 0) meta["keep_detail_ns"] = std::to_string(keep_detail_ns);
  auto rec = Recorder::start(arena, db_path, meta);
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
  // STALLSCOPE_GPU=off (stallscope run --gpu off): leave CUDA alone, so that another CUPTI client
  // (torch.profiler, Nsight) can have it.
  if (cuda_injection_available() && !gpu_choice_from_env().off()) ::setenv("CUDA_INJECTION64_PATH", info.dli_fname, 0);
}

__attribute__((constructor)) void stallscope_preload_init() {
  try {
    gpu_choice_from_env();  // read before any setenv here (see gpu_choice.cc)
    const char* shm = std::getenv("STALLSCOPE_SHM");
    if (shm != nullptr && *shm != '\0') {
      std::string error;
      Arena* arena = Arena::attach(shm, &error);
      if (arena == nullptr) {
        std::fprintf(stderr, "stallscope: cannot join the recording session (%s); this process is not recorded\n",
                     error.c_str());
        return;
      }
      // An anonymous arena: this process's children join through its own descriptor (spawned
      // ones open it as /proc/PID/fd/FD, which lives as long as this process does).
      if (Arena::is_anonymous_name(arena->name())) ::setenv("STALLSCOPE_SHM", arena->name().c_str(), 1);
      Collector::join(arena);
      install_exit_hook();
      offer_nvtx_injection();
      return;
    }
    const char* out = std::getenv("STALLSCOPE_OUTPUT");
    if (out != nullptr && *out != '\0') {
      char err[512];
      if (start_session(out, 0, err, sizeof err) != 0) {
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

// `stallscope attach`: the Python half runs on a thread of our own that takes the GIL like any
// other thread; the C API is looked up in the process (the interpreter's own symbols).
struct PythonApi {
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;  // Py_IsFinalizing (3.13) or _Py_IsFinalizing; may be missing
  int (*gil_ensure)() = nullptr;     // PyGILState_STATE is an enum
  void (*gil_release)(int) = nullptr;
  int (*run_simple)(const char*) = nullptr;
};

bool find_python(PythonApi* api) {
  auto sym = [](const char* name) { return ::dlsym(RTLD_DEFAULT, name); };
  api->is_initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  api->is_finalizing = reinterpret_cast<int (*)()>(sym("Py_IsFinalizing"));
  if (api->is_finalizing == nullptr) api->is_finalizing = reinterpret_cast<int (*)()>(sym("_Py_IsFinalizing"));
  api->gil_ensure = reinterpret_cast<int (*)()>(sym("PyGILState_Ensure"));
  api->gil_release = reinterpret_cast<void (*)(int)>(sym("PyGILState_Release"));
  api->run_simple = reinterpret_cast<int (*)(const char*)>(sym("PyRun_SimpleString"));
  return api->is_initialized != nullptr && api->gil_ensure != nullptr && api->gil_release != nullptr &&
         api->run_simple != nullptr;
}

struct PythonJob {
  PythonApi api;
  std::string code;
};

void* run_python_job(void* arg) {
  std::unique_ptr<PythonJob> job(static_cast<PythonJob*>(arg));
  const PythonApi& a = job->api;
  if (a.is_initialized() == 0 || (a.is_finalizing != nullptr && a.is_finalizing() != 0)) return nullptr;
  const int state = a.gil_ensure();
  a.run_simple(job->code.c_str());  // the code catches its own errors and reports them in a file
  a.gil_release(state);
  return nullptr;
}

// Starts `code` on a new detached thread that blocks every signal (they belong to the program).
bool start_python_job(const PythonApi& api, const char* code, std::string* error) {
  auto* job = new PythonJob{api, code};
  sigset_t all, old;
  sigfillset(&all);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = ::pthread_create(&t, &attr, run_python_job, job);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete job;
    *error = std::string("cannot start a thread: ") + std::strerror(rc);
    return false;
  }
  return true;
}

int attach_begin(const char* shm, const char* code, char* err, size_t err_len) {
  std::lock_guard<std::mutex> g(g_mu);
  if (shm == nullptr || *shm == '\0' || code == nullptr) {
    write_error(err, err_len, "bad arguments");
    return -1;
  }
  if (g_generation.load() != 0) {
    write_error(err, err_len,
                "this process is already recorded by stallscope (started under `stallscope run`, recording "
                "with stallscope.record(), or attached by another `stallscope attach`)");
    return -1;
  }
  PythonApi api;
  if (!find_python(&api)) {
    write_error(err, err_len, "no Python interpreter in this process (stallscope attach records Python programs)");
    return -1;
  }
  std::string error;
  Arena* arena = Arena::attach(shm, &error);
  if (arena == nullptr) {
    write_error(err, err_len, "cannot join the recording session: " + error);
    return -1;
  }
  Collector::join(arena);
  install_exit_hook();
  if (!start_python_job(api, code, &error)) {
    Collector::leave();
    write_error(err, err_len, error);
    return -1;
  }
  return 0;
}

int attach_end(const char* code, char* err, size_t err_len) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_recorder != nullptr) {
    write_error(err, err_len, "this process records in-process, not through stallscope attach");
    return -1;
  }
  Collector::leave();
  PythonApi api;
  std::string error;
  if (code != nullptr && *code != '\0' && find_python(&api) && !start_python_job(api, code, &error)) {
    write_error(err, err_len, error);
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" {

// Called by `stallscope attach` through ptrace on a thread it has stopped (see inject/attach.cc):
// must not wait for anything that thread might hold. Joins the session whose arena is /dev/shm/SHM
// and runs the Python source `code` on a new thread that takes the GIL.
__attribute__((visibility("default"))) int ss_attach_begin(const char* shm, const char* code, char* err,
                                                           size_t err_len) {
  try {
    return attach_begin(shm, code, err, err_len);
  } catch (...) {
    write_error(err, err_len, "internal error");
  }
  return -1;
}

// Ends an attached session: stops recording at once, then runs `code` (the Python clean-up).
__attribute__((visibility("default"))) int ss_attach_end(const char* code, char* err, size_t err_len) {
  try {
    return attach_end(code, err, err_len);
  } catch (...) {
    write_error(err, err_len, "internal error");
  }
  return -1;
}

int ss_session_start(const char* db_path, char* err, size_t err_len) {
  return ss_session_start_keep(db_path, 0, err, err_len);
}

int ss_session_start_keep(const char* db_path, int64_t keep_detail_ns, char* err, size_t err_len) {
  try {
    return start_session(db_path, keep_detail_ns, err, err_len);
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
