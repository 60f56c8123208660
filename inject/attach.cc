// `stallscope attach`; see attach.h.
#include "inject/attach.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

#include "collector/arena.h"
#include "common/procfs.h"
#include "inject/launcher.h"
#include "inject/remote_call.h"
#include "storage/session_registry.h"
#include "storage/recorder.h"

namespace stallscope {
namespace {

std::string status_field(const std::string& status, const char* key) {
  const std::string k = std::string(key) + ":";
  size_t at = 0;
  while ((at = status.find(k, at)) != std::string::npos) {
    if (at == 0 || status[at - 1] == '\n') {
      size_t b = at + k.size();
      while (b < status.size() && (status[b] == ' ' || status[b] == '\t')) ++b;
      const size_t e = status.find('\n', b);
      return status.substr(b, e == std::string::npos ? std::string::npos : e - b);
    }
    at += k.size();
  }
  return {};
}

// A Python interpreter: the executable is python* or libpython is mapped (embedded interpreters).
bool is_python(pid_t pid) {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink(procfs::path(pid, "exe").c_str(), exe, sizeof exe - 1);
  std::string name = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  name = name.substr(name.rfind('/') + 1);
  return name.rfind("python", 0) == 0 ||
         procfs::read_file(procfs::path(pid, "maps"), 64 << 20).find("libpython") != std::string::npos;
}

// Every process whose parent chain leads to `root` (DataLoader workers, their helpers).
std::vector<std::pair<pid_t, pid_t>> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      const std::string s = procfs::read_file("/proc/" + std::string(e->d_name) + "/stat", 512);
      const size_t close = s.rfind(')');
      if (close == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(s.c_str() + close + 1, " %c %d", &state, &ppid) == 2) {
        children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
      }
    }
    ::closedir(d);
  }
  std::vector<std::pair<pid_t, pid_t>> out;  // (pid, ppid)
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    auto [b, e] = children.equal_range(p);
    for (auto it = b; it != e; ++it) {
      out.emplace_back(it->second, p);
      todo.push_back(it->second);
    }
  }
  return out;
}

// A Python string expression for any bytes: no quoting rules to get wrong.
std::string py_str(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += hex[c >> 4];
    h += hex[c & 15];
  }
  return "bytes.fromhex('" + h + "').decode()";
}

// The source run inside the target by the library's Python thread: imports the stallscope
// package from `python_dir` without touching sys.path, calls stallscope._attach.FUNC(*args), and
// reports any failure in the status file. Runs in a fresh namespace (not __main__'s).
std::string python_source(const std::string& python_dir, const std::string& func,
                          const std::vector<std::string>& args, const std::string& status_path) {
  const std::string pkg = py_str(python_dir + "/stallscope");
  std::string call_args;
  for (const std::string& a : args) call_args += (call_args.empty() ? "" : ", ") + py_str(a);
  std::string body =
      "import sys\n"
      "try:\n"
      "    if 'stallscope' not in sys.modules:\n"
      "        import importlib.util\n"
      "        pkg = " + pkg + "\n"
      "        spec = importlib.util.spec_from_file_location('stallscope', pkg + '/__init__.py', "
      "submodule_search_locations=[pkg])\n"
      "        mod = importlib.util.module_from_spec(spec)\n"
      "        sys.modules['stallscope'] = mod\n"
      "        try:\n"
      "            spec.loader.exec_module(mod)\n"
      "        except BaseException:\n"
      "            sys.modules.pop('stallscope', None)\n"
      "            raise\n"
      "    from stallscope import _attach\n"
      "    _attach." + func + "(" + call_args + ")\n"
      "except BaseException as e:\n"
      "    try:\n"
      "        with open(" + py_str(status_path) + ", 'w') as f:\n"
      "            f.write('error ' + type(e).__name__ + ': ' + str(e))\n"
      "    except BaseException:\n"
      "        pass\n";
  return "exec(" + py_str(body) + ", {'__name__': '__stallscope_attach__'})";
}

// An empty file only this user can write, for the target's Python side to report into.
std::string make_status_file(pid_t pid) {
  std::random_device rd;
  for (int i = 0; i < 8; ++i) {
    char name[96];
    std::snprintf(name, sizeof name, "/dev/shm/stallscope-attach-%d-%08x", static_cast<int>(pid), rd());
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      return name;
    }
  }
  return {};
}

// Waits up to `timeout_ms` for the status file to be written; "" if nothing came.
std::string wait_status(const std::string& path, int timeout_ms, pid_t pid) {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    std::string s = procfs::read_file(path, 4096);
    if (!s.empty()) return s;
    if (!procfs::alive(pid)) return {};
    timespec ts{0, 20 * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
  return {};
}

struct Entries {
  uint64_t begin = 0;
  uint64_t end = 0;
  double paused_ms = 0;  // how long the process's thread was stopped for the injection
};

double mono_ms() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Loads `lib` into `pid` and runs ss_attach_begin(shm, code). Fills the addresses of the entry
// points (for the detach later). Empty on success, else the reason.
std::string inject(pid_t pid, const std::string& lib, const std::string& shm, const std::string& code,
                   Entries* entries) {
  std::string error;
  const uint64_t r_dlopen = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlopen"), &error);
  if (r_dlopen == 0) return error;
  const uint64_t r_dlsym = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlsym"), &error);
  if (r_dlsym == 0) return error;
  const uint64_t r_dlerror = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlerror"), &error);
  if (r_dlerror == 0) return error;

  const double t0 = mono_ms();
  std::unique_ptr<RemoteThread> t = RemoteThread::seize(pick_thread(pid), &error);
  if (!t) return error;
  const uint64_t a_lib = t->push_string(lib);
  const uint64_t a_begin = t->push_string("ss_attach_begin");
  const uint64_t a_end = t->push_string("ss_attach_end");
  const uint64_t a_shm = t->push_string(shm);
  const uint64_t a_code = t->push_string(code);
  const std::string zeros(512, '\0');
  const uint64_t a_err = t->push(zeros.data(), zeros.size());
  if (!a_lib || !a_begin || !a_end || !a_shm || !a_code || !a_err) {
    t->detach(nullptr);
    return "cannot write into the memory of process " + std::to_string(pid);
  }
  uint64_t handle = 0;
  if (!t->call(r_dlopen, {a_lib, static_cast<uint64_t>(RTLD_NOW)}, &handle, &error)) return error;
  if (handle == 0) {
    uint64_t msg = 0;
    std::string why = "unknown reason";
    if (t->call(r_dlerror, {}, &msg, &error) && msg != 0) why = t->read_string(msg, 400);
    t->detach(nullptr);
    return "cannot load " + lib + " into process " + std::to_string(pid) + ": " + why;
  }
  if (!t->call(r_dlsym, {handle, a_begin}, &entries->begin, &error)) return error;
  if (!t->call(r_dlsym, {handle, a_end}, &entries->end, &error)) return error;
  if (entries->begin == 0 || entries->end == 0) {
    t->detach(nullptr);
    return lib + " has no attach entry points (an older build?); rebuild stallscope";
  }
  uint64_t rc = 0;
  if (!t->call(entries->begin, {a_shm, a_code, a_err, zeros.size()}, &rc, &error)) return error;
  if (static_cast<int>(rc) != 0) {
    const std::string why = t->read_string(a_err, 511);
    t->detach(nullptr);
    return why.empty() ? "the library refused to attach" : why;
  }
  if (!t->detach(&error)) return error;
  entries->paused_ms = mono_ms() - t0;
  return {};
}

// Runs ss_attach_end(code) in `pid`. Empty on success.
std::string eject(pid_t pid, uint64_t end_fn, const std::string& code) {
  std::string error;
  std::unique_ptr<RemoteThread> t = RemoteThread::seize(pick_thread(pid), &error);
  if (!t) return error;
  const uint64_t a_code = t->push_string(code);
  const std::string zeros(512, '\0');
  const uint64_t a_err = t->push(zeros.data(), zeros.size());
  if (!a_code || !a_err) {
    t->detach(nullptr);
    return "cannot write into the memory of process " + std::to_string(pid);
  }
  uint64_t rc = 0;
  if (!t->call(end_fn, {a_code, a_err, zeros.size()}, &rc, &error)) return error;
  if (static_cast<int>(rc) != 0) {
    const std::string why = t->read_string(a_err, 511);
    t->detach(nullptr);
    return why;
  }
  if (!t->detach(&error)) return error;
  return {};
}

// A process joined by the attach besides the training process itself.
struct Joined {
  pid_t pid = 0;
  Entries entries;
  std::string status;
  bool worker = false;    // its Python side instrumented torch's worker loop
  bool resolved = false;  // its status has been read (or it ended without one)
};

// Whether a process the training process started is worth joining: a Python process that is not
// one of multiprocessing's helpers (resource tracker, fork server), which never run the worker loop.
bool worker_candidate(pid_t pid) {
  const std::string cmd = procfs::cmdline(pid);
  if (cmd.find("multiprocessing.resource_tracker") != std::string::npos ||
      cmd.find("multiprocessing.forkserver import main") != std::string::npos ||
      cmd.find("multiprocessing.semaphore_tracker") != std::string::npos) {
    return false;
  }
  return is_python(pid);
}

void say(bool quiet, const std::string& msg) {
  if (!quiet) std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
}

}  // namespace

int attach_list() {
  struct Row {
    pid_t pid;
    size_t children;
    double age_s;
    bool recorded;
    std::string cmd;
  };
  std::vector<Row> rows;
  double uptime = 0;
  {
    std::istringstream in(procfs::read_file("/proc/uptime", 128));
    in >> uptime;
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
      struct stat st;
      if (::stat(procfs::path(static_cast<pid_t>(pid), "").c_str(), &st) != 0) continue;
      if (::geteuid() != 0 && st.st_uid != ::geteuid()) continue;
      if (!is_python(static_cast<pid_t>(pid))) continue;
      const std::string maps = procfs::read_file(procfs::path(static_cast<pid_t>(pid), "maps"), 64 << 20);
      if (maps.find("libtorch") == std::string::npos) continue;
      // A DataLoader worker is a child of another process listed here: shown under it, not alone.
      const std::string stat_text = procfs::read_file(procfs::path(static_cast<pid_t>(pid), "stat"), 1024);
      const size_t close = stat_text.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream f(stat_text.substr(close + 2));
      std::string field;
      std::vector<std::string> fields;
      while (f >> field) fields.push_back(field);
      if (fields.size() < 20) continue;
      const pid_t ppid = static_cast<pid_t>(std::atoi(fields[1].c_str()));
      const std::string parent_maps = procfs::read_file(procfs::path(ppid, "maps"), 64 << 20);
      if (is_python(ppid) && parent_maps.find("libtorch") != std::string::npos) continue;
      const double start_s = static_cast<double>(std::strtoull(fields[19].c_str(), nullptr, 10)) / static_cast<double>(ticks);
      rows.push_back(Row{static_cast<pid_t>(pid), descendants(static_cast<pid_t>(pid)).size(), uptime - start_s,
                         maps.find("libstallscope.so") != std::string::npos, procfs::cmdline(static_cast<pid_t>(pid))});
    }
    ::closedir(d);
  }
  if (rows.empty()) {
    std::fprintf(stderr, "stallscope: no Python process with torch loaded%s\n",
                 ::geteuid() == 0 ? "" : " among this user's processes");
    return 0;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.pid < b.pid; });
  std::printf("%8s %9s %9s  %s\n", "PID", "CHILDREN", "RUNNING", "COMMAND");
  for (const Row& r : rows) {
    char age[32];
    if (r.age_s >= 3600) {
      std::snprintf(age, sizeof age, "%.1f h", r.age_s / 3600);
    } else if (r.age_s >= 60) {
      std::snprintf(age, sizeof age, "%.0f min", r.age_s / 60);
    } else {
      std::snprintf(age, sizeof age, "%.0f s", r.age_s);
    }
    std::printf("%8d %9zu %9s  %s%s\n", static_cast<int>(r.pid), r.children, age, r.cmd.c_str(),
                r.recorded ? "   [stallscope loaded]" : "");
  }
  return 0;
}

std::string attach_precheck(pid_t pid) {
  const std::string p = std::to_string(pid);
  if (pid <= 0) return "'" + p + "' is not a process id";
  if (pid == ::getpid()) return "cannot attach to stallscope itself";
  struct stat st;
  if (::stat(procfs::path(pid, "").c_str(), &st) != 0) return "no process " + p + " (check the pid with `ps`)";
  const std::string status = procfs::read_file(procfs::path(pid, "status"), 8192);
  if (status.empty()) return "cannot read /proc/" + p + "/status";
  const std::string state = status_field(status, "State");
  if (!state.empty() && (state[0] == 'Z' || state[0] == 'X')) return "process " + p + " has already exited";
  if (!state.empty() && (state[0] == 'T' || state[0] == 't')) {
    return "process " + p + " is stopped; continue it first (kill -CONT " + p + ")";
  }
  const int tracer = std::atoi(status_field(status, "TracerPid").c_str());
  if (tracer != 0) {
    return "process " + p + " is already traced by process " + std::to_string(tracer) +
           " (a debugger, py-spy or another attach?); detach that first";
  }
  if (::geteuid() != 0 && st.st_uid != ::geteuid()) {
    return "process " + p + " belongs to another user (uid " + std::to_string(st.st_uid) +
           "); run stallscope attach as that user";
  }
  if (!is_python(pid)) {
    return "process " + p + " (" + procfs::cmdline(pid) +
           ") is not a Python program; stallscope attach records Python training processes";
  }
  return {};
}

int attach_command(const AttachOptions& opt) {
  const pid_t pid = opt.pid;
  if (std::string why = attach_precheck(pid); !why.empty()) {
    std::fprintf(stderr, "stallscope: %s\n", why.c_str());
    return 1;
  }
  const std::string lib = find_preload_library();
  const std::string python_dir = find_python_dir();
  if (lib.empty() || python_dir.empty()) {
    std::fprintf(stderr, "stallscope: %s not found beside the stallscope executable (set %s)\n",
                 lib.empty() ? "libstallscope.so" : "the stallscope Python package",
                 lib.empty() ? "STALLSCOPE_LIBRARY" : "STALLSCOPE_PYTHONPATH");
    return 1;
  }
  const std::string target_cmd = procfs::cmdline(pid);
  std::string prog = target_cmd.substr(0, target_cmd.find(' '));
  if (const size_t sp = target_cmd.find(' '); sp != std::string::npos && prog.find("python") != std::string::npos) {
    std::string script = target_cmd.substr(sp + 1);
    script = script.substr(0, script.find(' '));
    if (!script.empty() && script[0] != '-') prog = script;  // "python train.py": name it after train.py
  }
  const std::string output = opt.output.empty() ? default_output_name(prog) : opt.output;

  // Ctrl-C and friends are taken with sigtimedwait below: never while a call runs in the target.
  sigset_t stop_set, old_mask;
  sigemptyset(&stop_set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_set, s);
  ::sigprocmask(SIG_BLOCK, &stop_set, &old_mask);

  std::random_device rd;
  const std::string shm = "stallscope-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  ArenaConfig cfg;
  cfg.ring_capacity = opt.ring_events;
  cfg.ring_count = opt.rings;
  std::string why;
  Arena* arena = Arena::create(shm, cfg, &why);
  if (arena == nullptr) {
    std::fprintf(stderr, "stallscope: cannot make the session's shared memory (%s)\n", why.c_str());
    return 1;
  }
  auto rec = Recorder::start(arena, output,
                             {{"mode", "attach"}, {"command", target_cmd}, {"attached_pid", std::to_string(pid)}});
  if (!rec.ok()) {
    Arena::unlink(shm);
    std::fprintf(stderr, "stallscope: cannot record to %s (%s)\n", output.c_str(), rec.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Recorder> recorder = std::move(*rec);
  const std::string status_path = make_status_file(pid);
  Entries entries;
  const std::string code = python_source(python_dir, "begin", {shm, lib, python_dir, status_path}, status_path);
  const std::string failure = inject(pid, lib, shm, code, &entries);
  if (!failure.empty()) {
    (void)recorder->stop();  // the recording is deleted below
    Arena::unlink(shm);
    ::unlink(output.c_str());
    for (const char* suffix : {"-wal", "-shm"}) ::unlink((output + suffix).c_str());
    if (!status_path.empty()) ::unlink(status_path.c_str());
    std::fprintf(stderr, "stallscope: cannot attach to process %d: %s\n", static_cast<int>(pid), failure.c_str());
    return 1;
  }
  char real[PATH_MAX];
  SessionEntry entry;
  entry.launcher_pid = ::getpid();
  entry.db_path = ::realpath(output.c_str(), real) ? std::string(real) : output;
  entry.command = target_cmd;
  entry.started_unix = static_cast<int64_t>(::time(nullptr));
  register_live_session(entry);
  char paused[32];
  std::snprintf(paused, sizeof paused, "%.1f", entries.paused_ms);
  say(opt.quiet, "attached to process " + std::to_string(pid) + " (" + target_cmd + ", stopped " + paused +
                     " ms to load the collector), recording to " + output +
                     (opt.duration_s > 0 ? "" : "; Ctrl-C detaches"));
  const std::string hooks = wait_status(status_path, 10000, pid);
  if (hooks.rfind("ok ", 0) == 0) {
    say(opt.quiet, hooks.substr(3));
  } else if (hooks.rfind("error ", 0) == 0) {
    std::fprintf(stderr, "stallscope: the DataLoader hooks could not be installed (%s); recording the rest\n",
                 hooks.substr(6).c_str());
  } else if (procfs::alive(pid)) {
    std::fprintf(stderr, "stallscope: no word yet from the Python side of process %d (its interpreter may be "
                 "busy in C code without releasing the GIL); recording goes on\n", static_cast<int>(pid));
  }

  // The processes it started before now (DataLoader workers, mostly): the Python ones are joined
  // too and instrument torch's worker loop if they run it; the others are only sampled.
  std::vector<Joined> workers;
  int instrumented = 0;
  for (const auto& [child, parent] : descendants(pid)) {
    bool joined = false;
    if (worker_candidate(child)) {
      Joined j{child, {}, make_status_file(child)};
      const std::string c = python_source(python_dir, "begin_worker", {shm, lib, python_dir, j.status}, j.status);
      const std::string err = inject(child, lib, shm, c, &j.entries);
      if (err.empty()) {
        joined = true;
        workers.push_back(std::move(j));
      } else if (err.find("already recorded by stallscope") != std::string::npos) {
        joined = true;  // forked from the training process after its attach: in the session already
        if (!j.status.empty()) ::unlink(j.status.c_str());
      } else {
        if (!j.status.empty()) ::unlink(j.status.c_str());
        std::fprintf(stderr, "stallscope: process %d (started by %d) is sampled only: %s\n", static_cast<int>(child),
                     static_cast<int>(parent), err.c_str());
      }
    }
    if (!joined) {  // the /proc sampler follows the processes of the session's table
      std::string cmd = procfs::read_file(procfs::path(child, "cmdline"), 500);
      arena->register_process(child, parent, cmd.data(), cmd.size());
    }
  }
  // What each worker's Python side found comes in while recording: a spawned worker that is still
  // starting up is joined when it reaches torch's worker loop (its Python side waits up to 30 s).
  bool reported = false;
  auto poll_workers = [&](bool last) {
    for (Joined& j : workers) {
      if (j.resolved) continue;
      const std::string st = procfs::read_file(j.status, 4096);
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
        ++instrumented;
        j.worker = true;
      } else if (st.rfind("error ", 0) == 0) {
        std::fprintf(stderr, "stallscope: process %d is sampled only: %s\n", static_cast<int>(j.pid),
                     st.substr(6).c_str());
      } else {
        say(opt.quiet, "process " + std::to_string(j.pid) + " (" + procfs::cmdline(j.pid) +
                           ") is sampled only: " + st.substr(st.find(' ') + 1));
      }
    }
    const bool all = std::all_of(workers.begin(), workers.end(), [](const Joined& j) { return j.resolved; });
    if (!reported && all && instrumented > 0) {
      say(opt.quiet, "instrumented " + std::to_string(instrumented) + " DataLoader worker process" +
                         (instrumented == 1 ? " that was" : "es that were") + " running already");
    }
    if (all) reported = true;
  };
  poll_workers(false);

  // Record until the process ends, the duration is up or a stop signal comes.
  timespec start;
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  bool detach = false;
  while (procfs::alive(pid)) {
    timespec tick{0, 100 * 1000000L};
    const int s = ::sigtimedwait(&stop_set, nullptr, &tick);
    poll_workers(false);
    if (s > 0) {
      detach = true;
      break;
    }
    if (opt.duration_s > 0) {
      timespec now;
      ::clock_gettime(CLOCK_MONOTONIC, &now);
      const double el = static_cast<double>(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) * 1e-9;
      if (el >= opt.duration_s) {
        detach = true;
        break;
      }
    }
  }
  poll_workers(true);
  int rc = 0;
  for (Joined& j : workers) {
    if (!j.status.empty()) ::unlink(j.status.c_str());
    if (detach && j.worker && procfs::alive(j.pid)) {
      const std::string err = eject(j.pid, j.entries.end, "");
      if (!err.empty()) {
        std::fprintf(stderr, "stallscope: cannot detach cleanly from process %d (%s)\n", static_cast<int>(j.pid),
                     err.c_str());
      }
    }
  }
  if (detach && procfs::alive(pid)) {
    if (!status_path.empty() && ::truncate(status_path.c_str(), 0) != 0) {
      // a stale "ok" would only make the wait below shorter
    }
    const std::string end_code = python_source(python_dir, "end", {status_path}, status_path);
    const std::string err = eject(pid, entries.end, end_code);
    if (!err.empty()) {
      std::fprintf(stderr, "stallscope: cannot detach cleanly from process %d (%s); it keeps running, unrecorded\n",
                   static_cast<int>(pid), err.c_str());
      rc = 1;
    } else {
      const std::string done = wait_status(status_path, 3000, pid);
      if (done.rfind("error ", 0) == 0) {
        std::fprintf(stderr, "stallscope: the Python side did not clean up (%s)\n", done.substr(6).c_str());
      }
      say(opt.quiet, "detached from process " + std::to_string(pid) + "; it goes on unrecorded");
    }
  } else if (!detach) {
    say(opt.quiet, "process " + std::to_string(pid) + " ended");
  }
  const Status s = recorder->stop();
  Arena::unlink(shm);
  if (!status_path.empty()) ::unlink(status_path.c_str());
  finish_live_session(::getpid(), static_cast<int64_t>(::time(nullptr)));
  if (s.ok()) {
    if (!opt.quiet) {
      const IngestStats st = recorder->stats();
      std::fprintf(stderr, "stallscope: recording saved to %s (%llu events, %llu spans, %llu dropped)\n",
                   output.c_str(), static_cast<unsigned long long>(st.events),
                   static_cast<unsigned long long>(st.spans), static_cast<unsigned long long>(st.dropped));
      if (opt.summary) opt.summary(output);
    }
  } else {
    std::fprintf(stderr, "stallscope: the recording %s did not close cleanly\n", output.c_str());
    rc = 1;
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return rc;
}

}  // namespace stallscope
