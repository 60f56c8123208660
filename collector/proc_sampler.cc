// The /proc sampler; see proc_sampler.h.
#include "collector/proc_sampler.h"

#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "collector/clock.h"
#include "common/procfs.h"

namespace stallscope {
namespace {

// Value of "Key:   123 kB" lines (in bytes when the unit is kB).
bool field_value(const std::string& text, const char* key, uint64_t* out) {
  const size_t klen = std::strlen(key);
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, klen, key) == 0 && pos + klen < text.size() && text[pos + klen] == ':') {
      const char* p = text.c_str() + pos + klen + 1;
      char* end = nullptr;
      const unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) return false;
      while (*end == ' ' || *end == '\t') ++end;
      *out = std::strncmp(end, "kB", 2) == 0 ? v * 1024 : v;
      return true;
    }
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return false;
}

}  // namespace

bool ProcSampler::parse_stat_starttime(const std::string& text, uint64_t* ticks) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count from the last ')'.
  // starttime is field 22; the state after ')' is field 3.
  const size_t rp = text.rfind(')');
  if (rp == std::string::npos) return false;
  const char* p = text.c_str() + rp + 1;
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    while (*p != ' ' && *p != '\0') ++p;
  }
  while (*p == ' ') ++p;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(p, &end, 10);
  if (end == p) return false;
  *ticks = v;
  return true;
}

bool ProcSampler::parse_stat_faults(const std::string& text, uint64_t* minflt, uint64_t* stime_ticks) {
  // Fields counted from the state after the last ')' (field 3), as in parse_stat_starttime.
  const size_t rp = text.rfind(')');
  if (rp == std::string::npos) return false;
  const char* p = text.c_str() + rp + 1;
  bool have_minflt = false;
  for (int field = 3; field <= 15; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return false;
    if (field == 10 || field == 15) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) return false;
      (field == 10 ? *minflt : *stime_ticks) = v;
      have_minflt |= field == 10;
      p = end;
      continue;
    }
    while (*p != ' ' && *p != '\0') ++p;
  }
  return have_minflt;
}

bool ProcSampler::parse_schedstat(const std::string& text, uint64_t* run_ns, uint64_t* wait_ns) {
  unsigned long long r = 0, w = 0;
  if (std::sscanf(text.c_str(), "%llu %llu", &r, &w) != 2) return false;
  *run_ns = r;
  *wait_ns = w;
  return true;
}

bool ProcSampler::parse_status_ctxsw(const std::string& text, uint64_t* voluntary, uint64_t* involuntary) {
  return field_value(text, "voluntary_ctxt_switches", voluntary) &&
         field_value(text, "nonvoluntary_ctxt_switches", involuntary);
}

bool ProcSampler::parse_smaps_rollup(const std::string& text, uint64_t* pss, uint64_t* private_dirty) {
  return field_value(text, "Pss", pss) && field_value(text, "Private_Dirty", private_dirty);
}

bool ProcSampler::parse_status_rss(const std::string& text, uint64_t* rss) { return field_value(text, "VmRSS", rss); }

bool ProcSampler::parse_io_rchar(const std::string& text, uint64_t* rchar) { return field_value(text, "rchar", rchar); }

namespace {

// Seconds since the process or thread whose stat file is `path` started; -1 if unknown.
double age_s(const char* path, std::string* text) {
  static const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
  uint64_t start_ticks = 0;
  if (ticks_per_s <= 0 || !procfs::read_file(path, text) || !ProcSampler::parse_stat_starttime(*text, &start_ticks))
    return -1;
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);  // starttime counts from boot, suspend included
  const double now_s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  return now_s - static_cast<double>(start_ticks) / static_cast<double>(ticks_per_s);
}

}  // namespace

double ProcSampler::young_age_s(int pid) const {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::string text;
  const double age = age_s(path, &text);
  return age >= young_min_s_ && age <= young_max_s_ ? age : 0;
}

std::vector<ProcSample> ProcSampler::sample(const std::vector<int>& pids, uint64_t now_ns) {
  std::vector<ProcSample> out;
  std::set<int> wanted(pids.begin(), pids.end());
  for (auto it = prev_.begin(); it != prev_.end();) it = wanted.count(it->first) ? std::next(it) : prev_.erase(it);

  std::string text;
  char path[96];
  for (int pid : pids) {
    // status: the process's liveness, RSS and context switches in one read.
    std::snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (!procfs::read_file(path, &text)) {
      prev_.erase(pid);
      continue;  // gone
    }
    ProcSample s;
    s.pid = pid;
    s.mono_ns = now_ns;
    parse_status_rss(text, &s.rss_bytes);
    Prev& p = prev_[pid];
    const bool first = p.count == 0;
    double dt = first ? 0.0 : static_cast<double>(now_ns - p.mono_ns) / 1e9;
    // A process born moments ago (a DataLoader worker, say) gets rates since its birth on its first
    // sample: its counters all started at zero then. Without this, a worker that lives less than
    // two sampling intervals would have no CPU or run-queue figures at all.
    const double age = first ? young_age_s(pid) : 0.0;
    const bool from_birth = age > 0;
    if (from_birth) dt = age;
    uint64_t v = 0, iv = 0;
    if (parse_status_ctxsw(text, &v, &iv)) {
      if ((p.have_ctx || from_birth) && dt > 0) {
        s.ctxsw_voluntary = static_cast<double>(v - std::min(v, p.vcsw)) / dt;
        s.ctxsw_involuntary = static_cast<double>(iv - std::min(iv, p.ivcsw)) / dt;
      }
      p.vcsw = v;
      p.ivcsw = iv;
      p.have_ctx = true;
    }

    // CPU and run-queue wait: per thread, so that threads that come and go do not skew the sum.
    if (p.count % kListEvery == 0) {
      p.tids.clear();
      std::snprintf(path, sizeof path, "/proc/%d/task", pid);
      if (DIR* d = ::opendir(path)) {
        while (dirent* e = ::readdir(d)) {
          if (e->d_name[0] >= '0' && e->d_name[0] <= '9') p.tids.push_back(std::atoi(e->d_name));
        }
        ::closedir(d);
      }
    }
    std::map<int, std::pair<uint64_t, uint64_t>> tasks;
    uint64_t run_delta = 0, wait_delta = 0;
    bool sched = false;  // some thread's schedstat was read (a kernel without schedstat has none)
    for (int tid : p.tids) {
      char tpath[128];
      std::snprintf(tpath, sizeof tpath, "/proc/%d/task/%d/schedstat", pid, tid);
      uint64_t run = 0, wait = 0;
      if (!procfs::read_file(tpath, &text) || !parse_schedstat(text, &run, &wait)) continue;  // thread ended
      sched = true;
      tasks[tid] = {run, wait};
      auto old = p.tasks.find(tid);
      if (old != p.tasks.end()) {
        run_delta += run >= old->second.first ? run - old->second.first : 0;
        wait_delta += wait >= old->second.second ? wait - old->second.second : 0;
      } else if (from_birth) {
        run_delta += run;  // the process is young: everything since its birth
        wait_delta += wait;
      } else if (!first) {
        // A thread listed for the first time (threads are listed once a second): its counters
        // cover its whole life, which may be longer than this interval. Counting them all here
        // made spikes of several cores (a multiprocessing queue's feeder thread, say); only the
        // share of its life inside the interval is counted, at its average rate.
        std::string stat;
        std::snprintf(tpath, sizeof tpath, "/proc/%d/task/%d/stat", pid, tid);
        const double life = age_s(tpath, &stat);
        const double share = life > dt && dt > 0 ? dt / life : 1.0;
        run_delta += static_cast<uint64_t>(static_cast<double>(run) * share);
        wait_delta += static_cast<uint64_t>(static_cast<double>(wait) * share);
      }
    }
    if ((!first || from_birth) && dt > 0 && sched) {
      s.cpu_cores = static_cast<double>(run_delta) / 1e9 / dt;
      s.runq_wait_ratio = static_cast<double>(wait_delta) / 1e9 / dt;
    }
    p.tasks = std::move(tasks);

    std::snprintf(path, sizeof path, "/proc/%d/io", pid);
    uint64_t rchar = 0;
    if (procfs::read_file(path, &text) && parse_io_rchar(text, &rchar)) {
      if ((p.have_io || from_birth) && dt > 0)
        s.read_bytes_per_s = static_cast<double>(rchar - std::min(rchar, p.rchar)) / dt;
      p.rchar = rchar;
      p.have_io = true;
    }

    // Minor page faults and kernel CPU: a process whose allocator hands big blocks back to the kernel
    // gets them back zero-filled, a fault per page, every step (docs/report.md, "Page faults in the training step").
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    uint64_t minflt = 0, stime = 0;
    if (procfs::read_file(path, &text) && parse_stat_faults(text, &minflt, &stime)) {
      static const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
      if ((p.have_stat || from_birth) && dt > 0 && ticks_per_s > 0) {
        s.minor_faults_per_s = static_cast<double>(minflt - std::min(minflt, p.minflt)) / dt;
        s.sys_cpu_cores = static_cast<double>(stime - std::min(stime, p.stime)) / static_cast<double>(ticks_per_s) / dt;
      }
      p.minflt = minflt;
      p.stime = stime;
      p.have_stat = true;
    }

    if (now_ns >= p.next_memory_ns) {
      std::snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
      uint64_t pss = 0, pd = 0;
      const uint64_t t0 = monotonic_ns();
      if (procfs::read_file(path, &text) && parse_smaps_rollup(text, &pss, &pd)) {
        s.pss_bytes = pss;
        s.private_dirty_bytes = pd;
      }
      // Every process is read about as often, so the whole set costs n x cost per interval.
      const double cost = static_cast<double>(monotonic_ns() - t0);
      const uint64_t interval = static_cast<uint64_t>(cost * static_cast<double>(pids.size()) / memory_budget_);
      p.next_memory_ns = now_ns + std::max(memory_min_interval_ns_, interval);
    }
    p.mono_ns = now_ns;
    ++p.count;
    out.push_back(s);
  }
  return out;
}

}  // namespace stallscope
