// Tests for the /proc sampler: parsers on fixed texts, and real processes whose CPU use and
// memory growth are known by construction.
#include "collector/proc_sampler.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "collector/clock.h"

namespace stallscope {
namespace {

TEST(ProcSamplerTest, Parsers) {
  uint64_t a = 0, b = 0;
  EXPECT_TRUE(ProcSampler::parse_schedstat("145197 3021561 2\n", &a, &b));
  EXPECT_EQ(a, 145197u);
  EXPECT_EQ(b, 3021561u);
  EXPECT_FALSE(ProcSampler::parse_schedstat("garbage", &a, &b));
  EXPECT_TRUE(ProcSampler::parse_status_ctxsw(
      "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n", &a, &b));
  EXPECT_EQ(a, 12u);
  EXPECT_EQ(b, 3u);
  EXPECT_TRUE(ProcSampler::parse_smaps_rollup(
      "55a-7ff ---p 0 00:00 0 [rollup]\nRss: 1684 kB\nPss:  269 kB\nPss_Dirty: 112 kB\nPrivate_Dirty: 112 kB\n", &a,
      &b));
  EXPECT_EQ(a, 269u * 1024);  // Pss, not Pss_Dirty
  EXPECT_EQ(b, 112u * 1024);
  EXPECT_TRUE(ProcSampler::parse_io_rchar("rchar: 6976\nwchar: 0\n", &a));
  EXPECT_EQ(a, 6976u);
}

pid_t spawn_child(void (*body)()) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  return pid;
}

// A child that has started: it says so over a pipe before its body runs, so that the faults of its
// start (its first writes to the pages it shares with this process since the fork) come before
// the caller's first sample, not inside the measured interval.
pid_t spawn_started_child(void (*body)()) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const char one = 1;
    if (write(fds[1], &one, 1) != 1) _exit(1);
    close(fds[1]);
    body();
    _exit(0);
  }
  close(fds[1]);
  char got = 0;
  while (read(fds[0], &got, 1) < 0 && errno == EINTR) {
  }
  close(fds[0]);
  return pid;
}

void spin_forever() {
  volatile uint64_t x = 0;
  for (;;) x = x + 1;
}

void sleep_forever() {
  for (;;) pause();
}

void fault_forever() {
  // What an allocator that hands big blocks back to the kernel does every step: map 16 MiB, write
  // every page (a minor fault and a zero-filled page each), unmap.
  const size_t n = 16 << 20;
  for (;;) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) _exit(1);
    memset(p, 1, n);
    munmap(p, n);
  }
}

void grow_memory() {
  // Touch 64 MiB of fresh private memory over ~0.6 s, then wait.
  for (int i = 0; i < 16; ++i) {
    char* p = static_cast<char*>(malloc(4 << 20));
    memset(p, 1, 4 << 20);
    usleep(40000);
  }
  for (;;) pause();
}

TEST(ProcSamplerTest, CpuOfABusyAndAnIdleProcess) {
  pid_t busy = spawn_child(spin_forever);
  pid_t idle = spawn_child(sleep_forever);
  ProcSampler s(1.0, 0);  // memory at every sample
  s.sample({busy, idle}, monotonic_ns());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto out = s.sample({busy, idle}, monotonic_ns());
  kill(busy, SIGKILL);
  kill(idle, SIGKILL);
  waitpid(busy, nullptr, 0);
  waitpid(idle, nullptr, 0);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].cpu_cores && out[1].cpu_cores);
  // A spinning process gets most of a core even on a loaded 2-core machine (run-queue wait fills
  // the rest); an idle one gets none.
  EXPECT_GT(*out[0].cpu_cores + *out[0].runq_wait_ratio, 0.8);
  EXPECT_LT(*out[0].cpu_cores + *out[0].runq_wait_ratio, 1.2);
  EXPECT_LT(*out[1].cpu_cores, 0.05);
  EXPECT_GT(out[0].rss_bytes, 0u);
  // Gone processes are skipped.
  EXPECT_TRUE(s.sample({busy}, monotonic_ns()).empty());
}

TEST(ProcSamplerTest, StartTimeParser) {
  uint64_t t = 0;
  // comm with spaces and a ')' of its own; starttime is the 22nd field.
  EXPECT_TRUE(ProcSampler::parse_stat_starttime(
      "4242 (a b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 3 1 0 0 20 0 1 0 987654 1000 200 18446744073709551615\n",
      &t));
  EXPECT_EQ(t, 987654u);
  EXPECT_FALSE(ProcSampler::parse_stat_starttime("4242 (x) S 1 2 3\n", &t));
  EXPECT_FALSE(ProcSampler::parse_stat_starttime("no parenthesis", &t));
}

TEST(ProcSamplerTest, StatFaultsParser) {
  uint64_t minflt = 0, stime = 0;
  // minflt is the 10th field, stime the 15th; comm may hold spaces and ')'.
  EXPECT_TRUE(ProcSampler::parse_stat_faults(
      "4242 (a b) c) S 1 4242 4242 0 -1 4194560 123456 7 8 9 300 41 0 0 20 0 1 0 987654 1000 200\n", &minflt, &stime));
  EXPECT_EQ(minflt, 123456u);
  EXPECT_EQ(stime, 41u);
  EXPECT_FALSE(ProcSampler::parse_stat_faults("4242 (x) S 1 2 3 4 5 6 7\n", &minflt, &stime));
  EXPECT_FALSE(ProcSampler::parse_stat_faults("no parenthesis", &minflt, &stime));
}

TEST(ProcSamplerTest, FaultsAndKernelCpuOfAProcessThatMapsFreshPages) {
  pid_t faulting = spawn_child(fault_forever);
  pid_t idle = spawn_started_child(sleep_forever);
  ProcSampler s(1.0, 0);
  s.sample({faulting, idle}, monotonic_ns());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  auto out = s.sample({faulting, idle}, monotonic_ns());
  kill(faulting, SIGKILL);
  kill(idle, SIGKILL);
  waitpid(faulting, nullptr, 0);
  waitpid(idle, nullptr, 0);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].minor_faults_per_s && out[0].sys_cpu_cores && out[0].cpu_cores);
  ASSERT_TRUE(out[1].minor_faults_per_s && out[1].sys_cpu_cores);
  // 4096 faults per 16 MiB mapped; even a slow machine maps several a second.
  EXPECT_GT(*out[0].minor_faults_per_s, 8000.0);
  // Nearly all its CPU is the kernel's (zero-filling the pages), never more than all of it.
  EXPECT_GT(*out[0].sys_cpu_cores, 0.3 * *out[0].cpu_cores);
  EXPECT_LT(*out[0].sys_cpu_cores, *out[0].cpu_cores + 0.1);  // stime has a 10 ms grain
  EXPECT_LT(*out[1].minor_faults_per_s, 50.0);
  EXPECT_LT(*out[1].sys_cpu_cores, 0.05);
}

TEST(ProcSamplerTest, YoungProcessGetsRatesOnItsFirstSample) {
  // A process seen once, 300 ms after its birth, must still get CPU and run-queue figures: a
  // DataLoader worker can live less than two sampling intervals.
  pid_t busy = spawn_child(spin_forever);
  pid_t idle = spawn_child(sleep_forever);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ProcSampler s(1.0, 0);
  auto out = s.sample({busy, idle, 1}, monotonic_ns());
  kill(busy, SIGKILL);
  kill(idle, SIGKILL);
  waitpid(busy, nullptr, 0);
  waitpid(idle, nullptr, 0);
  ASSERT_EQ(out.size(), 3u);
  ASSERT_TRUE(out[0].cpu_cores && out[0].runq_wait_ratio);
  EXPECT_GT(*out[0].cpu_cores + *out[0].runq_wait_ratio, 0.8);
  EXPECT_LT(*out[0].cpu_cores + *out[0].runq_wait_ratio, 1.2);
  ASSERT_TRUE(out[1].cpu_cores);
  EXPECT_LT(*out[1].cpu_cores, 0.05);
  // pid 1 has run since boot: a lifetime average would say nothing about now, so no rate.
  EXPECT_FALSE(out[2].cpu_cores);
  EXPECT_FALSE(out[2].runq_wait_ratio);
}

void spin_in_a_late_thread() {
  usleep(150000);
  std::thread t(spin_forever);
  t.detach();
  for (;;) pause();
}

TEST(ProcSamplerTest, AThreadListedLateDoesNotSpike) {
  // Threads are listed once a second: a thread born just after a listing is first seen with most
  // of a second of CPU behind it. Its counters must be spread over its life, not put in the one
  // interval where it was found: a spinning thread is one core, never several.
  pid_t pid = spawn_child(spin_in_a_late_thread);
  ProcSampler s(1.0, 1000000000000ull);
  std::vector<double> cpu, demand;  // demand: CPU + run-queue wait (a spinning thread: ~1 core)
  for (int i = 0; i < 14; ++i) {
    auto out = s.sample({pid}, monotonic_ns());
    if (!out.empty() && out[0].cpu_cores && out[0].runq_wait_ratio) {
      cpu.push_back(*out[0].cpu_cores);
      demand.push_back(*out[0].cpu_cores + *out[0].runq_wait_ratio);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_GE(cpu.size(), 12u);
  const double peak = *std::max_element(demand.begin(), demand.end());
  EXPECT_LT(peak, 1.3) << "a late-listed thread's whole life counted in one interval";
  EXPECT_GT(demand.back(), 0.8);  // tracked since it was listed, whatever the machine's load
}

TEST(ProcSamplerTest, PrivateDirtyGrowth) {
  pid_t pid = spawn_child(grow_memory);
  ProcSampler s(1.0, 0);  // memory at every sample
  auto first = s.sample({pid}, monotonic_ns());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto last = s.sample({pid}, monotonic_ns());
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(last.size(), 1u);
  ASSERT_TRUE(first[0].private_dirty_bytes && last[0].private_dirty_bytes);
  const int64_t growth =
      static_cast<int64_t>(*last[0].private_dirty_bytes) - static_cast<int64_t>(*first[0].private_dirty_bytes);
  EXPECT_GT(growth, 60ll << 20);
  EXPECT_LT(growth, 72ll << 20);
}

}  // namespace
}  // namespace stallscope
