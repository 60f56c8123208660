// Tests of `stallscope compare` end to end: two fixture recordings compared as text and as JSON,
// a file that cannot be read (the report command's one line, exit 1, whichever side it is on), and
// usage errors (exit 2).
#include <gtest/gtest.h>

#include "common/json.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::count_lines;
using testing::ProcResult;
using testing::RecordingBuilder;
using testing::run_process;
using testing::SimConfig;

class CompareCliTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;

  // A: num_workers=0, 100 steps of 100 ms (30 ms fetch + 70 ms compute); B: 2 workers, 70 ms steps.
  std::pair<std::string, std::string> two_recordings() {
    const std::string a = dir_.file("a.db"), b = dir_.file("b.db");
    SimConfig c;
    c.command = "python train.py";
    {
      RecordingBuilder rb(a);
      testing::simulate(rb, c);
    }
    c.num_workers = 2;
    {
      RecordingBuilder rb(b);
      testing::simulate(rb, c);
    }
    return {a, b};
  }
};

TEST_F(CompareCliTest, TextAndJson) {
  const auto [a, b] = two_recordings();
  ProcResult p = run_process({STALLSCOPE_BIN, "compare", a, b});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_TRUE(p.err.empty()) << p.err;
  for (const std::string& s :
       std::vector<std::string>{"stallscope compare", "  A  " + a, "  B  " + b, "B is faster by 1.4", "Samples/s",
                                "Data stall", "increase_num_workers"}) {
    EXPECT_NE(p.out.find(s), std::string::npos) << s << "\n" << p.out;
  }

  p = run_process({STALLSCOPE_BIN, "compare", "--json", a, b});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok()) << doc.status().message() << "\n" << p.out;
  EXPECT_EQ(json::get_string(*doc, "schema"), "stallscope.compare/1");
  EXPECT_EQ(json::get_string(*doc, "verdict"), "faster");
  EXPECT_GT(*json::get_double(doc->at("ratio"), "samples_per_s"), 1.4);
  EXPECT_EQ(json::get_string(doc->at("a"), "source"), a);
  EXPECT_EQ(json::get_string(doc->at("b"), "command"), "python train.py");
  EXPECT_TRUE(doc->at("problems").empty());

  // A recording against itself: no measurable difference.
  p = run_process({STALLSCOPE_BIN, "compare", "--json", a, a});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  doc = json::parse(p.out);
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(json::get_string(*doc, "verdict"), "no_difference");
}

TEST_F(CompareCliTest, AnUnreadableFileGetsTheReportCommandsLine) {
  const auto [a, b] = two_recordings();
  const std::string missing = dir_.file("missing.db");
  const std::string junk = dir_.file("junk.db");
  testing::write_file(junk, std::string(8192, 'x'));
  for (const std::string& bad : {missing, junk}) {
    const ProcResult report = run_process({STALLSCOPE_BIN, "report", bad});
    ASSERT_EQ(report.exit_code, 1);
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{bad, b}, {a, bad}, {"--json", a, bad}}) {
      std::vector<std::string> argv = {STALLSCOPE_BIN, "compare"};
      argv.insert(argv.end(), args.begin(), args.end());
      const ProcResult p = run_process(argv);
      EXPECT_EQ(p.exit_code, 1) << bad << "\n" << p.err;
      EXPECT_EQ(count_lines(p.err), 1) << p.err;
      EXPECT_EQ(p.err, report.err);
      EXPECT_TRUE(p.out.empty()) << p.out;
    }
  }
}

TEST_F(CompareCliTest, UsageErrors) {
  const auto [a, b] = two_recordings();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {}, {a}, {"--json"}, {a, b, a}, {"--bogus", a, b}, {"--json=maybe", a, b}}) {
    std::vector<std::string> argv = {STALLSCOPE_BIN, "compare"};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcResult p = run_process(argv);
    EXPECT_EQ(p.exit_code, 2) << p.err;
    EXPECT_EQ(count_lines(p.err), 1) << p.err;
    EXPECT_EQ(p.err.rfind("stallscope: ", 0), 0u) << p.err;
    EXPECT_NE(p.err.find("(see 'stallscope compare --help')"), std::string::npos) << p.err;
    EXPECT_TRUE(p.out.empty()) << p.out;
  }
}

}  // namespace
}  // namespace stallscope
