// Tests of the command line: help, version, usage errors (one line, exit code 2).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace stallscope
