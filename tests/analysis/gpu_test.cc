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

// A loader without workers in process `pid`: steps of 100 ms from 1 s, each beginning with a
// 20-ms next() of batch i; `step(proc, th, i, t)` writes the rest of step i, which begins at t.
template <typename Step>
void write_loader_loop(RecordingBuilder& b, int steps, int64_t pid, Step step) {
  const int64_t proc = b.process(pid);
  const int64_t th = b.thread(proc, pid);
  const int64_t t0 = 1000 * kMs;
  b.instant(th, "dl.config", t0 - 5 * kMs, 0,
            b.str(R"({"loader":0,"batch_size":64,"num_workers":0,"pin_memory":false,"persistent_workers":false})"), 0);
  b.instant(th, "dl.epoch_begin", t0 - 1 * kMs, 0, 0, 0);
  for (int i = 0; i < steps; ++i) {
    const int64_t t = t0 + i * 100 * kMs;
    b.span(th, "dl.next", t, 20 * kMs, 0, i, 0);
    step(proc, th, i, t);
  }
  b.instant(th, "dl.epoch_end", t0 + steps * 100 * kMs, 0, 0, steps);
}

// One step of 100 ms, repeated: [0,20) next() waits for data; [20,35) a pageable cudaMemcpyAsync
// whose GPU copy runs [27,35); [35,75) a kernel; [75,90) cudaStreamSynchronize with nothing left
// on the GPU; [90,100) other host work. GPU busy 48 ms of 100; idle: data 20, h2d 7, sync 15,
// other 10.
void write_gpu_loop(RecordingBuilder& b, int steps, const std::string& src_kind, int64_t pid = 1000) {
  write_loader_loop(b, steps, pid, [&](int64_t proc, int64_t th, int i, int64_t t) {
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
  });
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

// Light GPU mode: the same kind of loop recorded with marks instead of kernels. Step i of 100 ms
// begins with next() [t, t+20 ms). Its next_begin mark is recorded 10 us into the call; on even
// steps the GPU still works 5 ms on the previous step (reached at t+5 ms), on odd steps it is idle
// already (reached 20 us after recording). Step 7 has no mark (a full event pool, say).
void write_light_loop(RecordingBuilder& b, int steps) {
  constexpr int64_t kUs = 1000;
  write_loader_loop(b, steps, 1000, [&](int64_t proc, int64_t, int i, int64_t t) {
    if (i == 7) return;
    GpuActivityRow begin;
    begin.process_id = proc;
    begin.kind = "mark";
    begin.start_ns = t + 10 * kUs;
    begin.dur_ns = i % 2 == 0 ? 5 * kMs - 10 * kUs : 20 * kUs;
    begin.name_id = b.str("next_begin");
    b.writer().add_gpu_activity(begin);
    GpuActivityRow end = begin;
    end.start_ns = t + 20 * kMs - 10 * kUs;
    end.dur_ns = 20 * kUs;
    end.name_id = b.str("next_end");
    b.writer().add_gpu_activity(end);
  });
}

TEST_F(GpuTest, LightModeCountsTheGpusIdlePartOfEachWait) {
  const std::string p = dir_.file("light.db");
  {
    RecordingBuilder b(p);
    write_light_loop(b, 10);
  }
  auto s = load_session(p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Report r = analyze(*s);
  ASSERT_EQ(r.mode, "gpu_light");
  EXPECT_FALSE(r.gpu.present);  // marks are not GPU work
  const GpuLightStats& g = r.gpu_light;
  EXPECT_EQ(g.marks, 18);
  EXPECT_EQ(g.calls, 10);
  EXPECT_EQ(g.calls_marked, 9);
  EXPECT_NEAR(g.host_wait_s, 0.200, 1e-9);
  // Even steps 0,2,4,6,8: 15 ms idle; odd marked steps 1,3,5,9: 20 ms less the 30 us before the
  // mark was reached; step 7, unmarked: its whole 20 ms.
  const double idle = 5 * 0.015 + 4 * (0.020 - 0.000030) + 0.020;
  EXPECT_NEAR(g.gpu_idle_s, idle, 1e-9);
  EXPECT_NEAR(r.stall.by_cause_s.at("data_wait"), idle, 1e-9);
  EXPECT_NEAR(r.stall.by_cause_s.at("loader_start"), 0.001, 1e-9);
  EXPECT_NEAR(r.stall.seconds, idle + 0.001, 1e-9);
  EXPECT_NEAR(r.stall.fraction, (idle + 0.001) / r.wall_s, 1e-9);
  ASSERT_TRUE(g.queued_p50_ms.has_value());
  EXPECT_NEAR(*g.queued_p50_ms, 4.99, 1e-9);  // 5 of the 9 marked calls found 4.99 ms still queued
  // Each data_wait interval starts where the GPU ran out of work.
  for (const StallInterval& i : r.stall.intervals) {
    if (i.cause != "data_wait") continue;
    const int64_t t = 1000 * kMs + i.batch * 100 * kMs;
    const int64_t want = i.batch == 7 ? t : i.batch % 2 == 0 ? t + 5 * kMs : t + 30 * 1000;
    EXPECT_EQ(i.start_ns, want) << i.batch;
    EXPECT_EQ(i.end_ns, t + 20 * kMs) << i.batch;
  }
  const Json j = to_json(r);
  EXPECT_EQ(json::get_string(j, "mode"), "gpu_light");
  ASSERT_TRUE(j.contains("gpu_light"));
  EXPECT_EQ(j["gpu_light"]["calls_marked"].get<int64_t>(), 9);
  const std::string text = render_text(r);
  EXPECT_NE(text.find("light mode: 9 of 10 next() calls marked"), std::string::npos) << text;
}

}  // namespace
}  // namespace stallscope::analysis
