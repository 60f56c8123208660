// End-of-run summary; see summary.h.
//
// The analysis runs in a child process with a memory budget and a time limit. The launcher itself
// must end the way the program ended: analysing a long run's recording (tens of millions of
// events) takes gigabytes and minutes, and an out-of-memory kill of the launcher at that moment
// would replace the program's exit status with the launcher's SIGKILL. The child's summary is
// printed whole or not at all, with one line saying why not.
#include "cli/summary.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "analysis/report.h"
#include "analysis/session.h"
#include "storage/reader.h"

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // their allocators reserve and map memory of their own
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

constexpr int kOutOfMemory = 3;  // the child's exit status when the budget ran out

double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return *end == '\0' && d > 0 ? d : fallback;
}

uint64_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// The memory the analysis may take beyond what the process maps already: STALLSCOPE_SUMMARY_BUDGET_MB,
// else half of what the machine has available, at most 4 GiB.
uint64_t budget_bytes() {
  const double mb = env_number("STALLSCOPE_SUMMARY_BUDGET_MB", 0);
  if (mb > 0) return static_cast<uint64_t>(mb * 1024 * 1024);
  const uint64_t avail = mem_available();
  return std::min<uint64_t>(uint64_t{4} << 30, avail ? avail / 2 : uint64_t{1} << 30);
}

// The process's data size (VmData: private writable memory, the heap included), which
// RLIMIT_DATA bounds. Unlike the address space, it does not count what malloc has reserved but not
// yet made writable, so the budget is what the analysis can really take.
uint64_t data_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmData:") {
      uint64_t kib = 0;
      f >> kib;
      return kib * 1024;
    }
    f.ignore(1 << 12, '\n');
  }
  return 0;
}

[[noreturn]] void child(int out, const std::string& db_path, uint64_t budget) {
  if (!kSanitized) {
    const rlim_t cap = static_cast<rlim_t>(data_bytes() + budget);
    struct rlimit lim = {cap, cap};
    ::setrlimit(RLIMIT_DATA, &lim);
  }
  int code = 0;
  try {
    // A long run's latest part, as `stallscope report` reads it: memory that does not grow with
    // the length of the run.
    auto session = [&]() -> stallscope::Result<stallscope::analysis::Session> {
      auto reader = stallscope::Reader::open(db_path);
      if (!reader.ok()) return reader.status();
      auto from = stallscope::analysis::choose_detail_from(**reader, {});
      if (!from.ok()) return from.status();
      stallscope::analysis::LoadOptions options;
      options.detail_from_ns = *from;
      return stallscope::analysis::load_session(**reader, options);
    }();
    if (session.ok()) {
      const std::string text = stallscope::analysis::short_summary(stallscope::analysis::analyze(*session));
      for (size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(out, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
    } else if (session.status().message().find("out of memory") != std::string::npos) {
      code = kOutOfMemory;  // SQLite's SQLITE_NOMEM
    }
  } catch (const std::bad_alloc&) {
    code = kOutOfMemory;
  } catch (...) {
    code = 1;
  }
  ::_exit(code);
}

}  // namespace

void print_summary(const std::string& db_path) {
  const uint64_t budget = budget_bytes();
  const double timeout_s = env_number("STALLSCOPE_SUMMARY_TIMEOUT_S", 60);
  std::fflush(stderr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], db_path, budget);
  }
  ::close(fds[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (r == 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child is done
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool clean = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (clean) {
    std::fputs(text.c_str(), stderr);
  } else if (timed_out) {
    std::fprintf(stderr,
                 "stallscope: no summary: analysing the recording took longer than %g s "
                 "(STALLSCOPE_SUMMARY_TIMEOUT_S); run `stallscope report %s`\n",
                 timeout_s, db_path.c_str());
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kOutOfMemory) {
    std::fprintf(stderr,
                 "stallscope: no summary: analysing the recording needs more than %llu MiB here "
                 "(STALLSCOPE_SUMMARY_BUDGET_MB); run `stallscope report %s`\n",
                 static_cast<unsigned long long>(budget >> 20), db_path.c_str());
  } else {
    std::fprintf(stderr, "stallscope: no summary: the analysis failed; run `stallscope report %s`\n", db_path.c_str());
  }
}
