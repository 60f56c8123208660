// The CPU budget (common/cpus): cgroup v1 and v2 quota text, /proc/self/cgroup lines, the walk up
// a cgroup tree (a fake one under a temporary folder), and the usable count.
#include "common/cpus.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::TempDir;
using testing::write_file;

TEST(CpusTest, ParsesCgroupV2CpuMax) {
  EXPECT_EQ(cpus::parse_cpu_max("200000 100000\n"), 2.0);
  EXPECT_EQ(cpus::parse_cpu_max("150000 100000"), 1.5);
  EXPECT_EQ(cpus::parse_cpu_max("50000"), 0.5);  // period left at its default
  EXPECT_FALSE(cpus::parse_cpu_max("max 100000\n"));
  EXPECT_FALSE(cpus::parse_cpu_max("max"));
  EXPECT_FALSE(cpus::parse_cpu_max(""));
  EXPECT_FALSE(cpus::parse_cpu_max("abc 100000"));
  EXPECT_FALSE(cpus::parse_cpu_max("100000 0"));
  EXPECT_FALSE(cpus::parse_cpu_max("100000 x"));
}

TEST(CpusTest, ParsesCgroupV1Quota) {
  EXPECT_EQ(cpus::parse_cfs_quota("400000\n", "100000\n"), 4.0);
  EXPECT_EQ(cpus::parse_cfs_quota("25000", "50000"), 0.5);
  EXPECT_FALSE(cpus::parse_cfs_quota("-1\n", "100000\n"));
  EXPECT_FALSE(cpus::parse_cfs_quota("", "100000"));
  EXPECT_FALSE(cpus::parse_cfs_quota("100000", "0"));
}

TEST(CpusTest, ParsesProcSelfCgroup) {
  const cpus::CgroupPaths v2 = cpus::parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
  EXPECT_EQ(v2.v2, "/user.slice/user-1000.slice/session-2.scope");
  EXPECT_EQ(v2.v1_cpu, "");
  const cpus::CgroupPaths hybrid = cpus::parse_proc_cgroup(
      "12:pids:/docker/abc\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n");
  EXPECT_EQ(hybrid.v1_cpu, "/docker/abc");
  EXPECT_EQ(hybrid.v1_dir, "cpu,cpuacct");
  EXPECT_EQ(hybrid.v2, "/");
  const cpus::CgroupPaths cpuacct_only = cpus::parse_proc_cgroup("2:cpuacct:/a\n3:cpuset:/b\n");
  EXPECT_EQ(cpuacct_only.v1_cpu, "") << "cpuacct and cpuset are not the cpu controller";
  EXPECT_EQ(cpus::parse_proc_cgroup("garbage\n\n").v2, "");
}

TEST(CpusTest, TakesTheLowestQuotaOnTheWayUpTheTree) {
  TempDir root;
  namespace fs = std::filesystem;
  fs::create_directories(root.file("kubepods/pod1/ctr"));
  write_file(root.file("kubepods/cpu.max"), "max 100000\n");
  write_file(root.file("kubepods/pod1/cpu.max"), "300000 100000\n");
  write_file(root.file("kubepods/pod1/ctr/cpu.max"), "max 100000\n");
  cpus::CgroupPaths p;
  p.v2 = "/kubepods/pod1/ctr";
  EXPECT_EQ(cpus::cgroup_quota(root.path(), p), 3.0);
  write_file(root.file("kubepods/pod1/ctr/cpu.max"), "150000 100000\n");
  EXPECT_EQ(cpus::cgroup_quota(root.path(), p), 1.5);
  // A container that mounts only its own subtree: the path is not there, the mount's root is.
  TempDir container;
  write_file(container.file("cpu.max"), "200000 100000\n");
  EXPECT_EQ(cpus::cgroup_quota(container.path(), p), 2.0);
  // No limit anywhere.
  TempDir none;
  EXPECT_FALSE(cpus::cgroup_quota(none.path(), p));
}

TEST(CpusTest, ReadsCgroupV1Trees) {
  TempDir root;
  namespace fs = std::filesystem;
  fs::create_directories(root.file("cpu,cpuacct/docker/abc"));
  write_file(root.file("cpu,cpuacct/cpu.cfs_quota_us"), "-1\n");
  write_file(root.file("cpu,cpuacct/cpu.cfs_period_us"), "100000\n");
  write_file(root.file("cpu,cpuacct/docker/abc/cpu.cfs_quota_us"), "250000\n");
  write_file(root.file("cpu,cpuacct/docker/abc/cpu.cfs_period_us"), "100000\n");
  cpus::CgroupPaths p = cpus::parse_proc_cgroup("5:cpu,cpuacct:/docker/abc\n");
  EXPECT_EQ(cpus::cgroup_quota(root.path(), p), 2.5);
}

TEST(CpusTest, UsableIsTheAffinityCutByTheQuotaRoundedUp) {
  EXPECT_EQ(cpus::usable_from(8, std::nullopt), 8);
  EXPECT_EQ(cpus::usable_from(8, 2.0), 2);
  EXPECT_EQ(cpus::usable_from(8, 1.5), 2);
  EXPECT_EQ(cpus::usable_from(8, 0.2), 1);
  EXPECT_EQ(cpus::usable_from(2, 16.0), 2);
  EXPECT_GE(cpus::usable_from(0, std::nullopt), 1);
  const cpus::Budget b = cpus::budget();
  EXPECT_GE(b.affinity, 1);
  EXPECT_GE(b.usable, 1);
  EXPECT_LE(b.usable, b.affinity);
  EXPECT_NE(b.describe().find("usable"), std::string::npos);
}

}  // namespace
}  // namespace stallscope
