// bench/cupti_cost's mode specs: what each word turns on, and the words refused.
#include "bench/cupti_cost_modes.h"

#include <gtest/gtest.h>

#include <set>

namespace stallscope::bench {
namespace {

TEST(CuptiCostModesTest, PlainSpecTurnsNothingOn) {
  CuptiSpec s;
  std::string bad;
  ASSERT_TRUE(parse_spec("", &s, &bad));
  EXPECT_FALSE(s.uses_cupti());
  EXPECT_EQ(s.buffer_bytes, 4u << 20);
  EXPECT_EQ(s.flush_ms, 100);
  EXPECT_TRUE(s.walk);
  EXPECT_FALSE(s.pool);
  EXPECT_EQ(s.per_thread_buffers, -1);
}

TEST(CuptiCostModesTest, EveryWordIsRead) {
  CuptiSpec s;
  std::string bad;
  ASSERT_TRUE(
      parse_spec("act=ck+memcpy,cb=blocking,buf=1M,pool=1,walk=0,flush=0,period=250,ptb=0,lat=1,prealloc=4,"
                 "act=overhead",
                 &s, &bad))
      << bad;
  ASSERT_EQ(s.kinds.size(), 3u);
  EXPECT_EQ(s.kinds[0], CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  EXPECT_EQ(s.kinds[1], CUPTI_ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(s.kinds[2], CUPTI_ACTIVITY_KIND_OVERHEAD);
  EXPECT_EQ(s.callbacks, CuptiSpec::Callbacks::kBlocking);
  EXPECT_EQ(s.buffer_bytes, 1u << 20);
  EXPECT_TRUE(s.pool);
  EXPECT_FALSE(s.walk);
  EXPECT_EQ(s.flush_ms, 0);
  EXPECT_EQ(s.flush_period_ms, 250);
  EXPECT_EQ(s.per_thread_buffers, 0);
  EXPECT_EQ(s.latency, 1);
  EXPECT_EQ(s.prealloc, 4);
  EXPECT_TRUE(s.uses_cupti());
}

TEST(CuptiCostModesTest, BadWordsAreNamed) {
  CuptiSpec s;
  for (const char* spec : {"act=ck+nope", "cb=all", "buf=1", "buf=2G", "pool=2", "flush=-1", "colour=red", "act",
                           "buf=12x", "prealloc=99999"}) {
    std::string bad;
    EXPECT_FALSE(parse_spec(spec, &s, &bad)) << spec;
    EXPECT_FALSE(bad.empty()) << spec;
  }
  std::string bad;
  EXPECT_FALSE(parse_spec("act=ck,cb=maybe", &s, &bad));
  EXPECT_EQ(bad, "cb=maybe");
}

TEST(CuptiCostModesTest, EveryNamedModeParsesAndNamesAreUnique) {
  std::set<std::string> names;
  for (const Mode& m : modes()) {
    CuptiSpec s;
    std::string bad;
    EXPECT_TRUE(parse_spec(m.spec, &s, &bad)) << m.name << ": " << bad;
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.what.empty()) << m.name;
    // Modes run by this program turn CUPTI on themselves; the others leave it to stallscope.
    if (m.inject || !m.stallscope_gpu.empty() || m.name == "plain") {
      EXPECT_FALSE(s.uses_cupti()) << m.name;
    }
  }
  EXPECT_EQ(modes().front().name, "plain");
}

TEST(CuptiCostModesTest, ChosenModesAlwaysStartWithPlain) {
  std::vector<Mode> chosen;
  std::string bad;
  ASSERT_TRUE(choose_modes("ck,stallscope-all", &chosen, &bad));
  ASSERT_EQ(chosen.size(), 3u);
  EXPECT_EQ(chosen[0].name, "plain");
  EXPECT_EQ(chosen[1].name, "ck");
  EXPECT_EQ(chosen[2].stallscope_gpu, "all");
  ASSERT_TRUE(choose_modes("", &chosen, &bad));
  EXPECT_EQ(chosen.size(), modes().size());
  EXPECT_FALSE(choose_modes("ck,warp-speed", &chosen, &bad));
  EXPECT_EQ(bad, "warp-speed");
}

TEST(CuptiCostModesTest, KindNames) {
  EXPECT_EQ(activity_kind_name(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "ck");
  EXPECT_EQ(activity_kind_name(63), "kind_63");
  EXPECT_EQ(overhead_kind_name(CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION), "instrumentation");
  EXPECT_EQ(overhead_kind_name(12345), "overhead_12345");
}

}  // namespace
}  // namespace stallscope::bench
