// `stallscope run`; see launcher.h.
#include "inject/launcher.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "collector/arena.h"
#include "common/units.h"
#include "storage/recorder.h"
#include "storage/session_registry.h"
#include "storage/writer.h"

extern char** environ;

namespace stallscope {
namespace {

volatile sig_atomic_t g_child = 0;

// Signals the user sends to stallscope go to the program. Signals the terminal sends to the whole
// foreground process group (Ctrl-C, Ctrl-\) already reach the program, so they are not sent twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  const pid_t child = g_child;
  if (child <= 0) return;
  if (info != nullptr && info->si_code == SI_KERNEL) return;  // from the tty: the child has it too
  ::kill(child, sig);
}

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  std::string s(buf);
  return s.substr(0, s.rfind('/'));
}

std::string basename_of(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string shell_join(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) {
    if (!out.empty()) out += ' ';
    if (a.find_first_of(" \t\"'\\$") == std::string::npos && !a.empty()) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

// The value of PYTHONPATH that puts the Python hooks in front of the program:
// `_boot/sitecustomize.py` loads them at interpreter start and then runs whatever sitecustomize the
// program had. Empty when there is no Python directory.
std::string python_path(const std::string& python_dir) {
  if (python_dir.empty()) return "";
  std::string v = python_dir + "/stallscope/_boot:" + python_dir;
  const char* old = std::getenv("PYTHONPATH");
  if (old != nullptr && *old != '\0') v += std::string(":") + old;
  return v;
}

// The program's argv and environment, made before the fork: between fork() and exec the child of
// a process with threads (the recorder's) may only call async-signal-safe functions. An allocation
// there can wait forever for a lock another thread held at the fork (seen under AddressSanitizer).
struct ChildExec {
  std::vector<std::string> env;  // "NAME=value"
  std::vector<char*> envp, argv;
  std::string cannot_run;  // "stallscope: cannot run 'prog': "

  void set(const std::string& name, const std::string& value) {
    unset(name);
    env.push_back(name + "=" + value);
  }
  void unset(const std::string& name) {
    const std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; });
  }
};

ChildExec prepare_child(const RunOptions& opt, const std::string& preload, const std::string& shm) {
  ChildExec c;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) c.env.emplace_back(*e);
  if (!preload.empty()) {
    const char* old = std::getenv("LD_PRELOAD");
    std::string v = preload;
    if (old != nullptr && *old != '\0') v += std::string(":") + old;
    c.set("LD_PRELOAD", v);
    c.set("STALLSCOPE_SHM", shm);
    c.set("STALLSCOPE_LIBRARY", preload);
    if (const std::string pp = python_path(find_python_dir()); !pp.empty()) c.set("PYTHONPATH", pp);
    // Read by the DataLoader hooks (python/stallscope/hooks/_swap.py), in every Python process
    // the program starts.
    c.set("STALLSCOPE_LOADER", opt.loader);
    if (opt.loader_tuned.empty()) {
      c.unset("STALLSCOPE_LOADER_TUNED");
    } else {
      c.set("STALLSCOPE_LOADER_TUNED", opt.loader_tuned);
    }
  }
  c.unset("STALLSCOPE_OUTPUT");
  for (std::string& e : c.env) c.envp.push_back(e.data());
  c.envp.push_back(nullptr);
  for (const std::string& a : opt.command) c.argv.push_back(const_cast<char*>(a.c_str()));
  c.argv.push_back(nullptr);
  c.cannot_run = "stallscope: cannot run '" + (opt.command.empty() ? std::string() : opt.command[0]) + "': ";
  return c;
}

// The child starts with the signal mask and dispositions stallscope itself was started with (the
// forwarding handlers are installed only after the fork), so that e.g. a SIGINT ignored by a
// background job's shell stays ignored in the program. Async-signal-safe calls only (see above).
[[noreturn]] void exec_child(const ChildExec& c, const sigset_t& original_mask) {
  ::sigprocmask(SIG_SETMASK, &original_mask, nullptr);
  ::execvpe(c.argv[0], c.argv.data(), c.envp.data());
  const int e = errno;
  const char* why = std::strerror(e);
  (void)!::write(STDERR_FILENO, c.cannot_run.data(), c.cannot_run.size());
  (void)!::write(STDERR_FILENO, why, std::strlen(why));
  (void)!::write(STDERR_FILENO, "\n", 1);
  ::_exit(e == ENOENT ? 127 : 126);
}

}  // namespace

std::string default_output_name(const std::string& program) {
  std::string prog = basename_of(program);
  for (char& c : prog) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  if (prog.empty()) prog = "program";
  time_t now = ::time(nullptr);
  struct tm tm;
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string rank;
  if (const char* r = std::getenv("RANK");
      r != nullptr && *r != '\0' && std::strspn(r, "0123456789") == std::strlen(r)) {
    rank = std::string("rank") + r + "-";
  }
  std::string base = "stallscope-" + prog + "-" + rank + stamp;
  std::string name = base + ".db";
  for (int i = 2; file_exists(name); ++i) name = base + "-" + std::to_string(i) + ".db";
  return name;
}

std::string with_rank(std::string output) {
  const char* r = std::getenv("RANK");
  const std::string rank = r != nullptr && *r != '\0' ? r : "0";
  for (size_t at = output.find("{rank}"); at != std::string::npos; at = output.find("{rank}", at + rank.size())) {
    output.replace(at, 6, rank);
  }
  return output;
}

std::string find_preload_library() {
  if (const char* env = std::getenv("STALLSCOPE_LIBRARY"); env != nullptr && *env != '\0') {
    return file_exists(env) ? env : "";
  }
  const std::string dir = self_dir();
  for (const std::string& p : {dir + "/../lib/libstallscope.so", dir + "/libstallscope.so"}) {
    if (file_exists(p)) {
      char real[PATH_MAX];
      return ::realpath(p.c_str(), real) ? std::string(real) : p;
    }
  }
  return "";
}

std::string find_python_dir() {
  if (const char* env = std::getenv("STALLSCOPE_PYTHONPATH"); env != nullptr && *env != '\0') return env;
  const std::string dir = self_dir();
  for (const std::string& p : {dir + "/../python", dir + "/../share/stallscope/python"}) {
    if (file_exists(p + "/stallscope/__init__.py")) {
      char real[PATH_MAX];
      return ::realpath(p.c_str(), real) ? std::string(real) : p;
    }
  }
  return "";
}

void report_stale_arenas_removed(bool quiet) {
  // Ten seconds: an arena is locked microseconds after it is made; older and unlocked is dead.
  const auto removed = Arena::remove_stale("stallscope-", 10);
  if (removed.empty() || quiet) return;
  uint64_t bytes = 0;
  for (const auto& r : removed) bytes += r.second;
  std::fprintf(stderr, "stallscope: removed %zu shared-memory arena%s of dead sessions from /dev/shm (%.1f MiB)\n",
               removed.size(), removed.size() == 1 ? "" : "s", static_cast<double>(bytes) / (1 << 20));
}

// "; 12.3 MiB" for the saved recording, with its growth per hour on runs of 10 s or more
// ("; 1.2 GiB, 6.8 GiB per hour"): what a long run's disk will need. "" when it cannot be read.
static std::string size_and_growth(const std::string& path, const timespec& started) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const double seconds =
      static_cast<double>(now.tv_sec - started.tv_sec) + static_cast<double>(now.tv_nsec - started.tv_nsec) / 1e9;
  std::string out = "; " + bytes_text(static_cast<double>(st.st_size));
  if (seconds >= 10) out += ", " + bytes_text(static_cast<double>(st.st_size) * 3600 / seconds) + " per hour";
  return out;
}

int run_command(const RunOptions& opt) {
  const std::string output = opt.output.empty() ? default_output_name(opt.command[0]) : opt.output;
  const std::string preload = find_preload_library();
  std::unique_ptr<Recorder> recorder;
  struct stat written {};  // the recording's file as created: deleted or replaced mid-run is said at the end
  std::string shm_name;
  std::string why_not;
  if (preload.empty()) {
    why_not = "libstallscope.so not found beside the stallscope executable (set STALLSCOPE_LIBRARY)";
  } else {
    report_stale_arenas_removed(opt.quiet);
    ArenaConfig cfg;
    cfg.ring_capacity = opt.ring_events;
    cfg.ring_count = opt.rings;
    Arena* arena = nullptr;
    if (Status s = opt.overwrite ? Writer::remove(output) : Status::Ok(); !s.ok()) {
      why_not = s.message();
    } else {
      // Anonymous: nothing of the session in /dev/shm (the DataLoader's own budget), and freed
      // when its last process exits, whoever killed them.
      arena = Arena::create_anonymous(cfg, &why_not);
      if (arena != nullptr) shm_name = arena->name();
    }
    if (arena != nullptr) {
      std::map<std::string, std::string> meta = {
          {"mode", "launcher"}, {"command", shell_join(opt.command)}, {"loader", opt.loader}};
      if (!opt.loader_tuned.empty()) meta["loader_tuned"] = opt.loader_tuned;
      if (opt.keep_detail_ns > 0) meta["keep_detail_ns"] = std::to_string(opt.keep_detail_ns);
      // One `stallscope run` per rank (torchrun ... stallscope run -- python train.py): who it is.
      const std::pair<const char*, const char*> kRankEnv[] = {
          {"rank", "RANK"}, {"local_rank", "LOCAL_RANK"}, {"world_size", "WORLD_SIZE"}, {"job", "TORCHELASTIC_RUN_ID"}};
      for (const auto& [key, env] : kRankEnv) {
        if (const char* v = std::getenv(env); v != nullptr && *v != '\0') meta[key] = v;
      }
      if (const char* job = std::getenv("STALLSCOPE_JOB"); job != nullptr && *job != '\0') meta["job"] = job;
      auto rec = Recorder::start(arena, output, meta);
      if (rec.ok()) {
        recorder = std::move(*rec);
        if (::stat(output.c_str(), &written) != 0) written = {};
      } else {
        why_not = rec.status().message();
        Arena::unlink(shm_name);
      }
    }
  }
  if (!recorder) {
    std::fprintf(stderr, "stallscope: not recording (%s); running the program anyway%s\n", why_not.c_str(),
                 opt.loader == vocab::kLoaderTorch
                     ? ""
                     : (", with its own DataLoader (--loader " + opt.loader + " needs the hooks)").c_str());
  } else {
    if (!opt.quiet) std::fprintf(stderr, "stallscope: recording to %s\n", output.c_str());
    char real[PATH_MAX];
    SessionEntry entry;
    entry.launcher_pid = ::getpid();
    entry.db_path = ::realpath(output.c_str(), real) ? std::string(real) : output;
    entry.command = shell_join(opt.command);
    entry.started_unix = static_cast<int64_t>(::time(nullptr));
    register_live_session(entry);  // best effort: only `stallscope ui`'s list needs it
  }

  // Hold the forwarded signals until the child's pid is known.
  sigset_t fwd, old;
  sigemptyset(&fwd);
  const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};
  for (int s : forwarded) sigaddset(&fwd, s);
  ::sigprocmask(SIG_BLOCK, &fwd, &old);
  const ChildExec prepared = prepare_child(opt, recorder ? preload : std::string(), shm_name);
  timespec started{};
  ::clock_gettime(CLOCK_MONOTONIC, &started);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "stallscope: cannot start the program: %s\n", std::strerror(errno));
    if (recorder) (void)recorder->stop();  // nothing was recorded; the error above is the news
    if (!shm_name.empty()) Arena::unlink(shm_name);
    return 125;
  }
  if (child == 0) exec_child(prepared, old);
  g_child = child;
  for (int s : forwarded) {
    struct sigaction cur;
    if (::sigaction(s, nullptr, &cur) == 0 && cur.sa_handler == SIG_IGN) continue;  // ignored stays ignored
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(s, &sa, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);

  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;

  if (recorder) {
    if (WIFEXITED(status)) {
      recorder->set_exit_status(child, WEXITSTATUS(status), std::nullopt);
    } else if (WIFSIGNALED(status)) {
      recorder->set_exit_status(child, std::nullopt, WTERMSIG(status));
    }
    const Status s = recorder->stop();
    Arena::unlink(shm_name);
    finish_live_session(::getpid(), static_cast<int64_t>(::time(nullptr)));
    struct stat now {};
    const bool gone = written.st_ino != 0 && (::stat(output.c_str(), &now) != 0 || now.st_ino != written.st_ino ||
                                              now.st_dev != written.st_dev);
    if (gone && s.ok()) {
      // Someone removed (or replaced) the file while the run wrote it: what was written went into
      // the removed file. Said, not papered over with "saved to".
      std::fprintf(stderr,
                   "stallscope: the recording %s was deleted or replaced during the run; this run's recording is "
                   "lost (keep the file until the run ends, or record to another -o)\n",
                   output.c_str());
    } else if (s.ok()) {
      // SQLite removes -wal and -shm at the last close; a folder made read-only during the run
      // keeps them (the recording itself is complete). Said once, even with -q.
      const std::string wal = output + "-wal";
      const std::string::size_type slash = output.rfind('/');
      const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : output.substr(0, slash));
      if (::access(wal.c_str(), F_OK) == 0 && ::access(dir.c_str(), W_OK) != 0) {
        std::fprintf(stderr,
                     "stallscope: the folder %s became read-only during the run: the recording is complete, but "
                     "%s-wal and -shm are left beside it (remove them once the folder is writable)\n",
                     dir.c_str(), output.c_str());
      }
    }
    if (!gone && !opt.quiet && s.ok()) {
      const IngestStats st = recorder->stats();
      std::fprintf(stderr, "stallscope: recording saved to %s (%llu events, %llu spans, %llu dropped%s)\n",
                   output.c_str(), static_cast<unsigned long long>(st.events),
                   static_cast<unsigned long long>(st.spans), static_cast<unsigned long long>(st.dropped),
                   size_and_growth(output, started).c_str());
      if (opt.summary) opt.summary(output);
    }
  }
  if (WIFSIGNALED(status)) {
    // End the way the program ended, so a shell or a scheduler sees the same thing.
    const int sig = WTERMSIG(status);
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    ::sigprocmask(SIG_UNBLOCK, &s, nullptr);
    ::kill(::getpid(), sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace stallscope
