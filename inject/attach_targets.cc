// Which processes attach can record: `attach --list`, attach_precheck, the processes a training
// process started; see attach_targets.h.
#include "inject/attach_targets.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "common/procfs.h"
#include "inject/attach.h"

namespace stallscope {
namespace attach {

bool is_python(pid_t pid) {
  std::string name = procfs::exe(pid);
  name = name.substr(name.rfind('/') + 1);
  return name.rfind("python", 0) == 0 ||
         procfs::read_file(procfs::path(pid, "maps"), 64 << 20).find("libpython") != std::string::npos;
}

std::vector<std::pair<pid_t, pid_t>> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const int pid : procfs::pids()) {
    const std::vector<std::string> stat = procfs::stat_fields(pid);
    if (stat.size() >= 2) children.emplace(static_cast<pid_t>(std::atoi(stat[1].c_str())), static_cast<pid_t>(pid));
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

bool worker_candidate(pid_t pid) {
  const std::string cmd = procfs::cmdline(pid);
  if (cmd.find("multiprocessing.resource_tracker") != std::string::npos ||
      cmd.find("multiprocessing.forkserver import main") != std::string::npos ||
      cmd.find("multiprocessing.semaphore_tracker") != std::string::npos) {
    return false;
  }
  return is_python(pid);
}

}  // namespace attach

namespace {

// A Python process with torch loaded: what `attach --list` shows.
bool has_torch(pid_t pid, std::string* maps) {
  if (!attach::is_python(pid)) return false;
  *maps = procfs::read_file(procfs::path(pid, "maps"), 64 << 20);
  return maps->find("libtorch") != std::string::npos;
}

// Whether `pid`, a child of `ppid`, looks like one of its DataLoader workers: forked (the same
// command line) or started by multiprocessing (spawn, forkserver).
bool looks_like_worker(pid_t pid, pid_t ppid) {
  const std::string cmd = procfs::read_file(procfs::path(pid, "cmdline"), 8192);
  if (cmd == procfs::read_file(procfs::path(ppid, "cmdline"), 8192)) return true;
  return cmd.find("multiprocessing.spawn") != std::string::npos ||
         cmd.find("multiprocessing.forkserver") != std::string::npos;
}

std::string age_text(double age_s) {
  char age[32];
  if (age_s >= 3600) {
    std::snprintf(age, sizeof age, "%.1f h", age_s / 3600);
  } else if (age_s >= 60) {
    std::snprintf(age, sizeof age, "%.0f min", age_s / 60);
  } else {
    std::snprintf(age, sizeof age, "%.0f s", age_s);
  }
  return age;
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
  for (const int pid : procfs::pids()) {
    if (pid == ::getpid()) continue;
    struct stat st;
    if (::stat(procfs::path(pid, "").c_str(), &st) != 0) continue;
    if (::geteuid() != 0 && st.st_uid != ::geteuid()) continue;
    std::string maps;
    if (!has_torch(pid, &maps)) continue;
    const std::vector<std::string> fields = procfs::stat_fields(pid);
    if (fields.size() < 20) continue;
    // A DataLoader worker is shown under its training process, not alone: a child of a process
    // with torch loaded that runs the same command (forked) or multiprocessing's spawn entry.
    // Other children of a torch process are training processes of their own (torchrun's ranks,
    // a script started from a notebook or a test runner).
    const pid_t ppid = static_cast<pid_t>(std::atoi(fields[1].c_str()));
    std::string parent_maps;
    if (has_torch(ppid, &parent_maps) && looks_like_worker(pid, ppid)) continue;
    const double start_s =
        static_cast<double>(std::strtoull(fields[19].c_str(), nullptr, 10)) / static_cast<double>(ticks);
    rows.push_back(Row{pid, attach::descendants(pid).size(), uptime - start_s,
                       maps.find("libstallscope.so") != std::string::npos, procfs::cmdline(pid)});
  }
  if (rows.empty()) {
    std::fprintf(stderr, "stallscope: no Python process with torch loaded%s\n",
                 ::geteuid() == 0 ? "" : " among this user's processes");
    return 0;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.pid < b.pid; });
  std::printf("%8s %9s %9s  %s\n", "PID", "CHILDREN", "RUNNING", "COMMAND");
  for (const Row& r : rows) {
    std::printf("%8d %9zu %9s  %s%s\n", static_cast<int>(r.pid), r.children, age_text(r.age_s).c_str(), r.cmd.c_str(),
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
  const std::string state = procfs::status_field(status, "State");
  if (!state.empty() && (state[0] == 'Z' || state[0] == 'X')) return "process " + p + " has already exited";
  if (!state.empty() && (state[0] == 'T' || state[0] == 't')) {
    return "process " + p + " is stopped; continue it first (kill -CONT " + p + ")";
  }
  const int tracer = std::atoi(procfs::status_field(status, "TracerPid").c_str());
  if (tracer != 0) {
    return "process " + p + " is already traced by process " + std::to_string(tracer) +
           " (a debugger, py-spy or another attach?); detach that first";
  }
  if (::geteuid() != 0 && st.st_uid != ::geteuid()) {
    return "process " + p + " belongs to another user (uid " + std::to_string(st.st_uid) +
           "); run stallscope attach as that user";
  }
  if (!attach::is_python(pid)) {
    return "process " + p + " (" + procfs::cmdline(pid) +
           ") is not a Python program; stallscope attach records Python training processes";
  }
  return {};
}

}  // namespace stallscope
