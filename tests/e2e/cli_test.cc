// Tests of the command line: help, version, usage errors (one line, exit code 2).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::ProcResult;
using testing::run_process;

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(CliTest, HelpAndVersion) {
  ProcResult p = run_process({STALLSCOPE_BIN, "--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("Usage: stallscope"), std::string::npos);
  EXPECT_NE(p.out.find("run "), std::string::npos);
  p = run_process({STALLSCOPE_BIN, "run", "--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("stallscope run [OPTIONS]"), std::string::npos);
  p = run_process({STALLSCOPE_BIN, "attach", "--help"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_NE(p.out.find("stallscope attach [OPTIONS] PID"), std::string::npos);
  p = run_process({STALLSCOPE_BIN, "--version"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.out.rfind("stallscope ", 0), 0u);
}

TEST(CliTest, UsageErrorsAreOneLineAndExit2) {
  const std::vector<std::vector<std::string>> bad = {
      {STALLSCOPE_BIN},
      {STALLSCOPE_BIN, "--frobnicate"},
      {STALLSCOPE_BIN, "frobnicate"},
      {STALLSCOPE_BIN, "run"},
      {STALLSCOPE_BIN, "run", "--"},
      {STALLSCOPE_BIN, "run", "--bogus", "--", "true"},
      {STALLSCOPE_BIN, "run", "-o"},
      {STALLSCOPE_BIN, "run", "--ring-events", "1000", "--", "true"},
      {STALLSCOPE_BIN, "run", "--rings", "zero", "--", "true"},
      {STALLSCOPE_BIN, "run", "--gpu"},
      {STALLSCOPE_BIN, "run", "--gpu", "kernels", "--", "true"},
      {STALLSCOPE_BIN, "run", "--gpu=kernel,,sync", "--", "true"},
      {"/usr/bin/env", "STALLSCOPE_GPU=cupti", STALLSCOPE_BIN, "run", "--", "true"},
      {STALLSCOPE_BIN, "attach"},
      {STALLSCOPE_BIN, "attach", "-1"},
      {STALLSCOPE_BIN, "attach", "12x"},
      {STALLSCOPE_BIN, "attach", "1", "2"},
      {STALLSCOPE_BIN, "attach", "--duration", "soon", "1"},
      {STALLSCOPE_BIN, "attach", "-o"},
  };
  for (const auto& argv : bad) {
    ProcResult p = run_process(argv);
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    EXPECT_EQ(p.exit_code, 2) << cmd;
    EXPECT_EQ(lines(p.err), 1) << cmd << "\n" << p.err;
    EXPECT_NE(p.err.find("stallscope: "), std::string::npos) << cmd;
    EXPECT_NE(p.err.find("--help"), std::string::npos) << cmd;  // says what to do next
  }
}

// Targets attach refuses before touching them: one line, exit 1, no recording left behind.
TEST(CliTest, AttachRefusesTargetsItCannotRecord) {
  testing::TempDir dir;
  const std::string db = dir.file("x.db");
  // Not running: a pid that just ended.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  ProcResult p = run_process({STALLSCOPE_BIN, "attach", "-o", db, std::to_string(gone)});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_EQ(lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("no process " + std::to_string(gone)), std::string::npos) << p.err;
  // Not Python: a child of this test, blocked in pause().
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  p = run_process({STALLSCOPE_BIN, "attach", "-o", db, std::to_string(child)});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_EQ(lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("is not a Python program"), std::string::npos) << p.err;
  int st = 0;
  EXPECT_EQ(::waitpid(child, &st, WNOHANG), 0) << "the refused process was disturbed";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NE(::access(db.c_str(), F_OK), 0) << "a refused attach left a recording";
}

}  // namespace
}  // namespace stallscope
