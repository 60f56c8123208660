// The CUPTI layer without a GPU: synthetic CUPTI activity records go through the same decoding
// and recording path as real ones, then through the drainer into gpu_activities rows, on the same
// clock as host events.
#include "collector/cupti_decode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "collector/collector.h"
#include "stallscope/stallscope.h"
#include "storage/ingest.h"
#include "storage/reader.h"
#include "storage/sqlite.h"
#include "tests/unit/test_util.h"

extern "C" int InitializeInjection(void);

namespace stallscope {
namespace {

class CuptiDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = testing::unique_name("ss-cupti-test");
    std::string err;
    arena_ = Arena::create(name_, ArenaConfig{}, &err);
    ASSERT_NE(arena_, nullptr) << err;
    Collector::join(arena_);
    auto w = Writer::create(dir_.file("gpu.db"));
    ASSERT_TRUE(w.ok());
    writer_ = std::move(*w);
    ingest_ = std::make_unique<Ingest>(arena_, writer_.get());
    ASSERT_TRUE(ingest_->write_meta({}).ok());
  }
  void TearDown() override {
    Collector::leave();
    Arena::unlink(name_);
  }
  std::unique_ptr<Reader> drain_and_read() {
    EXPECT_TRUE(ingest_->drain(true).ok());
    auto r = Reader::open(dir_.file("gpu.db"));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::move(*r);
  }
  void feed(const CUpti_Activity* record) {
    GpuActivity a;
    ASSERT_TRUE(cupti_decode(record, &a));
    record_gpu_activity(a);
  }
  std::string name_;
  testing::TempDir dir_;
  Arena* arena_ = nullptr;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(CuptiDecodeTest, EveryRecordKindBecomesARow) {
  const uint64_t t = monotonic_ns();
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = t + 1000;
  k.end = t + 51000;
  k.deviceId = 1;
  k.streamId = 7;
  k.correlationId = 42;
  k.name = "_Z4gemmIfEvPKT_S2_PS0_";
  feed(reinterpret_cast<CUpti_Activity*>(&k));

  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4 << 20;
  m.start = t + 60000;
  m.end = t + 460000;
  m.streamId = 7;
  m.correlationId = 43;
  feed(reinterpret_cast<CUpti_Activity*>(&m));
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.start = t + 500000;
  m.end = t + 600000;
  feed(reinterpret_cast<CUpti_Activity*>(&m));

  CUpti_ActivityMemset4 s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 1024;
  s.start = t + 700000;
  s.end = t + 701000;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  feed(reinterpret_cast<CUpti_Activity*>(&s));

  CUpti_ActivitySynchronization2 y;
  std::memset(&y, 0, sizeof y);
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = t + 800000;
  y.end = t + 900000;
  y.streamId = 7;
  feed(reinterpret_cast<CUpti_Activity*>(&y));

  CUpti_Activity other;
  other.kind = CUPTI_ACTIVITY_KIND_NAME;
  GpuActivity ignored;
  EXPECT_FALSE(cupti_decode(&other, &ignored));

  auto r = drain_and_read();
  auto rows = r->gpu_activities();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 5u);
  auto strings = *r->strings();
  const GpuActivityRow& kr = (*rows)[0];
  EXPECT_EQ(kr.kind, "kernel");
  EXPECT_EQ(kr.dur_ns, 50000);
  EXPECT_EQ(kr.device, 1);
  EXPECT_EQ(kr.stream, 7);
  EXPECT_EQ(kr.correlation_id, 42);
  EXPECT_EQ(strings[kr.name_id], "_Z4gemmIfEvPKT_S2_PS0_");
  EXPECT_EQ(kr.start_ns, static_cast<int64_t>(t + 1000 - arena_->header()->start_mono_ns));
  const GpuActivityRow& pageable = (*rows)[1];
  EXPECT_EQ(pageable.kind, "memcpy");
  EXPECT_EQ(pageable.copy_kind, "HtoD");
  EXPECT_EQ(pageable.src_kind, "pageable");
  EXPECT_EQ(pageable.dst_kind, "device");
  EXPECT_EQ(pageable.bytes, 4 << 20);
  EXPECT_EQ(strings[pageable.name_id], "memcpy HtoD");
  EXPECT_EQ((*rows)[2].src_kind, "pinned");
  EXPECT_EQ((*rows)[3].kind, "memset");
  EXPECT_EQ((*rows)[3].bytes, 1024);
  EXPECT_EQ((*rows)[4].kind, "sync");
  EXPECT_EQ(strings[(*rows)[4].name_id], "stream_synchronize");
  // The view joins it all for a user at the sqlite3 prompt.
  EXPECT_EQ(*r->db().query_int("SELECT count(*) FROM gpu_view WHERE kind = 'memcpy' AND src_kind = 'pageable' "
                               "AND pid = " +
                               std::to_string(getpid())),
            1);
}

TEST_F(CuptiDecodeTest, GpuAndHostEventsShareOneClock) {
  // A host span (TSC ticks) around a kernel whose timestamps are CLOCK_MONOTONIC ns, as CUPTI
  // gives them with our timestamp callback: after conversion the kernel lies inside the span.
  const uint32_t wait = ss_intern("dl.next");
  ss_span_begin(wait);
  const uint64_t k0 = monotonic_ns();
  const uint64_t k1 = monotonic_ns() + 1;
  ss_span_end();
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_KERNEL;
  k.start = k0;
  k.end = k1;
  k.name = "k";
  feed(reinterpret_cast<CUpti_Activity*>(&k));
  auto r = drain_and_read();
  auto spans = *r->all_spans();
  auto gpu = *r->gpu_activities();
  ASSERT_EQ(spans.size(), 1u);
  ASSERT_EQ(gpu.size(), 1u);
  // Within 1 us: the TSC-to-monotonic conversion and the monotonic reading agree.
  EXPECT_GE(gpu[0].start_ns, spans[0].start_ns - 1000);
  EXPECT_LE(gpu[0].start_ns + gpu[0].dur_ns, spans[0].start_ns + *spans[0].dur_ns + 1000);
}

TEST_F(CuptiDecodeTest, BlockingCallsAreNamed) {
  EXPECT_STREQ(blocking_call_name(CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020), "cuda.cudaStreamSynchronize");
  EXPECT_STREQ(blocking_call_name(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020), "cuda.cudaDeviceSynchronize");
  EXPECT_STREQ(blocking_call_name(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020), "cuda.cudaMemcpy");
  EXPECT_EQ(blocking_call_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), nullptr);
}

TEST_F(CuptiDecodeTest, WithoutADriverCudaInjectionSaysSoAndCarriesOn) {
  // On this machine libcupti may load but CUDA has no driver: InitializeInjection must not fail
  // the process (it returns success to the CUDA driver either way).
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(InitializeInjection(), 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  if (!err.empty()) {
    EXPECT_EQ(err.rfind("stallscope: ", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  ss_span_begin(ss_intern("still recording"));
  ss_span_end();
  auto r = drain_and_read();
  EXPECT_EQ(*r->count("spans"), 1);
}

}  // namespace
}  // namespace stallscope
