// The job view (analysis/job.h) on generated jobs whose truth is known by construction
// (tests/ui/sim_recording.h, write_sim_job): ranks in lockstep, one node's input made slower from a
// given minute. It names that node, its ranks and the period it began; reads the same job from its
// folder as from the merged recording; refuses a rank given twice; and `stallscope report DIR`
// prints it.
#include "analysis/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/json.h"
#include "storage/merge.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

using testing::JobSimOptions;

JobSimOptions small_job() { return testing::small_job(10, 6); }

std::set<int64_t> as_set(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

TEST(JobViewTest, NamesThePlantedSlowNodeItsRanksAndTheMinuteItBegan) {
  testing::TempDir dir;
  const JobSimOptions o = small_job();
  const testing::JobSimTruth truth = testing::write_sim_job(dir.path(), o);
  auto files = analysis::job_folder(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 16u);
  auto v = analysis::job_view(*files);
  ASSERT_TRUE(v.ok()) << v.status().message();

  EXPECT_EQ(v->ranks.size(), 16u);
  EXPECT_EQ(v->world_size, 16);
  EXPECT_EQ(v->job, "sim-job");
  EXPECT_EQ(v->nodes.size(), 4u);
  EXPECT_EQ(v->slow_nodes, std::vector<std::string>{"node-02"});
  EXPECT_EQ(as_set(v->slow), (std::set<int64_t>{8, 9, 10, 11}));
  ASSERT_FALSE(v->nodes.empty());
  EXPECT_EQ(v->nodes.front().name, "node-02");
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(v->ranks[i].node, "node-02") << "rank " << v->ranks[i].rank;
  for (size_t i = 4; i < v->ranks.size(); ++i) EXPECT_FALSE(v->ranks[i].slow) << v->ranks[i].rank;

  // The slowdown: at 6:00 of job time, give or take a period, and first on node-02's ranks.
  ASSERT_TRUE(v->slowdown.has_value());
  const int64_t at = v->start_ns + v->slowdown->period * v->period_ns;
  EXPECT_LE(std::llabs(at - o.slow_from_ns), v->period_ns) << at;
  EXPECT_LT(v->slowdown->after, 0.7 * v->slowdown->before);
  EXPECT_EQ(as_set(v->slowdown->first_ranks), (std::set<int64_t>{8, 9, 10, 11}));
  EXPECT_EQ(v->slowdown->first_nodes, std::vector<std::string>{"node-02"});

  // Every rank handed every step's batch; the slow node's fetches took about 3x the others' after.
  for (const analysis::JobRank& k : v->ranks) {
    EXPECT_EQ(k.batches, truth.steps) << k.rank;
    EXPECT_EQ(k.samples, truth.steps * o.batch_size) << k.rank;
    ASSERT_TRUE(k.fetch_x.has_value()) << k.rank;
    if (k.slow) {
      EXPECT_NEAR(*k.fetch_x, 3.0, 0.3) << k.rank;
      ASSERT_TRUE(k.rose_at.has_value()) << k.rank;
      EXPECT_LE(std::llabs(v->start_ns + *k.rose_at * v->period_ns - o.slow_from_ns), v->period_ns) << k.rank;
    } else {
      EXPECT_NEAR(*k.fetch_x, 1.0, 0.1) << k.rank;
      EXPECT_FALSE(k.rose_at.has_value()) << k.rank;
    }
    // The synchronous all_reduce: one a step, measured.
    EXPECT_EQ(k.collectives, truth.steps) << k.rank;
  }
  // Fast ranks wait in the collectives for the slow node; the rank that waits most for its data
  // waits least there.
  const analysis::JobRank& slowest = v->ranks.front();
  const analysis::JobRank& fast = v->ranks.back();
  EXPECT_GT(slowest.data_share(), fast.data_share() + 0.05);
  EXPECT_GT(fast.collective_share(), slowest.collective_share() + 0.05);
  EXPECT_GT(fast.behind_s, slowest.behind_s);
}

TEST(JobViewTest, AnEvenJobNamesNoRankAndNoSlowdown) {
  testing::TempDir dir;
  JobSimOptions o = small_job();
  o.slow_node = -1;
  testing::write_sim_job(dir.path(), o);
  auto v = analysis::job_view(*analysis::job_folder(dir.path()));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_FALSE(v->slowdown.has_value());
  EXPECT_TRUE(v->slow.empty());
  EXPECT_TRUE(v->slow_nodes.empty());
  const std::string text = analysis::render_job_text(*v);
  EXPECT_NE(text.find("No rank stands out"), std::string::npos) << text;
  EXPECT_NE(text.find("samples/s held"), std::string::npos) << text;
}

TEST(JobViewTest, ANodeSlowFromTheStartIsNamedWithoutASlowdown) {
  testing::TempDir dir;
  JobSimOptions o = small_job();
  o.slow_node = 1;
  o.slow_from_ns = 0;
  testing::write_sim_job(dir.path(), o);
  auto v = analysis::job_view(*analysis::job_folder(dir.path()));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_FALSE(v->slowdown.has_value());
  EXPECT_EQ(v->slow_nodes, std::vector<std::string>{"node-01"});
  EXPECT_EQ(as_set(v->slow), (std::set<int64_t>{4, 5, 6, 7}));
}

TEST(JobViewTest, TheFolderAndTheMergedRecordingGiveTheSameView) {
  testing::TempDir dir, out;
  testing::write_sim_job(dir.path(), small_job());
  auto files = analysis::job_folder(dir.path());
  ASSERT_TRUE(files.ok());
  auto merged = merge_recordings(*files, out.file("job.db"));
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  auto a = analysis::job_view(*files);
  auto b = analysis::job_view({out.file("job.db")});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(a->slow, b->slow);
  EXPECT_EQ(a->slow_nodes, b->slow_nodes);
  ASSERT_EQ(a->slowdown.has_value(), b->slowdown.has_value());
  EXPECT_EQ(a->slowdown->period, b->slowdown->period);
  EXPECT_EQ(a->slowdown->first_ranks, b->slowdown->first_ranks);
  ASSERT_EQ(a->ranks.size(), b->ranks.size());
  for (size_t i = 0; i < a->ranks.size(); ++i) {
    const analysis::JobRank &x = a->ranks[i], &y = b->ranks[i];
    EXPECT_EQ(x.rank, y.rank) << i;
    EXPECT_EQ(x.node, y.node) << i;
    EXPECT_EQ(x.batches, y.batches) << x.rank;
    EXPECT_EQ(x.samples, y.samples) << x.rank;
    EXPECT_EQ(x.start_ns, y.start_ns) << x.rank;
    EXPECT_NEAR(x.data_share(), y.data_share(), 0.002) << x.rank;
    EXPECT_NEAR(x.collective_share(), y.collective_share(), 0.01) << x.rank;
  }
}

TEST(JobViewTest, RefusesARankTwiceAndSaysWhatWasLeftOut) {
  testing::TempDir dir, other;
  testing::write_sim_job(dir.path(), small_job());
  auto files = analysis::job_folder(dir.path());
  ASSERT_TRUE(files.ok());
  std::vector<std::string> twice = *files;
  twice.push_back(files->front());
  auto v = analysis::job_view(twice);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("is in both"), std::string::npos) << v.status().message();
  EXPECT_EQ(testing::count_lines(v.status().message()), 0);

  // A recording of no rank (one process, no dist.rank, no meta rank) is left out, said in a note.
  testing::SimOptions single;
  single.epochs = 1;
  single.batches = 10;
  testing::write_sim_recording(other.file("single.db"), single);
  std::vector<std::string> with = *files;
  with.push_back(other.file("single.db"));
  auto w = analysis::job_view(with);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ(w->ranks.size(), 16u);
  ASSERT_EQ(w->notes.size(), 1u);
  EXPECT_NE(w->notes[0].find("no rank recorded"), std::string::npos) << w->notes[0];
  auto none = analysis::job_view({other.file("single.db")});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no rank"), std::string::npos) << none.status().message();

  auto empty = analysis::job_folder(other.path() + "/nothing");
  EXPECT_FALSE(empty.ok());
}

TEST(JobViewTest, ReportOfAFolderPrintsTheJobViewAsTextAndJson) {
  testing::TempDir dir;
  testing::write_sim_job(dir.path(), small_job());
  testing::ProcResult p = testing::run_process({STALLSCOPE_BIN, "report", dir.path()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.out.find("Job: 16 ranks on 4 nodes"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("Slow node node-02: all 4 of its ranks (8-11)"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("The job slowed at 6:00"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("First on node node-02"), std::string::npos) << p.out;

  testing::ProcResult j = testing::run_process({STALLSCOPE_BIN, "report", "--json", dir.path()});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto doc = json::parse(j.out);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["schema"], "stallscope.job/1");
  EXPECT_EQ((*doc)["ranks"].size(), 16u);
  EXPECT_EQ((*doc)["slow_nodes"], Json::array({"node-02"}));
  EXPECT_NEAR((*doc)["slowdown"]["at_s"].get<double>(), 360.0, 20.0);

  // The same from the files named one by one; --explain is one rank's and refused for a job.
  auto files = analysis::job_folder(dir.path());
  std::vector<std::string> argv = {STALLSCOPE_BIN, "report", "--json"};
  argv.insert(argv.end(), files->begin(), files->end());
  testing::ProcResult f = testing::run_process(argv);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, j.out);
  testing::ProcResult e = testing::run_process({STALLSCOPE_BIN, "report", "--explain", dir.path()});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_EQ(testing::count_lines(e.err), 1) << e.err;
  testing::TempDir empty;
  testing::ProcResult n = testing::run_process({STALLSCOPE_BIN, "report", empty.path()});
  EXPECT_EQ(n.exit_code, 1);
  EXPECT_EQ(testing::count_lines(n.err), 1) << n.err;
  EXPECT_NE(n.err.find("no recordings"), std::string::npos) << n.err;
}

}  // namespace
}  // namespace stallscope
