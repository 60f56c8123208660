// Synthetic DataLoader recordings; see sim_recording.h.
#include "tests/ui/sim_recording.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "storage/writer.h"

namespace stallscope::testing {
namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "sim_recording: %s: %s\n", what, s.message().c_str());
    std::abort();
  }
}

// One row to write, ordered by when a drainer would write it (spans when they end).
struct Ev {
  enum Kind : uint8_t { kSpan, kInstant, kCounter, kGpu };
  explicit Ev(Kind k) : kind(k) {}
  Kind kind;
  int64_t key = 0;
  int64_t owner = 0;  // thread row id, counter track id, or process row id (GPU)
  int64_t start = 0, dur = 0;
  uint32_t name = 0;
  int32_t depth = 0;
  std::optional<int64_t> a0, a1, a2;
  double value = 0;
  bool copy = false;  // GPU: a memcpy (else a kernel)
};

class Sim {
 public:
  Sim(const std::string& path, const SimOptions& o) : o_(o) {
    auto w = Writer::create(path);
    if (!w.ok()) {
      std::fprintf(stderr, "sim_recording: %s\n", w.status().message().c_str());
      std::abort();
    }
    w_ = std::move(*w);
    check(w_->begin(), "begin");
  }

  uint32_t str(const std::string& s) {
    auto it = strings_.find(s);
    if (it != strings_.end()) return it->second;
    const uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
    strings_.emplace(s, id);
    w_->add_string(id, s);
    return id;
  }

  int64_t track(int64_t pid, const std::string& name, const std::string& unit) {
    auto key = std::make_pair(pid, name);
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const int64_t id = w_->add_counter_track(CounterTrackRow{0, name, unit, pid});
    tracks_.emplace(key, id);
    return id;
  }

  void span(int64_t thread, uint32_t name, int64_t start, int64_t end, std::optional<int64_t> a0,
            std::optional<int64_t> a1, std::optional<int64_t> a2, int depth = 0) {
    Ev e(Ev::kSpan);
    e.key = end;
    e.owner = thread;
    e.start = start;
    e.dur = end - start;
    e.name = name;
    e.depth = depth;
    e.a0 = a0;
    e.a1 = a1;
    e.a2 = a2;
    buf_.push_back(e);
  }
  void instant(int64_t thread, uint32_t name, int64_t ts, std::optional<int64_t> a0, std::optional<int64_t> a1,
               std::optional<int64_t> a2) {
    Ev e(Ev::kInstant);
    e.key = ts;
    e.owner = thread;
    e.start = ts;
    e.name = name;
    e.a0 = a0;
    e.a1 = a1;
    e.a2 = a2;
    buf_.push_back(e);
  }
  void counter(int64_t track, int64_t ts, double v) {
    Ev e(Ev::kCounter);
    e.key = ts;
    e.owner = track;
    e.start = ts;
    e.value = v;
    buf_.push_back(e);
  }
  void gpu(int64_t process_row, uint32_t name, int64_t start, int64_t end, bool copy) {
    Ev e(Ev::kGpu);
    e.key = end;
    e.owner = process_row;
    e.start = start;
    e.dur = end - start;
    e.name = name;
    e.copy = copy;
    buf_.push_back(e);
  }

  // Writes the buffered rows in drain order, committing every commit_rows rows with a flush row.
  void flush_buffer(SimTruth* truth) {
    std::stable_sort(buf_.begin(), buf_.end(), [](const Ev& a, const Ev& b) { return a.key < b.key; });
    for (const Ev& e : buf_) {
      switch (e.kind) {
        case Ev::kSpan: {
          SpanRow r;
          r.thread_id = e.owner;
          r.start_ns = e.start;
          r.dur_ns = e.dur;
          r.name_id = e.name;
          r.depth = e.depth;
          r.arg0 = e.a0;
          r.arg1 = e.a1;
          r.arg2 = e.a2;
          const int64_t id = w_->add_span(r);
          if (!first_span_) first_span_ = id;
          last_span_ = id;
          min_start_ = std::min(min_start_, e.start);
          max_end_ = std::max(max_end_, e.start + e.dur);
          ++truth->spans;
          break;
        }
        case Ev::kInstant: w_->add_instant(InstantRow{0, e.owner, e.start, e.name, e.a0, e.a1, e.a2}); break;
        case Ev::kCounter: w_->add_counter(CounterRow{e.owner, e.start, e.value}); break;
        case Ev::kGpu: {
          GpuActivityRow g;
          g.process_id = e.owner;
          g.device = 0;
          g.stream = 7;
          g.context = 1;
          g.kind = e.copy ? "memcpy" : "kernel";
          g.start_ns = e.start;
          g.dur_ns = e.dur;
          g.name_id = e.name;
          if (e.copy) {
            g.bytes = int64_t{o_.batch_size} * 4096;
            g.copy_kind = "HtoD";
            g.src_kind = o_.pin ? "pinned" : "pageable";
            g.dst_kind = "device";
          }
          g.correlation_id = ++correlation_;
          w_->add_gpu_activity(g);
          break;
        }
      }
      ++truth->events;
      last_ts_ = std::max(last_ts_, e.key);
      if (++rows_ % o_.commit_rows == 0) commit();
    }
    buf_.clear();
  }

  void commit() {
    FlushRow f;
    f.ts_ns = last_ts_;
    f.events = rows_ - rows_at_last_flush_;
    f.first_span_id = first_span_;
    f.last_span_id = last_span_;
    if (first_span_) {
      f.min_start_ns = min_start_;
      f.max_end_ns = max_end_;
    }
    w_->add_flush(f);
    check(w_->commit(), "commit");
    check(w_->begin(), "begin");
    rows_at_last_flush_ = rows_;
    first_span_.reset();
    min_start_ = INT64_MAX;
    max_end_ = 0;
  }

  Writer& w() { return *w_; }
  const SimOptions& o_;
  std::vector<Ev> buf_;

 private:
  std::unique_ptr<Writer> w_;
  std::map<std::string, uint32_t> strings_;
  std::map<std::pair<int64_t, std::string>, int64_t> tracks_;
  int64_t rows_ = 0, rows_at_last_flush_ = 0, last_ts_ = 0, correlation_ = 0;
  std::optional<int64_t> first_span_;
  int64_t last_span_ = 0, min_start_ = INT64_MAX, max_end_ = 0;
};

struct Proc {
  int64_t pid = 0, row = 0, thread = 0;
  int worker = -1;
  int64_t start = 0, end = -1;
  std::vector<std::pair<int64_t, int64_t>> busy;  // fetch intervals of this epoch (workers)
};

double busy_fraction(const std::vector<std::pair<int64_t, int64_t>>& busy, int64_t a, int64_t b) {
  int64_t sum = 0;
  for (const auto& [s, e] : busy) {
    if (e <= a || s >= b) continue;
    sum += std::min(e, b) - std::max(s, a);
  }
  return static_cast<double>(sum) / static_cast<double>(b - a);
}

}  // namespace

const SimBatch* SimTruth::find(int epoch, int batch) const {
  for (const SimBatch& b : batches) {
    if (b.epoch == epoch && b.batch == batch) return &b;
  }
  return nullptr;
}

SimTruth write_sim_recording(const std::string& path, const SimOptions& o) {
  SimTruth truth;
  Sim sim(path, o);
  Writer& w = sim.w();
  check(w.set_meta("format", "stallscope.session"), "meta");
  check(w.set_meta("schema_version", "1"), "meta");
  check(w.set_meta("stallscope_version", "sim"), "meta");
  check(w.set_meta("host", "sim"), "meta");
  check(w.set_meta("mode", "launcher"), "meta");
  check(w.set_meta("command", "python train.py (simulated)"), "meta");
  check(w.set_meta("cpu_count", "8"), "meta");
  check(w.set_meta("start_real_ns", "1700000000000000000"), "meta");
  check(w.set_meta("complete", "0"), "meta");

  const uint32_t n_next = sim.str("dl.next"), n_fetch = sim.str("dl.fetch"), n_collate = sim.str("dl.collate"),
                 n_pin = sim.str("dl.pin"), n_sent = sim.str("dl.sent"), n_recv = sim.str("dl.recv"),
                 n_put = sim.str("dl.put"), n_wstart = sim.str("dl.worker_start"), n_wstop = sim.str("dl.worker_stop"),
                 n_wready = sim.str("dl.worker_ready"), n_ebegin = sim.str("dl.epoch_begin"),
                 n_eend = sim.str("dl.epoch_end"), n_config = sim.str("dl.config"),
                 n_kernel = sim.str("void sgemm_kernel<128>"), n_copy = sim.str("memcpy HtoD");
  const int N = std::max(0, o.workers);

  ProcessRow mp;
  mp.pid = o.main_pid;
  mp.ppid = 1;
  mp.cmdline = "python train.py";
  mp.start_ns = 0;
  Proc main;
  main.pid = o.main_pid;
  main.row = w.add_process(mp);
  main.thread = w.add_thread(ThreadRow{0, main.row, o.main_pid, "MainThread"});
  const int64_t pin_thread = o.pin ? w.add_thread(ThreadRow{0, main.row, o.main_pid + 1, "pin_memory"}) : 0;
  if (o.config) {
    char doc[512];
    std::snprintf(doc, sizeof doc,
                  "{\"loader\":0,\"batch_size\":%d,\"num_workers\":%d,\"pin_memory\":%s,\"pin_memory_effective\":%s,"
                  "\"persistent_workers\":%s,\"prefetch_factor\":%d,\"start_method\":\"fork\",\"dataset_type\":\"map\","
                  "\"dataset_class\":\"SimDataset\",\"dataset_len\":%d,\"batches_per_epoch\":%d,\"in_order\":true,"
                  "\"drop_last\":false,\"created_at\":\"train.py:12\",\"torch_version\":\"sim\"}",
                  o.batch_size, N, o.pin ? "true" : "false", o.pin ? "true" : "false", o.persistent ? "true" : "false",
                  o.prefetch, o.batches * o.batch_size, o.batches);
    sim.instant(main.thread, n_config, o.start_ns, 0, sim.str(doc), std::nullopt);
  }

  std::vector<Proc> workers(static_cast<size_t>(N));
  int64_t next_pid = o.main_pid + 1000;
  int64_t t = o.start_ns;
  int64_t pin_free = 0;
  const char* const extra_tracks[][2] = {{"proc.ctxsw_voluntary", "1/s"},
                                         {"proc.ctxsw_involuntary", "1/s"},
                                         {"proc.pss", "bytes"},
                                         {"proc.private_dirty", "bytes"},
                                         {"proc.read_bytes", "bytes/s"}};
  auto sample = [&](const Proc& p, int64_t a, int64_t b, int epoch) {
    if (!o.counters) return;
    const int64_t first = (a + o.sample_ns - 1) / o.sample_ns * o.sample_ns;
    const bool is_worker = p.worker >= 0;
    const int64_t cpu = sim.track(p.pid, "proc.cpu", "cores"), runq = sim.track(p.pid, "proc.runq_wait", "ratio"),
                  rss = sim.track(p.pid, "proc.rss", "bytes");
    for (int64_t ts = first; ts < b; ts += o.sample_ns) {
      const double c = is_worker ? 0.05 + 0.9 * busy_fraction(p.busy, ts - o.sample_ns, ts) : 0.35;
      sim.counter(cpu, ts, c);
      sim.counter(runq, ts, is_worker ? o.runq(p.worker) : 0.02);
      const double mem = is_worker ? 300e6 + 2e6 * epoch + 1e5 * static_cast<double>(p.worker)
                                   : 1.5e9 + 1e3 * static_cast<double>((ts - o.start_ns) / o.sample_ns % 1000);
      sim.counter(rss, ts, mem);
      if (o.all_counter_tracks) {
        for (const auto& tr : extra_tracks) {
          sim.counter(sim.track(p.pid, tr[0], tr[1]), ts, std::string(tr[1]) == "bytes" ? mem * 0.8 : 120.0);
        }
      }
    }
  };

  for (int e = 0; e < o.epochs; ++e) {
    const int64_t epoch_begin = t;
    if (e == 0) truth.first_epoch_begin_ns = t;
    sim.instant(main.thread, n_ebegin, t, 0, e, N);
    std::vector<int64_t> free(static_cast<size_t>(N), 0);
    for (int k = 0; k < N; ++k) {
      Proc& p = workers[static_cast<size_t>(k)];
      p.busy.clear();
      const bool fresh = e == 0 || !o.persistent;
      if (fresh) {
        p.pid = next_pid++;
        p.worker = k;
        p.start = t + (k + 1) * 100 * kUs;
        ProcessRow pr;
        pr.pid = p.pid;
        pr.ppid = o.main_pid;
        pr.cmdline = "python train.py";
        pr.start_ns = p.start;
        p.row = w.add_process(pr);
        p.thread = w.add_thread(ThreadRow{0, p.row, p.pid, "dl-worker-" + std::to_string(k)});
        truth.worker_pids.push_back(p.pid);
        sim.instant(main.thread, n_wstart, p.start, 0, k, p.pid);
        const int64_t ready = t + o.worker_boot_ns + k * 200 * kUs;
        sim.instant(p.thread, n_wready, ready, k, 0, std::nullopt);
        free[static_cast<size_t>(k)] = ready;
      } else {
        const int64_t ready = t + 100 * kUs;
        sim.instant(p.thread, n_wready, ready, k, e, std::nullopt);
        free[static_cast<size_t>(k)] = ready;
      }
    }
    const int gen = o.persistent ? e : 0;
    std::vector<SimBatch> bs(static_cast<size_t>(o.batches));
    auto send = [&](int i, int64_t ts) {
      SimBatch& b = bs[static_cast<size_t>(i)];
      b.epoch = e;
      b.batch = i;
      b.sent = ts;
      if (N == 0) return;
      b.worker = i % N;
      Proc& p = workers[static_cast<size_t>(b.worker)];
      b.worker_pid = p.pid;
      sim.instant(main.thread, n_sent, ts, 0, i, b.worker);
      b.fetch_start = std::max(free[static_cast<size_t>(b.worker)], ts + 20 * kUs);
      b.fetch_end = b.fetch_start + o.fetch_ns(e, i);
      b.put = b.fetch_end + 10 * kUs;
      free[static_cast<size_t>(b.worker)] = b.put + 10 * kUs;
      p.busy.push_back({b.fetch_start, b.fetch_end});
      sim.span(p.thread, n_fetch, b.fetch_start, b.fetch_end, i, b.worker, gen);
      const int64_t collate = std::max<int64_t>(1, (b.fetch_end - b.fetch_start) / 10);
      sim.span(p.thread, n_collate, b.fetch_end - collate, b.fetch_end, i, o.batch_size, gen, 1);
      sim.instant(p.thread, n_put, b.put, i, b.worker, gen);
    };
    t += 1 * kMsNs;  // __iter__
    for (int i = 0; i < std::min(o.batches, o.prefetch * N); ++i) send(i, t + i * 50 * kUs);
    for (int i = 0; i < o.batches; ++i) {
      SimBatch& b = bs[static_cast<size_t>(i)];
      b.next_start = t;
      int64_t avail;
      if (N == 0) {  // num_workers=0: the fetch happens inside next()
        b.fetch_start = t + 20 * kUs;
        b.fetch_end = b.fetch_start + o.fetch_ns(e, i);
        sim.span(main.thread, n_fetch, b.fetch_start, b.fetch_end, 0, i, -1, 1);
        avail = b.fetch_end;
        b.put = b.fetch_end;
        b.worker = -1;
      } else {
        avail = b.put;
        if (o.pin) {
          b.pin_start = std::max(b.put + 20 * kUs, pin_free);
          b.pin_end = b.pin_start + o.pin_ns;
          pin_free = b.pin_end;
          sim.span(pin_thread, n_pin, b.pin_start, b.pin_end, 0, i, std::nullopt);
          avail = b.pin_end;
        }
      }
      b.recv = std::max(t, avail) + 5 * kUs;
      if (N > 0) sim.instant(main.thread, n_recv, b.recv, 0, i, b.worker);
      b.handed = b.recv + 30 * kUs;
      sim.span(main.thread, n_next, t, b.handed, 0, i, e);
      truth.stall_ns += b.handed - t;
      if (N > 0 && i + o.prefetch * N < o.batches) send(i + o.prefetch * N, b.handed + 10 * kUs);
      if (o.gpu) {
        sim.gpu(main.row, n_copy, b.handed + 20 * kUs, b.handed + 120 * kUs, true);
        sim.gpu(main.row, n_kernel, b.handed + 150 * kUs, b.handed + o.step_ns * 85 / 100, false);
      }
      t = b.handed + o.step_ns;
    }
    sim.span(main.thread, n_next, t, t + 20 * kUs, 0, -1, e);  // StopIteration
    truth.stall_ns += 20 * kUs;
    t += 20 * kUs;
    sim.instant(main.thread, n_eend, t, 0, e, o.batches);
    const bool last = e == o.epochs - 1;
    const int64_t next_begin = t + o.epoch_gap_ns;
    sample(main, epoch_begin, last ? t : next_begin, e);
    for (Proc& p : workers) {
      const bool stops = !o.persistent || last;
      sample(p, std::max(epoch_begin, p.start), stops ? t : next_begin, e);
      if (stops) {
        sim.instant(main.thread, n_wstop, t + 30 * kUs, 0, p.worker, p.pid);
        w.update_process_end(p.row, t + 1 * kMsNs, 0, std::nullopt);
      }
    }
    for (const SimBatch& b : bs) truth.batches.push_back(b);
    sim.flush_buffer(&truth);
    if (o.after_epoch) {
      sim.commit();
      o.after_epoch(e, t);
    }
    t = next_begin;
  }
  truth.end_ns = t;
  w.update_process_end(main.row, t + 2 * kMsNs, 0, std::nullopt);
  check(w.set_meta("end_ns", std::to_string(t + 2 * kMsNs)), "meta");
  check(w.set_meta("dropped_events", "0"), "meta");
  check(w.set_meta("complete", o.complete ? "1" : "0"), "meta");
  sim.commit();
  check(w.commit(), "final commit");
  if (o.complete) check(w.finish(), "finish");
  return truth;
}

namespace {

// A deterministic jitter in [0, 1).
double jitter(int e, int b) {
  uint64_t x = static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(b) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<double>(x % 1000000) / 1e6;
}

}  // namespace

SimOptions hour_of_training(int64_t events) {
  SimOptions o;
  o.workers = 8;
  o.persistent = true;
  o.pin = true;
  o.batches = 10000;
  o.step_ns = 4'600'000;
  o.pin_ns = 300'000;
  o.all_counter_tracks = true;
  o.sample_ns = 50 * kMsNs;
  o.fetch_ns = [](int e, int b) {
    const int64_t base = 38 * kMsNs + static_cast<int64_t>(jitter(e, b) * 7e6);
    return b % 997 == 996 ? base + 150 * kMsNs : base;  // now and then a slow sample
  };
  o.runq = [](int w) { return w == 5 ? 0.35 : 0.04 + 0.01 * w; };
  const double per_epoch = 7.0 * o.batches + 1440.0 * (o.batches * 5.25e-3);
  o.epochs = std::max(1, static_cast<int>(std::llround(static_cast<double>(events) / per_epoch)));
  return o;
}

}  // namespace stallscope::testing
