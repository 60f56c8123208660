// Tests of the command line: help, version, usage errors (one line, exit code 2). The commands are
// found in `stallscope --help`, so a new command's help and usage errors are checked without an
// edit here.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "stallscope/version.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::count_lines;
using testing::ProcResult;
using testing::run_process;

// The commands `stallscope --help` lists: the first word of each line under "Commands:".
std::vector<std::string> listed_commands() {
  const ProcResult p = run_process({STALLSCOPE_BIN, "--help"});
  std::vector<std::string> out;
  std::istringstream in(p.out);
  std::string line;
  bool in_list = false;
  while (std::getline(in, line)) {
    if (line == "Commands:") {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list) {
      break;
    }
  }
  return out;
}

// The lines of the "Options:" section of a help text.
std::vector<std::string> option_lines(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool in_options = false;
  while (std::getline(in, line)) {
    if (line == "Options:") {
      in_options = true;
    } else if (in_options && line.empty()) {
      break;
    } else if (in_options) {
      out.push_back(line);
    }
  }
  return out;
}

// A usage error: exit 2, one line on stderr, `stallscope: ... (see 'stallscope CMD --help')`.
void expect_usage_error(const std::vector<std::string>& argv, const std::string& cmd,
                        const std::map<std::string, std::string>& env = {}) {
  const ProcResult p = run_process(argv, 60000, env);
  std::string shown;
  for (const auto& a : argv) shown += a + " ";
  EXPECT_EQ(p.exit_code, 2) << shown << "\n" << p.err;
  EXPECT_EQ(count_lines(p.err), 1) << shown << "\n" << p.err;
  EXPECT_EQ(p.err.rfind("stallscope: ", 0), 0u) << shown << "\n" << p.err;
  const std::string see = "(see 'stallscope" + (cmd.empty() ? "" : " " + cmd) + " --help')\n";
  EXPECT_TRUE(p.err.size() >= see.size() && p.err.compare(p.err.size() - see.size(), see.size(), see) == 0)
      << shown << "\n"
      << p.err;
  EXPECT_TRUE(p.out.empty()) << shown << "\n" << p.out;
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
      {STALLSCOPE_BIN, "run", "--loader", "fast", "--", "true"},
      {STALLSCOPE_BIN, "run", "--loader"},
      {"/usr/bin/env", "STALLSCOPE_LOADER=Reference", STALLSCOPE_BIN, "run", "--", "true"},
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
    EXPECT_EQ(count_lines(p.err), 1) << cmd << "\n" << p.err;
    EXPECT_NE(p.err.find("stallscope: "), std::string::npos) << cmd;
    EXPECT_NE(p.err.find("--help"), std::string::npos) << cmd;  // says what to do next
  }
}

TEST(CliTest, EveryCommandHasHelp) {
  const std::vector<std::string> commands = listed_commands();
  for (const char* known : {"run", "attach", "report", "compare", "ui"}) {
    EXPECT_NE(std::find(commands.begin(), commands.end(), known), commands.end()) << known << " not listed";
  }
  std::vector<std::vector<std::string>> asks = {{"--help"}, {"-h"}, {"help"}};
  for (const std::string& c : commands) {
    asks.push_back({c, "--help"});
    asks.push_back({c, "-h"});
  }
  for (const auto& ask : asks) {
    std::vector<std::string> argv = {STALLSCOPE_BIN};
    argv.insert(argv.end(), ask.begin(), ask.end());
    const ProcResult p = run_process(argv);
    const std::string cmd = ask[0][0] == '-' || ask[0] == "help" ? "" : ask[0];
    SCOPED_TRACE("stallscope " + cmd + " " + ask.back());
    EXPECT_EQ(p.exit_code, 0);
    EXPECT_TRUE(p.err.empty()) << p.err;
    EXPECT_EQ(p.out.rfind("Usage: stallscope" + (cmd.empty() ? "" : " " + cmd) + " ", 0), 0u) << p.out;
    const std::vector<std::string> options = option_lines(p.out);
    ASSERT_FALSE(options.empty()) << p.out;
    size_t entries = 0;  // lines that name an option; the others carry on a description
    for (const std::string& o : options) {
      const size_t name = o.find_first_not_of(' ');
      if (name == std::string::npos || o[name] != '-') continue;
      ++entries;
      const size_t gap = o.find("  ", name);
      EXPECT_TRUE(gap != std::string::npos && o.find_first_not_of(' ', gap) != std::string::npos)
          << "no description: " << o;
    }
    EXPECT_GE(entries, 1u) << p.out;
    EXPECT_NE(p.out.find("-h, --help"), std::string::npos) << p.out;
  }
}

// --help answers even where the rest of the command line (or the environment) is wrong: the
// usage errors point at it.
TEST(CliTest, HelpComesBeforeChecks) {
  ProcResult p = run_process({STALLSCOPE_BIN, "run", "--help"}, 60000, {{"STALLSCOPE_GPU", "bogus"}});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("Usage: stallscope run ", 0), 0u) << p.out;
  p = run_process({STALLSCOPE_BIN, "run", "--rings", "0", "-h"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("Usage: stallscope run ", 0), 0u) << p.out;
  p = run_process({STALLSCOPE_BIN, "attach", "--duration", "never", "--help"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("Usage: stallscope attach ", 0), 0u) << p.out;
}

TEST(CliTest, Version) {
  for (const char* flag : {"--version", "-V"}) {
    const ProcResult p = run_process({STALLSCOPE_BIN, flag});
    EXPECT_EQ(p.exit_code, 0) << flag;
    EXPECT_EQ(p.out, std::string("stallscope ") + STALLSCOPE_VERSION + "\n") << flag;
    EXPECT_TRUE(p.err.empty()) << p.err;
  }
}

// `ui`'s command line is parsed by the dashboard, stallscope-ui, which `stallscope ui` runs only
// where a window could open: a display named (none is connected to before the command line parsed).
const std::map<std::string, std::string> kUiEnv = {{"DISPLAY", ":999"}};

// Each command refuses what it does not know in one line that points at its own --help.
TEST(CliTest, EveryCommandRefusesUnknownOptions) {
  for (const std::string& c : listed_commands()) {
    const ProcResult help = run_process({STALLSCOPE_BIN, c, "--help"});
    if (help.out.find("not in this build") != std::string::npos) continue;  // ui without a dashboard
    const std::map<std::string, std::string> env = c == "ui" ? kUiEnv : std::map<std::string, std::string>{};
    expect_usage_error({STALLSCOPE_BIN, c, "--no-such-option"}, c, env);
    expect_usage_error({STALLSCOPE_BIN, c, "-Z"}, c, env);
  }
}

// Bad values and arguments, a few per command, in the command's words; one line each.
TEST(CliTest, UsageErrorsNameTheCommand) {
  const std::string bin = STALLSCOPE_BIN;
  expect_usage_error({bin}, "");
  expect_usage_error({bin, "frobnicate"}, "");
  expect_usage_error({bin, "--frobnicate"}, "");
  expect_usage_error({bin, "-x", "run"}, "");
  expect_usage_error({bin, "report", "a.db", "--", "b.db"}, "report");
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"run"},
           {"run", "--"},
           {"run", "-q"},
           {"run", "--bogus", "true"},
           {"run", "-qx", "--", "true"},
           {"run", "--rings", "0", "--", "true"},
           {"run", "--rings=-3", "--", "true"},
           {"run", "--rings"},
           {"run", "--ring-events", "3", "--", "true"},
           {"run", "--ring-events", "0", "--", "true"},
           {"run", "--gpu", "bogus", "--", "true"},
           {"run", "--gpu", "--", "true"},
           {"run", "--loader", "ref", "--", "true"},
           {"run", "--loader=", "--", "true"},
           {"run", "--loader", "--", "true"},
           {"run", "--output"},
           {"run", "-o", "dir/", "--", "true"},
       }) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), bad.begin(), bad.end());
    expect_usage_error(argv, "run");
  }
  expect_usage_error({bin, "run", "--", "true"}, "run", {{"STALLSCOPE_GPU", "bogus"}});
  expect_usage_error({bin, "run", "-q", "true"}, "run", {{"STALLSCOPE_GPU", "kernel,"}});
  expect_usage_error({bin, "run", "-q", "true"}, "run", {{"STALLSCOPE_LOADER", "dali"}});
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"attach"},
           {"attach", "--duration", "-1", "1"},
           {"attach", "--duration", "0", "1"},
           {"attach", "-d", "1e9", "1"},
           {"attach", "-d"},
           {"attach", "--rings", "0", "1"},
           {"attach", "--ring-events", "3", "1"},
           {"attach", "0"},
           {"attach", "--list", "1"},
           {"attach", "1", "--bogus"},
           {"attach", "-o", "dir/", "1"},
       }) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), bad.begin(), bad.end());
    expect_usage_error(argv, "attach");
  }
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"report"},
           {"report", "--json"},
           {"report", "a.db", "a.db"},               // one recording twice (several are a job)
           {"report", "--explain", "a.db", "b.db"},  // --explain is one rank's
           {"report", "--top", "0", "job/"},
           {"report", "--json=maybe", "a.db"},
       }) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), bad.begin(), bad.end());
    expect_usage_error(argv, "report");
  }
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"compare"},
           {"compare", "--json"},
           {"compare", "a.db"},
           {"compare", "a.db", "b.db", "c.db"},
           {"compare", "--json=maybe", "a.db", "b.db"},
           {"compare", "a.db", "--", "b.db", "c.db"},
       }) {
    std::vector<std::string> argv = {bin};
    argv.insert(argv.end(), bad.begin(), bad.end());
    expect_usage_error(argv, "compare");
  }
  if (run_process({bin, "ui", "--help"}).out.find("--size") != std::string::npos) {  // a build with the dashboard
    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {"ui", "--size", "10x10"},
             {"ui", "--size=1600"},
             {"ui", "--frames", "0"},
             {"ui", "--range", "5:1"},
             {"ui", "--at", "-1"},
             {"ui", "--mouse", "1"},
             {"ui", "--screenshot"},
             {"ui", "a.db", "b.db", "c.db"},  // two are the compare view
         }) {
      std::vector<std::string> argv = {bin};
      argv.insert(argv.end(), bad.begin(), bad.end());
      expect_usage_error(argv, "ui", kUiEnv);
    }
  }
}

// The options of `run` end at `--` or at the program: what follows is the program's, options
// included, even the ones `run` has.
TEST(CliTest, RunPassesEverythingAfterTheProgramToIt) {
  testing::TempDir dir;
  const std::string out = dir.file("args.txt");
  const std::string script = "printf '%s|' \"$@\" > " + out;
  for (const bool with_dashes : {false, true}) {
    std::vector<std::string> argv = {STALLSCOPE_BIN, "run", "-q", "-o", dir.file("r.db")};
    if (with_dashes) argv.push_back("--");
    for (const char* a : {"sh", "-c", script.c_str(), "sh", "--epochs", "2", "-o", "x", "--", "-q"}) argv.push_back(a);
    const ProcResult p = run_process(argv);
    EXPECT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(testing::read_file(out), "--epochs|2|-o|x|--|-q|") << with_dashes;
    ::unlink(dir.file("r.db").c_str());
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
  EXPECT_EQ(count_lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("no process " + std::to_string(gone)), std::string::npos) << p.err;
  // Not Python: a child of this test, blocked in pause().
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  p = run_process({STALLSCOPE_BIN, "attach", "-o", db, std::to_string(child)});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_EQ(count_lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find("is not a Python program"), std::string::npos) << p.err;
  int st = 0;
  EXPECT_EQ(::waitpid(child, &st, WNOHANG), 0) << "the refused process was disturbed";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_NE(::access(db.c_str(), F_OK), 0) << "a refused attach left a recording";
}

// attach's help says what happens to the DataLoader workers already running: they are joined and
// instrumented (docs/attach.md), not only sampled.
TEST(CliTest, AttachHelpSaysRunningWorkersAreInstrumented) {
  const ProcResult p = run_process({STALLSCOPE_BIN, "attach", "--help"});
  ASSERT_EQ(p.exit_code, 0);
  std::string text = p.out;
  std::replace(text.begin(), text.end(), '\n', ' ');
  EXPECT_NE(text.find("worker processes that exist already are joined and instrumented"), std::string::npos) << p.out;
  EXPECT_EQ(text.find("exist already are sampled"), std::string::npos) << p.out;
}

// An -o file that exists: attach refuses it before touching the process (exit 2, one line); with
// --force a target that cannot be recorded still leaves the old file as it was.
TEST(CliTest, AttachRefusesAnExistingOutputUnlessForced) {
  testing::TempDir dir;
  const std::string db = dir.file("old.db");
  testing::write_file(db, "an old recording");
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ProcResult p = run_process({STALLSCOPE_BIN, "attach", "-o", db, std::to_string(child)});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_EQ(count_lines(p.err), 1) << p.err;
  EXPECT_NE(p.err.find(db + " exists; pass --force to overwrite it or choose another -o"), std::string::npos) << p.err;
  p = run_process({STALLSCOPE_BIN, "attach", "--force", "-o", db, std::to_string(child)});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_NE(p.err.find("is not a Python program"), std::string::npos) << p.err;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(testing::read_file(db), "an old recording");
}

}  // namespace
}  // namespace stallscope
