// STALLSCOPE_GPU / `stallscope run --gpu` parsing.
#include "collector/gpu_choice.h"

#include <gtest/gtest.h>

namespace stallscope {
namespace {

TEST(GpuChoiceTest, AllOffAndLists) {
  GpuChoice c;
  std::string bad;
  for (const char* all : {"", "all"}) {
    ASSERT_TRUE(parse_gpu_choice(all, &c, &bad)) << all;
    EXPECT_TRUE(c.kernel && c.memcpy && c.memset && c.sync && c.calls) << all;
    EXPECT_FALSE(c.off());
  }
  ASSERT_TRUE(parse_gpu_choice("off", &c, &bad));
  EXPECT_TRUE(c.off());
  EXPECT_FALSE(c.light);
  // light: no CUPTI at all (CUDA_INJECTION64_PATH left alone), marks instead.
  ASSERT_TRUE(parse_gpu_choice("light", &c, &bad));
  EXPECT_TRUE(c.off());
  EXPECT_TRUE(c.light);
  EXPECT_FALSE(parse_gpu_choice("light,kernel", &c, &bad));  // a value of its own, like off
  EXPECT_FALSE(c.light);
  ASSERT_TRUE(parse_gpu_choice("kernel,memcpy", &c, &bad));
  EXPECT_TRUE(c.kernel && c.memcpy);
  EXPECT_FALSE(c.memset || c.sync || c.calls || c.off());
  ASSERT_TRUE(parse_gpu_choice("calls", &c, &bad));
  EXPECT_TRUE(c.calls);
  EXPECT_FALSE(c.kernel || c.memcpy || c.memset || c.sync);
  ASSERT_TRUE(parse_gpu_choice("sync,memset,sync", &c, &bad));
  EXPECT_TRUE(c.sync && c.memset);
  EXPECT_FALSE(c.kernel || c.memcpy || c.calls);
}

TEST(GpuChoiceTest, UnknownItemsAreNamed) {
  GpuChoice c;
  std::string bad;
  EXPECT_FALSE(parse_gpu_choice("kernels", &c, &bad));
  EXPECT_EQ(bad, "kernels");
  EXPECT_FALSE(parse_gpu_choice("kernel,,sync", &c, &bad));
  EXPECT_EQ(bad, "");
  EXPECT_TRUE(c.kernel && c.sync);  // what it knew
  EXPECT_FALSE(parse_gpu_choice("memcpy,OFF", &c, &bad));
  EXPECT_EQ(bad, "OFF");
  EXPECT_FALSE(parse_gpu_choice("off,kernel", &c, &bad));  // off is a value of its own
  EXPECT_EQ(bad, "off");
}

}  // namespace
}  // namespace stallscope
