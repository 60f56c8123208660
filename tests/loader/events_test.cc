// The loader's events through a stand-in for libstallscope's C API: this test program defines the
// ss_* functions itself (exported, so Events::bind finds them in the global scope, as it finds a
// preloaded libstallscope.so) and records every call. Per batch: dl.sent, a dl.fetch span on the
// worker thread holding dl.stages and a zero-length dl.collate, then dl.put; threads named ss-loader-W.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "loader/loader.h"
#include "tests/loader/test_sources.h"

namespace {

struct Call {
  std::thread::id thread;
  std::string what;  // "begin", "end", "instant", "name"
  std::string name;  // the event's (or thread's) name
  int64_t a0 = 0;
  int32_t a1 = 0, a2 = 0;
};

std::mutex g_mu;
std::vector<Call> g_calls;
std::vector<std::string> g_names = {""};  // id -> name; 0 is no name

void add(Call c) {
  std::lock_guard<std::mutex> lock(g_mu);
  c.thread = std::this_thread::get_id();
  g_calls.push_back(std::move(c));
}

}  // namespace

#define STANDIN extern "C" __attribute__((visibility("default")))
STANDIN uint32_t ss_intern(const char* text) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 1; i < g_names.size(); ++i) {
    if (g_names[i] == text) return static_cast<uint32_t>(i);
  }
  g_names.emplace_back(text);
  return static_cast<uint32_t>(g_names.size() - 1);
}
STANDIN void ss_span_begin_args(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  add(Call{{}, "begin", g_names.at(name), a0, a1, a2});
}
STANDIN void ss_span_end() { add(Call{{}, "end", "", 0, 0, 0}); }
STANDIN void ss_span_empty(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  add(Call{{}, "begin", g_names.at(name), a0, a1, a2});
  add(Call{{}, "end", "", 0, 0, 0});
}
STANDIN void ss_span_end_args(int64_t a0, int32_t a1, int32_t a2) { add(Call{{}, "end", "", a0, a1, a2}); }
STANDIN void ss_instant(uint32_t name, int64_t a0, int32_t a1, int32_t a2) {
  add(Call{{}, "instant", g_names.at(name), a0, a1, a2});
}
STANDIN void ss_thread_name(const char* name) { add(Call{{}, "name", name, 0, 0, 0}); }
STANDIN int ss_is_recording() { return 1; }

namespace stallscope::loader {
namespace {

TEST(EventsTest, EachBatchIsSentFetchedWithItsStagesAndPut) {
  auto src = std::make_shared<testing::TestSource>(95);
  src->delay_us = 200;
  LoaderOptions o;
  o.batch_size = 10;
  o.threads = 3;
  o.prefetch = 4;
  o.loader_id = 7;
  Result<std::unique_ptr<Loader>> l = Loader::create(src, o);
  ASSERT_TRUE(l.ok());
  ASSERT_TRUE((*l)->bind_events(""));  // "": the global scope, where this program's ss_* are
  Result<Loader::EpochStart> s = (*l)->begin_epoch();
  ASSERT_TRUE(s.ok());
  int batches = 0;
  while ((*l)->next(s->token).got == Pipeline::Got::kBatch) ++batches;
  ASSERT_EQ(batches, 10);
  (*l)->stop();

  std::lock_guard<std::mutex> lock(g_mu);
  std::map<std::thread::id, std::vector<const Call*>> by_thread;
  for (const Call& c : g_calls) by_thread[c.thread].push_back(&c);
  std::map<int32_t, int> sent, fetched, put;
  std::set<std::string> thread_names;
  for (const auto& [tid, calls] : by_thread) {
    std::string name;
    for (size_t i = 0; i < calls.size(); ++i) {
      const Call& c = *calls[i];
      if (c.what == "name") {
        name = c.name;
        thread_names.insert(name);
        continue;
      }
      ASSERT_FALSE(name.empty()) << "an event before the thread was named";
      if (c.what == "instant" && c.name == "dl.sent") {
        EXPECT_EQ(c.a0, 7);
        ++sent[c.a1];
        // Then on this thread: the fetch span of that batch, its stages and its sample count (a
        // zero-length collate span) inside, its end, the put.
        ASSERT_LT(i + 6, calls.size());
        const Call &begin = *calls[i + 1], &stages = *calls[i + 2], &collate = *calls[i + 3],
                   &collate_end = *calls[i + 4], &end = *calls[i + 5], &p = *calls[i + 6];
        EXPECT_EQ(begin.what, "begin");
        EXPECT_EQ(begin.name, "dl.fetch");
        EXPECT_EQ(begin.a0, 7);
        EXPECT_EQ(begin.a1, c.a1);
        EXPECT_EQ(begin.a2, c.a2);
        EXPECT_EQ(name, "ss-loader-" + std::to_string(c.a2)) << "W is the thread's index";
        EXPECT_EQ(stages.name, "dl.stages");
        EXPECT_EQ(stages.a1, c.a1 == 9 ? 5 : 10) << "1 us of decoding per sample of the batch";
        EXPECT_GE(stages.a0, 0);
        EXPECT_EQ(collate.what, "begin");
        EXPECT_EQ(collate.name, "dl.collate");
        EXPECT_EQ(collate.a0, 7);
        EXPECT_EQ(collate.a1, c.a1);
        EXPECT_EQ(collate.a2, c.a1 == 9 ? 5 : 10) << "the samples of the batch (the last one is short)";
        EXPECT_EQ(collate_end.what, "end");
        EXPECT_EQ(end.what, "end");
        EXPECT_EQ(p.name, "dl.put");
        EXPECT_EQ(p.a1, c.a1);
        ++fetched[begin.a1];
        ++put[p.a1];
        i += 6;
      } else {
        ADD_FAILURE() << "unexpected " << c.what << " " << c.name << " on " << name;
      }
    }
  }
  EXPECT_EQ(thread_names, (std::set<std::string>{"ss-loader-0", "ss-loader-1", "ss-loader-2"}));
  for (int32_t b = 0; b < 10; ++b) {
    EXPECT_EQ(sent[b], 1) << b;
    EXPECT_EQ(fetched[b], 1) << b;
    EXPECT_EQ(put[b], 1) << b;
  }
}

}  // namespace
}  // namespace stallscope::loader
