// The `stallscope` command: parses the command line and dispatches to the subcommands.
// Usage errors print one line and exit 2; `--help` on every command.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/summary.h"
#include "collector/gpu_choice.h"
#include "inject/attach.h"
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
  "  attach   record a Python training process that is already running (by pid)\n"
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
    "      --gpu SPEC        GPU-side capture (CUPTI): all (default), off, or a comma list of\n"
    "                        kernel, memcpy, memset, sync, calls. CUPTI serves one tool per\n"
    "                        process: use off to profile the GPU with torch.profiler or Nsight\n"
    "                        under stallscope. Also read from STALLSCOPE_GPU.\n"
    "      --ring-events N   events buffered per thread between flushes (power of two, default 16384)\n"
    "      --rings N         threads that can record at once (default 64)\n"
    "  -q, --quiet           print nothing but errors\n"
    "  -h, --help            show this help\n"
    "\n"
    "Example:\n"
    "  stallscope run -o run.db -- python train.py --epochs 2\n"
    "  stallscope run --gpu off -o run.db -- python train_with_torch_profiler.py\n";

constexpr const char* kAttachHelp =
    "Usage: stallscope attach [OPTIONS] PID\n"
    "       stallscope attach --list\n"
    "\n"
    "Records a Python training process that is already running, started without stallscope:\n"
    "loads the collector into it (ptrace), installs the DataLoader hooks, including on the\n"
    "iterators that run now (followed from their next batch), and records into a session\n"
    "database until the process exits, the duration is up, or Ctrl-C. Ctrl-C detaches: the\n"
    "process goes on, unrecorded. Worker processes that exist already are sampled (CPU, run\n"
    "queue, memory); batch events come from the workers started after the attach.\n"
    "\n"
    "Needs permission to trace PID: the same user (root with kernel.yama.ptrace_scope >= 1).\n"
    "x86-64 Linux; GPU capture (CUPTI, NVTX) needs `stallscope run`.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     database to write (default: stallscope-PROG-YYYYmmdd-HHMMSS.db here)\n"
    "  -d, --duration SEC    detach after SEC seconds (default: until the process exits or Ctrl-C)\n"
    "      --ring-events N   events buffered per thread between flushes (power of two, default 16384)\n"
    "      --rings N         threads that can record at once (default 64)\n"
    "  -q, --quiet           print nothing but errors\n"
    "  -l, --list            list the Python processes with torch loaded (to find PID), and exit\n"
    "  -h, --help            show this help\n"
    "\n"
    "Example:\n"
    "  stallscope attach -o late.db --duration 60 $(pgrep -f train.py)\n";

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
  const char* gpu_env = std::getenv("STALLSCOPE_GPU");
  std::string gpu = gpu_env != nullptr ? gpu_env : "";
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
    } else if (a == "--gpu" || a.rfind("--gpu=", 0) == 0) {
      if (a == "--gpu" && i + 1 >= argc)
        return usage_error(std::string("--gpu needs ") + stallscope::kGpuChoiceHelp, "stallscope run");
      gpu = a == "--gpu" ? argv[++i] : a.substr(6);
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
  stallscope::GpuChoice choice;
  std::string bad;
  if (!stallscope::parse_gpu_choice(gpu, &choice, &bad)) {
    return usage_error(
        "--gpu (or STALLSCOPE_GPU) '" + gpu + "': unknown item '" + bad + "'; use " + stallscope::kGpuChoiceHelp,
        "stallscope run");
  }
  if (!gpu.empty()) ::setenv("STALLSCOPE_GPU", gpu.c_str(), 1);  // the program's processes read it
  opt.summary = print_summary;
  return stallscope::run_command(opt);
}

int cmd_attach(int argc, char** argv) {
  stallscope::AttachOptions opt;
  std::string pid_arg;
  bool list = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kAttachHelp);
      return 0;
    }
    if (a == "-l" || a == "--list") {
      list = true;
    } else if (a == "-q" || a == "--quiet") {
      opt.quiet = true;
    } else if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) return usage_error(a + " needs a file name", "stallscope attach");
      opt.output = argv[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      opt.output = a.substr(9);
    } else if (a == "-d" || a == "--duration") {
      char* end = nullptr;
      const double v = i + 1 < argc ? std::strtod(argv[i + 1], &end) : 0;
      if (i + 1 >= argc || end == argv[i + 1] || *end != '\0' || !(v > 0) || v > 1e7) {
        return usage_error(a + " needs a number of seconds above 0", "stallscope attach");
      }
      opt.duration_s = v;
      ++i;
    } else if (a == "--ring-events" || a == "--rings") {
      unsigned v = 0;
      if (i + 1 >= argc || !parse_uint(argv[i + 1], &v)) return usage_error(a + " needs a positive number", "stallscope attach");
      ++i;
      if (a == "--rings") {
        opt.rings = v;
      } else if ((v & (v - 1)) != 0) {
        return usage_error("--ring-events must be a power of two", "stallscope attach");
      } else {
        opt.ring_events = v;
      }
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option '" + a + "'", "stallscope attach");
    } else if (!pid_arg.empty()) {
      return usage_error("one process id only (got '" + pid_arg + "' and '" + a + "')", "stallscope attach");
    } else {
      pid_arg = a;
    }
  }
  if (list) {
    if (!pid_arg.empty()) return usage_error("--list takes no process id", "stallscope attach");
    return stallscope::attach_list();
  }
  if (pid_arg.empty()) {
    return usage_error("attach: no process id given; usage: stallscope attach [-o FILE] PID (find it with --list)",
                       "stallscope attach");
  }
  char* end = nullptr;
  const long pid = std::strtol(pid_arg.c_str(), &end, 10);
  if (*end != '\0' || pid <= 0 || pid > (1l << 22)) return usage_error("'" + pid_arg + "' is not a process id", "stallscope attach");
  if (!opt.output.empty() && opt.output.back() == '/') return usage_error("-o needs a file name, not a directory", "stallscope attach");
  opt.pid = static_cast<pid_t>(pid);
  opt.summary = print_summary;
  return stallscope::attach_command(opt);
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
  if (cmd == "attach") return cmd_attach(argc - 2, argv + 2);
  if (cmd == "report") return cmd_report(argc - 2, argv + 2);
  if (cmd == "ui") return cmd_ui(argc - 2, argv + 2);
  if (!cmd.empty() && cmd[0] == '-') return usage_error("unknown option '" + cmd + "'", "stallscope");
  return usage_error("unknown command '" + cmd + "'", "stallscope");
}
