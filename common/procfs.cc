// /proc helpers; see procfs.h.
#include "common/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace stallscope::procfs {

std::string path(int pid, const char* what) { return "/proc/" + std::to_string(pid) + "/" + what; }

bool read_file(const std::string& file, std::string* out, size_t max) {
  out->clear();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  while (out->size() < max) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max - out->size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return !out->empty();
}

std::string read_file(const std::string& file, size_t max) {
  std::string s;
  read_file(file, &s, max);
  return s;
}

std::vector<int> pids() {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid > 0 && *end == '\0') out.push_back(static_cast<int>(pid));
  }
  ::closedir(d);
  return out;
}

std::vector<std::string> stat_fields(int pid) {
  const std::string s = read_file(path(pid, "stat"), 4096);
  // "pid (comm) S ...": comm may hold spaces and parentheses, so split after the last ')'.
  const size_t close = s.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream in(s.substr(close + 1));
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

std::string status_field(const std::string& status, const char* key) {
  const std::string k = std::string(key) + ":";
  size_t at = 0;
  while ((at = status.find(k, at)) != std::string::npos) {
    if (at == 0 || status[at - 1] == '\n') {  // a key at the start of a line, not inside a value
      size_t b = at + k.size();
      while (b < status.size() && (status[b] == ' ' || status[b] == '\t')) ++b;
      const size_t e = status.find('\n', b);
      return status.substr(b, e == std::string::npos ? std::string::npos : e - b);
    }
    at += k.size();
  }
  return {};
}

std::string exe(int pid) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path(pid, "exe").c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

char state(int pid) {
  const std::string s = read_file(path(pid, "stat"), 512);
  // "pid (comm) S ...": comm may hold spaces and parentheses, so look after the last ')'.
  const size_t close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}

bool alive(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  const char st = state(pid);
  if (st == '?') return ::kill(pid, 0) == 0 || errno == EPERM;  // /proc hidden from us: trust kill
  return st != 'Z' && st != 'X';
}

std::string cmdline(int pid, size_t max_len) {
  std::string c = read_file(path(pid, "cmdline"), 4096);
  while (!c.empty() && c.back() == '\0') c.pop_back();
  for (char& ch : c) {
    if (ch == '\0') ch = ' ';
  }
  if (c.size() > max_len && max_len > 3) c = c.substr(0, max_len - 3) + "...";
  return c;
}

}  // namespace stallscope::procfs
