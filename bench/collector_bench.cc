// Collector and storage benchmarks. Prints tables with the goal beside each figure.
//   collector_bench [--quick]
// 1. Hot path: ns per event (span begin + end = 2 events) from one and from two threads, while a
//    drainer empties the rings.
// 2. Ingest: events/s that one drainer thread writes into SQLite, and bytes per span on disk.
// 3. Transport for forked workers: shared-memory arena drained by one writer (the design) versus
//    one SQLite writer per process; CPU time spent inside the worker processes.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_rows.h"
#include "collector/collector.h"
#include "stallscope/stallscope.h"
#include "storage/ingest.h"
#include "storage/schema.h"
#include "storage/summaries.h"
#include "storage/writer.h"

using namespace stallscope;

namespace {

// A benchmark whose database step fails measures nothing: stop with the reason.
void must(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "collector_bench: %s\n", s.message().c_str());
  std::exit(1);
}

std::string tmp_path(const std::string& name) {
  const char* t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/" + name + "-" + std::to_string(getpid());
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double cpu_seconds(int who) {
  rusage ru;
  getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// ---------------------------------------------------------------------------------------------
// 1. Hot path
struct HotResult {
  double median_ns, p99_ns;
  int rounds_kept, rounds_with_drops;
};

HotResult hot_path(int threads, int rounds) {
  const std::string name = "ss-bench-hot-" + std::to_string(getpid()) + "-" + std::to_string(threads);
  ArenaConfig cfg;
  cfg.ring_capacity = 1u << 20;
  cfg.ring_count = 8;
  std::string err;
  Arena* arena = Arena::create(name, cfg, &err);
  std::atomic<int> rounds_with_drops{0};
  if (!arena) {
    std::fprintf(stderr, "collector_bench: %s\n", err.c_str());
    std::exit(1);
  }
  Collector::join(arena);
  std::atomic<bool> done{false};
  // The drainer: frees ring space as the real one does (reads head, publishes tail), every 50 us:
  // often enough that a ring (16,384 events, about 300 us of this loop) never fills, and far more
  // often than the real drainer (every 100 ms). A drainer polling without pause reads the head's
  // cache line between every two events, so that each store to it fetches the line back from the
  // other core: 20-23 ns an event on one thread against 11-12 ns with this pause, a cost the real
  // drainer does not cause (docs/decisions.md, "The hot-path bench's drainer pauses between passes").
  std::thread drainer([&] {
    while (!done.load()) {
      for (uint32_t i = 0; i < cfg.ring_count; ++i) {
        Ring* r = arena->ring(i);
        if (r->h.state.load(std::memory_order_acquire) != kRingFree) {
          r->h.tail.store(r->h.head.load(std::memory_order_acquire), std::memory_order_release);
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  std::vector<std::vector<double>> per_thread(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const uint32_t id = ss_intern("step");
      constexpr int kSpans = 1000;
      ss_span_begin(id);  // claims this thread's ring
      ss_span_end();
      const Ring* ring = t_state.ring;
      // Touch every page of the ring once: first-touch page faults are a start-up cost, not the
      // hot path's (a short run would otherwise never wrap and pay one per 128 events).
      for (uint64_t i = 0; i <= ring->h.mask; i += 2) {
        ss_span_begin(id);
        ss_span_end();
      }
      for (int r = 0; r < rounds; ++r) {
        const uint64_t dropped_before = ring->h.dropped.load(std::memory_order_relaxed);
        const uint64_t t0 = monotonic_ns();
        for (int i = 0; i < kSpans; ++i) {
          ss_span_begin_args(id, i, r, t);
          ss_span_end();
        }
        const uint64_t t1 = monotonic_ns();
        // A round that hit a full ring took the (cheaper) drop path: not a hot-path figure.
        if (ring->h.dropped.load(std::memory_order_relaxed) != dropped_before) {
          rounds_with_drops.fetch_add(1);
          continue;
        }
        per_thread[t].push_back(static_cast<double>(t1 - t0) / (2.0 * kSpans));
      }
    });
  }
  for (auto& t : ts) t.join();
  done.store(true);
  drainer.join();
  std::vector<double> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  Collector::leave();
  Arena::unlink(name);
  return {percentile(all, 0.5), percentile(all, 0.99), static_cast<int>(all.size()), rounds_with_drops.load()};
}

double disabled_path(int n) {
  Collector::leave();
  const uint64_t t0 = monotonic_ns();
  for (int i = 0; i < n; ++i) {
    ss_span_begin_args(1, i, 0, 0);
    ss_span_end();
  }
  return static_cast<double>(monotonic_ns() - t0) / (2.0 * n);
}

// ---------------------------------------------------------------------------------------------
// 2. Ingest
struct IngestResult {
  double events_per_s, spans_per_s, bytes_per_span, bytes_per_span_indexed;
  uint64_t events;
};

IngestResult ingest(uint32_t spans_per_ring, uint32_t rings) {
  const std::string name = "ss-bench-ingest-" + std::to_string(getpid());
  ArenaConfig cfg;
  cfg.ring_capacity = 1;
  while (cfg.ring_capacity < 2 * spans_per_ring) cfg.ring_capacity <<= 1;
  cfg.ring_count = rings;
  std::string err;
  Arena* arena = Arena::create(name, cfg, &err);
  Collector::join(arena);
  const std::string db = tmp_path("ss-bench-ingest") + ".db";
  ::unlink(db.c_str());
  auto w = Writer::create(db);
  if (!w.ok()) {
    std::fprintf(stderr, "collector_bench: %s\n", w.status().message().c_str());
    std::exit(1);
  }
  Ingest in(arena, w->get());
  must(in.write_meta({}));
  // Fill the rings from `rings` threads with DataLoader-like spans (loader, batch, epoch args).
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < rings; ++t) {
    ts.emplace_back([&, t] {
      const uint32_t names[] = {ss_intern("dl.next"), ss_intern("dl.fetch"), ss_intern("dl.collate")};
      for (uint32_t i = 0; i < spans_per_ring; ++i) {
        ss_span_begin_args(names[i % 3], 0, static_cast<int32_t>(i), static_cast<int32_t>(t));
        ss_span_end();
      }
      // Keep the ring: exit would retire it, which is fine too, but hold it for a like-for-like run.
    });
  }
  for (auto& t : ts) t.join();
  const double c0 = cpu_seconds(RUSAGE_THREAD);
  const uint64_t t0 = monotonic_ns();
  Status s = in.drain(true);
  const uint64_t t1 = monotonic_ns();
  const double c1 = cpu_seconds(RUSAGE_THREAD);
  must((*w)->finish());
  if (!s.ok()) std::fprintf(stderr, "collector_bench: drain failed: %s\n", s.message().c_str());
  const double secs = static_cast<double>(t1 - t0) / 1e9;
  (void)c0;
  (void)c1;
  w->reset();
  struct stat st;
  ::stat(db.c_str(), &st);
  const double spans = static_cast<double>(in.stats().spans);
  IngestResult r{static_cast<double>(in.stats().events) / secs, spans / secs, static_cast<double>(st.st_size) / spans,
                 0, in.stats().events};
  // The cost of a time index on spans, for docs/decisions.md.
  {
    auto d = Db::open(db, Db::Mode::kReadWrite);
    must((*d)->exec("CREATE INDEX spans_start ON spans(start_ns); VACUUM;"));
  }
  ::stat(db.c_str(), &st);
  r.bytes_per_span_indexed = static_cast<double>(st.st_size) / spans;
  ::unlink(db.c_str());
  Collector::leave();
  Arena::unlink(name);
  return r;
}

// ---------------------------------------------------------------------------------------------
// 2b. Summaries (storage/summaries.h): the drainer's CPU to keep them, per second of a run that
// records `rate` spans per second on 8 threads under 6 names, drained (summaries written) every
// 100 ms; one name in 6 is `dl.next` handing a batch (handoff_summaries), whose size no collate
// gives: the join's costliest case, every hand-off waiting. Their cost is mostly per drain (each bucket a drain touched
// is rewritten once), so it is given at a training job's rate and at a high one. The commit is not counted.
double summaries_core_share(uint32_t rate, int seconds) {
  const std::string db = tmp_path("ss-bench-summaries") + ".db";
  (void)Writer::remove(db);
  auto w = Writer::create(db);
  if (!w.ok()) {
    std::fprintf(stderr, "collector_bench: %s\n", w.status().message().c_str());
    std::exit(1);
  }
  Summaries sum((*w)->db());
  must(sum.prepare());
  for (uint32_t n = 1; n <= 6; ++n) sum.on_string(n, n == 1 ? "dl.next" : "name" + std::to_string(n));
  double cpu = 0;
  SpanRow r;
  const uint32_t per_drain = std::max(1u, rate / 10);
  const int64_t gap = 100'000'000 / per_drain;
  uint64_t i = 0;
  for (int d = 0; d < seconds * 10; ++d) {
    must((*w)->begin());
    const double c0 = cpu_seconds(RUSAGE_THREAD);
    for (uint32_t k = 0; k < per_drain; ++k, ++i) {
      r.thread_id = static_cast<int64_t>(i % 8);
      r.name_id = 1 + static_cast<uint32_t>(i % 6);
      r.start_ns = static_cast<int64_t>(i) * gap;
      r.dur_ns = 10'000 + static_cast<int64_t>((i * 7919) % 5'000'000);
      r.arg0 = static_cast<int64_t>(i % 2);
      r.arg1 = static_cast<int64_t>(i);  // dl.next: a batch handed (its size never collated: every one waits)
      sum.add_span(r);
    }
    must(sum.write());
    cpu += cpu_seconds(RUSAGE_THREAD) - c0;
    must((*w)->commit());
  }
  w->reset();
  (void)Writer::remove(db);
  return cpu / seconds;
}

// ---------------------------------------------------------------------------------------------
// 2c. --keep-detail (Writer::set_keep_detail): the writer's CPU (rows, summaries, commit and the
// deletes) per second of a run of 2 x `half_s` seconds at a training job's rate (3,000 spans,
// 3,000 instants and 80 counter values a second, drained every 100 ms), and the file's size
// (with its WAL) at the middle and at the end: with a window, the second half should not grow it.
struct KeepDetailResult {
  double cpu_share = 0;
  int64_t bytes_half = 0, bytes_end = 0;
};

int64_t file_bytes(const std::string& db) {
  int64_t total = 0;
  for (const char* suffix : {"", "-wal"}) {
    struct stat st;
    if (::stat((db + suffix).c_str(), &st) == 0) total += static_cast<int64_t>(st.st_size);
  }
  return total;
}

KeepDetailResult keep_detail_run(int64_t keep_ns, int half_s) {
  const std::string db = tmp_path("ss-bench-keep") + ".db";
  (void)Writer::remove(db);
  auto w = Writer::create(db);
  if (!w.ok()) {
    std::fprintf(stderr, "collector_bench: %s\n", w.status().message().c_str());
    std::exit(1);
  }
  Writer& wr = **w;
  if (keep_ns > 0) must(wr.set_keep_detail(keep_ns));
  must(wr.begin());
  wr.add_string(1, "dl.next");
  wr.add_string(2, "dl.sent");
  const int64_t proc = wr.add_process(ProcessRow{0, 7, {}, "p", 0, {}, {}, {}});
  const int64_t th = wr.add_thread(ThreadRow{0, proc, 7, "t"});
  const int64_t track = wr.add_counter_track(CounterTrackRow{0, "proc.cpu", "cores", 7});
  must(wr.commit());
  KeepDetailResult r;
  double cpu = 0;
  constexpr int64_t kDrainNs = 100'000'000;
  SpanRow s;
  s.thread_id = th;
  s.name_id = 1;
  for (int d = 1; d <= 2 * half_s * 10; ++d) {
    const double c0 = cpu_seconds(RUSAGE_THREAD);
    must(wr.begin());
    const int64_t t0 = (d - 1) * kDrainNs;
    for (int k = 0; k < 300; ++k) {
      s.start_ns = t0 + k * (kDrainNs / 300);
      s.dur_ns = 200'000 + (k * 7919) % 300'000;
      s.arg0 = 0;
      s.arg1 = d * 300 + k;
      wr.add_span(s);
      wr.add_instant(InstantRow{0, th, s.start_ns + 1000, 2, 0, d * 300 + k, k % 8});
    }
    for (int k = 0; k < 8; ++k) wr.add_counter(CounterRow{track, t0 + k * (kDrainNs / 8), 0.5 + k});
    wr.add_flush(FlushRow{d * kDrainNs, 608, 0, {}, {}, {}, {}});
    must(wr.commit());
    cpu += cpu_seconds(RUSAGE_THREAD) - c0;
    if (d == half_s * 10) r.bytes_half = file_bytes(db);
  }
  r.bytes_end = file_bytes(db);
  r.cpu_share = cpu / (2.0 * half_s);
  w->reset();
  (void)Writer::remove(db);
  return r;
}

// ---------------------------------------------------------------------------------------------
// 3. Transport for forked workers
struct TransportResult {
  double worker_cpu_ns_per_span;  // CPU inside the worker processes, per span
  double drain_cpu_ns_per_span;   // CPU in the single drainer (arena design only)
  double wall_s;
};

TransportResult transport_arena(int workers, int spans) {
  const std::string name = "ss-bench-tr-" + std::to_string(getpid());
  ArenaConfig cfg;
  cfg.ring_capacity = 1u << 20;  // a worker here emits far faster than a real one: no drops
  std::string err;
  Arena* arena = Arena::create(name, cfg, &err);
  Collector::join(arena);
  const std::string db = tmp_path("ss-bench-transport-a") + ".db";
  ::unlink(db.c_str());
  auto w = Writer::create(db);
  Ingest in(arena, w->get());
  must(in.write_meta({}));
  const uint32_t id = ss_intern("dl.fetch");
  const double children_before = cpu_seconds(RUSAGE_CHILDREN);
  const uint64_t t0 = monotonic_ns();
  std::vector<pid_t> pids;
  for (int k = 0; k < workers; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < spans; ++i) {
        ss_span_begin_args(id, i, k, 0);
        ss_span_end();
        if (i % 20000 == 0) usleep(1000);  // a worker does other work between batches
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  double drain_cpu = 0;
  int alive = workers;
  while (alive > 0) {
    const double c0 = cpu_seconds(RUSAGE_THREAD);
    must(in.drain(false));
    drain_cpu += cpu_seconds(RUSAGE_THREAD) - c0;
    usleep(20000);
    alive = 0;
    for (pid_t p : pids) alive += waitpid(p, nullptr, WNOHANG) == 0;
  }
  const double c0 = cpu_seconds(RUSAGE_THREAD);
  must(in.drain(true));
  drain_cpu += cpu_seconds(RUSAGE_THREAD) - c0;
  const double wall = static_cast<double>(monotonic_ns() - t0) / 1e9;
  const double worker_cpu = cpu_seconds(RUSAGE_CHILDREN) - children_before;
  const double total = static_cast<double>(workers) * spans;
  if (in.stats().spans != static_cast<uint64_t>(total)) {
    std::fprintf(stderr, "collector_bench: transport (arena) lost spans: %llu of %.0f (%llu dropped)\n",
                 static_cast<unsigned long long>(in.stats().spans), total,
                 static_cast<unsigned long long>(in.stats().dropped));
  }
  w->reset();
  ::unlink(db.c_str());
  Collector::leave();
  Arena::unlink(name);
  return {worker_cpu * 1e9 / total, drain_cpu * 1e9 / total, wall};
}

TransportResult transport_writer_per_process(int workers, int spans) {
  const std::string db = tmp_path("ss-bench-transport-b") + ".db";
  ::unlink(db.c_str());
  {
    auto w = Writer::create(db);  // schema, WAL
  }
  const double children_before = cpu_seconds(RUSAGE_CHILDREN);
  const uint64_t t0 = monotonic_ns();
  std::vector<pid_t> pids;
  for (int k = 0; k < workers; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      // What a worker would do if it wrote its own events: buffer in memory (as the ring does),
      // and every 100 ms-worth of events open a transaction on the shared database.
      auto d = Db::open(db, Db::Mode::kReadWrite);
      if (!d.ok()) _exit(1);
      must((*d)->exec("PRAGMA synchronous = NORMAL"));
      auto st = (*d)->prepare(
          "INSERT INTO spans (thread_id, start_ns, dur_ns, name_id, depth, arg0, arg1, arg2) VALUES (?,?,?,?,?,?,?,?)");
      struct Row {
        int64_t start, dur;
        int32_t i;
      };
      std::vector<Row> buf;
      buf.reserve(20000);
      auto flush = [&] {
        while (!(*d)->exec("BEGIN IMMEDIATE").ok()) usleep(1000);
        for (const Row& r : buf) {
          (*st)->bind(1, int64_t{k}).bind(2, r.start).bind(3, r.dur).bind(4, int64_t{1}).bind(5, int64_t{0});
          (*st)->bind(6, int64_t{r.i}).bind(7, int64_t{k}).bind(8, int64_t{0});
          (void)(*st)->run();
        }
        must((*d)->exec("COMMIT"));
        buf.clear();
      };
      for (int i = 0; i < spans; ++i) {
        const int64_t a = static_cast<int64_t>(monotonic_ns());
        buf.push_back({a, static_cast<int64_t>(monotonic_ns()) - a, i});
        if (buf.size() == 20000) flush();
        if (i % 20000 == 0) usleep(1000);
      }
      flush();
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  const double wall = static_cast<double>(monotonic_ns() - t0) / 1e9;
  const double worker_cpu = cpu_seconds(RUSAGE_CHILDREN) - children_before;
  ::unlink(db.c_str());
  ::unlink((db + "-wal").c_str());
  ::unlink((db + "-shm").c_str());
  return {worker_cpu * 1e9 / (static_cast<double>(workers) * spans), 0, wall};
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && !quick) {
    std::fprintf(stderr, "usage: collector_bench [--quick]\n");
    return 2;
  }
  const int rounds = quick ? 200 : 2000;
  std::printf("stallscope collector benchmarks (%d cores)\n\n", static_cast<int>(std::thread::hardware_concurrency()));

  std::printf("1. Hot path: ns per event (span begin+end = 2 events), %d rounds of 1000 spans per thread\n", rounds);
  std::printf(
      "| threads | median ns/event | p99 ns/event | rounds kept (dropped) | goal (median) |\n|---|---|---|---|---|\n");
  for (int t : {1, 2}) {
    HotResult r = hot_path(t, rounds);
    std::printf("| %d | %.1f | %.1f | %d (%d) | < 20 ns %s |\n", t, r.median_ns, r.p99_ns, r.rounds_kept,
                r.rounds_with_drops, r.median_ns < 20 ? "(met)" : "(MISSED)");
    bench::bench_row(std::string("hot path, ns per event, ") + (t == 1 ? "1 thread" : "2 threads") + " (median)",
                     bench::fmt("%.1f ns", r.median_ns) + bench::fmt(" (p99 %.1f)", r.p99_ns), "< 20 ns", "",
                     r.median_ns < 20);
  }
  std::printf("| not recording | %.1f | | | |\n\n", disabled_path(1000000));

  const uint32_t per_ring = quick ? 100000 : 500000;
  std::printf("2. Ingest into SQLite: one drainer thread, %u spans x 4 threads (3 args each)\n", per_ring);
  IngestResult in = ingest(per_ring, 4);
  std::printf("| figure | measured | goal |\n|---|---|---|\n");
  std::printf("| events/s (one core) | %.2f M | >= 1 M %s |\n", in.events_per_s / 1e6,
              in.events_per_s >= 1e6 ? "(met)" : "(MISSED)");
  std::printf("| spans/s | %.2f M | |\n", in.spans_per_s / 1e6);
  bench::bench_row("ingest into SQLite, one core", bench::fmt("%.2f M events/s", in.events_per_s / 1e6),
                   ">= 1 M events/s", "", in.events_per_s >= 1e6);
  bench::bench_row("bytes per span on disk", bench::fmt("%.1f", in.bytes_per_span), "<= 40", "",
                   in.bytes_per_span <= 40);
  std::printf("| bytes per span on disk | %.1f | <= 40 %s |\n", in.bytes_per_span,
              in.bytes_per_span <= 40 ? "(met)" : "(MISSED)");
  std::printf("| bytes per span with an index on start_ns | %.1f | (not used; see docs/decisions.md) |\n",
              in.bytes_per_span_indexed);

  std::printf("\n2b. Summaries kept by the drainer: CPU per second of recording (drains every 100 ms)\n");
  std::printf("| spans/s recorded | CPU, share of one core | goal |\n|---|---|---|\n");
  for (uint32_t rate : {3000u, 100000u}) {
    const double share = summaries_core_share(rate, quick ? 60 : 300);
    // The ingest's own CPU at that rate (section 2), for scale.
    const double ingest_share = rate / in.spans_per_s;
    if (rate <= 3000) {
      std::printf("| %u (a training job) | %.2f %% | <= 1 %% %s |\n", rate, 100 * share,
                  share <= 0.01 ? "(met)" : "(MISSED)");
      bench::bench_row("summaries, CPU at 3,000 spans/s", bench::fmt("%.2f %% of a core", 100 * share), "<= 1 %", "",
                       share <= 0.01);
    } else {
      std::printf("| %u | %.2f %% (the ingest itself: %.1f %%) | |\n", rate, 100 * share, 100 * ingest_share);
      bench::bench_row("summaries, CPU at 100,000 spans/s", bench::fmt("%.2f %% of a core", 100 * share), "",
                       bench::fmt("the ingest itself: %.1f %%", 100 * ingest_share));
    }
  }
  std::printf("\n");

  {
    // Interleaved: without, with, without, with; the medians of CPU (two runs each: the mean).
    const int half_s = quick ? 150 : 600;
    const int64_t keep_ns = 60'000'000'000;
    KeepDetailResult off[2], on[2];
    for (int i = 0; i < 2; ++i) {
      off[i] = keep_detail_run(0, half_s);
      on[i] = keep_detail_run(keep_ns, half_s);
    }
    const double cpu_off = (off[0].cpu_share + off[1].cpu_share) / 2, cpu_on = (on[0].cpu_share + on[1].cpu_share) / 2;
    const double grow_off = static_cast<double>(off[1].bytes_end) / static_cast<double>(off[1].bytes_half);
    const double grow_on = static_cast<double>(on[1].bytes_end) / static_cast<double>(on[1].bytes_half);
    std::printf("2c. --keep-detail 60s: a run of 2 x %d s at 6,080 rows/s (drains every 100 ms), interleaved\n",
                half_s);
    std::printf(
        "| | writer CPU, share of one core | file at the middle | file at the end | end / middle | goal |\n"
        "|---|---|---|---|---|---|\n");
    std::printf("| all detail | %.2f %% | %.1f MB | %.1f MB | %.2f | |\n", 100 * cpu_off, off[1].bytes_half / 1e6,
                off[1].bytes_end / 1e6, grow_off);
    std::printf("| --keep-detail 60s | %.2f %% (x%.2f) | %.1f MB | %.1f MB | %.2f | <= 1.1 %s |\n", 100 * cpu_on,
                cpu_on / cpu_off, on[1].bytes_half / 1e6, on[1].bytes_end / 1e6, grow_on,
                grow_on <= 1.1 ? "(met)" : "(MISSED)");
    bench::bench_row("--keep-detail: file growth in the second half", bench::fmt("x%.2f", grow_on), "<= x1.1",
                     bench::fmt("all detail x%.2f", grow_off), grow_on <= 1.1);
    bench::bench_row("--keep-detail: writer CPU", bench::fmt("%.2f %% of a core", 100 * cpu_on), "",
                     bench::fmt("all detail %.2f %%", 100 * cpu_off));
    std::printf("\n");
  }

  const int workers = 4, spans = quick ? 100000 : 400000;
  std::printf("3. Forked workers: %d processes x %d spans; CPU inside the workers per span\n", workers, spans);
  TransportResult a = transport_arena(workers, spans);
  TransportResult b = transport_writer_per_process(workers, spans);
  std::printf("| transport | worker CPU ns/span | drainer CPU ns/span | wall s |\n|---|---|---|---|\n");
  std::printf("| shared-memory arena, one drainer (used) | %.0f | %.0f | %.2f |\n", a.worker_cpu_ns_per_span,
              a.drain_cpu_ns_per_span, a.wall_s);
  std::printf("| one SQLite writer per process | %.0f | - | %.2f |\n", b.worker_cpu_ns_per_span, b.wall_s);
  std::printf("| ratio (per-process / arena), worker CPU | %.1fx | | |\n",
              b.worker_cpu_ns_per_span / std::max(1.0, a.worker_cpu_ns_per_span));
  bench::bench_row("CPU per span inside a forked worker", bench::fmt("%.0f ns", a.worker_cpu_ns_per_span), "",
                   bench::fmt("a SQLite writer per process: %.0f ns", b.worker_cpu_ns_per_span));
  return 0;
}
