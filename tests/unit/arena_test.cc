// Tests for the shared-memory session arena: creation, attach from another mapping, string
// interning, process registration, ring claiming and exhaustion.
#include "collector/arena.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

class ArenaTest : public ::testing::Test {
 protected:
  void SetUp() override { name_ = testing::unique_name("ss-arena-test"); }
  void TearDown() override { Arena::unlink(name_); }
  std::string name_;
};

TEST_F(ArenaTest, CreateIsPrivateAndAttachSeesTheSameData) {
  std::string err;
  Arena* a = Arena::create(name_, ArenaConfig{}, &err);
  ASSERT_NE(a, nullptr) << err;
  struct stat st;
  ASSERT_EQ(::stat(("/dev/shm/" + name_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const uint32_t id = a->intern("hello");
  EXPECT_NE(id, 0u);
  Arena* b = Arena::attach(name_, &err);
  ASSERT_NE(b, nullptr) << err;
  EXPECT_STREQ(b->string(id), "hello");
  EXPECT_EQ(b->intern("hello"), id);  // the same id from another mapping
  EXPECT_NE(b->intern("world"), id);
  EXPECT_STREQ(a->string(b->intern("world")), "world");
}

TEST_F(ArenaTest, InternIsSharedWithForkedChildren) {
  std::string err;
  Arena* a = Arena::create(name_, ArenaConfig{}, &err);
  ASSERT_NE(a, nullptr) << err;
  pid_t pid = fork();
  if (pid == 0) _exit(a->intern("from-child") == 0 ? 1 : 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(a->header()->string_count.load(), 1u);
  EXPECT_STREQ(a->string(1), "from-child");
}

// An anonymous arena (memfd): nothing in /dev/shm; a child that inherited the descriptor maps it,
// one that did not (a spawned worker: multiprocessing closes descriptors) opens the holder's
// /proc/PID/fd/FD, and its own name() then names its own descriptor for its children.
TEST_F(ArenaTest, AnonymousArenaIsJoinedByDescriptorOrThroughProc) {
  std::string err;
  Arena* a = Arena::create_anonymous(ArenaConfig{}, &err);
  ASSERT_NE(a, nullptr) << err;
  int pid = 0, fd = -1;
  ASSERT_EQ(std::sscanf(a->name().c_str(), "fd:%d:%d", &pid, &fd), 2) << a->name();
  EXPECT_EQ(pid, ::getpid());
  EXPECT_TRUE(Arena::is_anonymous_name(a->name()));
  struct stat st;
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const uint32_t id = a->intern("hello");
  const std::string name = a->name();
  // Inherited descriptor (as the program the launcher execs).
  pid_t child = fork();
  if (child == 0) {
    std::string e;
    Arena* b = Arena::attach(name, &e);
    const std::string own = "fd:" + std::to_string(::getpid()) + ":" + std::to_string(fd);  // the same descriptor
    _exit(b != nullptr && b->intern("hello") == id && b->intern("inherited") != 0 && b->name() == own ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Descriptor closed: through /proc/PID/fd/FD, and a name of its own.
  child = fork();
  if (child == 0) {
    ::close(fd);
    std::string e;
    Arena* b = Arena::attach(name, &e);
    if (b == nullptr || b->name() == name) _exit(2);
    Arena* c = Arena::attach(b->name(), &e);  // its own children
    _exit(c != nullptr && c->intern("through-proc") != 0 ? 0 : 1);
  }
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(a->string(a->intern("inherited")), nullptr);
  EXPECT_EQ(a->header()->string_count.load(), 3u);  // hello, inherited, through-proc
  Arena::unlink(a->name());                         // the session is over: the descriptor is closed, the mapping stays
  EXPECT_NE(::fcntl(fd, F_GETFD), 0);
  EXPECT_STREQ(a->string(id), "hello");
  // A name that does not parse, or a descriptor that is not an arena: one message, no arena.
  EXPECT_EQ(Arena::attach("fd:x:y", &err), nullptr);
  EXPECT_NE(err.find("fd:PID:FD"), std::string::npos) << err;
  EXPECT_EQ(Arena::attach("fd:" + std::to_string(::getpid()) + ":0", &err), nullptr);
}

TEST_F(ArenaTest, StringTableFullIsCountedNotFatal) {
  ArenaConfig cfg;
  cfg.string_capacity = 4;
  std::string err;
  Arena* a = Arena::create(name_, cfg, &err);
  ASSERT_NE(a, nullptr) << err;
  for (int i = 0; i < 4; ++i) EXPECT_NE(a->intern("s" + std::to_string(i)), 0u);
  EXPECT_EQ(a->intern("one-too-many"), 0u);
  EXPECT_EQ(a->header()->dropped_strings.load(), 1u);
  EXPECT_EQ(a->intern("s2"), 3u);  // existing strings still resolve
}

TEST_F(ArenaTest, RingsAreClaimedUntilExhausted) {
  ArenaConfig cfg;
  cfg.ring_count = 3;
  cfg.ring_capacity = 64;
  std::string err;
  Arena* a = Arena::create(name_, cfg, &err);
  ASSERT_NE(a, nullptr) << err;
  Ring* r0 = a->claim_ring(1, 10, "t0");
  Ring* r1 = a->claim_ring(1, 11, "t1");
  Ring* r2 = a->claim_ring(1, 12, "t2");
  ASSERT_TRUE(r0 && r1 && r2);
  EXPECT_EQ(a->claim_ring(1, 13, "t3"), nullptr);
  EXPECT_NE(r0->h.thread_uid, r1->h.thread_uid);
  EXPECT_STREQ(r2->h.name, "t2");
  r1->h.state.store(kRingFree);  // what the drainer does after a retired ring is drained
  Ring* again = a->claim_ring(1, 14, "t4");
  EXPECT_EQ(again, r1);
  EXPECT_EQ(again->h.tid, 14);
}

TEST_F(ArenaTest, ProcessesAreRegistered) {
  std::string err;
  Arena* a = Arena::create(name_, ArenaConfig{}, &err);
  ASSERT_NE(a, nullptr) << err;
  const char cmd[] = "python\0train.py";
  ProcessEntry* p = a->register_process(42, 1, cmd, sizeof cmd);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(a->find_process(42), p);
  EXPECT_EQ(a->find_process(43), nullptr);
  EXPECT_STREQ(p->cmdline, "python");
  EXPECT_STREQ(p->cmdline + 7, "train.py");
}

TEST_F(ArenaTest, AttachRejectsWhatIsNotAnArena) {
  testing::write_file("/dev/shm/" + name_, std::string(8192, 'x'));
  std::string err;
  EXPECT_EQ(Arena::attach(name_, &err), nullptr);
  EXPECT_NE(err.find("not a stallscope arena"), std::string::npos) << err;
  EXPECT_EQ(Arena::attach(name_ + "-missing", &err), nullptr);
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

// Whether /dev/shm/<name> exists.
bool exists(const std::string& name) {
  struct stat st;
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// A child that makes an arena named `name` and dies without removing it; with `keep_child`, it
// first forks a grandchild that holds the inherited lock until killed (returned), else -1.
pid_t leave_arena_behind(const std::string& name, bool keep_child) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::string err;
    if (Arena::create(name, ArenaConfig{}, &err) == nullptr) ::_exit(1);
    pid_t grandchild = -1;
    if (keep_child) {
      grandchild = ::fork();
      if (grandchild == 0) {
        ::pause();
        ::_exit(0);
      }
    }
    (void)!::write(pipe_fds[1], &grandchild, sizeof grandchild);
    ::_exit(0);  // SIGKILL-like for the arena: no unlink
  }
  ::close(pipe_fds[1]);
  pid_t grandchild = -1;
  EXPECT_EQ(::read(pipe_fds[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return grandchild;
}

std::vector<std::string> names(const std::vector<std::pair<std::string, uint64_t>>& removed) {
  std::vector<std::string> out;
  for (const auto& r : removed) out.push_back(r.first);
  return out;
}

TEST_F(ArenaTest, RemoveStaleTakesOnlyTheArenasOfDeadSessions) {
  const std::string prefix = name_ + "-";
  const std::string mine = prefix + "live", dead = prefix + "dead", held = prefix + "held";
  std::string err;
  ASSERT_NE(Arena::create(mine, ArenaConfig{}, &err), nullptr) << err;
  leave_arena_behind(dead, false);
  const pid_t grandchild = leave_arena_behind(held, true);
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(exists(dead) && exists(held) && exists(mine));

  // Too young: nothing goes.
  EXPECT_TRUE(Arena::remove_stale(prefix, 3600).empty());
  // The dead session's arena goes; the live creator's and the one a forked child still holds stay.
  auto removed = Arena::remove_stale(prefix, 0);
  EXPECT_EQ(names(removed), std::vector<std::string>{dead});
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_GT(removed[0].second, 0u);  // its pages, as the header was written
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(held) && exists(mine));

  // The grandchild is init's now (its parent exited): its lock goes when it is gone, soon after.
  ::kill(grandchild, SIGKILL);
  std::vector<std::pair<std::string, uint64_t>> later;
  for (int i = 0; i < 500 && later.empty(); ++i) {
    later = Arena::remove_stale(prefix, 0);
    if (later.empty()) ::usleep(10'000);
  }
  EXPECT_EQ(names(later), std::vector<std::string>{held});
  EXPECT_TRUE(exists(mine));

  // Unlinking lets go of the lock: a file of that name made afterwards (not an arena) is stale.
  Arena::unlink(mine);
  testing::write_file("/dev/shm/" + mine, "not an arena");
  EXPECT_EQ(names(Arena::remove_stale(prefix, 0)), std::vector<std::string>{mine});
}

TEST_F(ArenaTest, CreateRejectsBadSizes) {
  ArenaConfig cfg;
  cfg.ring_capacity = 1000;
  std::string err;
  EXPECT_EQ(Arena::create(name_, cfg, &err), nullptr);
  EXPECT_NE(err.find("power of two"), std::string::npos);
}

}  // namespace
}  // namespace stallscope
