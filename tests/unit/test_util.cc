// Test helpers; see test_util.h.
#include "tests/unit/test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace stallscope::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/stallscope-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) std::abort();
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string unique_name(const std::string& prefix) {
  std::random_device rd;
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

pid_t start_process(const std::vector<std::string>& argv, const std::string& dir,
                    const std::map<std::string, std::string>& env) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(o, 1);
    ::dup2(e, 2);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  return pid;
}

ProcResult wait_process(pid_t pid, int timeout_ms) {
  ProcResult r;
  int status = 0;
  for (int waited = 0;; waited += 10) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (waited >= timeout_ms) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    ::usleep(10000);
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

ProcResult run_process(const std::vector<std::string>& argv, int timeout_ms,
                       const std::map<std::string, std::string>& env) {
  TempDir dir;
  pid_t pid = start_process(argv, dir.path(), env);
  ProcResult r = wait_process(pid, timeout_ms);
  r.out = read_file(dir.file("stdout.txt"));
  r.err = read_file(dir.file("stderr.txt"));
  return r;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace stallscope::testing
