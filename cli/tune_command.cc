// `stallscope tune [OPTIONS] [--] PROGRAM [ARGS...]`: the DataLoader benchmark harness, run for the
// user. The unmodified program runs once under recording with its own settings (the baseline);
// the what-if model of that recording (analysis/whatif.h) names the settings worth measuring
// (analysis/tune.h); each runs for a bounded number of steps through `stallscope run --loader-args`,
// and the fastest measured wins. docs/tune.md has the details.
//
// Each run is a `stallscope run` child of this process, in a process group of its own (so Ctrl-C
// reaches tune alone), with its output in DIR/NN-NAME.log. Steps are counted live from the
// recording (dl.next spans that handed a batch); a run is stopped at its step count, when it can
// no longer come within 5 % of the best so far, or when the time budget is spent, by SIGKILL of the
// program's processes (the launcher saves what was drained). Tune is the sub-reaper of its
// children, so DataLoader workers orphaned by that kill come back to it and are killed too.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "analysis/dataloader.h"
#include "analysis/format.h"
#include "analysis/report.h"
#include "analysis/session.h"
#include "analysis/tune.h"
#include "cli/command.h"
#include "common/cpus.h"
#include "common/json.h"
#include "common/procfs.h"
#include "common/vocabulary.h"
#include "storage/handed_batches.h"

namespace stallscope::cli {
namespace {

using analysis::LoaderSetting;
using analysis::SteadyFigures;
using analysis::WhatIfCandidate;
using Clock = std::chrono::steady_clock;

// What an early stop needs, over at least max(this many, a quarter of the) measured steps: a run
// this much slower than the best so far, or one that cannot come within kWinMargin of it even two
// standard errors above its rate so far (analysis::cannot_win): it could not be the winner, nor
// one within the 5 % that tune promises.
constexpr double kClearlySlower = 0.75;
constexpr double kWinMargin = 0.05;
constexpr int64_t kEarlyStopMinSteps = 10;
// Hill-climb: settings beyond the model's list measured when the best measured one has an
// unmeasured neighbour in num_workers.
constexpr int kMaxClimbs = 2;

struct TuneArgs {
  int64_t steps = 200;
  int64_t warmup = 20;
  double budget_s = 600;
  std::string dir;
  bool force = false;
  bool include_reference = false;
  bool sweep = false;
  bool as_json = false;
  unsigned max_candidates = 3;
  std::vector<std::string> command;
};

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One run of the program with one setting.
struct Trial {
  std::string name;                          // "baseline", "reference", or the arguments
  std::string loader = vocab::kLoaderTorch;  // what `run --loader` it used
  std::optional<LoaderSetting> setting;      // the baseline's is the recorded one, known once analysed
  std::string db, log;
  std::string status = "not run";  // measured, ended, stopped early, budget, failed, interrupted, not run
  std::string exit_text;           // how the program ended when it ended by itself with an error
  std::string not_applied;         // why the training loader did not run with the setting
  double elapsed_s = 0;
  int64_t live_steps = 0;
  SteadyFigures fig;
  // The whole run as the user launches it, where the program ended by itself: samples/s over the
  // training loader's window (the report's), worker start-ups, every epoch and the first steps
  // after forking included. 0: the run was stopped (or failed) before its end.
  double whole_samples_per_s = 0, whole_window_s = 0;
  // An allocator preloaded for this run (LD_PRELOAD, before stallscope's own library): the report's
  // allocator_page_faults advice, measured rather than bounded. Empty: the program's own malloc.
  std::string preload;
  std::optional<WhatIfCandidate> pred;
  bool ran() const { return fig.measured() && not_applied.empty(); }
  bool whole() const { return ran() && whole_samples_per_s > 0; }
};

// ---------------------------------------------------------------------------------------------
// Processes

// The descendants of `root` (not `root` itself), from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (int pid : procfs::pids()) {
    const std::vector<std::string> f = procfs::stat_fields(pid);
    if (f.size() < 2) continue;  // gone since listed
    children[static_cast<pid_t>(std::strtol(f[1].c_str(), nullptr, 10))].push_back(static_cast<pid_t>(pid));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

// Kills what is left of a run: this process's children and all below them (DataLoader workers
// orphaned by a kill come back here: tune is their sub-reaper), and reaps them.
void kill_strays() {
  for (int round = 0; round < 50; ++round) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    const std::vector<pid_t> left = descendants(::getpid());
    if (left.empty()) return;
    for (pid_t p : left) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Python's temporary directory as the runs see it (tempfile.gettempdir(): $TMPDIR, $TEMP, $TMP,
// else /tmp), for the folders below.
std::string python_temp_dir() {
  for (const char* v : {"TMPDIR", "TEMP", "TMP"}) {
    const char* s = std::getenv(v);
    struct stat st {};
    if (s && *s && ::stat(s, &st) == 0 && S_ISDIR(st.st_mode)) return s;
  }
  return "/tmp";
}

// The paths of the unix sockets bound now, from /proc/net/unix (its last column; the header line
// has none).
std::set<std::string> bound_unix_paths() {
  std::set<std::string> out;
  const std::string text = procfs::read_file("/proc/net/unix", size_t{64} << 20);
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    const size_t slash = line.find(" /");
    if (slash != std::string_view::npos) out.insert(std::string(line.substr(slash + 1)));
    at = end + 1;
  }
  return out;
}

// Python multiprocessing's folders of a killed run: a process that shares a file descriptor with
// another (torch's DataLoader workers handing batches) makes TEMP/pymp-XXXX with a listener-XXXX
// socket in it, and removes it at exit, which a SIGKILL skips. Tune kills runs, so it removes
// what they left: folders of this user, changed since `since` (the run's start, wall clock),
// holding only listener-* sockets that no process has bound any more. Others are left alone.
void remove_dead_pymp_dirs(const std::string& temp, time_t since) {
  DIR* d = ::opendir(temp.c_str());
  if (d == nullptr) return;
  std::vector<std::string> candidates;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "pymp-", 5) != 0) continue;
    const std::string path = temp + "/" + e->d_name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (st.st_mtime < since - 1) continue;
    candidates.push_back(path);
  }
  ::closedir(d);
  if (candidates.empty()) return;
  const std::set<std::string> bound = bound_unix_paths();
  for (const std::string& dir : candidates) {
    std::vector<std::string> sockets;
    bool dead = true;
    if (DIR* sub = ::opendir(dir.c_str())) {
      while (dirent* e = ::readdir(sub)) {
        const std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        const std::string path = dir + "/" + name;
        struct stat st {};
        if (name.rfind("listener-", 0) != 0 || ::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
            bound.count(path) != 0) {
          dead = false;
          break;
        }
        sockets.push_back(path);
      }
      ::closedir(sub);
    }
    if (!dead || sockets.empty()) continue;  // empty: one being made right now, perhaps not ours
    for (const std::string& p : sockets) ::unlink(p.c_str());
    ::rmdir(dir.c_str());
  }
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "stallscope";
  buf[n] = '\0';
  return buf;
}

// Starts `stallscope run ... -- PROGRAM` for `t`, output to t.log; returns its pid (-1: fork failed).
pid_t start_run(const TuneArgs& a, const Trial& t, const std::string& loader_args) {
  std::vector<std::string> argv = {self_exe(), "run", "--quiet", "--force", "-o", t.db};
  if (!loader_args.empty()) {
    argv.insert(argv.end(), {"--loader-args", loader_args});
  } else {
    argv.insert(argv.end(), {"--loader", t.loader});
  }
  argv.push_back("--");
  argv.insert(argv.end(), a.command.begin(), a.command.end());
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  // An old recording of that name (tune --force into a used folder) must not be counted live.
  for (const char* suffix : {"", "-wal", "-shm"}) (void)::unlink((t.db + suffix).c_str());
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);  // Ctrl-C at the terminal reaches tune, which stops the run itself
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigaction(SIGTERM, &dfl, nullptr);
  if (!t.preload.empty()) {  // the launcher puts its own library before what it finds here
    const char* old = std::getenv("LD_PRELOAD");
    const std::string v = t.preload + (old != nullptr && *old != '\0' ? std::string(":") + old : std::string());
    ::setenv("LD_PRELOAD", v.c_str(), 1);
  }
  const int in = ::open("/dev/null", O_RDONLY);
  const int out = ::open(t.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
  ::execv(cargv[0], cargv.data());
  std::fprintf(stderr, "stallscope tune: cannot run %s: %s\n", cargv[0], std::strerror(errno));
  ::_exit(127);
}

// The last non-empty line of a log, for a one-line error.
std::string last_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// Live step counts

// Batches handed by each loader so far, read from the recording as it grows: the training loader
// is taken to be the one that handed the most.
class LiveSteps {
 public:
  explicit LiveSteps(std::string path) : handed_(std::move(path)) {}
  void poll() { handed_.poll(); }
  void close() { handed_.close(); }

  const std::vector<int64_t>* busiest() const {
    const std::vector<int64_t>* best = nullptr;
    for (const auto& [loader, ends] : handed_.ends()) {
      if (!best || ends.size() > best->size()) best = &ends;
    }
    return best;
  }
  int64_t steps() const {
    const auto* e = busiest();
    return e ? static_cast<int64_t>(e->size()) : 0;
  }
  // The rate after `warmup` steps (analysis::live_rate).
  analysis::LiveRate rate(int64_t warmup) const {
    const auto* e = busiest();
    if (!e) return {};
    std::vector<int64_t> v = *e;
    std::sort(v.begin(), v.end());
    return analysis::live_rate(v, warmup);
  }

 private:
  HandedBatches handed_;
};

// Why the training loader of a --loader-args run did not run with `want` (the hooks keep a
// setting that could change what the script computes, and say why in the loader's configuration):
// "" when it did.
std::string not_applied(const analysis::LoaderConfig& c, const LoaderSetting& want) {
  std::string what;
  if (c.num_workers.value_or(-1) != want.num_workers) {
    what = "num_workers";
  } else if (want.num_workers > 0 && c.prefetch_factor && *c.prefetch_factor != want.prefetch_factor) {
    what = "prefetch_factor";
  } else if (want.num_workers > 0 && c.persistent_workers.value_or(false) != want.persistent_workers) {
    what = "persistent_workers";
  }
  if (what.empty()) return "";
  std::string why = "kept by the hooks";
  if (const Json* kept = c.doc.is_object() && c.doc.contains("replaced") ? &c.doc["replaced"] : nullptr;
      kept && kept->is_object() && kept->contains("kept")) {
    if (auto r = json::get_string((*kept)["kept"], what)) why = *r;
  }
  return "the script's " + what + " was kept: " + why;
}

// ---------------------------------------------------------------------------------------------
// One run

struct Progress {
  bool quiet = false;
  bool tty = false;
  size_t shown = 0;  // characters of the live line on screen
  void line(const std::string& s, bool final) {
    if (quiet) return;
    if (tty) {
      std::fprintf(stderr, "\r%-*s", static_cast<int>(shown), s.c_str());
      shown = s.size();
      if (final) {
        std::fputc('\n', stderr);
        shown = 0;
      }
    } else if (final) {
      std::fprintf(stderr, "%s\n", s.c_str());
    }
    std::fflush(stderr);
  }
};

struct RunLimits {
  Clock::time_point deadline;
  double best_samples_per_s = 0;  // the best measured so far: the early-stop reference
  double samples_per_step = 0;    // from the baseline (0: show steps/s)
};

// Runs `t` until it has warm-up + steps steps, ends, cannot win against the best so far, the
// budget is spent, or tune is interrupted; then analyses its recording.
void run_trial(const TuneArgs& a, Trial& t, const std::string& loader_args, const RunLimits& lim, Progress& pr,
               const std::string& counter) {
  const Clock::time_point t0 = Clock::now();
  const time_t started = ::time(nullptr);
  const pid_t pid = start_run(a, t, loader_args);
  if (pid < 0) {
    t.status = "failed";
    t.exit_text = std::string("fork: ") + std::strerror(errno);
    return;
  }
  LiveSteps live(t.db);
  const int64_t want = a.warmup + a.steps;
  std::string stop;  // why tune stopped it; empty: it ended by itself
  int wstatus = 0;
  bool exited = false;
  Clock::time_point last_show{};
  while (!exited) {
    const pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    live.poll();
    const int64_t n = live.steps();
    const analysis::LiveRate lr = live.rate(a.warmup);
    const double sps = lr.steps_per_s;
    const double rate = lim.samples_per_step > 0 ? sps * lim.samples_per_step : 0;
    if (since(last_show) > 0.5) {
      last_show = Clock::now();
      std::string s =
          counter + " " + t.name + ": step " + std::to_string(std::min(n, want)) + "/" + std::to_string(want);
      if (rate > 0) {
        s += ", " + analysis::fixed(rate, 1) + " samples/s";
      } else if (sps > 0) {
        s += ", " + analysis::fixed(sps, 1) + " steps/s";
      }
      pr.line(s, false);
    }
    if (n >= want) {
      stop = "measured";
    } else if (g_interrupted) {
      stop = "interrupted";
    } else if (Clock::now() >= lim.deadline) {
      stop = "budget";
    } else if (!a.sweep && lim.best_samples_per_s > 0 && rate > 0 &&
               lr.steps >= std::max(kEarlyStopMinSteps, a.steps / 4) &&
               (rate < kClearlySlower * lim.best_samples_per_s ||
                analysis::cannot_win(lr, lim.best_samples_per_s / lim.samples_per_step, kWinMargin))) {
      stop = "stopped early";
    }
    if (!stop.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  t.live_steps = live.steps();
  live.close();
  if (!exited) {
    // SIGKILL the program's processes, not the launcher: it saves what was drained, then ends.
    for (int round = 0; round < 100 && !exited; ++round) {
      for (pid_t p : descendants(pid)) ::kill(p, SIGKILL);
      const pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
      if (w == pid) exited = true;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!exited) {  // the launcher did not end in 10 s: stop it too
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
    }
  }
  kill_strays();
  remove_dead_pymp_dirs(python_temp_dir(), started);
  t.elapsed_s = since(t0);
  HandedBatches::tidy(t.db);  // the run may have ended while this process was reading it

  double whole_rate = 0, whole_window = 0;  // the report's, kept for a run that ended by itself
  auto session = analysis::load_session(t.db);
  if (session.ok()) {
    const analysis::DataLoaderModel m = analysis::build_dataloader_model(*session);
    const analysis::Report r = analysis::analyze(*session, m);
    t.fig = analysis::steady_figures(m, r, a.warmup, a.steps);
    whole_rate = r.samples_per_s.value_or(0);
    whole_window = r.wall_s;
    if (!t.setting && r.whatif.available) {
      t.setting = r.whatif.recorded;
    } else if (const analysis::LoaderStats* l = r.loader(); !t.setting && l) {
      LoaderSetting own;  // the baseline without a model: its settings as recorded
      own.num_workers = l->num_workers.value_or(0);
      own.prefetch_factor = own.num_workers > 0 ? l->config.prefetch_factor.value_or(2) : 2;
      own.persistent_workers = own.num_workers > 0 && l->config.persistent_workers.value_or(false);
      t.setting = own;
    }
    if (const analysis::LoaderStats* l = r.loader(); l && t.setting && t.loader == vocab::kLoaderTuned) {
      t.not_applied = not_applied(l->config, *t.setting);
    }
  }
  if (!t.not_applied.empty()) {
    t.status = "not applied";  // the hooks kept the script's value: this run measured something else
  } else if (!stop.empty()) {
    t.status = stop;
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    t.status = "ended";  // the program finished before the step count
    t.whole_samples_per_s = whole_rate;
    t.whole_window_s = whole_window;
  } else {
    t.status = "failed";
    t.exit_text = WIFEXITED(wstatus) ? "exit status " + std::to_string(WEXITSTATUS(wstatus))
                                     : std::string("killed by signal ") + std::to_string(WTERMSIG(wstatus));
    const std::string why = last_line(t.log);
    if (!why.empty()) t.exit_text += ": " + why;
  }
  std::string s = counter + " " + t.name + ": ";
  if (t.ran()) {
    s += analysis::fixed(t.fig.samples_per_s, 1) + " samples/s over " + std::to_string(t.fig.steps) + " steps, stall " +
         analysis::percent(t.fig.stall, 0);
    if (t.status != "measured" && t.status != "ended") s += " (" + t.status + ")";
  } else {
    s += t.status + (t.exit_text.empty() ? "" : " (" + t.exit_text + ")") +
         (t.not_applied.empty() ? "" : " (" + t.not_applied + ")");
  }
  pr.line(s, true);
}

// ---------------------------------------------------------------------------------------------
// Output

Json settings_json(const std::optional<LoaderSetting>& s) {
  if (!s) return nullptr;
  Json j = Json::object();
  j["num_workers"] = s->num_workers;
  if (s->num_workers > 0) {
    j["prefetch_factor"] = s->prefetch_factor;
    j["persistent_workers"] = s->persistent_workers;
  }
  if (s->torch_threads > 0) j["torch_threads"] = s->torch_threads;
  return j;
}

// The gains over the baseline: steady (after the warm-up) and of the whole run (null where either
// run was stopped before its end).
Json gains_json(const Trial& t, const Trial& base) {
  Json g = Json::object();
  g["steady"] = t.ran() && base.ran() ? Json(t.fig.samples_per_s / base.fig.samples_per_s) : Json(nullptr);
  g["whole_run"] = t.whole() && base.whole() ? Json(t.whole_samples_per_s / base.whole_samples_per_s) : Json(nullptr);
  return g;
}

Json trial_json(const Trial& t, const Trial& base) {
  Json j = Json::object();
  j["name"] = t.name;
  j["loader"] = t.loader;
  j["settings"] = settings_json(t.setting);
  j["arguments"] = t.setting ? Json(t.setting->arguments()) : Json(nullptr);
  j["loader_args"] = t.setting ? Json(analysis::loader_args_text(*t.setting)) : Json(nullptr);
  j["status"] = t.status;
  if (!t.exit_text.empty()) j["exit"] = t.exit_text;
  if (!t.not_applied.empty()) j["not_applied"] = t.not_applied;
  j["steps"] = t.fig.steps;
  j["warmup"] = t.fig.warmup;
  if (t.ran()) {
    j["measured"] = {{"samples_per_s", t.fig.samples_per_s}, {"stall", t.fig.stall}, {"window_s", t.fig.window_s}};
  } else {
    j["measured"] = nullptr;
  }
  j["preload"] = t.preload.empty() ? Json(nullptr) : Json(t.preload);
  j["whole_run"] =
      t.whole() ? Json{{"samples_per_s", t.whole_samples_per_s}, {"window_s", t.whole_window_s}} : Json(nullptr);
  j["gain"] = gains_json(t, base);
  if (t.pred) {
    j["predicted"] = {{"samples_per_s", t.pred->samples_per_s}, {"stall", t.pred->stall}};
  } else {
    j["predicted"] = nullptr;
  }
  j["elapsed_s"] = t.elapsed_s;
  j["recording"] = t.db;
  j["log"] = t.log;
  return j;
}

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}
std::string lpad(const std::string& s, size_t w) { return s.size() < w ? std::string(w - s.size(), ' ') + s : s; }

// The command as a shell reads it back, each word after a space, quoted where it needs it.
std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    const bool plain = !w.empty() && w.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                         "_-./=:,+@%") == std::string::npos;
    out += ' ';
    if (plain) {
      out += w;
    } else {
      out += '\'';
      for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

std::string base_name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string trial_label(const Trial& t, bool baseline) {
  if (t.loader == vocab::kLoaderReference) return "--loader reference";
  std::string s = t.setting ? analysis::loader_args_text(*t.setting) : t.name;
  if (!t.preload.empty()) s += " + " + base_name_of(t.preload);
  if (baseline) s += " (the script's)";
  return s;
}

// The allocators a run can preload where the report advises keeping freed memory in the process
// (allocator_page_faults): tcmalloc and jemalloc, each where its library is installed.
std::vector<std::string> installed_allocators() {
  std::vector<std::string> out;
  for (const char* name : {"libtcmalloc_minimal.so.4", "libjemalloc.so.2"}) {
    for (const char* dir :
         {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}) {
      const std::string p = std::string(dir) + "/" + name;
      if (::access(p.c_str(), R_OK) == 0) {
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

void print_table(const Trial& base, const std::vector<Trial>& cands, const Trial* winner, bool by_whole,
                 const TuneArgs& a, double elapsed_s, bool interrupted) {
  std::vector<const Trial*> all{&base};
  for (const Trial& c : cands) all.push_back(&c);
  size_t w = 7;
  for (const Trial* t : all) w = std::max(w, trial_label(*t, t == &base).size());
  std::string out = "\n" + pad("setting", w) + "  samples/s  predicted  whole run  stall  predicted  status\n";
  for (const Trial* t : all) {
    out += pad(trial_label(*t, t == &base), w) + "  ";
    out += lpad(t->ran() ? analysis::fixed(t->fig.samples_per_s, 1) : "-", 9) + "  ";
    out += lpad(t->pred ? analysis::fixed(t->pred->samples_per_s, 1) : "-", 9) + "  ";
    out += lpad(t->whole() ? analysis::fixed(t->whole_samples_per_s, 1) : "-", 9) + "  ";
    out += lpad(t->ran() ? analysis::percent(t->fig.stall, 0) : "-", 5) + "  ";
    out += lpad(t->pred ? analysis::percent(t->pred->stall, 0) : "-", 9) + "  ";
    out += t->status;
    if (t->ran() && t->fig.steps < a.steps) out += " (" + std::to_string(t->fig.steps) + " steps)";
    out += "\n";
  }
  out += "\nsamples/s: measured over the steps after " + std::to_string(a.warmup) +
         " warm-up steps; predicted: the what-if model of the baseline's recording.\n"
         "whole run: samples/s over the training loader's window of a run that ended by itself (worker\n"
         "start-ups and every epoch in it).\n";
  out += by_whole ? "The winner is the fastest over the whole run, as the script runs end to end.\n"
                  : "The winner is the fastest after the warm-up: not every run ran to its end.\n";
  if (interrupted) out += "Interrupted: the table holds what was measured before Ctrl-C.\n";
  if (winner == &base) {
    out += "Winner: the script's own settings";
    out += base.setting ? " (" + base.setting->arguments() + ")" : "";
    out += ", " + analysis::fixed(by_whole ? base.whole_samples_per_s : base.fig.samples_per_s, 1) +
           " samples/s: no setting measured faster; leave them.\n";
  } else if (winner) {
    const double rate = by_whole ? winner->whole_samples_per_s : winner->fig.samples_per_s;
    const double base_rate = by_whole ? base.whole_samples_per_s : base.fig.samples_per_s;
    const double gain = base.ran() && base_rate > 0 ? rate / base_rate : 0;
    out += "Winner: " + trial_label(*winner, false) + ", " + analysis::fixed(rate, 1) + " samples/s";
    if (gain > 0) {
      out += " (" + analysis::fixed(gain, 2) + "x the script's own settings" + (by_whole ? " over the whole run" : "");
      if (by_whole && winner->ran() && base.fig.samples_per_s > 0) {
        out += "; " + analysis::fixed(winner->fig.samples_per_s / base.fig.samples_per_s, 2) + "x after the warm-up";
      }
      out += ")";
    }
    out += ".\n";
    if (winner->loader == vocab::kLoaderReference) {
      out += "Run it with: stallscope run --loader reference --" + shell_words(a.command) + "\n";
    } else if (winner->setting) {
      const bool same_loader = !winner->preload.empty() && base.setting && *base.setting == *winner->setting;
      if (same_loader) {
        out += "Keep the DataLoader as it is.\n";
      } else {
        out += "Paste into the DataLoader(...) call: " + winner->setting->arguments() + "\n";
      }
      if (winner->setting->torch_threads > 0) {
        out += "And before the training loop: torch.set_num_threads(" + std::to_string(winner->setting->torch_threads) +
               ") (torch's intra-op threads; a step's floating-point sums may then round differently)\n";
      }
      if (!winner->preload.empty()) {
        out += "And preload the allocator: LD_PRELOAD=" + winner->preload + " before the program\n";
      }
      out += std::string("Or try it unedited: ") +
             (winner->preload.empty() ? "" : "LD_PRELOAD=" + winner->preload + " ") + "stallscope run" +
             (same_loader ? "" : " --loader-args \"" + analysis::loader_args_text(*winner->setting) + "\"") + " --" +
             shell_words(a.command) + "\n";
    }
  } else {
    out += "No setting was measured.\n";
  }
  out += "Took " + analysis::fixed(elapsed_s, 1) + " s; recordings and logs in " + a.dir +
         "/ (all of them in the dashboard: stallscope ui " + a.dir + ")\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// ---------------------------------------------------------------------------------------------

bool dir_has_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool any = false;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) any = true;
  }
  ::closedir(d);
  return any;
}

// An earlier tune's files in `dir` (tune.json and NN-*.db, -wal, -shm, .log), removed by --force
// so that the folder holds this tune's runs only; anything else in it stays.
void remove_earlier_tune(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> gone;
  auto ends_with = [](const std::string& n, const char* tail) {
    const size_t k = std::strlen(tail);
    return n.size() >= k && n.compare(n.size() - k, k, tail) == 0;
  };
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    const bool numbered = n.size() > 3 && std::isdigit(static_cast<unsigned char>(n[0])) &&
                          std::isdigit(static_cast<unsigned char>(n[1])) && n[2] == '-';
    if (n == "tune.json" || (numbered && (ends_with(n, ".db") || ends_with(n, ".db-wal") || ends_with(n, ".db-shm") ||
                                          ends_with(n, ".log")))) {
      gone.push_back(dir + "/" + n);
    }
  }
  ::closedir(d);
  for (const std::string& p : gone) ::unlink(p.c_str());
}

std::string default_dir() {
  time_t now = ::time(nullptr);
  struct tm tm;
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return std::string("stallscope-tune-") + stamp;
}

std::string file_name(int index, const std::string& what) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d-", index);
  std::string s = buf;
  for (char c : what) s += std::isalnum(static_cast<unsigned char>(c)) ? c : (c == '=' ? '-' : '_');
  while (s.find("__") != std::string::npos) s.erase(s.find("__"), 1);
  return s;
}

int tune(CLI::App& app, TuneArgs& a) {
  if (a.command.empty()) {
    return usage_error(app, "tune: no program given; usage: stallscope tune [--steps N] -- PROGRAM [ARGS...]");
  }
  if (a.dir.empty()) a.dir = default_dir();
  if (dir_has_files(a.dir) && !a.force) {
    return usage_error(app,
                       "tune: '" + a.dir + "' holds files already; pass another -o DIR, or --force to write over them");
  }
  if (a.force) remove_earlier_tune(a.dir);
  if (::mkdir(a.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "stallscope: tune: cannot make '%s': %s; pass another -o DIR\n", a.dir.c_str(),
                 std::strerror(errno));
    return 1;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const Clock::time_point start = Clock::now();
  Progress pr;
  pr.tty = ::isatty(2) != 0;
  const int64_t cores = cpus::budget().usable;
  if (!a.as_json) {
    std::fprintf(stderr, "stallscope tune: %lld steps per setting after %lld warm-up steps, budget %s s; %s/\n",
                 static_cast<long long>(a.steps), static_cast<long long>(a.warmup),
                 analysis::fixed(a.budget_s, 0).c_str(), a.dir.c_str());
  }

  // 1. The script as it is.
  Trial base;
  base.name = "baseline";
  base.db = a.dir + "/" + file_name(0, "baseline") + ".db";
  base.log = a.dir + "/" + file_name(0, "baseline") + ".log";
  RunLimits lim;
  lim.deadline = start + std::chrono::milliseconds(static_cast<int64_t>(a.budget_s * 1000));
  run_trial(a, base, "", lim, pr, "[0]");
  std::optional<analysis::Report> base_report;
  {
    auto session = analysis::load_session(base.db);
    if (session.ok()) base_report = analysis::analyze(*session);
  }
  if (!base.ran()) {
    std::string why;
    if (base.status == "failed") {
      why = "the program failed (" + base.exit_text + ")";
    } else if (base.status == "interrupted") {
      why = "interrupted before a step was measured";
    } else if (!base_report || !base_report->dataloader_seen) {
      why = "no DataLoader was recorded: tune measures training loops that iterate a torch DataLoader";
    } else {
      why = "the program handed " + std::to_string(base.live_steps) + " batches, too few to measure";
    }
    std::fprintf(stderr, "stallscope: tune: %s; see %s\n", why.c_str(), base.log.c_str());
    return g_interrupted ? 130 : 1;
  }
  lim.samples_per_step = base.fig.samples_per_step;
  lim.best_samples_per_s = base.fig.samples_per_s;
  const analysis::WhatIf& w = base_report->whatif;
  if (w.available) base.pred = w.candidates.front();

  // 2. The settings to measure.
  std::vector<Trial> cands;
  auto add = [&](const LoaderSetting& s) {
    if (base.setting && s == *base.setting) return false;
    for (const Trial& c : cands) {
      if (c.setting && *c.setting == s) return false;
    }
    Trial t;
    t.loader = vocab::kLoaderTuned;
    t.setting = s;
    t.name = analysis::loader_args_text(s);
    t.pred = analysis::predicted(w, s);
    const std::string f = file_name(static_cast<int>(cands.size()) + 1, t.name);
    t.db = a.dir + "/" + f + ".db";
    t.log = a.dir + "/" + f + ".log";
    cands.push_back(std::move(t));
    return true;
  };
  // The sweep's grid; the climb may go as far as the model's own grid.
  const int64_t max_workers = std::max<int64_t>(4, 2 * cores);
  int64_t climb_max = max_workers;
  for (const WhatIfCandidate& c : w.candidates) climb_max = std::max(climb_max, c.setting.num_workers);
  if (a.sweep) {
    for (const LoaderSetting& s : analysis::sweep_settings(max_workers)) add(s);
  } else if (w.available) {
    for (const WhatIfCandidate& c : analysis::tune_candidates(w, a.max_candidates)) add(c.setting);
  } else {
    if (!a.as_json) {
      std::fprintf(stderr, "stallscope tune: the what-if model is not available (%s); measuring a small grid\n",
                   w.why_not.c_str());
    }
    for (int64_t n : {cores - 1, cores, 2 * cores}) {
      LoaderSetting s;
      s.num_workers = std::max<int64_t>(n, 1);
      s.persistent_workers = true;
      add(s);
    }
  }
  if (a.include_reference) {
    Trial t;
    t.loader = vocab::kLoaderReference;
    t.name = "--loader reference";
    const std::string f = file_name(static_cast<int>(cands.size()) + 1, "reference");
    t.db = a.dir + "/" + f + ".db";
    t.log = a.dir + "/" + f + ".log";
    cands.push_back(std::move(t));
  }

  // 3. Measure each; then climb to an unmeasured neighbour of the best, a few times.
  // The fastest of the baseline and the candidates that `keep` accepts (the earliest of equals), or
  // nullptr.
  auto fastest = [&](const auto& keep, bool whole = false) -> Trial* {
    Trial* b = nullptr;
    auto rate = [whole](const Trial& t) { return whole ? t.whole_samples_per_s : t.fig.samples_per_s; };
    auto consider = [&](Trial& t) {
      if (keep(t) && (b == nullptr || rate(t) > rate(*b))) b = &t;
    };
    consider(base);
    for (Trial& c : cands) consider(c);
    return b;
  };
  // The winner: the baseline unless a candidate measured in full beat it.
  auto best_trial = [&]() -> Trial* {
    return fastest([&](const Trial& t) { return &t == &base || (t.ran() && t.status != "stopped early"); });
  };
  // Last (not with --sweep, the DataLoader grid alone), on one intra-op thread
  // (analysis::one_thread_trial), once: the fastest setting, and the fastest with workers, measured
  // in full or not. Beside workers that keep the cores busy, torch's threads wait for each other,
  // so settings with workers may have lost on the threads alone.
  auto best_with_workers = [&]() -> const Trial* {
    return fastest([](const Trial& t) {
      return t.ran() && t.setting && t.loader != vocab::kLoaderReference && t.setting->num_workers > 0 &&
             t.setting->torch_threads == 0;
    });
  };
  int climbs = 0;
  bool thread_trial = false;
  for (size_t i = 0; i < cands.size() && !g_interrupted && Clock::now() < lim.deadline; ++i) {
    Trial& t = cands[i];
    const std::string counter = "[" + std::to_string(i + 1) + "/" + std::to_string(cands.size()) + "]";
    run_trial(a, t, t.loader == vocab::kLoaderReference ? "" : analysis::loader_args_text(*t.setting), lim, pr,
              counter);
    if (t.ran() && t.status != "stopped early") {
      lim.best_samples_per_s = std::max(lim.best_samples_per_s, t.fig.samples_per_s);
    }
    if (i + 1 == cands.size() && !a.sweep && w.available && climbs < kMaxClimbs && Clock::now() < lim.deadline) {
      const Trial* best = best_trial();
      // Not from a one-thread trial: its neighbours would cost runs for gains within the noise
      // (bench/tune_bench.py: 1-2 % where measured), and tune's time is a third of a sweep's.
      if (best->setting && best->loader != vocab::kLoaderReference && best->setting->torch_threads == 0) {
        for (const LoaderSetting& s : analysis::worker_neighbours(*best->setting, climb_max)) {
          if (climbs < kMaxClimbs && add(s)) ++climbs;
        }
      }
    }
    if (i + 1 == cands.size() && !a.sweep && !thread_trial && Clock::now() < lim.deadline) {
      thread_trial = true;
      std::vector<LoaderSetting> one;  // copied first: add() may move the trials
      for (const Trial* x : {static_cast<const Trial*>(best_trial()), best_with_workers()}) {
        if (x == nullptr || !x->setting || x->loader == vocab::kLoaderReference) continue;
        if (auto s = analysis::one_thread_trial(w, *x->setting)) one.push_back(*s);
      }
      for (const LoaderSetting& s : one) add(s);
    }
  }
  // Last, where the baseline's report advises keeping freed memory in the process: the fastest
  // setting measured, with each installed allocator preloaded (the report's figure is an estimate).
  const bool allocator_advised =
      std::any_of(base_report->recommendations.begin(), base_report->recommendations.end(),
                  [](const analysis::Recommendation& r) { return r.id == vocab::kRecAllocatorPageFaults; });
  if (allocator_advised && !a.sweep) {
    const Trial* best = best_trial();
    std::vector<Trial> extra;
    for (const std::string& lib : installed_allocators()) {
      if (best->loader == vocab::kLoaderReference || !best->setting) break;
      Trial t;
      t.loader = best == &base ? vocab::kLoaderTorch : vocab::kLoaderTuned;
      t.setting = best->setting;
      t.preload = lib;
      t.name = (best == &base ? std::string("baseline") : analysis::loader_args_text(*best->setting)) + " + " +
               base_name_of(lib);
      // No prediction: the what-if model does not model the allocator.
      const std::string f = file_name(static_cast<int>(cands.size() + extra.size()) + 1, t.name);
      t.db = a.dir + "/" + f + ".db";
      t.log = a.dir + "/" + f + ".log";
      extra.push_back(std::move(t));
    }
    for (Trial& t : extra) {
      if (g_interrupted || Clock::now() >= lim.deadline) break;
      cands.push_back(std::move(t));
      Trial& c = cands.back();
      const std::string counter = "[" + std::to_string(cands.size()) + "/" + std::to_string(cands.size()) + "]";
      const bool own = c.loader == vocab::kLoaderTorch;  // the script's settings: no --loader-args
      run_trial(a, c, own ? "" : analysis::loader_args_text(*c.setting), lim, pr, counter);
    }
  }
  kill_strays();

  // Where every run that could win ran to its end, the winner is the fastest over the whole run as
  // launched (worker start-ups and every epoch in it), not after the warm-up: the figure the user
  // will see end to end. Else the steady figure, which a run cut at the step count still gives.
  auto contender = [&](const Trial& t) { return &t == &base || (t.ran() && t.status != "stopped early"); };
  bool by_whole = base.whole();
  for (const Trial& c : cands) by_whole = by_whole && (!contender(c) || c.whole());
  Trial* winner = by_whole ? fastest(contender, true) : best_trial();
  const bool interrupted = g_interrupted != 0;
  const double elapsed = since(start);
  {
    Json j = Json::object();
    j["schema"] = "stallscope.tune/1";
    j["command"] = a.command;
    j["directory"] = a.dir;
    j["steps"] = a.steps;
    j["warmup"] = a.warmup;
    j["budget_s"] = a.budget_s;
    j["usable_cores"] = cores;
    j["model"] = {{"available", w.available},
                  {"why_not", w.available ? Json(nullptr) : Json(w.why_not)},
                  {"fit_error", w.available ? Json(w.fit_error) : Json(nullptr)},
                  {"confidence", w.available ? Json(w.confidence) : Json(nullptr)}};
    j["baseline"] = trial_json(base, base);
    j["candidates"] = Json::array();
    for (const Trial& c : cands) j["candidates"].push_back(trial_json(c, base));
    Json win = Json::object();
    win["name"] = winner->name;
    win["loader"] = winner->loader;
    win["settings"] = settings_json(winner->setting);
    win["arguments"] = winner->setting && winner->loader != vocab::kLoaderReference ? Json(winner->setting->arguments())
                                                                                    : Json(nullptr);
    win["loader_args"] = winner->setting && winner->loader != vocab::kLoaderReference
                             ? Json(analysis::loader_args_text(*winner->setting))
                             : Json(nullptr);
    win["preload"] = winner->preload.empty() ? Json(nullptr) : Json(winner->preload);
    win["basis"] = by_whole ? "whole run" : "steady";
    win["samples_per_s"] = by_whole ? winner->whole_samples_per_s : winner->fig.samples_per_s;
    win["gain"] = by_whole ? winner->whole_samples_per_s / base.whole_samples_per_s
                           : (base.fig.samples_per_s > 0 ? winner->fig.samples_per_s / base.fig.samples_per_s : 0);
    win["gains"] = gains_json(*winner, base);
    win["is_baseline"] = winner == &base;
    win["recording"] = winner->db;
    j["winner"] = win;
    j["interrupted"] = interrupted;
    j["elapsed_s"] = elapsed;
    const std::string out = json::write(j);
    // Kept beside the recordings: `stallscope ui DIR` opens the baseline and the winner from it.
    if (FILE* f = std::fopen((a.dir + "/tune.json").c_str(), "w")) {
      std::fwrite(out.data(), 1, out.size(), f);
      std::fclose(f);
    }
    if (a.as_json) {
      std::fwrite(out.data(), 1, out.size(), stdout);
    } else {
      print_table(base, cands, winner, by_whole, a, elapsed, interrupted);
    }
  }
  std::fflush(stdout);
  return interrupted ? 130 : 0;
}

Body define(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  parse_with(app.add_option("--steps")->type_name("N")->description(
                 "steps measured per setting, after the warm-up (default 200)"),
             [a](const std::string& v) -> std::string {
               unsigned n = 0;
               if (!parse_count(v, &n) || n < 2) return "needs a whole number of at least 2";
               a->steps = n;
               return "";
             });
  parse_with(
      app.add_option("--warmup")->type_name("N")->description("steps skipped at the start of each run (default 20)"),
      [a](const std::string& v) -> std::string {
        unsigned n = 0;
        if (v != "0" && !parse_count(v, &n)) return "needs a whole number";
        a->warmup = n;
        return "";
      });
  parse_with(app.add_option("--budget")
                 ->type_name("SECONDS")
                 ->description("time for the whole tune (default 600); a run still going when it is spent is\n"
                               "stopped and measured as far as it got"),
             [a](const std::string& v) -> std::string {
               double s = 0;
               if (!parse_number(v, &s) || !(s > 0) || s > 7 * 86400) return "needs a number of seconds above 0";
               a->budget_s = s;
               return "";
             });
  app.add_option("-o,--output", a->dir, "the folder for the recordings and logs (default stallscope-tune-TIME)")
      ->type_name("DIR");
  app.add_flag("--force", a->force,
               "write into an -o folder that holds files already (an earlier tune's runs in it are removed)");
  app.add_flag("--include-reference", a->include_reference,
               "measure stallscope.ReferenceLoader too (--loader reference), where the dataset allows it");
  app.add_flag("--sweep", a->sweep,
               "measure every setting of a grid (num_workers 0 to max(4, 2 x cores), prefetch_factor 2\n"
               "and 4, persistent or not) instead of the model's few: the exhaustive benchmark");
  parse_with(
      app.add_option("--candidates")->type_name("K")->description("settings the model proposes to measure (default 3)"),
      [a](const std::string& v) -> std::string {
        unsigned n = 0;
        if (!parse_count(v, &n) || n > 64) return "needs a whole number from 1 to 64";
        a->max_candidates = n;
        return "";
      });
  app.add_flag("--json", a->as_json, "print a JSON document (schema \"stallscope.tune/1\") instead of the table");
  app.add_option("PROGRAM", a->command, "the training program, and its arguments")->type_name("");
  app.positionals_at_end();
  return [&app, a] { return tune(app, *a); };
}

}  // namespace

const Command kTuneCommand = {
    "tune",
    "find faster DataLoader settings by measuring the ones the what-if model proposes",
    "stallscope tune [--steps N] [--budget SECONDS] [-o DIR] [--include-reference] [--json] [--] PROGRAM [ARGS...]",
    "Runs PROGRAM, unmodified, under recording with its own DataLoader settings (the baseline),\n"
    "then once per setting that the what-if model of that recording proposes (the predicted best\n"
    "and its neighbours; last, the fastest, and the fastest with workers, with torch on one\n"
    "intra-op thread when the baseline ran more), each for the warm-up plus N steps, applied\n"
    "with 'run --loader-args' so the script is never edited. Each run is stopped after its steps\n"
    "(or earlier when it can no longer come within 5 % of the best so far, or when the budget is\n"
    "spent; --sweep runs every setting in full). Where the report advises a preloaded allocator,\n"
    "the fastest setting runs once more with each installed one (tcmalloc, jemalloc). Prints, per\n"
    "setting, measured and predicted samples/s and stall, and samples/s over the whole run where\n"
    "it ended by itself; then the winner (on the whole run where every run that could win ended,\n"
    "else after the warm-up) and the DataLoader arguments to paste (torch.set_num_threads(1) for a\n"
    "one-thread winner, LD_PRELOAD for an allocator). One recording per setting is kept in DIR for\n"
    "'compare' and the dashboard ('stallscope ui DIR' shows them as a set). docs/tune.md.",
    "Exit status: 0 with a result, 1 when PROGRAM cannot be run or records no DataLoader loop,\n"
    "2 on usage errors, 130 after Ctrl-C (what was measured so far is printed).\n"
    "\n"
    "Examples:\n"
    "  stallscope tune -- python train.py\n"
    "  stallscope tune --steps 300 --budget 900 -o tune-out --json -- python train.py > tune.json",
    define,
};

}  // namespace stallscope::cli
