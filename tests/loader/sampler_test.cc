// The order of epochs: deterministic shuffles, sharding that covers every index once across
// ranks, batching with drop_last, and resume states (mid-epoch, at an epoch boundary, twice,
// uneven shards, refused settings).
#include "loader/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace stallscope::loader {
namespace {

SamplerOptions opts(int64_t n, int64_t batch, bool shuffle = true, uint64_t seed = 0, bool drop_last = false,
                    int64_t rank = 0, int64_t world = 1) {
  SamplerOptions o;
  o.dataset_len = n;
  o.batch_size = batch;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  o.rank = rank;
  o.world_size = world;
  return o;
}

Sampler make(const SamplerOptions& o) {
  Result<Sampler> s = Sampler::create(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s.value());
}

// Every batch of the epoch begun by `s`, from its first batch on, marking each as received.
std::vector<std::vector<int64_t>> drain(Sampler& s, int64_t max_batches = INT64_MAX) {
  const EpochPlan p = s.begin_epoch();
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = p.first_batch; b < p.num_batches && static_cast<int64_t>(out.size()) < max_batches; ++b) {
    const auto batch = p.batch(b);
    out.emplace_back(batch.begin(), batch.end());
    s.handed(b + 1);
  }
  return out;
}

TEST(SamplerTest, ShuffleIsDeterministicPerSeedAndEpoch) {
  const Sampler a = make(opts(1000, 10, true, 7));
  const Sampler b = make(opts(1000, 10, true, 7));
  EXPECT_EQ(a.epoch_indices(0), b.epoch_indices(0));
  EXPECT_EQ(a.epoch_indices(3), b.epoch_indices(3));
  EXPECT_NE(a.epoch_indices(0), a.epoch_indices(1));
  EXPECT_NE(a.epoch_indices(0), make(opts(1000, 10, true, 8)).epoch_indices(0));
  std::vector<int64_t> sorted = a.epoch_indices(2);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(1000);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
}

// The exact order is part of the contract (tests/python re-computes it in plain Python): a change
// here changes every seeded run.
TEST(SamplerTest, ShuffleOrderIsPinned) {
  EXPECT_EQ(make(opts(10, 10, true, 0)).epoch_indices(0), (std::vector<int64_t>{1, 4, 0, 3, 9, 6, 7, 5, 2, 8}));
  EXPECT_EQ(make(opts(10, 10, true, 0)).epoch_indices(1), (std::vector<int64_t>{1, 2, 3, 4, 7, 6, 9, 8, 0, 5}));
  EXPECT_EQ(make(opts(10, 10, true, 42)).epoch_indices(0), (std::vector<int64_t>{9, 5, 3, 7, 2, 8, 0, 6, 4, 1}));
}

TEST(SamplerTest, WithoutShuffleTheOrderIsTheDatasetOrder) {
  std::vector<int64_t> all(17);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(make(opts(17, 4, false)).epoch_indices(5), all);
}

TEST(SamplerTest, ShardsCoverEveryIndexOnceAcrossRanks) {
  for (int64_t world : {1, 2, 3, 4, 7, 16}) {
    for (int64_t n : {0, 1, 5, 10, 11, 97, 1000}) {
      for (bool shuffle : {false, true}) {
        std::multiset<int64_t> seen;
        int64_t smallest = INT64_MAX, largest = 0;
        for (int64_t r = 0; r < world; ++r) {
          const Sampler s = make(opts(n, 3, shuffle, 5, false, r, world));
          const std::vector<int64_t> mine = s.epoch_indices(2);
          EXPECT_EQ(static_cast<int64_t>(mine.size()), s.shard_size());
          smallest = std::min<int64_t>(smallest, static_cast<int64_t>(mine.size()));
          largest = std::max<int64_t>(largest, static_cast<int64_t>(mine.size()));
          seen.insert(mine.begin(), mine.end());
        }
        ASSERT_EQ(static_cast<int64_t>(seen.size()), n) << "world " << world << " n " << n;
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << "index " << i << " world " << world;
        EXPECT_LE(largest - smallest, 1) << "shards differ by at most one sample";
      }
    }
  }
}

TEST(SamplerTest, RankTakesEveryWorldSizethPositionOfTheSharedPermutation) {
  const std::vector<int64_t> all = make(opts(20, 1, true, 3)).epoch_indices(1);
  const std::vector<int64_t> r1 = make(opts(20, 1, true, 3, false, 1, 3)).epoch_indices(1);
  std::vector<int64_t> want;
  for (size_t p = 1; p < all.size(); p += 3) want.push_back(all[p]);
  EXPECT_EQ(r1, want);
}

TEST(SamplerTest, BatchesAndDropLast) {
  Sampler keep = make(opts(10, 4, false));
  EXPECT_EQ(keep.batches_per_epoch(), 3);
  EXPECT_EQ(drain(keep), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  Sampler drop = make(opts(10, 4, false, 0, true));
  EXPECT_EQ(drop.batches_per_epoch(), 2);
  EXPECT_EQ(drain(drop), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(make(opts(8, 4, false, 0, true)).batches_per_epoch(), 2);
  EXPECT_EQ(make(opts(3, 4, false, 0, true)).batches_per_epoch(), 0);
  EXPECT_EQ(make(opts(0, 4)).batches_per_epoch(), 0);
}

TEST(SamplerTest, RefusesImpossibleSettings) {
  EXPECT_FALSE(Sampler::create(opts(10, 0)).ok());
  EXPECT_FALSE(Sampler::create(opts(-1, 1)).ok());
  EXPECT_FALSE(Sampler::create(opts(10, 1, true, 0, false, 2, 2)).ok());
  EXPECT_FALSE(Sampler::create(opts(10, 1, true, 0, false, 0, 0)).ok());
  EXPECT_NE(Sampler::create(opts(10, 1, true, 0, false, 3, 2)).status().message().find("rank 3"), std::string::npos);
}

TEST(SamplerTest, EpochsAdvanceAndSetEpochChoosesTheNext) {
  Sampler s = make(opts(50, 5, true, 1));
  EXPECT_EQ(s.begin_epoch().epoch, 0);
  EXPECT_EQ(s.begin_epoch().epoch, 1);  // an epoch left early still counts
  s.set_epoch(7);
  const EpochPlan p = s.begin_epoch();
  EXPECT_EQ(p.epoch, 7);
  EXPECT_EQ(p.indices, s.epoch_indices(7));
  EXPECT_EQ(s.begin_epoch().epoch, 8);
}

// A run interrupted after `stop_after` batches of epoch `epoch` and resumed from its state gets
// exactly the batches the uninterrupted run had left, in the same order.
void expect_resume_exact(const SamplerOptions& o, int64_t epoch, int64_t stop_after) {
  Sampler whole = make(o);
  whole.set_epoch(epoch);
  const auto full = drain(whole);
  const auto next_epoch = drain(whole);

  Sampler first = make(o);
  first.set_epoch(epoch);
  const auto head = drain(first, stop_after);
  const SamplerState st = first.state();
  Sampler second = make(o);
  ASSERT_TRUE(second.load_state(st).ok());
  auto tail = drain(second);
  if (stop_after >= static_cast<int64_t>(full.size())) {
    // Saved after the epoch's last batch: the resumed run goes on with the next epoch.
    EXPECT_EQ(st.epoch, epoch + 1);
    EXPECT_EQ(tail, next_epoch);
    return;
  }
  EXPECT_EQ(st.epoch, epoch);
  EXPECT_EQ(st.batches_handed, stop_after);
  auto joined = head;
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, full) << o.describe() << " stopped after " << stop_after;
  EXPECT_EQ(drain(second), next_epoch);  // and the epoch after it is the uninterrupted run's
}

TEST(SamplerTest, ResumesMidEpochExactly) {
  for (int64_t k : {0, 1, 3, 9}) expect_resume_exact(opts(100, 7, true, 11), 2, k);
  expect_resume_exact(opts(100, 7, false), 0, 4);
  expect_resume_exact(opts(100, 7, true, 11, true), 1, 5);
}

TEST(SamplerTest, ResumesAtAnEpochBoundary) {
  expect_resume_exact(opts(100, 10, true, 3), 4, 10);  // all 10 batches received
  // A state taken between epochs (the loop ended, the next iter() not begun) is the next epoch.
  Sampler s = make(opts(100, 10, true, 3));
  drain(s);
  const SamplerState st = s.state();
  EXPECT_EQ(st.epoch, 1);
  EXPECT_EQ(st.batches_handed, 0);
  Sampler r = make(opts(100, 10, true, 3));
  ASSERT_TRUE(r.load_state(st).ok());
  EXPECT_EQ(r.begin_epoch().epoch, 1);
}

TEST(SamplerTest, ResumesTwice) {
  const SamplerOptions o = opts(200, 6, true, 99);
  Sampler whole = make(o);
  whole.set_epoch(3);
  const auto full = drain(whole);

  Sampler a = make(o);
  a.set_epoch(3);
  auto got = drain(a, 5);
  Sampler b = make(o);
  ASSERT_TRUE(b.load_state(a.state()).ok());
  const auto more = drain(b, 7);
  got.insert(got.end(), more.begin(), more.end());
  Sampler c = make(o);
  ASSERT_TRUE(c.load_state(b.state()).ok());
  EXPECT_EQ(c.state().batches_handed, 12);
  const auto rest = drain(c);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, full);
}

TEST(SamplerTest, ResumesUnevenShards) {
  // 103 samples over 4 ranks: shards of 26, 26, 26 and 25; batches of 5 (6 per rank, the last
  // of 1 or 0 ... 5 samples): every rank resumes exactly, and together they still cover every
  // index once.
  std::multiset<int64_t> seen;
  for (int64_t r = 0; r < 4; ++r) {
    const SamplerOptions o = opts(103, 5, true, 21, false, r, 4);
    expect_resume_exact(o, 1, 3);
    Sampler a = make(o);
    a.set_epoch(1);
    auto got = drain(a, 3);
    Sampler b = make(o);
    ASSERT_TRUE(b.load_state(a.state()).ok());
    const auto rest = drain(b);
    got.insert(got.end(), rest.begin(), rest.end());
    for (const auto& batch : got) seen.insert(batch.begin(), batch.end());
  }
  ASSERT_EQ(seen.size(), 103u);
  for (int64_t i = 0; i < 103; ++i) EXPECT_EQ(seen.count(i), 1u);
}

TEST(SamplerTest, SetEpochKeepsTheResumeOffsetOnlyForTheSavedEpoch) {
  const SamplerOptions o = opts(100, 10, true, 5);
  Sampler a = make(o);
  a.set_epoch(2);
  drain(a, 4);
  const SamplerState st = a.state();
  Sampler same = make(o);
  ASSERT_TRUE(same.load_state(st).ok());
  same.set_epoch(2);  // the training loop's own `loader.set_epoch(epoch)` after resuming
  EXPECT_EQ(same.begin_epoch().first_batch, 4);
  Sampler other = make(o);
  ASSERT_TRUE(other.load_state(st).ok());
  other.set_epoch(3);
  const EpochPlan p = other.begin_epoch();
  EXPECT_EQ(p.epoch, 3);
  EXPECT_EQ(p.first_batch, 0);
}

TEST(SamplerTest, RefusesAStateOfOtherSettings) {
  Sampler a = make(opts(100, 10, true, 5));
  a.begin_epoch();
  a.handed(3);
  const SamplerState st = a.state();
  struct Case {
    SamplerOptions o;
    const char* names;
  };
  for (const Case& c :
       {Case{opts(100, 20, true, 5), "batch_size"}, Case{opts(101, 10, true, 5), "dataset_len"},
        Case{opts(100, 10, false, 5), "shuffle"}, Case{opts(100, 10, true, 6), "seed"},
        Case{opts(100, 10, true, 5, true), "drop_last"}, Case{opts(100, 10, true, 5, false, 1, 2), "rank=0"},
        Case{opts(100, 10, true, 5, false, 0, 2), "world_size"}}) {
    Sampler b = make(c.o);
    const Status s = b.load_state(st);
    ASSERT_FALSE(s.ok()) << c.names;
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  }
  SamplerState forged = st;
  forged.fingerprint ^= 1;
  Sampler b = make(opts(100, 10, true, 5));
  EXPECT_NE(b.load_state(forged).message().find("fingerprint"), std::string::npos);
  SamplerState beyond = st;
  beyond.batches_handed = 11;
  EXPECT_FALSE(b.load_state(beyond).ok());
  SamplerState other_rank = st;
  other_rank.options.rank = 1;
  other_rank.options.world_size = 2;
  EXPECT_NE(make(opts(100, 10, true, 5, false, 0, 2)).load_state(other_rank).message().find("rank"), std::string::npos);
}

}  // namespace
}  // namespace stallscope::loader
