// Tests for the drainer: every event kind from the rings to database rows, span pairing and
// depth, tick conversion, recycled rings of exited threads and dead processes, drop counts, and a
// second reader following a recording while it is written.
#include "storage/ingest.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "collector/collector.h"
#include "stallscope/stallscope.h"
#include "storage/reader.h"
#include "storage/recorder.h"
#include "tests/unit/test_util.h"

namespace stallscope {
namespace {

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = testing::unique_name("ss-ingest-test");
    ArenaConfig cfg;
    cfg.ring_capacity = 1024;
    cfg.ring_count = 8;
    std::string err;
    arena_ = Arena::create(name_, cfg, &err);
    ASSERT_NE(arena_, nullptr) << err;
    Collector::join(arena_);
    auto w = Writer::create(dir_.file("run.db"));
    ASSERT_TRUE(w.ok()) << w.status().message();
    writer_ = std::move(*w);
    ingest_ = std::make_unique<Ingest>(arena_, writer_.get());
    ASSERT_TRUE(ingest_->write_meta({{"command", "test"}}).ok());
  }
  void TearDown() override {
    Collector::leave();
    Arena::unlink(name_);
  }
  std::unique_ptr<Reader> read() {
    auto r = Reader::open(dir_.file("run.db"));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? std::move(*r) : nullptr;
  }
  std::string name_;
  testing::TempDir dir_;
  Arena* arena_ = nullptr;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Ingest> ingest_;
};

TEST_F(IngestTest, AnEmptySpanHasNoLengthAndNestsInTheOpenOne) {
  const uint32_t fetch = ss_intern("dl.fetch"), collate = ss_intern("dl.collate");
  ss_span_begin(fetch);
  ss_span_empty(collate, 7, 3, 512);
  ss_span_end();
  ASSERT_TRUE(ingest_->drain(true).ok());
  auto r = read();
  ASSERT_TRUE(r);
  auto spans = r->all_spans();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 2u);
  const SpanRow& f = (*spans)[0];
  const SpanRow& c = (*spans)[1];
  EXPECT_EQ(f.name_id, fetch);
  EXPECT_EQ(c.name_id, collate);
  EXPECT_EQ(c.depth, 1);
  EXPECT_EQ(c.arg0, 7);
  EXPECT_EQ(c.arg1, 3);
  EXPECT_EQ(c.arg2, 512);
  ASSERT_TRUE(c.dur_ns.has_value());
  EXPECT_EQ(*c.dur_ns, 0) << "one timestamp for both ends";
  EXPECT_GE(c.start_ns, f.start_ns);
  EXPECT_LE(c.start_ns, f.start_ns + *f.dur_ns);
}

TEST_F(IngestTest, EveryEventKindBecomesRows) {
  const uint32_t outer = ss_intern("outer"), inner = ss_intern("inner"), mark = ss_intern("mark");
  ss_thread_name("trainer");
  ss_span_begin_args(outer, 1, 2, 3);
  ss_span_begin(inner);
  ss_instant(mark, 10, 20, 21);
  ss_span_end_args(30, 40, 50);  // inner gets the end's args
  ss_span_end();
  ss_counter(ss_counter_track("queue_depth", "batches"), 4.0);
  ss_counter_for(ss_counter_track("cpu", "percent"), 55.5, 4242);
  ss_span_end();         // an end without a begin is ignored
  ss_span_begin(outer);  // never ended: written with no duration at the final drain
  ASSERT_TRUE(ingest_->drain(false).ok());
  ASSERT_TRUE(ingest_->drain(true).ok());

  auto r = read();
  ASSERT_TRUE(r);
  auto spans = r->all_spans();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 3u);
  const SpanRow& o = (*spans)[0];
  const SpanRow& i = (*spans)[1];
  EXPECT_EQ(o.name_id, outer);
  EXPECT_EQ(o.depth, 0);
  EXPECT_EQ(o.arg0, 1);
  EXPECT_EQ(o.arg1, 2);
  EXPECT_EQ(o.arg2, 3);
  EXPECT_EQ(i.name_id, inner);
  EXPECT_EQ(i.depth, 1);
  EXPECT_EQ(i.arg0, 30);
  EXPECT_EQ(i.arg1, 40);
  EXPECT_EQ(i.arg2, 50);
  EXPECT_GE(i.start_ns, o.start_ns);
  EXPECT_LE(i.start_ns + *i.dur_ns, o.start_ns + *o.dur_ns);
  EXPECT_FALSE((*spans)[2].dur_ns.has_value());
  auto inst = r->instants();
  ASSERT_TRUE(inst.ok());
  ASSERT_EQ(inst->size(), 1u);
  EXPECT_EQ((*inst)[0].arg1, 20);
  EXPECT_EQ((*inst)[0].arg2, 21);
  auto tracks = r->counter_tracks();
  ASSERT_TRUE(tracks.ok());
  ASSERT_EQ(tracks->size(), 2u);
  EXPECT_EQ((*tracks)[0].name, "queue_depth");
  EXPECT_EQ((*tracks)[0].unit, "batches");
  EXPECT_EQ((*tracks)[0].pid, getpid());
  EXPECT_EQ((*tracks)[1].pid, 4242);
  auto v = r->counters((*tracks)[1].id);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_DOUBLE_EQ((*v)[0].value, 55.5);
  auto threads = r->threads();
  ASSERT_TRUE(threads.ok());
  ASSERT_EQ(threads->size(), 1u);
  EXPECT_EQ((*threads)[0].name, "trainer");
  auto strings = r->strings();
  EXPECT_EQ((*strings)[outer], "outer");
  auto meta = r->meta();
  EXPECT_EQ((*meta)["complete"], "1");
  EXPECT_EQ((*meta)["command"], "test");
}

TEST_F(IngestTest, TimestampsAreMonotonicNanoseconds) {
  const uint32_t nap = ss_intern("nap");
  ss_span_begin(nap);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ss_span_end();
  ASSERT_TRUE(ingest_->drain(true).ok());
  auto r = read();
  auto spans = r->all_spans();
  ASSERT_EQ(spans->size(), 1u);
  const int64_t dur = *(*spans)[0].dur_ns;
  EXPECT_GE(dur, 30'000'000);
  EXPECT_LT(dur, 60'000'000);
  auto meta = r->meta();
  const int64_t end = std::stoll((*meta)["end_ns"]);
  EXPECT_GE((*spans)[0].start_ns, 0);
  EXPECT_LE((*spans)[0].start_ns + dur, end);
}

TEST_F(IngestTest, ExitedThreadsGiveBackTheirRings) {
  const uint32_t n = ss_intern("worker");
  for (int round = 0; round < 20; ++round) {  // more threads than rings, one after another
    std::thread t([n, round] {
      ss_span_begin_args(n, round, 0, 0);
      ss_span_end();
    });
    t.join();
    ASSERT_TRUE(ingest_->drain(false).ok());
  }
  ASSERT_TRUE(ingest_->drain(true).ok());
  auto r = read();
  EXPECT_EQ(*r->count("spans"), 20);
  EXPECT_EQ(*r->count("threads"), 20);
  EXPECT_EQ(ingest_->stats().dropped, 0u);
}

TEST_F(IngestTest, DeadProcessRingsAreDrainedAndOpenSpansKept) {
  const uint32_t n = ss_intern("child");
  pid_t pid = fork();
  if (pid == 0) {
    ss_span_begin(n);
    ss_span_begin(n);
    ss_span_end();
    _exit(3);  // dies with one span open; on_exit is not run by _exit
  }
  int status;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(ingest_->drain(false).ok());
  auto r = read();
  auto procs = r->processes();
  ASSERT_EQ(procs->size(), 2u);
  EXPECT_EQ((*procs)[1].pid, pid);
  EXPECT_EQ((*procs)[1].ppid, getpid());
  EXPECT_TRUE((*procs)[1].end_ns.has_value());  // found gone
  auto spans = r->all_spans();
  ASSERT_EQ(spans->size(), 2u);
  int open = 0;
  for (const SpanRow& s : *spans) open += !s.dur_ns.has_value();
  EXPECT_EQ(open, 1);
  int free_rings = 0;
  for (uint32_t i = 0; i < 8; ++i) free_rings += arena_->ring(i)->h.state.load() == kRingFree;
  EXPECT_EQ(free_rings, 8);
}

TEST_F(IngestTest, DropsAreRecorded) {
  const uint32_t n = ss_intern("flood");
  for (int i = 0; i < 1100; ++i) ss_instant(n, i, 0, 0);  // 1024 fit
  ASSERT_TRUE(ingest_->drain(true).ok());
  auto r = read();
  EXPECT_EQ(*r->count("instants"), 1024);
  EXPECT_EQ((*r->meta())["dropped_events"], "76");
  auto f = r->flushes();
  EXPECT_EQ(f->back().dropped_total, 76);
}

TEST_F(IngestTest, SpilledEventsAreWrittenFirstAndFreeTheRing) {
  // 1,500 spans are 3,000 events through a ring of 1,024: only spill() between drains saves them.
  const uint32_t n = ss_intern("step");
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 500; ++i) {
      ss_span_begin_args(n, round * 500 + i, 0, 0);
      ss_span_end();
    }
    EXPECT_EQ(ingest_->spill(), 1000u);
  }
  EXPECT_EQ(ingest_->spilled_events(), 3000u);
  ss_span_begin_args(n, 1500, 0, 0);  // still in the ring: written after the spilled ones
  ss_span_end();
  ASSERT_TRUE(ingest_->drain(true).ok());
  EXPECT_EQ(ingest_->spilled_events(), 0u);
  auto r = read();
  auto spans = r->all_spans();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  ASSERT_EQ(spans->size(), 1501u);
  for (size_t i = 0; i < spans->size(); ++i) EXPECT_EQ((*spans)[i].arg0, std::optional<int64_t>(i));
  EXPECT_EQ((*r->meta())["dropped_events"], "0");
}

TEST_F(IngestTest, SpillingStopsAtItsCapAndTheRingDropsAsBefore) {
  ingest_->set_spill_cap(1500);
  const uint32_t n = ss_intern("flood");
  for (int i = 0; i < 1000; ++i) ss_instant(n, i, 0, 0);
  EXPECT_EQ(ingest_->spill(), 1000u);
  for (int i = 1000; i < 2000; ++i) ss_instant(n, i, 0, 0);
  EXPECT_EQ(ingest_->spill(), 500u);  // the cap; 500 stay in the ring
  EXPECT_EQ(ingest_->spill(), 0u);
  for (int i = 2000; i < 3000; ++i) ss_instant(n, i, 0, 0);  // 524 fit beside the 500
  ASSERT_TRUE(ingest_->drain(true).ok());
  auto r = read();
  EXPECT_EQ(*r->count("instants"), 1500 + 1024);
  EXPECT_EQ((*r->meta())["dropped_events"], "476");
}

TEST_F(IngestTest, SpillingBesideDrainsLosesAndRepeatsNothing) {
  // A thread records as fast as it can while one thread drains and another spills, as the
  // recorder's threads do: every event is either a row or counted as dropped, once (TSan: no race).
  // It records at least 200,000 spans, and on until the spiller has taken events and two drains
  // have run meanwhile (a loaded machine may not schedule them at first).
  constexpr int64_t kSpans = 200000, kMostSpans = 20'000'000;
  std::atomic<bool> done{false};
  std::atomic<size_t> spilled{0};
  std::atomic<int> drains{0};
  int64_t recorded = 0;
  std::thread producer([&] {
    const uint32_t n = ss_intern("fast");
    for (; recorded < kMostSpans && (recorded < kSpans || spilled.load() == 0 || drains.load() < 2); ++recorded) {
      ss_span_begin_args(n, recorded, 0, 0);
      ss_span_end();
    }
    done.store(true);
  });
  std::thread spiller([&] {
    while (!done.load()) spilled += ingest_->spill();
  });
  while (!done.load()) {
    ASSERT_TRUE(ingest_->drain(false).ok());
    ++drains;
  }
  producer.join();
  spiller.join();
  ASSERT_TRUE(ingest_->drain(true).ok());
  ASSERT_GT(spilled.load(), 0u);  // the spiller took part
  ASSERT_GE(drains.load(), 2);
  auto r = read();
  const int64_t dropped = std::stoll((*r->meta())["dropped_events"]);
  auto spans = r->all_spans();
  ASSERT_TRUE(spans.ok());
  EXPECT_EQ(static_cast<int64_t>(ingest_->stats().events) + dropped, 2 * recorded);
  int64_t last = -1;
  for (const auto& s : *spans) {  // in order, none twice
    ASSERT_TRUE(s.arg0.has_value());
    EXPECT_GT(*s.arg0, last);
    last = *s.arg0;
  }
  EXPECT_GT(spans->size(), 0u);
}

TEST_F(IngestTest, EventsStampedAfterTheDrainsAnchorWaitForTheNextDrain) {
  // A drain converts ticks up to its own anchor, between two anchors; a later event would be
  // converted by extrapolating the last rate, and the next drain's rate could put events either
  // side of the drain in the wrong order. So it waits, and the next drain writes it once.
  if (!g_clock_uses_tsc) GTEST_SKIP() << "ticks are CLOCK_MONOTONIC ns here: nothing to convert";
  const uint32_t n = ss_intern("step");
  ASSERT_TRUE(ingest_->drain(false).ok());
  ss_span_begin_args(n, 1, 0, 0);
  ss_span_end();
  const ClockAnchor anchor = take_anchor();
  ss_span_begin_args(n, 2, 0, 0);
  ss_span_end();
  ASSERT_TRUE(ingest_->drain(false, anchor).ok());
  EXPECT_EQ(*read()->count("spans"), 1);
  EXPECT_EQ(ingest_->spilled_events(), 2u);  // span 2's begin and end, held
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(ingest_->drain(false).ok());
  EXPECT_EQ(ingest_->spilled_events(), 0u);
  auto spans = read()->all_spans();
  ASSERT_TRUE(spans.ok());
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ((*spans)[0].arg0, 1);
  EXPECT_EQ((*spans)[1].arg0, 2);
  const int64_t anchor_ns = static_cast<int64_t>(anchor.ns - arena_->header()->start_mono_ns);
  EXPECT_LE((*spans)[0].start_ns + *(*spans)[0].dur_ns, anchor_ns);
  EXPECT_GE((*spans)[1].start_ns, anchor_ns);
}

TEST_F(IngestTest, QueueEventsGoThroughOnceNoEarlierRowCanCome) {
  // A loader with workers: its queue's events wait for time order. They go through at the drain
  // after their time, not 5 s later; a next() call begun and not ended holds them from its start.
  const uint32_t next = ss_intern("dl.next"), begin = ss_intern("dl.epoch_begin");
  ASSERT_TRUE(ingest_->drain(false).ok());  // the names first
  const Summaries& sum = writer_->summaries();
  ss_instant(begin, 0, 0, 2);  // loader 0, epoch 0, 2 workers
  for (int i = 0; i < 100; ++i) {
    ss_span_begin_args(next, 0, i, 0);
    ss_span_end();
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * Ingest::kHorizonMarginNs));
  ASSERT_TRUE(ingest_->drain(false).ok());
  EXPECT_EQ(sum.queue_events_waiting(), 0u);  // 201 held for 5 s before
  ss_span_begin_args(next, 0, 100, 0);        // held open across drains
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * Ingest::kHorizonMarginNs));
  for (int i = 0; i < 10; ++i) ss_instant(begin, 0, 1, 2);  // rows after the open call's start
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * Ingest::kHorizonMarginNs));
  ASSERT_TRUE(ingest_->drain(false).ok());
  EXPECT_EQ(sum.queue_events_waiting(), 10u);
  ss_span_end();
  std::this_thread::sleep_for(std::chrono::nanoseconds(2 * Ingest::kHorizonMarginNs));
  ASSERT_TRUE(ingest_->drain(false).ok());
  EXPECT_EQ(sum.queue_events_waiting(), 0u);
  EXPECT_EQ(sum.queue_events_late(), 0);
}

TEST(RecorderTest, ASecondReaderFollowsTheRecordingLive) {
  testing::TempDir dir;
  const std::string name = testing::unique_name("ss-live-test");
  std::string err;
  Arena* arena = Arena::create(name, ArenaConfig{}, &err);
  ASSERT_NE(arena, nullptr) << err;
  Collector::join(arena);
  auto rec = Recorder::start(arena, dir.file("live.db"), {}, 20);
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  auto reader = Reader::open(dir.file("live.db"));
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const uint32_t n = ss_intern("tick");
  int64_t last_seen = 0;
  int increases = 0;
  for (int i = 0; i < 5; ++i) {
    for (int k = 0; k < 10; ++k) {
      ss_span_begin(n);
      ss_span_end();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    const int64_t seen = *(*reader)->count("spans");
    increases += seen > last_seen;
    last_seen = seen;
  }
  EXPECT_EQ(increases, 5);
  EXPECT_EQ(last_seen, 50);
  ASSERT_TRUE((*rec)->stop().ok());
  Collector::leave();
  Arena::unlink(name);
}

}  // namespace
}  // namespace stallscope
