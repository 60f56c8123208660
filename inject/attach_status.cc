// The status file a target's Python side reports into; see attach_status.h.
#include "inject/attach_status.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <random>

#include "common/procfs.h"

namespace stallscope::attach {

StatusFile StatusFile::create(pid_t pid) {
  StatusFile f;
  std::random_device rd;
  for (int i = 0; i < 8; ++i) {
    char name[96];
    std::snprintf(name, sizeof name, "/dev/shm/stallscope-attach-%d-%08x", static_cast<int>(pid), rd());
    const int fd = ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      f.path_ = name;
      break;
    }
  }
  return f;
}

StatusFile& StatusFile::operator=(StatusFile&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

std::string StatusFile::read() const { return procfs::read_file(path_, 4096); }

std::string StatusFile::wait(int timeout_ms, pid_t pid) const {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    std::string s = read();
    if (!s.empty()) return s;
    if (!procfs::alive(pid)) return {};
    timespec ts{0, 20 * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
  return {};
}

void StatusFile::clear() {
  if (!path_.empty() && ::truncate(path_.c_str(), 0) != 0) {
    // a stale report would only make the next wait() shorter
  }
}

void StatusFile::remove() {
  if (path_.empty()) return;
  ::unlink(path_.c_str());
  path_.clear();
}

}  // namespace stallscope::attach
