// /proc helpers; see procfs.h.
#include "common/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

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
