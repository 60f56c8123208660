// Usable cores from the affinity mask and the cgroup CPU quota; see cpus.h.
#include "common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/procfs.h"

namespace stallscope::cpus {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::optional<long long> to_int(std::string_view s) {
  s = trim(s);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> ratio(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return static_cast<double>(quota) / static_cast<double>(period);
}

// "/a/b" -> "/a"; "/a" -> "/".
std::string parent(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
}

std::string join(const std::string& root, const std::string& path) { return path == "/" ? root : root + path; }

// The lowest limit `read_level` finds at `path` and at each ancestor up to the mount's root. In a
// container that mounts only its own subtree, the folders of `path` are not there and the walk
// ends at the mount's root, which is the container's cgroup. `read_level` answers nullopt when a
// level has no file, an empty optional when the file says "no limit".
template <typename ReadLevel>
std::optional<double> lowest(const std::string& root, std::string path, ReadLevel read_level) {
  std::optional<double> best;
  for (;;) {
    const std::optional<std::optional<double>> level = read_level(join(root, path));
    if (level && *level && (!best || **level < *best)) best = **level;
    if (path == "/" || path.empty()) break;
    path = parent(path);
  }
  return best;
}

using Level = std::optional<std::optional<double>>;

}  // namespace

std::optional<double> parse_cpu_max(std::string_view text) {
  text = trim(text);
  const size_t space = text.find(' ');
  const std::string_view quota = text.substr(0, space);
  if (quota == "max") return std::nullopt;
  const std::optional<long long> q = to_int(quota);
  if (!q) return std::nullopt;
  long long period = 100000;  // the kernel's default when only the quota was written
  if (space != std::string_view::npos) {
    const std::optional<long long> p = to_int(text.substr(space + 1));
    if (!p) return std::nullopt;
    period = *p;
  }
  return ratio(*q, period);
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
  const std::optional<long long> q = to_int(quota);
  const std::optional<long long> p = to_int(period);
  if (!q || !p) return std::nullopt;
  return ratio(*q, *p);  // -1: no limit
}

CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    // "ID:CONTROLLERS:PATH"; PATH may itself hold ':'.
    const size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, c1);
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path(trim(line.substr(c2 + 1)));
    if (id == "0" && controllers.empty()) {
      out.v2 = path;
      continue;
    }
    std::string_view rest = controllers;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      if (rest.substr(0, comma) == "cpu") {
        out.v1_cpu = path;
        out.v1_dir = std::string(controllers);
        break;
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return out;
}

std::optional<double> cgroup_quota(const std::string& fs_root, const CgroupPaths& paths) {
  std::optional<double> best;
  auto take = [&](std::optional<double> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  if (!paths.v2.empty()) {
    // Unified mode mounts v2 at the root; hybrid mode (v1 controllers beside it) at "unified".
    for (const std::string& root : {fs_root, fs_root + "/unified"}) {
      take(lowest(root, paths.v2, [](const std::string& dir) -> Level {
        std::string text;
        if (!procfs::read_file(dir + "/cpu.max", &text, 256)) return std::nullopt;
        return Level(std::in_place, parse_cpu_max(text));
      }));
    }
  }
  if (!paths.v1_cpu.empty()) {
    // Distributions mount the v1 cpu hierarchy as "cpu,cpuacct" (with a "cpu" link) or "cpu".
    for (const std::string& dir : {paths.v1_dir, std::string("cpu"), std::string("cpu,cpuacct")}) {
      if (dir.empty()) continue;
      const std::string root = fs_root + "/" + dir;
      std::string probe;
      if (!procfs::read_file(root + "/cpu.cfs_period_us", &probe, 64)) continue;
      take(lowest(root, paths.v1_cpu, [](const std::string& d) -> Level {
        std::string quota, period;
        if (!procfs::read_file(d + "/cpu.cfs_quota_us", &quota, 64) ||
            !procfs::read_file(d + "/cpu.cfs_period_us", &period, 64)) {
          return std::nullopt;
        }
        return Level(std::in_place, parse_cfs_quota(quota, period));
      }));
      break;
    }
  }
  return best;
}

int affinity_cores() {
  // A mask wide enough for any machine (CPU_ALLOC): the fixed cpu_set_t stops at 1024 CPUs.
  for (int n = 1024; n <= (1 << 16); n *= 4) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) return 0;
    const size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      const int count = CPU_COUNT_S(size, set);
      CPU_FREE(set);
      return count;
    }
    CPU_FREE(set);
    if (errno != EINVAL) return 0;
  }
  return 0;
}

int usable_from(int affinity, std::optional<double> quota) {
  int n = affinity > 0 ? affinity : static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  if (quota && *quota > 0) {
    // A fractional quota (1.5 cores) can keep 2 threads busy part of the time: round up, as the
    // Go and Java runtimes do.
    n = std::min(n, static_cast<int>(std::ceil(*quota - 1e-9)));
  }
  return std::max(n, 1);
}

std::string Budget::describe() const {
  char q[64] = "none";
  if (quota) std::snprintf(q, sizeof q, "%.2f", *quota);
  return std::to_string(usable) + " usable (affinity " + std::to_string(affinity) + ", cgroup quota " + q + ")";
}

Budget budget() {
  Budget b;
  b.affinity = affinity_cores();
  b.quota = cgroup_quota("/sys/fs/cgroup", parse_proc_cgroup(procfs::read_file("/proc/self/cgroup", 1 << 16)));
  b.usable = usable_from(b.affinity, b.quota);
  return b;
}

}  // namespace stallscope::cpus
