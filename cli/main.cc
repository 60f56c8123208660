// The `stallscope` command: parses the command line and dispatches to the subcommands.
// Usage errors print one line and exit 2; `--help` on every command.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "inject/launcher.h"
#include "stallscope/version.h"

namespace {

constexpr const char* kMainHelp =
    "stallscope %s - see why a training job's GPU waits for its input pipeline\n"
    "\n"
    "Usage: stallscope [--help] [--version] COMMAND [ARGS...]\n"
    "\n"
    "Commands:\n"
    "  run      run a program with the collector injected and record a session database\n"
    "  report   summarise a recording: stalls, throughput, DataLoader workers, recommendations\n"
    "  ui       open the dashboard: live sessions, or a recording (FILE.db) to replay\n"
    "\n"
    "Run 'stallscope COMMAND --help' for a command's options.\n";

constexpr const char* kRunHelp =
    "Usage: stallscope run [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Starts PROGRAM with libstallscope.so preloaded and records every process it starts (forked\n"
    "or spawned) into one SQLite session database, readable while it is written. Signals sent to\n"
    "stallscope are passed to PROGRAM; stallscope exits with PROGRAM's exit status.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     database to write (default: stallscope-PROG-YYYYmmdd-HHMMSS.db here)\n"
    "      --ring-events N   events buffered per thread between flushes (power of two, default 16384)\n"
    "      --rings N         threads that can record at once (default 64)\n"
    "  -q, --quiet           print nothing but errors\n"
    "  -h, --help            show this help\n"
    "\n"
    "Example:\n"
    "  stallscope run -o run.db -- python train.py --epochs 2\n";

int usage_error(const std::string& msg, const char* help_cmd) {
  std::fprintf(stderr, "stallscope: %s (see '%s --help')\n", msg.c_str(), help_cmd);
  return 2;
}

bool parse_uint(const char* s, unsigned* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (*end != '\0' || v == 0 || v > (1ul << 24)) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

int cmd_run(int argc, char** argv) {
  stallscope::RunOptions opt;
  int i = 0;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "-h" || a == "--help") {
      std::printf("%s", kRunHelp);
      return 0;
    }
    if (a == "-q" || a == "--quiet") {
      opt.quiet = true;
    } else if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) return usage_error(a + " needs a file name", "stallscope run");
      opt.output = argv[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      opt.output = a.substr(9);
    } else if (a == "--ring-events" || a == "--rings") {
      unsigned v = 0;
      if (i + 1 >= argc || !parse_uint(argv[i + 1], &v)) return usage_error(a + " needs a positive number", "stallscope run");
      ++i;
      if (a == "--rings") {
        opt.rings = v;
      } else if ((v & (v - 1)) != 0) {
        return usage_error("--ring-events must be a power of two", "stallscope run");
      } else {
        opt.ring_events = v;
      }
    } else {
      return usage_error("unknown option '" + a + "'", "stallscope run");
    }
  }
  for (; i < argc; ++i) opt.command.emplace_back(argv[i]);
  if (opt.command.empty()) return usage_error("run: no program given; usage: stallscope run [-o FILE] -- PROGRAM [ARGS...]", "stallscope run");
  if (opt.output.empty() == false && opt.output.back() == '/') return usage_error("-o needs a file name, not a directory", "stallscope run");
  return stallscope::run_command(opt);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given", "stallscope");
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::printf(kMainHelp, STALLSCOPE_VERSION);
    return 0;
  }
  if (cmd == "-V" || cmd == "--version") {
    std::printf("stallscope %s\n", STALLSCOPE_VERSION);
    return 0;
  }
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "report") return cmd_report(argc - 2, argv + 2);
  if (cmd == "ui") return cmd_ui(argc - 2, argv + 2);
  if (!cmd.empty() && cmd[0] == '-') return usage_error("unknown option '" + cmd + "'", "stallscope");
  return usage_error("unknown command '" + cmd + "'", "stallscope");
}
