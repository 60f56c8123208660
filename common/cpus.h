// How many cores this process may use: the CPUs its affinity mask allows, cut by the CPU quota of
// its cgroup (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`) on the way up to the
// hierarchy's root. A container limited to 2 CPUs on a 64-core host sees 64 in
// std::thread::hardware_concurrency() and 2 here. The parsers take text, so tests need no cgroup.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace stallscope::cpus {

// Cores allowed by the text of a cgroup v2 `cpu.max` file: "200000 100000" -> 2.0, "50000" (period
// left at its default 100000) -> 0.5; nullopt for "max ..." (no limit) or text that does not parse.
std::optional<double> parse_cpu_max(std::string_view text);

// Cores allowed by cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`: nullopt for a quota of
// -1 (no limit) or text that does not parse.
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

// The process's cgroups from the text of /proc/self/cgroup: the unified (v2) one, "0::/a/b", and
// the v1 hierarchy that holds the `cpu` controller, "4:cpu,cpuacct:/a/b". Empty when absent.
struct CgroupPaths {
  std::string v2;      // "/a/b"
  std::string v1_cpu;  // "/a/b"
  std::string v1_dir;  // the controller list naming that hierarchy's folder: "cpu,cpuacct"
};
CgroupPaths parse_proc_cgroup(std::string_view text);

// The lowest quota (in cores) of the cgroup and its ancestors under `fs_root` (normally
// "/sys/fs/cgroup"): v2 files at fs_root + path + "/cpu.max" (or under fs_root + "/unified", hybrid mode), v1 files
// under fs_root + "/" + v1_dir (or "cpu"). A cgroup whose folder is not there (a container that mounts only its own
// subtree) is looked for at the mount's root. nullopt when no level sets a limit.
std::optional<double> cgroup_quota(const std::string& fs_root, const CgroupPaths& paths);

// The CPUs in this process's affinity mask (sched_getaffinity); 0 when it cannot be read.
int affinity_cores();

// min(affinity, ceil(quota)), at least 1; affinity 0 means unknown (hardware_concurrency is used).
int usable_from(int affinity, std::optional<double> quota);

struct Budget {
  int affinity = 0;              // CPUs of the affinity mask
  std::optional<double> quota;   // cgroup quota in cores, if any
  int usable = 1;                // what the process may keep busy
  std::string describe() const;  // "2 usable (affinity 4, cgroup quota 1.5)"
};
// The budget of the calling process, from /proc/self/cgroup and /sys/fs/cgroup.
Budget budget();

}  // namespace stallscope::cpus
