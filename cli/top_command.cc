// `stallscope top [PID | FILE.db]`: a live view of a recorded training job in the terminal, for a
// plain ssh session (as `py-spy top`, `htop`): refreshed about once a second, `q` or Ctrl-C to
// quit. It only reads the recording (Reader::open: read-only, WAL); it never signals or traces the
// training process. The figures come from cli/top_source.h, the layout from cli/top_frame.h, the
// terminal from cli/terminal.h.
#include <errno.h>
#include <langinfo.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/recording_input.h"
#include "cli/terminal.h"
#include "cli/top_frame.h"
#include "cli/top_source.h"
#include "common/procfs.h"
#include "remote/link.h"
#include "storage/reader.h"
#include "storage/session_registry.h"

namespace stallscope::cli {
namespace {

struct TopArgs {
  std::vector<std::string> targets;  // more than one is a usage error, said in the command's words
  bool once = false;
  bool ascii = false;
  double interval_s = 1;
};

// One line on stderr, `stallscope: top: WHAT`, exit status 1.
int failure(const std::string& what) {
  std::fprintf(stderr, "stallscope: top: %s\n", what.c_str());
  return 1;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Whether `ancestor` is `pid` or one of its parents.
bool descends_from(int pid, int ancestor) {
  for (int i = 0; i < 64 && pid > 1; ++i) {
    if (pid == ancestor) return true;
    const std::vector<std::string> f = procfs::stat_fields(pid);
    if (f.size() < 2) return false;
    pid = std::atoi(f[1].c_str());
  }
  return false;
}

// Whether the recording at `path` has a live process `pid` (a DataLoader worker, or the target of
// `stallscope attach`, which is no child of the recorder).
bool records_process(const std::string& path, int pid) {
  auto r = Reader::open(path);
  if (!r.ok()) return false;
  auto ps = (*r)->processes();
  if (!ps.ok()) return false;
  for (const ProcessRow& p : *ps) {
    if (p.pid == pid && !p.end_ns) return true;
  }
  return false;
}

// The live session that records process `pid`: its launcher (`stallscope run` or `attach`), a
// process under the launcher, or a process in its recording.
std::optional<SessionEntry> session_of(int pid) {
  const std::vector<SessionEntry> live = list_live_sessions();
  for (const SessionEntry& e : live) {
    if (e.launcher_pid == pid) return e;
  }
  for (const SessionEntry& e : live) {
    if (descends_from(pid, e.launcher_pid)) return e;
  }
  for (const SessionEntry& e : live) {
    if (records_process(e.db_path, pid)) return e;
  }
  return std::nullopt;
}

std::string short_command(const std::string& c) { return c.size() > 40 ? c.substr(0, 37) + "..." : c; }

bool utf8_locale() {
  const char* set = std::setlocale(LC_CTYPE, "");
  const bool utf8 = set != nullptr && std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
  std::setlocale(LC_CTYPE, "C");
  return utf8;
}

// Opens the recording; a live one whose file the recorder has not written yet gets a few seconds.
Result<std::unique_ptr<Reader>> open_recording(const std::string& path, bool live) {
  auto r = Reader::open(path);
  for (int i = 0; live && !r.ok() && i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = Reader::open(path);
  }
  return r;
}

int show(TopSource& source, const TopArgs& a) {
  using Clock = TopSource::Clock;
  std::string why;
  std::unique_ptr<Terminal> term = a.once ? nullptr : Terminal::open(&why);
  const bool utf8 = !a.ascii && utf8_locale();
  if (!term) {
    // One plain frame: `--once`, or stdout is not a terminal (a script, a pipe, a test).
    source.refresh(Clock::now());
    source.analyse_if_due(Clock::now(), true);
    const char* cols_env = std::getenv("COLUMNS");
    const int cols = cols_env != nullptr && std::atoi(cols_env) > 0 ? std::atoi(cols_env) : 80;
    std::string out;
    for (const std::string& line : render_top(source.frame(), cols, 0, utf8)) out += line + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.interval_s));
  auto draw = [&] {
    const TermSize size = term->size();
    term->draw(render_top(source.frame(), size.cols, size.rows, utf8));
  };
  Clock::time_point next = Clock::now();
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= next) {
      source.refresh(now);
      draw();
      if (source.analyse_if_due(Clock::now())) draw();
      next = now + period;
      continue;
    }
    const int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count()) + 1;
    switch (term->wait(wait_ms)) {
      case Terminal::Event::kQuit: return 0;
      case Terminal::Event::kResize: draw(); break;
      case Terminal::Event::kKey: next = Clock::now(); break;  // any other key: refresh now
      case Terminal::Event::kTimeout: break;
    }
  }
}

// Runs `ssh -t HOST stallscope top` (with the user's ssh, as `ui ssh://` does): returns only when
// ssh cannot be started.
int exec_node_top(const remote::Endpoint& e, const TopArgs& a) {
  std::string cmd = "top";
  if (a.once) cmd += " --once";
  if (a.ascii) cmd += " --ascii";
  if (a.interval_s != 1.0) cmd += " -n " + std::to_string(a.interval_s);
  std::vector<std::string> argv = remote::ssh_command(e, {"-t"}, cmd);
  std::vector<char*> args;
  for (auto& s : argv) args.push_back(s.data());
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  return failure(std::string("cannot run ") + args[0] + ": " + std::strerror(errno) +
                 "; set STALLSCOPE_SSH to your ssh");
}

Body define(CLI::App& app) {
  auto a = std::make_shared<TopArgs>();
  app.add_flag("--once", a->once, "print one frame as plain text and exit (also when stdout is not a terminal)");
  app.add_flag("--ascii", a->ascii, "ASCII only (the sparkline and separators), whatever the locale");
  parse_with(
      app.add_option("-n,--interval")->type_name("SECONDS")->description("seconds between refreshes (default 1)"),
      [&i = a->interval_s](const std::string& v) {
        double s = 0;
        if (!parse_number(v, &s) || !(s >= 0.1 && s <= 60)) return "needs a number of seconds from 0.1 to 60";
        i = s;
        return "";
      });
  app.add_option("PID|FILE.db", a->targets,
                 "a recorded process (the training process, a DataLoader worker, or its `stallscope run`),\n"
                 "or a recording, live or finished (default: the one live session)")
      ->type_name("");
  return [&app, a]() -> int {
    if (a->targets.size() > 1) {
      return usage_error(app,
                         "one process or recording at a time; got '" + a->targets[0] + "' and '" + a->targets[1] + "'");
    }
    std::string path;
    std::optional<int64_t> pid;
    bool live = false;
    if (!a->targets.empty() && Reader::is_uri(a->targets[0])) {
      auto e = remote::parse_uri(a->targets[0]);
      if (!e.ok()) return usage_error(app, "top: " + e.status().message());
      // ssh://host alone: the node's own `stallscope top` in a terminal over ssh (its live session);
      // ssh://host/path/run.db: that recording, read over the link like the dashboard's.
      if (e->path.empty()) {
        if (e->scheme != "ssh") return usage_error(app, "top: " + a->targets[0] + " names no recording; add its path");
        return exec_node_top(*e, *a);
      }
    }
    if (a->targets.empty()) {
      const std::vector<SessionEntry> sessions = list_live_sessions();
      if (sessions.empty()) {
        return usage_error(app,
                           "no live session on this machine; start one with `stallscope run -- python train.py`, "
                           "or name a recording: stallscope top run.db");
      }
      if (sessions.size() > 1) {
        std::string list;
        for (const SessionEntry& e : sessions) {
          list += (list.empty() ? "" : "; ") + std::to_string(e.launcher_pid) + " (" + short_command(e.command) + ")";
        }
        return usage_error(app, std::to_string(sessions.size()) + " live sessions: " + list +
                                    "; pick one: stallscope top " + std::to_string(sessions.front().launcher_pid));
      }
      path = sessions.front().db_path;
      live = true;
    } else if (const std::string& t = a->targets[0]; all_digits(t) && procfs::alive(std::atoi(t.c_str()))) {
      const int p = std::atoi(t.c_str());
      const std::optional<SessionEntry> e = session_of(p);
      if (!e) {
        return failure("process " + t + " (" + short_command(procfs::cmdline(p)) +
                       ") is not recorded by a live stallscope session of this user; record it with "
                       "`stallscope attach " +
                       t + "` or `stallscope run -- python train.py`, then run `stallscope top " + t + "`");
      }
      path = e->db_path;
      pid = p;
      live = true;
    } else {
      path = t;
      char real[PATH_MAX];  // the registry holds absolute paths
      const std::string absolute = ::realpath(t.c_str(), real) != nullptr ? std::string(real) : t;
      for (const SessionEntry& e : list_live_sessions()) live = live || e.db_path == absolute;
    }
    auto reader = open_recording(path, live);
    if (!reader.ok()) {
      if (a->targets.size() == 1 && all_digits(a->targets[0])) {
        return failure("no process " + a->targets[0] + " is running and no recording is named '" + a->targets[0] +
                       "'; pass the pid of a recorded training process, or a .db file");
      }
      return read_error("top: " + reader.status().message());
    }
    TopSource source(std::move(*reader), live, pid, a->interval_s);
    return show(source, *a);
  };
}

}  // namespace

const Command kTopCommand = {
    "top",
    "a live view of a recorded job in the terminal (stall, samples/s, queue, workers, advice)",
    "stallscope top [--once] [--ascii] [-n SECONDS] [PID | FILE.db | ssh://[user@]host[:port][/path/run.db]]",
    "Shows a recorded training job in the terminal, refreshed every second, in an ssh session\n"
    "without a display: the share of time the loop stalls waiting for data and its cause,\n"
    "samples/s and step time, the DataLoader's queue (batches ready, and a line of its last\n"
    "minute), each process's CPU and run-queue delay, the GPU's busy share where it is recorded,\n"
    "and the top recommendation of `stallscope report`. It only reads the recording (read-only);\n"
    "the training process is never signalled or traced.\n"
    "\n"
    "PID is any process of a live session on this machine: the training process, a worker, or\n"
    "the `stallscope run` (or `attach`) that records it. FILE.db is a recording, live or\n"
    "finished (a finished one shows its last state). With neither, the one live session; when\n"
    "there are several, or none, one line says which there are.",
    "Keys: q or Ctrl-C quits (the terminal is restored); any other key refreshes now.\n"
    "When stdout is not a terminal, or with --once, one frame is printed as plain text (80\n"
    "columns, or $COLUMNS) and top exits.\n"
    "\n"
    "Exit status: 0 on success; 1 when the process is not recorded or the recording cannot be\n"
    "read; 2 on usage errors, and when no argument is given and there is not exactly one live\n"
    "session.\n"
    "\n"
    "Examples:\n"
    "  stallscope top                 # the one live session\n"
    "  stallscope top 12345           # the session recording process 12345\n"
    "  stallscope top run.db          # a recording, live or finished\n"
    "  stallscope top --once run.db   # one frame as text, for a script\n"
    "  stallscope top ssh://gpu-node-3                  # the node's live session, over ssh\n"
    "  stallscope top ssh://gpu-node-3/~/runs/run.db    # a recording on the node, read over the link",
    define,
};

}  // namespace stallscope::cli
