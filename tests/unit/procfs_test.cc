// Tests for the /proc readers of common/procfs: a file is read whole however long, up to `max`,
// and what a read costs depends on the file, not on `max`.
#include "common/procfs.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <vector>

#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

TEST(ProcfsTest, ReadsAFileWholeUpToMax) {
  // Enough mappings that /proc/self/maps is several reads long (procfs reports size 0).
  std::vector<void*> maps;
  for (int i = 0; i < 200; ++i) {
    const int prot = i % 2 == 0 ? PROT_READ : PROT_READ | PROT_WRITE;  // alternate, so none merge
    maps.push_back(::mmap(nullptr, 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  const std::string whole = procfs::read_file(procfs::path(::getpid(), "maps"), size_t{64} << 20);
  for (void* p : maps) ::munmap(p, 4096);
  EXPECT_GT(whole.size(), 200u * 40);
  EXPECT_EQ(whole.back(), '\n');
  // Cut at `max`, on a file whose text stays put (a /proc file's changes between two reads).
  testing::TempDir dir;
  std::string text;
  for (int i = 0; text.size() < 20000; ++i) text += std::to_string(i) + "\n";
  testing::write_file(dir.file("t"), text);
  EXPECT_EQ(procfs::read_file(dir.file("t"), size_t{64} << 20), text);
  EXPECT_EQ(procfs::read_file(dir.file("t"), 5000), text.substr(0, 5000));
  std::string out = "old";
  EXPECT_FALSE(procfs::read_file("/proc/self/no-such-file", &out));
  EXPECT_TRUE(out.empty());
}

// `attach --list` reads every process's maps with a 64 MiB limit. A reader that zero-filled a
// buffer of `max` bytes for each read took ~20 ms of system time a read (~3-5 s for the list on
// a machine with ~100 processes); read in chunks, a small file costs microseconds.
TEST(ProcfsTest, ALargeMaxCostsNothingForASmallFile) {
  const double t0 = cpu_seconds();
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(procfs::read_file("/proc/self/stat", size_t{64} << 20).empty());
  EXPECT_LT(cpu_seconds() - t0, 0.5) << "100 reads of /proc/self/stat with a 64 MiB limit";
}

}  // namespace
}  // namespace stallscope
