// MetricsState against recordings whose figures are known: the DataLoader simulator's training
// loops (stall, steps, samples, samples/s, queue depth) and a live recording written in parts,
// read between commits as a scrape would (only the new rows), with processes that end.
#include "export/metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::metrics {
namespace {

using testing::kMs;
using testing::RecordingBuilder;
using testing::SimConfig;
using testing::SimTruth;

class MetricsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name = "run.db") const { return dir_.file(name); }

  Figures read(const std::string& p, MetricsState* state = nullptr) {
    MetricsState local;
    MetricsState& s = state ? *state : local;
    auto r = Reader::open(p);
    EXPECT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(s.update(**r).ok());
    return s.figures();
  }

  testing::TempDir dir_;
};

TEST_F(MetricsTest, SimulatedLoopWithoutWorkers) {
  SimConfig c;
  c.batches_per_epoch = 200;  // 20 s: the recent window is in the steady state
  c.batch_size = 32;
  c.compute_ns = 70 * kMs;
  c.fetch_ns = [](int, int) { return 30 * kMs; };
  c.iter_ns = 5 * kMs;
  SimTruth truth;
  {
    RecordingBuilder b(path());
    truth = testing::simulate(b, c);
  }
  const Figures f = read(path());
  ASSERT_TRUE(f.training_seen);
  EXPECT_EQ(f.steps, truth.steps);
  EXPECT_EQ(f.samples, truth.samples);
  EXPECT_NEAR(f.training_s, truth.wall_s(), 1e-6);
  EXPECT_NEAR(f.stall_fraction, truth.stall_fraction(), 1e-6);
  EXPECT_NEAR(f.stall_by_cause_s.at(vocab::kCauseLoaderStart), 0.005, 1e-9);
  EXPECT_NEAR(f.stall_s, static_cast<double>(truth.stall_ns) / 1e9, 1e-9);
  // One batch of 32 every 100 ms, 30 of them waiting.
  ASSERT_TRUE(f.samples_per_s && f.recent_stall_fraction);
  EXPECT_NEAR(*f.samples_per_s, 320, 320 * 0.05);
  EXPECT_NEAR(*f.recent_stall_fraction, 0.30, 0.02);
  ASSERT_TRUE(f.recent_step_ms);  // `stallscope top`'s step time: a batch every 100 ms
  EXPECT_NEAR(*f.recent_step_ms, 100, 100 * 0.05);
  ASSERT_TRUE(f.training_loader);
  EXPECT_EQ(f.training_end_ns, truth.window_end_ns);
  EXPECT_FALSE(f.queue_seen);  // no workers: no queue
  EXPECT_FALSE(f.gpu_busy_fraction);
}

TEST_F(MetricsTest, SimulatedLoopWithWorkersCountsShortBatchesAndTheQueue) {
  SimConfig c;
  c.epochs = 2;
  c.batches_per_epoch = 40;
  c.batch_size = 16;
  c.last_batch_size = 5;  // known only from the workers' dl.collate
  c.num_workers = 2;
  c.compute_ns = 10 * kMs;
  c.fetch_ns = [](int, int) { return 50 * kMs; };  // data-bound: 2 workers, 25 ms a batch, 10 ms compute
  SimTruth truth;
  {
    RecordingBuilder b(path());
    truth = testing::simulate(b, c);
  }
  const Figures f = read(path());
  EXPECT_EQ(f.steps, truth.steps);
  EXPECT_EQ(f.samples, truth.samples);
  EXPECT_EQ(f.samples, 2 * (39 * 16 + 5));
  EXPECT_NEAR(f.stall_fraction, truth.stall_fraction(), 1e-6);
  EXPECT_GT(f.stall_fraction, 0.5);
  EXPECT_TRUE(f.queue_seen);
  // The recording is finished: every batch sent was put and handed.
  EXPECT_EQ(f.batches_in_flight, 0);
  EXPECT_EQ(f.batches_ready, 0);
  // Workers ended with their epochs: no process is left in the state.
  EXPECT_TRUE(f.processes.empty());
}

// A live recording read in parts: each update reads only the new rows, and the totals are those
// of one read of the whole.
TEST_F(MetricsTest, LiveRecordingReadInParts) {
  RecordingBuilder b(path());
  const int64_t main_row = b.process(1000);
  const int64_t main_thread = b.thread(main_row, 1000);
  const int64_t worker_row = b.process(2000);
  const int64_t worker_thread = b.thread(worker_row, 2000);
  b.instant(main_thread, "dl.config", 0, 0, b.str(R"({"loader": 0, "batch_size": 8, "num_workers": 1})"));
  b.instant(main_thread, "dl.epoch_begin", 0, 0, 0, 1);
  b.instant(main_thread, "dl.worker_start", 1 * kMs, 0, 0, 2000);
  int64_t t = 10 * kMs;
  auto batch = [&](int64_t i) {  // sent, fetched in 40 ms, put; next() waits 40 ms; step 10 ms
    b.instant(main_thread, "dl.sent", t, 0, i, 0);
    b.span(worker_thread, "dl.fetch", t, 40 * kMs, i, 0, 0);
    b.span(worker_thread, "dl.collate", t + 30 * kMs, 10 * kMs, i, 8, 0, 1);
    b.instant(worker_thread, "dl.put", t + 40 * kMs, i, 0, 0);
    b.span(main_thread, "dl.next", t, 40 * kMs, 0, i, 0);
    b.instant(main_thread, "dl.step", t + 50 * kMs, 0, 0);
    t += 50 * kMs;
  };
  for (int64_t i = 0; i < 4; ++i) batch(i);
  b.instant(main_thread, "dl.sent", t, 0, 4, 0);  // batch 4 in flight
  b.counter(2000, "proc.cpu", "cores", t, 0.75);
  b.counter(2000, "proc.runq_wait", "ratio", t, 0.25);
  b.counter(2000, "proc.sys_cpu", "cores", t, 0.125);
  b.counter(2000, "proc.minor_faults", "1/s", t, 5000);
  b.counter(2000, "proc.private_dirty", "bytes", 20 * kMs, 1000);
  b.counter(2000, "proc.private_dirty", "bytes", t, 5096);
  b.commit();

  MetricsState state;
  auto reader = Reader::open(path());
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  ASSERT_TRUE(state.update(**reader).ok());
  Figures f = state.figures();
  EXPECT_EQ(f.steps, 4);
  EXPECT_EQ(f.optimizer_steps, 4);
  EXPECT_EQ(f.samples, 32);
  EXPECT_EQ(f.batches_in_flight, 1);
  EXPECT_EQ(f.batches_ready, 0);
  EXPECT_NEAR(f.stall_s, 0.010 + 4 * 0.040, 1e-9);  // __iter__ until the first next(), then 4 waits
  ASSERT_EQ(f.processes.size(), 1u);
  EXPECT_EQ(f.processes[0].pid, 2000);
  EXPECT_EQ(f.processes[0].role, "worker");
  EXPECT_DOUBLE_EQ(*f.processes[0].cpu_cores, 0.75);
  EXPECT_DOUBLE_EQ(*f.processes[0].runq_wait_ratio, 0.25);
  EXPECT_DOUBLE_EQ(*f.processes[0].sys_cpu_cores, 0.125);
  EXPECT_DOUBLE_EQ(*f.processes[0].minor_faults_per_s, 5000);
  EXPECT_EQ(*f.processes[0].private_growth_bytes, 4096);

  const std::string text = MetricsState::render(f, {"j", "3", "h"}, true);
  EXPECT_NE(text.find("# TYPE stallscope_steps_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("stallscope_steps_total{job=\"j\",rank=\"3\",host=\"h\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stallscope_process_cpu_cores{job=\"j\",rank=\"3\",host=\"h\",role=\"worker\",loader=\"0\","
                      "worker=\"0\"} 0.75\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stallscope_up{job=\"j\",rank=\"3\",host=\"h\"} 1\n"), std::string::npos);
  EXPECT_NE(
      text.find(
          "stallscope_process_sys_cpu_cores{job=\"j\",rank=\"3\",host=\"h\",role=\"worker\",loader=\"0\",worker=\"0\"} "
          "0.125\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("stallscope_process_minor_faults_per_second{job=\"j\",rank=\"3\",host=\"h\",role=\"worker\","
                      "loader=\"0\",worker=\"0\"} 5000\n"),
            std::string::npos)
      << text;

  // Batch 4 is put (ready), then handed with a 5th; the worker ends.
  b.span(worker_thread, "dl.fetch", t, 40 * kMs, 4, 0, 0);
  b.instant(worker_thread, "dl.put", t + 40 * kMs, 4, 0, 0);
  b.commit();
  ASSERT_TRUE(state.update(**reader).ok());
  f = state.figures();
  EXPECT_EQ(f.batches_in_flight, 0);
  EXPECT_EQ(f.batches_ready, 1);
  EXPECT_EQ(f.steps, 4);

  b.span(main_thread, "dl.next", t, 40 * kMs, 0, 4, 0);
  b.end_process(worker_row, t + 60 * kMs);
  b.commit();
  ASSERT_TRUE(state.update(**reader).ok());
  f = state.figures();
  EXPECT_EQ(f.steps, 5);
  EXPECT_EQ(f.samples, 40);  // batch 4 had no collate: the configured batch_size
  EXPECT_EQ(f.batches_ready, 0);
  EXPECT_TRUE(f.processes.empty());  // the ended worker left the state

  // The same rows read at once give the same totals.
  b.finish();
  const Figures whole = read(path());
  EXPECT_EQ(whole.steps, f.steps);
  EXPECT_EQ(whole.samples, f.samples);
  EXPECT_NEAR(whole.stall_s, f.stall_s, 1e-9);
  EXPECT_NEAR(whole.training_s, f.training_s, 1e-9);
}

// Workers started again every epoch (no persistent_workers) continue the series of their index, and
// processes that are neither the training process nor its workers are one series: a rank's series
// stay as many however long it runs.
TEST_F(MetricsTest, WorkersStartedAgainEachEpochContinueTheirSeries) {
  RecordingBuilder b(path());
  const int64_t main_row = b.process(1000);
  const int64_t main_thread = b.thread(main_row, 1000);
  b.process(5000);  // something else the launcher started
  b.process(5001);
  b.instant(main_thread, "dl.config", 0, 0, b.str(R"({"loader": 0, "batch_size": 8, "num_workers": 2})"));
  MetricsState state;
  std::set<std::string> series;  // every process series ever rendered
  int64_t t = 0, pid = 2000;
  for (int epoch = 0; epoch < 6; ++epoch) {
    b.instant(main_thread, "dl.epoch_begin", t, 0, epoch, 2);
    std::vector<int64_t> rows;
    for (int k = 0; k < 2; ++k, ++pid) {
      rows.push_back(b.process(pid, t));
      b.instant(main_thread, "dl.worker_start", t + 1 * kMs, 0, k, pid);
      b.counter(pid, "proc.cpu", "cores", t + 50 * kMs, 0.5 + 0.1 * k + epoch);
    }
    b.counter(1000, "proc.cpu", "cores", t + 50 * kMs, 0.25);
    b.counter(5000, "proc.cpu", "cores", t + 50 * kMs, 0.125);
    b.counter(5001, "proc.cpu", "cores", t + 50 * kMs, 0.125);
    b.span(main_thread, "dl.next", t + 2 * kMs, 40 * kMs, 0, 0, epoch);
    b.commit();
    auto reader = Reader::open(path());
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    ASSERT_TRUE(state.update(**reader).ok());
    const Figures f = state.figures();
    const std::string text = MetricsState::render(f, {"j", "0", "h"}, true);
    for (size_t at = text.find("stallscope_process_cpu_cores{"); at != std::string::npos;
         at = text.find("stallscope_process_cpu_cores{", at + 1)) {
      series.insert(text.substr(at, text.find('}', at) - at + 1));
    }
    // This epoch's workers hold the places 0 and 1 with their own figures.
    EXPECT_NE(text.find("stallscope_process_cpu_cores{job=\"j\",rank=\"0\",host=\"h\",role=\"worker\",loader=\"0\","
                        "worker=\"1\"} " +
                        std::to_string(0.6 + epoch).substr(0, 3)),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("stallscope_process_cpu_cores{job=\"j\",rank=\"0\",host=\"h\",role=\"other\"} 0.25\n"),
              std::string::npos)
        << text;
    for (int64_t row : rows) b.end_process(row, t + 60 * kMs);
    b.commit();
    t += 100 * kMs;
  }
  EXPECT_EQ(series.size(), 4u) << [&] {
    std::string all;
    for (const std::string& s : series) all += s + "\n";
    return all;
  }();  // train, worker 0, worker 1, other: not 12 workers' pids
}

// GPU busy: the union of kernels, copies and memsets (overlaps counted once, syncs not at all)
// over the time since the first.
TEST_F(MetricsTest, GpuBusyFraction) {
  RecordingBuilder b(path());
  const int64_t main_row = b.process(1000);
  auto gpu = [&](const char* kind, int64_t start_ms, int64_t dur_ms) {
    GpuActivityRow g;
    g.process_id = main_row;
    g.kind = kind;
    g.start_ns = start_ms * kMs;
    g.dur_ns = dur_ms * kMs;
    g.name_id = b.str(kind);
    b.writer().add_gpu_activity(g);
  };
  gpu("kernel", 0, 10);
  gpu("memcpy", 5, 10);  // overlaps the kernel: 0-15 busy
  gpu("sync", 20, 50);   // a host wait, not GPU work
  gpu("memset", 90, 10);
  b.finish();
  const Figures f = read(path());
  ASSERT_TRUE(f.gpu_busy_fraction);
  EXPECT_NEAR(*f.gpu_busy_fraction, 25.0 / 100.0, 1e-9);
  EXPECT_NE(MetricsState::render(f, {"j", "0", "h"}, true)
                .find("stallscope_gpu_busy_fraction{job=\"j\",rank=\"0\",host=\"h\"} 0.25\n"),
            std::string::npos);
}

TEST_F(MetricsTest, LabelValuesAreEscaped) {
  const std::string text = MetricsState::render(Figures{}, {"a\"b\\c\nd", "0", "h"}, false);
  EXPECT_NE(text.find("stallscope_up{job=\"a\\\"b\\\\c\\nd\",rank=\"0\",host=\"h\"} 0\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace stallscope::metrics
