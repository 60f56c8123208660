// `stallscope ui ARGS...` in `stallscope`, which links no GUI library: the dashboard is the
// executable stallscope-ui beside it (cli/ui_main.cc), exec'd with the same arguments, so that its
// exit status and signals are the dashboard's own. Before that, where no window can open here (no
// display; no OpenGL library to load), one line on stderr says so and how to view the recording
// elsewhere, exit 1: on a headless node the dashboard would otherwise fail to start, or fail
// inside GLFW, in words that do not say what to do. --help goes to stallscope-ui as it is (its
// options are the dashboard's), display or not.
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/ui_command.h"

namespace stallscope::cli {
namespace {

// What to do instead, after the reason a window cannot open here.
constexpr char kElsewhere[] =
    "on a machine with a screen run `stallscope ui ssh://THIS-HOST/path/FILE.db` (it reads the recording here "
    "over ssh), or read it here with `stallscope report FILE.db` or `stallscope top`";

// The folder of this executable (/proc/self/exe: where it is, whatever PATH or argv[0] said).
std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

bool is_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// Why no window can open here, the start of the one line; "" where one may. The dashboard's GLFW
// speaks X11 (a Wayland session offers it through XWayland, which sets DISPLAY); the OpenGL
// library is loaded as the dashboard loads it (at run time, libGL.so.1), and let go again.
std::string why_no_window() {
  if (!is_set("DISPLAY")) {
    return is_set("WAYLAND_DISPLAY")
               ? "no X11 display here (DISPLAY is not set; the dashboard speaks X11, which a Wayland session "
                 "offers through XWayland)"
               : "no display here (neither DISPLAY nor WAYLAND_DISPLAY is set); the dashboard needs one";
  }
  void* gl = ::dlopen("libGL.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (gl == nullptr) {
    const char* err = ::dlerror();
    std::string why = err != nullptr ? err : "not found";
    for (char& c : why) {
      if (c == '\n') c = ' ';
    }
    return "the OpenGL library libGL.so.1 cannot be loaded here (" + why + "); the dashboard needs it";
  }
  ::dlclose(gl);
  return "";
}

// Whether the words ask for help (before a `--`, after which words are file names).
bool asks_help(const std::vector<std::string>& words) {
  for (const std::string& w : words) {
    if (w == "--") return false;
    if (w == "-h" || w == "--help") return true;
  }
  return false;
}

Body define(CLI::App& app) {
  // Every word is stallscope-ui's, --help included, in the order given: CLI11 stops at the first
  // one (none is known here) and leaves the rest as they are.
  app.set_help_flag();
  app.prefix_command();
  app.allow_extras();
  return [&app] {
    const std::vector<std::string> words = app.remaining();
    const std::string dir = exe_dir();
    const std::string dashboard = dir + "/" + kUiExecutable;
    if (dir.empty() || ::access(dashboard.c_str(), X_OK) != 0) {
      if (asks_help(words)) {
        std::fputs(app.get_formatter()->make_help(&app, "", CLI::AppFormatMode::Normal).c_str(), stdout);
        return 0;
      }
      std::fprintf(stderr,
                   "stallscope: ui: the dashboard is not installed here (no %s beside %s/stallscope); read the "
                   "recording with `stallscope report FILE.db`, or open it with `stallscope ui` where the "
                   "dashboard is installed\n",
                   kUiExecutable, dir.c_str());
      return 1;
    }
    if (!asks_help(words)) {
      if (const std::string why = why_no_window(); !why.empty()) {
        std::fprintf(stderr, "stallscope: ui: %s: %s\n", why.c_str(), kElsewhere);
        return 1;
      }
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(dashboard.c_str()));
    for (const std::string& w : words) argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    std::fflush(stdout);
    ::execv(dashboard.c_str(), argv.data());
    std::fprintf(stderr, "stallscope: ui: cannot run %s: %s\n", dashboard.c_str(), std::strerror(errno));
    return 1;
  };
}

}  // namespace

const Command kUiCommand = {
    "ui",
    kUiSummary,
    "stallscope ui [OPTIONS] [A.db [B.db] | TUNE-DIR [RUN]]",
    "Opens the dashboard: a program of its own, stallscope-ui, that `stallscope ui` runs with the\n"
    "same arguments (its --help lists the options). It is not beside this stallscope: build or\n"
    "install stallscope with the dashboard (ImGui and GLFW found at configure time), or read a\n"
    "recording with `stallscope report FILE.db`.",
    "Exit status: the dashboard's; 1 where stallscope-ui is missing or no window can open here (no\n"
    "display, no OpenGL library), said in one line on stderr. See docs/dashboard.md.",
    define,
};

}  // namespace stallscope::cli
