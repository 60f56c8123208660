// End-to-end tests of `stallscope run` on a real program that forks or spawns children: every
// process's spans reach one database with the right pid/tid, the exit status passes through,
// signals are forwarded, SIGKILL leaves a readable database, and a reader follows a live run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "storage/reader.h"
#include "storage/session_registry.h"
#include "storage/sqlite.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::ProcResult;
using testing::TempDir;

std::unique_ptr<Reader> open_db(const std::string& path) {
  auto r = Reader::open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(*r) : nullptr;
}

// Counts spans per (pid, name) through the span_view.
std::map<std::pair<int64_t, std::string>, int64_t> spans_by_pid_and_name(Reader& r) {
  std::map<std::pair<int64_t, std::string>, int64_t> out;
  auto st = r.db().prepare("SELECT pid, name, count(*) FROM span_view GROUP BY pid, name");
  EXPECT_TRUE(st.ok());
  while ((*st)->step()) out[{(*st)->int64(0), (*st)->text(1)}] = (*st)->int64(2);
  return out;
}

// Polls until `pred` holds or `ms` pass.
template <typename F>
bool eventually(F pred, int ms) {
  for (int waited = 0; waited < ms; waited += 20) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

int64_t count_or_zero(const std::string& db, const std::string& sql) {
  auto r = Reader::open(db);
  if (!r.ok()) return 0;
  auto v = (*r)->db().query_int(sql);
  return v.ok() ? *v : 0;
}

void check_forked_run(bool spawn) {
  TempDir dir;
  const std::string db = dir.file("run.db");
  std::vector<std::string> argv = {STALLSCOPE_BIN, "run", "-o",      db,    "--",     FORK_EMITTER_BIN,
                                   "--children",   "3",   "--spans", "200", "--exit", "7"};
  if (spawn) argv.push_back("--spawn");
  ProcResult p = testing::run_process(argv);
  ASSERT_FALSE(p.timed_out);
  EXPECT_EQ(p.exit_code, 7) << p.err;
  EXPECT_NE(p.err.find("recording saved to " + db), std::string::npos) << p.err;
  EXPECT_NE(p.out.find("fork_emitter: parent"), std::string::npos);  // program output untouched

  auto r = open_db(db);
  ASSERT_TRUE(r);
  auto procs = r->processes();
  ASSERT_TRUE(procs.ok());
  // fork_emitter itself, and its three children (spawned ones appear once, after their exec).
  std::set<int64_t> pids;
  int64_t parent = 0;
  for (const ProcessRow& pr : *procs) {
    pids.insert(pr.pid);
    // Forked children share the parent's command line; the parent registered first.
    if (parent == 0 && pr.cmdline.find("--exit 7") != std::string::npos) parent = pr.pid;
  }
  ASSERT_NE(parent, 0);
  EXPECT_EQ(pids.size(), 4u);
  auto counts = spans_by_pid_and_name(*r);
  EXPECT_EQ((counts[{parent, "parent_work"}]), 200);
  EXPECT_EQ((counts[{parent, "inner"}]), 200);
  int children = 0;
  for (const ProcessRow& pr : *procs) {
    if (pr.pid == parent) {
      EXPECT_EQ(pr.exit_code, 7);
      continue;
    }
    if ((counts[{pr.pid, "child_work"}]) == 0) continue;  // the pre-exec image of a spawned child
    ++children;
    EXPECT_EQ(pr.ppid, parent);
    EXPECT_EQ((counts[{pr.pid, "child_work"}]), 200);
    EXPECT_EQ((counts[{pr.pid, "inner"}]), 200);
  }
  EXPECT_EQ(children, 3);
  // Each child's spans were recorded on its own main thread: tid == pid.
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'child_work' AND tid != pid"), 0);
  // Arguments made it: child index in arg0, iteration in arg1.
  EXPECT_EQ(*r->db().query_int("SELECT count(DISTINCT arg0) FROM span_view WHERE name = 'child_work'"), 3);
  EXPECT_EQ(*r->db().query_int("SELECT max(arg1) FROM span_view WHERE name = 'parent_work'"), 199);
  EXPECT_EQ((*r->meta())["complete"], "1");
  EXPECT_EQ((*r->meta())["dropped_events"], "0");
  struct stat st;
  ASSERT_EQ(::stat(db.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(RunTest, ForkedChildrenAreRecordedWithTheirPids) { check_forked_run(false); }

TEST(RunTest, SpawnedChildrenJoinTheSameSession) { check_forked_run(true); }

TEST(RunTest, SigkillOfTheProgramLeavesACompleteDatabase) {
  TempDir dir;
  const std::string db = dir.file("killed.db");
  pid_t launcher = testing::start_process(
      {STALLSCOPE_BIN, "run", "-o", db, "--", FORK_EMITTER_BIN, "--children", "1", "--spans", "10", "--hang"},
      dir.path());
  ASSERT_TRUE(eventually(
      [&] { return count_or_zero(db, "SELECT count(*) FROM span_view WHERE name='heartbeat'") >= 5; }, 20000));
  const int64_t program =
      count_or_zero(db, "SELECT pid FROM processes WHERE cmdline LIKE '%--hang%' ORDER BY id LIMIT 1");
  ASSERT_GT(program, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(program), SIGKILL), 0);
  ProcResult p = testing::wait_process(launcher, 20000);
  EXPECT_FALSE(p.timed_out);
  EXPECT_EQ(p.term_signal, SIGKILL);  // stallscope ends the way the program ended
  // It closed the database before it died: no -wal or -shm file is left beside it.
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(db + "-shm"));
  auto r = open_db(db);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r->meta())["complete"], "1");
  EXPECT_EQ(*r->db().query_int("SELECT exit_signal FROM processes WHERE pid = " + std::to_string(program)), SIGKILL);
  EXPECT_GE(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'heartbeat'"), 5);
}

TEST(RunTest, SigkillOfEverythingLeavesWhatWasFlushed) {
  TempDir dir;
  const std::string db = dir.file("both.db");
  pid_t launcher = testing::start_process(
      {STALLSCOPE_BIN, "run", "-o", db, "--", FORK_EMITTER_BIN, "--children", "0", "--spans", "10", "--hang"},
      dir.path());
  ASSERT_TRUE(eventually(
      [&] { return count_or_zero(db, "SELECT count(*) FROM span_view WHERE name='heartbeat'") >= 10; }, 20000));
  ::kill(-launcher, SIGKILL);  // the launcher and the program (one process group)
  testing::wait_process(launcher, 10000);
  auto r = open_db(db);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r->meta())["complete"], "0");
  EXPECT_GE(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'heartbeat'"), 10);
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'parent_work'"), 10);
}

TEST(RunTest, ALiveReaderSeesEventsAppear) {
  TempDir dir;
  const std::string db = dir.file("live.db");
  pid_t launcher = testing::start_process(
      {STALLSCOPE_BIN, "run", "-o", db, "--", FORK_EMITTER_BIN, "--children", "0", "--spans", "1", "--hang"},
      dir.path());
  ASSERT_TRUE(eventually([&] { return count_or_zero(db, "SELECT count(*) FROM spans") > 0; }, 20000));
  auto r = open_db(db);
  ASSERT_TRUE(r);
  // One reader connection, kept open, sees the count grow flush after flush.
  std::vector<int64_t> seen;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    seen.push_back(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'heartbeat'"));
  }
  ::kill(launcher, SIGTERM);
  ProcResult p = testing::wait_process(launcher, 20000);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(seen[i], seen[i - 1]);
  EXPECT_EQ(p.term_signal, SIGTERM);  // forwarded to the program, which died of it
}

TEST(RunTest, SigtermIsForwardedAndTheRecordingFinished) {
  TempDir dir;
  const std::string db = dir.file("term.db");
  pid_t launcher = testing::start_process(
      {STALLSCOPE_BIN, "run", "-o", db, "--", FORK_EMITTER_BIN, "--children", "0", "--spans", "1", "--hang"},
      dir.path());
  // Running long enough for the sampler's first CPU rate (its second sample).
  ASSERT_TRUE(eventually(
      [&] { return count_or_zero(db, "SELECT count(*) FROM counter_view WHERE name = 'proc.cpu'") > 0; }, 20000));
  ::kill(launcher, SIGTERM);
  ProcResult p = testing::wait_process(launcher, 20000);
  EXPECT_FALSE(p.timed_out);
  EXPECT_EQ(p.term_signal, SIGTERM);
  auto r = open_db(db);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r->meta())["complete"], "1");
  EXPECT_EQ(*r->db().query_int("SELECT exit_signal FROM processes ORDER BY id LIMIT 1"), SIGTERM);
  // The sampler followed the program: CPU and memory counters for its pid.
  const std::string pid = std::to_string(*r->db().query_int("SELECT pid FROM processes ORDER BY id LIMIT 1"));
  EXPECT_GT(*r->db().query_int("SELECT count(*) FROM counter_view WHERE name = 'proc.cpu' AND pid = " + pid), 0);
  EXPECT_GT(*r->db().query_int("SELECT count(*) FROM counter_view WHERE name = 'proc.rss' AND pid = " + pid +
                               " AND value > 0"),
            0);
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM counter_tracks WHERE name = 'proc.cpu' AND unit = 'cores'"), 1);
}

TEST(RunTest, IgnoredSignalsStayIgnoredInTheProgram) {
  // A shell that ignores SIGINT (as for a background job) starts stallscope; the program inherits
  // the ignored SIGINT exactly as it would without stallscope, and survives one.
  TempDir dir;
  ProcResult p = testing::run_process({"/bin/sh", "-c",
                                       "trap '' INT; exec " STALLSCOPE_BIN " run -q -o '" + dir.file("ign.db") +
                                           "' -- /bin/sh -c 'kill -INT $$; echo survived'"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("survived"), std::string::npos) << p.out << p.err;
}

TEST(RunTest, MissingProgramExits127WithOneLine) {
  TempDir dir;
  ProcResult p = testing::run_process({STALLSCOPE_BIN, "run", "-q", "-o", dir.file("x.db"), "--", "/nonexistent/prog"});
  EXPECT_EQ(p.exit_code, 127);
  EXPECT_NE(p.err.find("cannot run '/nonexistent/prog'"), std::string::npos) << p.err;
}

TEST(RunTest, UnwritableOutputStillRunsTheProgram) {
  ProcResult p = testing::run_process({STALLSCOPE_BIN, "run", "-o", "/proc/stallscope-cannot-write.db", "--",
                                       FORK_EMITTER_BIN, "--children", "1", "--spans", "5", "--exit", "4"});
  EXPECT_EQ(p.exit_code, 4);
  EXPECT_NE(p.err.find("not recording"), std::string::npos) << p.err;
  EXPECT_NE(p.out.find("fork_emitter: parent"), std::string::npos);
}

// --loader reaches the program's environment (with the tuned settings for tuned and reference,
// which falls back to tuned) and the recording's meta says which loader was asked for.
TEST(RunTest, LoaderChoiceReachesTheProgramAndTheMeta) {
  TempDir dir;
  const std::string show = "echo \"loader=$STALLSCOPE_LOADER tuned=${STALLSCOPE_LOADER_TUNED:-none}\"";
  for (const std::string kind : {"torch", "tuned", "reference", ""}) {
    SCOPED_TRACE(kind);
    const std::string db = dir.file("loader-" + kind + ".db");
    std::vector<std::string> argv = {STALLSCOPE_BIN, "run", "-q", "-o", db};
    if (!kind.empty()) argv.insert(argv.end(), {"--loader", kind});
    argv.insert(argv.end(), {"--", "/bin/sh", "-c", show});
    ProcResult p = testing::run_process(argv, 60000, {{"STALLSCOPE_LOADER_TUNED", "left over"}});
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const std::string asked = kind.empty() ? "torch" : kind;
    EXPECT_EQ(p.out.rfind("loader=" + asked + " tuned=", 0), 0u) << p.out;
    auto r = open_db(db);
    ASSERT_TRUE(r);
    auto meta = *r->meta();
    EXPECT_EQ(meta["loader"], asked);
    if (asked == "torch") {
      EXPECT_NE(p.out.find("tuned=none"), std::string::npos) << p.out;
      EXPECT_EQ(meta.count("loader_tuned"), 0u);
    } else {
      // One line of JSON, the same in the environment and the meta.
      EXPECT_NE(p.out.find("tuned={\"num_workers\":"), std::string::npos) << p.out;
      EXPECT_NE(p.out.find("\"persistent_workers\":true"), std::string::npos) << p.out;
      EXPECT_EQ(p.out.substr(p.out.find("tuned=") + 6), meta["loader_tuned"] + "\n");
    }
  }
  // From the environment, as --gpu.
  ProcResult p =
      testing::run_process({STALLSCOPE_BIN, "run", "-q", "-o", dir.file("env.db"), "--", "/bin/sh", "-c", show}, 60000,
                           {{"STALLSCOPE_LOADER", "reference"}});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("loader=reference tuned={", 0), 0u) << p.out;
}

// An -o file that exists is refused before the program starts: exit 2, one line, the old
// recording kept. --force replaces it, and its side files, with the new run.
TEST(RunTest, AnExistingOutputIsRefusedUnlessForced) {
  TempDir dir;
  const std::string db = dir.file("out.db"), marker = dir.file("started");
  auto command_of = [&] {
    auto r = open_db(db);
    return r ? (*r->meta())["command"] : std::string();
  };
  ProcResult p = testing::run_process({STALLSCOPE_BIN, "run", "-q", "-o", db, "--", "/bin/sh", "-c", "echo old run"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ASSERT_NE(command_of().find("old run"), std::string::npos);
  const std::string new_run = "touch '" + marker + "'; exit 3";
  p = testing::run_process({STALLSCOPE_BIN, "run", "-o", db, "--", "/bin/sh", "-c", new_run});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(testing::count_lines(p.err), 1) << p.err;
  EXPECT_EQ(p.err.rfind("stallscope: " + db + " exists; pass --force to overwrite it or choose another -o", 0), 0u)
      << p.err;
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the program was started";
  EXPECT_NE(command_of().find("old run"), std::string::npos);
  p = testing::run_process({STALLSCOPE_BIN, "run", "-q", "--force", "-o", db, "--", "/bin/sh", "-c", new_run});
  EXPECT_EQ(p.exit_code, 3) << p.err;
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0) << "the program did not run";
  EXPECT_NE(command_of().find("exit 3"), std::string::npos) << command_of();
  EXPECT_EQ(count_or_zero(db, "SELECT COUNT(*) FROM processes WHERE exit_code = 3"), 1);
}

TEST(RunTest, DefaultOutputNameInTheCurrentDirectory) {
  TempDir dir;
  ProcResult p = testing::run_process(
      {"/bin/sh", "-c", "cd '" + dir.path() + "' && exec " STALLSCOPE_BIN " run " FORK_EMITTER_BIN " --children 0"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  const size_t at = p.err.find("recording saved to stallscope-fork_emitter-");
  ASSERT_NE(at, std::string::npos) << p.err;
  const std::string name = p.err.substr(at + 19, p.err.find(' ', at + 19) - at - 19);
  EXPECT_TRUE(open_db(dir.file(name)));
}

TEST(PreloadTest, InProcessRecordingWithoutTheLauncher) {
  TempDir dir;
  const std::string db = dir.file("inproc.db");
  ProcResult p = testing::run_process({FORK_EMITTER_BIN, "--children", "2", "--spans", "50", "--exit", "5"}, 60000,
                                      {{"LD_PRELOAD", PRELOAD_LIB}, {"STALLSCOPE_OUTPUT", db}});
  EXPECT_EQ(p.exit_code, 5) << p.err;
  auto r = open_db(db);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r->meta())["mode"], "in-process");
  EXPECT_EQ((*r->meta())["complete"], "1");
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'child_work'"), 100);
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM span_view WHERE name = 'parent_work'"), 50);
  EXPECT_EQ(*r->db().query_int("SELECT count(DISTINCT pid) FROM span_view"), 3);
  EXPECT_EQ(*r->db().query_int("SELECT exit_code FROM processes ORDER BY id LIMIT 1"), 5);
}

TEST(PreloadTest, InProcessRecordingFlushesOnSigterm) {
  TempDir dir;
  const std::string db = dir.file("inproc-term.db");
  pid_t pid = testing::start_process({FORK_EMITTER_BIN, "--children", "0", "--spans", "3", "--hang"}, dir.path(),
                                     {{"LD_PRELOAD", PRELOAD_LIB}, {"STALLSCOPE_OUTPUT", db}});
  ASSERT_TRUE(eventually([&] { return count_or_zero(db, "SELECT count(*) FROM spans") > 0; }, 20000));
  ::kill(pid, SIGTERM);
  ProcResult p = testing::wait_process(pid, 20000);
  EXPECT_EQ(p.term_signal, SIGTERM);  // the signal still ends the program as it would have
  auto r = open_db(db);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r->meta())["complete"], "1");
}

}  // namespace
}  // namespace stallscope

namespace stallscope {
namespace {

TEST(RegistryTest, LiveSessionsAreListedWhileRunningAndRecentAfter) {
  TempDir dir;
  TempDir runtime;
  ::setenv("XDG_RUNTIME_DIR", runtime.path().c_str(), 1);
  const std::string db = dir.file("listed.db");
  pid_t launcher = testing::start_process(
      {STALLSCOPE_BIN, "run", "-o", db, "--", FORK_EMITTER_BIN, "--children", "0", "--spans", "1", "--hang"},
      dir.path(), {{"XDG_RUNTIME_DIR", runtime.path()}});
  ASSERT_TRUE(eventually([&] { return !list_live_sessions().empty(); }, 20000));
  auto live = list_live_sessions();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].launcher_pid, launcher);
  EXPECT_EQ(live[0].db_path, db);
  EXPECT_NE(live[0].command.find("--hang"), std::string::npos);
  EXPECT_TRUE(list_recent_sessions().empty());
  ::kill(launcher, SIGTERM);
  testing::wait_process(launcher, 20000);
  EXPECT_TRUE(list_live_sessions().empty());
  auto recent = list_recent_sessions();
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_EQ(recent[0].db_path, db);
  EXPECT_GE(recent[0].ended_unix, recent[0].started_unix);
  struct stat st;
  ASSERT_EQ(::stat(registry_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ::unsetenv("XDG_RUNTIME_DIR");
}

}  // namespace
}  // namespace stallscope
