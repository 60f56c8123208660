// The two-slot GPU record: what the collector packs, the drainer unpacks unchanged.
#include "collector/gpu_activity.h"

#include <gtest/gtest.h>

namespace stallscope {
namespace {

TEST(GpuActivityTest, PackAndUnpackAreInverse) {
  GpuActivity a;
  a.kind = GpuActivityKind::kMemcpy;
  a.device = 3;
  a.context = 0x7fffffff;
  a.stream = 4000000000u;  // above INT32_MAX: stored in an int32 slot, read back unsigned
  a.correlation = 0xfedcba98u;
  a.start_ns = 1234567890123456789ull;
  a.end_ns = 1234567890123999999ull;
  a.bytes = (uint64_t{1} << 40) + 7;
  a.copy_kind = kCopyHtoD;
  a.src_kind = kMemPageable;
  a.dst_kind = kMemDevice;
  a.sync_type = 3;
  const GpuEventPair p = pack_gpu_activity(a, 77);
  EXPECT_EQ(p.first.kind, EventKind::kGpuActivity);
  EXPECT_EQ(p.second.kind, EventKind::kGpuActivityExt);
  EXPECT_TRUE(p.first.flags & kFlagTimeNs);
  uint32_t name = 0;
  const GpuActivity b = unpack_gpu_activity(p, &name);
  EXPECT_EQ(name, 77u);
  EXPECT_EQ(b.kind, a.kind);
  EXPECT_EQ(b.device, a.device);
  EXPECT_EQ(b.context, a.context);
  EXPECT_EQ(b.stream, a.stream);
  EXPECT_EQ(b.correlation, a.correlation);
  EXPECT_EQ(b.start_ns, a.start_ns);
  EXPECT_EQ(b.end_ns, a.end_ns);
  EXPECT_EQ(b.bytes, a.bytes);
  EXPECT_EQ(b.copy_kind, a.copy_kind);
  EXPECT_EQ(b.src_kind, a.src_kind);
  EXPECT_EQ(b.dst_kind, a.dst_kind);
  EXPECT_EQ(b.sync_type, a.sync_type);
}

TEST(GpuActivityTest, KernelOnDeviceZero) {
  GpuActivity a;
  a.kind = GpuActivityKind::kKernel;
  a.start_ns = 10;
  a.end_ns = 20;
  uint32_t name = 1;
  const GpuActivity b = unpack_gpu_activity(pack_gpu_activity(a, 0), &name);
  EXPECT_EQ(name, 0u);
  EXPECT_EQ(b.kind, GpuActivityKind::kKernel);
  EXPECT_EQ(b.device, 0u);
  EXPECT_EQ(b.end_ns - b.start_ns, 10u);
}

}  // namespace
}  // namespace stallscope
