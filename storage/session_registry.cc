// Session registry; see session_registry.h. One small key=value file per live session; one
// append-only "recent" file of finished recordings (tab-separated: ended, started, path, command).
#include "storage/session_registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/procfs.h"

namespace stallscope {
namespace {

std::string live_file(pid_t pid) { return registry_dir() + "/live-" + std::to_string(pid) + ".session"; }

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s;
}

bool read_entry(const std::string& path, SessionEntry* e) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "pid")
      e->launcher_pid = static_cast<pid_t>(std::atol(v.c_str()));
    else if (k == "db")
      e->db_path = v;
    else if (k == "command")
      e->command = v;
    else if (k == "started")
      e->started_unix = std::atoll(v.c_str());
  }
  return e->launcher_pid > 0 && !e->db_path.empty();
}

}  // namespace

std::string registry_dir() {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  std::string dir =
      (xdg != nullptr && *xdg) ? std::string(xdg) + "/stallscope" : "/tmp/stallscope-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return "";
  struct stat st;
  // Only a folder of our own: another user could have made it to read our command lines.
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) return "";
  return dir;
}

bool register_live_session(const SessionEntry& e) {
  if (registry_dir().empty()) return false;
  const std::string path = live_file(e.launcher_pid);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  std::ostringstream s;
  s << "pid=" << e.launcher_pid << "\ndb=" << one_line(e.db_path) << "\ncommand=" << one_line(e.command)
    << "\nstarted=" << e.started_unix << "\n";
  const std::string text = s.str();
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) ::unlink(path.c_str());
  return ok;
}

void finish_live_session(pid_t launcher_pid, int64_t ended_unix) {
  const std::string path = live_file(launcher_pid);
  SessionEntry e;
  if (!read_entry(path, &e)) return;
  ::unlink(path.c_str());
  const std::string recent = registry_dir() + "/recent";
  int fd = ::open(recent.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string line =
      std::to_string(ended_unix) + "\t" + std::to_string(e.started_unix) + "\t" + e.db_path + "\t" + e.command + "\n";
  (void)!::write(fd, line.data(), line.size());
  ::close(fd);
}

std::vector<SessionEntry> list_live_sessions() {
  std::vector<SessionEntry> out;
  const std::string dir = registry_dir();
  if (dir.empty()) return out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name.rfind("live-", 0) != 0) continue;
    SessionEntry e;
    const std::string path = dir + "/" + name;
    if (!read_entry(path, &e)) continue;
    if (!procfs::alive(e.launcher_pid)) {
      ::unlink(path.c_str());  // the launcher was killed: not live any more
      continue;
    }
    out.push_back(e);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const SessionEntry& a, const SessionEntry& b) { return a.started_unix > b.started_unix; });
  return out;
}

std::vector<SessionEntry> list_recent_sessions(size_t limit) {
  std::vector<SessionEntry> all;
  std::ifstream f(registry_dir() + "/recent");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    SessionEntry e;
    std::string ended, started;
    if (!std::getline(s, ended, '\t') || !std::getline(s, started, '\t') || !std::getline(s, e.db_path, '\t')) continue;
    std::getline(s, e.command);
    e.ended_unix = std::atoll(ended.c_str());
    e.started_unix = std::atoll(started.c_str());
    struct stat st;
    if (::stat(e.db_path.c_str(), &st) != 0) continue;
    all.push_back(e);
  }
  std::reverse(all.begin(), all.end());
  std::vector<SessionEntry> out;
  for (const SessionEntry& e : all) {
    if (out.size() >= limit) break;
    if (std::none_of(out.begin(), out.end(), [&](const SessionEntry& o) { return o.db_path == e.db_path; })) {
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace stallscope
