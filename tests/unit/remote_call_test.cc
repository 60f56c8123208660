// Tests for the ptrace remote calls behind `stallscope attach`, on real child processes: calls
// run in the stopped thread with their arguments and return values, the thread's interrupted
// system call resumes as if nothing happened, signals that arrive meanwhile are delivered after,
// and a call that never returns is abandoned with the thread put back as it was.
#include "inject/remote_call.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace stallscope {
namespace {

volatile sig_atomic_t g_usr1 = 0;
void on_usr1(int) { g_usr1 = g_usr1 + 1; }

// A child blocked in read() on a pipe. It exits 0 when that read, however interrupted, ends
// with exactly "hello"; 1 on a short or failed read (an EINTR that leaked, for one); with
// SIGUSR1 counted, the count is added as 10 * count.
struct BlockedChild {
  pid_t pid = -1;
  int to_child = -1;

  explicit BlockedChild(bool count_usr1 = false) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(p[1]);
      if (count_usr1) {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = SA_RESTART;
        ::sigaction(SIGUSR1, &sa, nullptr);
      }
      char buf[8] = {};
      const ssize_t n = ::read(p[0], buf, 5);
      int code = (n == 5 && std::memcmp(buf, "hello", 5) == 0) ? 0 : 1;
      code += 10 * static_cast<int>(g_usr1);
      ::_exit(code);
    }
    ::close(p[0]);
    to_child = p[1];
    // Let it reach the read: asleep in the kernel.
    for (int i = 0; i < 200; ++i) {
      char path[64], st[512] = {};
      std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
      FILE* f = std::fopen(path, "r");
      if (f != nullptr) {
        const size_t n = std::fread(st, 1, sizeof st - 1, f);
        std::fclose(f);
        const char* close = n > 0 ? std::strrchr(st, ')') : nullptr;
        if (close != nullptr && close[1] == ' ' && close[2] == 'S') break;
      }
      ::usleep(5000);
    }
    ::usleep(20000);
  }

  // Sends "hello" and returns the child's exit code (-1 if it did not exit normally).
  int finish() {
    if (::write(to_child, "hello", 5) != 5) return -2;
    ::close(to_child);
    int st = 0;
    if (::waitpid(pid, &st, 0) != pid) return -3;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  ~BlockedChild() {
    if (to_child >= 0) ::close(to_child);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

uint64_t fn(const void* f) { return reinterpret_cast<uint64_t>(f); }

TEST(RemoteCallTest, CallsRunInTheStoppedThreadAndItsReadResumes) {
  BlockedChild child;
  ASSERT_GT(child.pid, 0);
  std::string error;
  auto t = RemoteThread::seize(child.pid, &error);
  ASSERT_TRUE(t) << error;

  uint64_t r = 0;
  const uint64_t s = t->push_string("stallscope");
  ASSERT_NE(s, 0u);
  ASSERT_TRUE(t->call(fn(reinterpret_cast<const void*>(&::strlen)), {s}, &r, &error)) << error;
  EXPECT_EQ(r, 10u);

  // Six arguments, through rdi, rsi, rdx, rcx, r8 and r9, into a variadic function.
  char zeros[32] = {};
  const uint64_t buf = t->push(zeros, sizeof zeros);
  const uint64_t fmt = t->push_string("%d-%d-%d");
  ASSERT_TRUE(t->call(fn(reinterpret_cast<const void*>(&::snprintf)), {buf, sizeof zeros, fmt, 7, 8, 9}, &r, &error))
      << error;
  EXPECT_EQ(r, 5u);
  EXPECT_EQ(t->read_string(buf), "7-8-9");

  // The address of the same function, as the attach command computes it for another process.
  EXPECT_EQ(remote_address_of(child.pid, reinterpret_cast<const void*>(&::strlen), &error),
            fn(reinterpret_cast<const void*>(&::strlen)))
      << error;

  ASSERT_TRUE(t->detach(&error)) << error;
  EXPECT_EQ(child.finish(), 0) << "the read the child was blocked in did not resume cleanly";
}

TEST(RemoteCallTest, ASignalThatArrivesDuringACallIsDeliveredAfterTheDetach) {
  BlockedChild child(/*count_usr1=*/true);
  ASSERT_GT(child.pid, 0);
  std::string error;
  auto t = RemoteThread::seize(child.pid, &error);
  ASSERT_TRUE(t) << error;
  ::kill(child.pid, SIGUSR1);
  uint64_t r = 0;
  const uint64_t s = t->push_string("abc");
  ASSERT_TRUE(t->call(fn(reinterpret_cast<const void*>(&::strlen)), {s}, &r, &error)) << error;
  EXPECT_EQ(r, 3u);
  ASSERT_TRUE(t->detach(&error)) << error;
  ::usleep(50000);
  EXPECT_EQ(child.finish(), 10) << "expected the handler to run once and the read to end with \"hello\"";
}

TEST(RemoteCallTest, ACallThatDoesNotReturnIsAbandonedAndTheThreadGoesOn) {
  BlockedChild child;
  ASSERT_GT(child.pid, 0);
  std::string error;
  auto t = RemoteThread::seize(child.pid, &error);
  ASSERT_TRUE(t) << error;
  uint64_t r = 0;
  EXPECT_FALSE(t->call(fn(reinterpret_cast<const void*>(&::sleep)), {60}, &r, &error, 300));
  EXPECT_NE(error.find("did not return"), std::string::npos) << error;
  EXPECT_FALSE(t->attached());
  EXPECT_EQ(child.finish(), 0) << "the thread was not put back as it was";
}

void* volatile g_sink;

// A child that allocates and frees blocks big enough to take malloc's arena lock, all the time,
// with a second thread so that glibc really locks, and a short sleep now and then.
pid_t start_allocating_child() {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::thread idle([] { ::pause(); });
    idle.detach();
    for (unsigned i = 1;; ++i) {
      void* p = std::malloc(2048 + (i * 7919u) % 100000u);
      if (p != nullptr) std::memset(p, 1, 64);
      g_sink = p;  // or the compiler drops the malloc/free pair
      std::free(p);
    }
  }
  ::usleep(100000);
  return pid;
}

// Counts the rounds, of `rounds`, in which a malloc called in the stopped thread returned.
int malloc_rounds(pid_t pid, int rounds, int safe_point_timeout_ms, std::string* error) {
  int ok = 0;
  for (int i = 0; i < rounds; ++i) {
    auto t = RemoteThread::seize(pid, error, safe_point_timeout_ms);
    if (!t) return ok;
    uint64_t p = 0, r = 0;
    if (t->call(fn(reinterpret_cast<const void*>(&::malloc)), {5000}, &p, error, 300) && p != 0 &&
        t->call(fn(reinterpret_cast<const void*>(&::free)), {p}, &r, error, 300)) {
      ++ok;
      t->detach(nullptr);
    }
    ::usleep(2000);
  }
  return ok;
}

TEST(RemoteCallTest, AThreadBusyInMallocIsStoppedWhereMallocIsSafeToCall) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator replaces glibc's malloc, whose locks this test is about";
#endif
  const pid_t pid = start_allocating_child();
  ASSERT_GT(pid, 0);
  std::string error;
  const int ok = malloc_rounds(pid, 8, 2000, &error);
  EXPECT_EQ(ok, 8) << error;
  // The control: stopped wherever it happens to be (mostly inside malloc, holding its lock), the
  // same call hangs in some rounds; each is abandoned and the child goes on.
  std::string unsafe_error;
  const int unsafe_ok = malloc_rounds(pid, 8, 0, &unsafe_error);
  EXPECT_LT(unsafe_ok, 8) << "the child never held malloc's lock: this test shows nothing";
  int st = 0;
  EXPECT_EQ(::waitpid(pid, &st, WNOHANG), 0) << "the child died";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

TEST(RemoteCallTest, SeizingAProcessThatIsNotThereSaysSo) {
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  std::string error;
  EXPECT_FALSE(RemoteThread::seize(gone, &error));
  EXPECT_NE(error.find("no process"), std::string::npos) << error;
}

}  // namespace
}  // namespace stallscope
