// GPU mode on synthetic recordings whose GPU timeline and host activity are known by
// construction: busy fraction, idle time split by cause, pinned/pageable copy figures, and the
// GPU recommendations.
#include <gtest/gtest.h>

#include "analysis/report.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::analysis {
namespace {

using stallscope::testing::kMs;
using stallscope::testing::RecordingBuilder;

bool has(const Report& r, const std::string& id) {
  for (const Recommendation& rec : r.recommendations) {
    if (rec.id == id) return true;
  }
  return false;
}

// One step of 100 ms, repeated: [0,20) next() waits for data; [20,35) a pageable cudaMemcpyAsync
// whose GPU copy runs [27,35); [35,75) a kernel; [75,90) cudaStreamSynchronize with nothing left
// on the GPU; [90,100) other host work. GPU busy 48 ms of 100; idle: data 20, h2d 7, sync 15,
// other 10.
void write_gpu_loop(RecordingBuilder& b, int steps, const std::string& src_kind, int64_t pid = 1000) {
  const int64_t proc = b.process(pid);
  const int64_t th = b.thread(proc, pid);
  const int64_t t0 = 1000 * kMs;
  b.instant(th, "dl.config", t0 - 5 * kMs, 0,
            b.str(R"({"loader":0,"batch_size":64,"num_workers":0,"pin_memory":false,"persistent_workers":false})"), 0);
  b.instant(th, "dl.epoch_begin", t0 - 1 * kMs, 0, 0, 0);
  for (int i = 0; i < steps; ++i) {
    const int64_t t = t0 + i * 100 * kMs;
    b.span(th, "dl.next", t, 20 * kMs, 0, i, 0);
    b.span(th, "dl.fetch", t, 20 * kMs, 0, i, -1, 1);
    b.span(th, "cuda.cudaMemcpyAsync", t + 20 * kMs, 15 * kMs, 100 + i);
    GpuActivityRow copy;
    copy.process_id = proc;
    copy.kind = "memcpy";
    copy.start_ns = t + 27 * kMs;
    copy.dur_ns = 8 * kMs;
    copy.name_id = b.str("memcpy HtoD");
    copy.bytes = 64 << 20;
    copy.copy_kind = "HtoD";
    copy.src_kind = src_kind;
    copy.dst_kind = "device";
    copy.correlation_id = 100 + i;
    b.writer().add_gpu_activity(copy);
    GpuActivityRow k;
    k.process_id = proc;
    k.kind = "kernel";
    k.start_ns = t + 35 * kMs;
    k.dur_ns = 40 * kMs;
    k.name_id = b.str("gemm");
    k.correlation_id = 200 + i;
    b.writer().add_gpu_activity(k);
    b.span(th, "cuda.cudaStreamSynchronize", t + 75 * kMs, 15 * kMs, 300 + i);
  }
  b.instant(th, "dl.epoch_end", t0 + steps * 100 * kMs, 0, 0, steps);
}

class GpuTest : public ::testing::Test {
 protected:
  stallscope::testing::TempDir dir_;
  Report report(const std::string& src_kind) {
    const std::string p = dir_.file(src_kind + ".db");
    {
      RecordingBuilder b(p);
      write_gpu_loop(b, 10, src_kind);
    }
    auto s = load_session(p);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return analyze(*s);
  }
};

TEST_F(GpuTest, IdleTimeIsSplitByCause) {
  const Report r = report("pageable");
  ASSERT_EQ(r.mode, "gpu");
  // The window starts at DataLoader.__iter__, 1 ms before the first next(): loader_start.
  EXPECT_NEAR(r.wall_s, 1.001, 1e-6);
  EXPECT_NEAR(r.gpu.busy_fraction, 0.48 / 1.001, 1e-6);
  EXPECT_NEAR(r.stall.fraction, 0.521 / 1.001, 1e-6);
  EXPECT_NEAR(r.stall.by_cause_s.at("loader_start"), 0.001, 1e-6);
  EXPECT_NEAR(r.stall.by_cause_s.at("data_wait"), 0.20, 1e-6);
  EXPECT_NEAR(r.stall.by_cause_s.at("h2d_transfer"), 0.07, 1e-6);
  EXPECT_NEAR(r.stall.by_cause_s.at("sync"), 0.15, 1e-6);
  EXPECT_NEAR(r.stall.by_cause_s.at("host_other"), 0.10, 1e-6);
  // Each interval has one cause; data_wait intervals name the batch.
  int data = 0;
  for (const StallInterval& i : r.stall.intervals) {
    if (i.cause == "data_wait") {
      EXPECT_EQ(i.end_ns - i.start_ns, 20 * kMs);
      EXPECT_EQ(i.batch, data);
      ++data;
    }
  }
  EXPECT_EQ(data, 10);
  EXPECT_EQ(r.steps, 10);
}

TEST_F(GpuTest, CopiesSplitByPinnedAndPageable) {
  const Report pg = report("pageable");
  EXPECT_EQ(pg.gpu.h2d_pageable.count, 10);
  EXPECT_EQ(pg.gpu.h2d_pageable.bytes, 10ll * (64 << 20));
  ASSERT_TRUE(pg.gpu.h2d_pageable.gbps.has_value());
  EXPECT_NEAR(*pg.gpu.h2d_pageable.gbps, (64.0 * (1 << 20)) / 0.008 / 1e9, 1e-6);
  EXPECT_EQ(pg.gpu.h2d_pinned.count, 0);
  const Report pn = report("pinned");
  EXPECT_EQ(pn.gpu.h2d_pinned.count, 10);
  EXPECT_EQ(pn.gpu.h2d_pageable.count, 0);
}

TEST_F(GpuTest, GpuRecommendations) {
  const Report pg = report("pageable");
  EXPECT_TRUE(has(pg, "pageable_h2d"));
  EXPECT_TRUE(has(pg, "host_sync"));
  EXPECT_TRUE(has(pg, "enable_pin_memory"));
  const Report pn = report("pinned");
  EXPECT_FALSE(has(pn, "pageable_h2d"));
  EXPECT_TRUE(has(pn, "host_sync"));
  // The JSON document carries the GPU figures.
  const Json j = to_json(pg);
  ASSERT_TRUE(j.contains("gpu"));
  EXPECT_EQ(json::get_string(j, "mode"), "gpu");
}

TEST_F(GpuTest, CpuRecordingStaysInCpuMode) {
  const std::string p = dir_.file("cpu.db");
  {
    RecordingBuilder b(p);
    const int64_t proc = b.process(1000);
    const int64_t th = b.thread(proc, 1000);
    for (int i = 0; i < 5; ++i) b.span(th, "dl.next", (1000 + i * 100) * kMs, 30 * kMs, 0, i, 0);
  }
  auto s = load_session(p);
  ASSERT_TRUE(s.ok());
  const Report r = analyze(*s);
  EXPECT_EQ(r.mode, "cpu");
  EXPECT_FALSE(r.gpu.present);
  EXPECT_FALSE(has(r, "pageable_h2d"));
  EXPECT_FALSE(has(r, "enable_pin_memory"));
}

}  // namespace
}  // namespace stallscope::analysis
