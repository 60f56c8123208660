// Synthetic DataLoader recordings; see sim_recording.h.
#include "tests/ui/sim_recording.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>

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
  // With `horizon`, only the rows a drainer would have written by then; the others stay buffered.
  void flush_buffer(RecordingTruth* truth, int64_t horizon = INT64_MAX) {
    std::stable_sort(buf_.begin(), buf_.end(), [](const Ev& a, const Ev& b) { return a.key < b.key; });
    const auto until =
        std::upper_bound(buf_.begin(), buf_.end(), horizon, [](int64_t h, const Ev& e) { return h < e.key; });
    for (auto it = buf_.begin(); it != until; ++it) {
      const Ev& e = *it;
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
    buf_.erase(buf_.begin(), until);
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

const SimBatch* RecordingTruth::find(int epoch, int batch) const {
  for (const SimBatch& b : batches) {
    if (b.epoch == epoch && b.batch == batch) return &b;
  }
  return nullptr;
}

RecordingTruth write_sim_recording(const std::string& path, const SimOptions& o) {
  RecordingTruth truth;
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

namespace {

// A deterministic draw in [0, 1) from three numbers.
double draw(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ b * 0xBF58476D1CE4E5B9ull ^ c * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<double>(x % 1000000) / 1e6;
}

// One rank's part of the lockstep run, kept to write its recording: per step, when its batch was
// handed and when it called the all_reduce; per batch, when it was sent and fetched.
struct RankRun {
  std::vector<int64_t> handed, arrive, sent, fetch_start, fetch_end;
  std::vector<int64_t> free;  // per worker: when it can start its next fetch
};

void write_rank(const std::string& path, const JobSimOptions& o, int rank, const std::string& node, int64_t offset,
                const RankRun& run, const std::vector<int64_t>& call, const std::vector<int64_t>& leave,
                int64_t start) {
  SimOptions so;
  so.commit_rows = o.commit_rows;
  so.batch_size = o.batch_size;
  so.pin = false;
  RecordingTruth truth;
  Sim sim(path, so);
  Writer& w = sim.w();
  const int local = rank % std::max(1, o.ranks / std::max(1, o.nodes));
  const int64_t node_index = rank / std::max(1, o.ranks / std::max(1, o.nodes));
  auto meta = [&](const char* k, const std::string& v) { check(w.set_meta(k, v), "meta"); };
  meta("format", "stallscope.session");
  meta("schema_version", "2");
  meta("stallscope_version", "sim");
  meta("host", node);
  meta("mode", "launcher");
  meta("command", "python train.py (simulated rank)");
  meta("cpu_count", "32");
  // The job's clock: each node's monotonic clock has a base of its own; the realtime clock is shared.
  meta("start_real_ns", std::to_string(1'700'000'000'000'000'000 + offset));
  meta("start_mono_ns", std::to_string(5'000'000'000 * (node_index + 1) + offset));
  meta("rank", std::to_string(rank));
  meta("local_rank", std::to_string(local));
  meta("world_size", std::to_string(o.ranks));
  meta("job", o.job);
  meta("complete", "0");
  const int64_t pid = 4000 + 10 * local;
  ProcessRow mp;
  mp.pid = pid;
  mp.ppid = 1;
  mp.cmdline = "python train.py";
  mp.start_ns = 0;
  const int64_t main_row = w.add_process(mp);
  const int64_t main_thread = w.add_thread(ThreadRow{0, main_row, pid, "MainThread"});
  const uint32_t n_next = sim.str("dl.next"), n_fetch = sim.str("dl.fetch"), n_collate = sim.str("dl.collate"),
                 n_sent = sim.str("dl.sent"), n_recv = sim.str("dl.recv"), n_put = sim.str("dl.put"),
                 n_wstart = sim.str("dl.worker_start"), n_wready = sim.str("dl.worker_ready"),
                 n_ebegin = sim.str("dl.epoch_begin"), n_config = sim.str("dl.config"), n_rank = sim.str("dist.rank"),
                 n_coll = sim.str("dist.collective"), n_allreduce = sim.str("all_reduce");
  auto t = [&](int64_t job_ns) { return job_ns - offset; };  // the recording's own time
  const int W = std::max(1, o.workers);
  const int64_t steps = static_cast<int64_t>(run.handed.size());
  char doc[512];
  std::snprintf(
      doc, sizeof doc,
      "{\"loader\":0,\"batch_size\":%d,\"num_workers\":%d,\"pin_memory\":false,\"pin_memory_effective\":false,"
      "\"persistent_workers\":true,\"prefetch_factor\":%d,\"start_method\":\"fork\",\"dataset_type\":\"map\","
      "\"dataset_class\":\"SimDataset\",\"dataset_len\":%lld,\"batches_per_epoch\":%lld,\"in_order\":true,"
      "\"drop_last\":true,\"created_at\":\"train.py:40\",\"torch_version\":\"sim\"}",
      o.batch_size, W, o.prefetch, static_cast<long long>(steps * o.batch_size * 4), static_cast<long long>(steps * 4));
  sim.instant(main_thread, n_config, t(start - 2 * kMsNs), 0, sim.str(doc), std::nullopt);
  std::snprintf(doc, sizeof doc,
                "{\"rank\":%d,\"local_rank\":%d,\"world_size\":%d,\"node\":\"%s\",\"group_rank\":%lld,"
                "\"job\":\"%s\",\"backend\":\"nccl\"}",
                rank, local, o.ranks, node.c_str(), static_cast<long long>(node_index), o.job.c_str());
  sim.instant(main_thread, n_rank, t(start - 1 * kMsNs), rank, sim.str(doc), o.ranks);
  sim.instant(main_thread, n_ebegin, t(start), 0, 0, W);
  std::vector<int64_t> worker_thread(static_cast<size_t>(W));
  for (int k = 0; k < W; ++k) {
    ProcessRow pr;
    pr.pid = pid + 1 + k;
    pr.ppid = pid;
    pr.cmdline = "python train.py";
    pr.start_ns = t(start + (k + 1) * 100 * kUs);
    const int64_t row = w.add_process(pr);
    worker_thread[static_cast<size_t>(k)] = w.add_thread(ThreadRow{0, row, pr.pid, "dl-worker-" + std::to_string(k)});
    sim.instant(main_thread, n_wstart, *pr.start_ns, 0, k, pr.pid);
    sim.instant(worker_thread[static_cast<size_t>(k)], n_wready, t(start + 20 * kMsNs), k, 0, std::nullopt);
  }
  const size_t batches = run.sent.size();
  for (size_t b = 0; b < batches; ++b) {
    if (run.sent[b] < 0) continue;
    const int worker = static_cast<int>(b % static_cast<size_t>(W));
    const int64_t th = worker_thread[static_cast<size_t>(worker)];
    sim.instant(main_thread, n_sent, t(run.sent[b]), 0, static_cast<int64_t>(b), worker);
    sim.span(th, n_fetch, t(run.fetch_start[b]), t(run.fetch_end[b]), static_cast<int64_t>(b), worker, 0);
    const int64_t collate = std::max<int64_t>(1, (run.fetch_end[b] - run.fetch_start[b]) / 20);
    sim.span(th, n_collate, t(run.fetch_end[b] - collate), t(run.fetch_end[b]), static_cast<int64_t>(b), o.batch_size,
             0, 1);
    sim.instant(th, n_put, t(run.fetch_end[b] + 10 * kUs), static_cast<int64_t>(b), worker, 0);
    if (static_cast<int64_t>(b) < steps) {
      const size_t k = b;
      sim.instant(main_thread, n_recv, t(run.handed[k] - 30 * kUs), 0, static_cast<int64_t>(k), worker);
      sim.span(main_thread, n_next, t(call[k]), t(run.handed[k]), 0, static_cast<int64_t>(k), 0);
      sim.span(main_thread, n_coll, t(run.arrive[k]), t(leave[k]), 4 << 20, static_cast<int64_t>(k), n_allreduce);
      if (k % 512 == 511) sim.flush_buffer(&truth, t(call[k]));
    }
  }
  sim.flush_buffer(&truth);
  const int64_t end = t(leave.empty() ? start : leave.back() + o.optim_ns);
  w.update_process_end(main_row, end, 0, std::nullopt);
  check(w.set_meta("end_ns", std::to_string(end)), "meta");
  check(w.set_meta("dropped_events", "0"), "meta");
  check(w.set_meta("complete", "1"), "meta");
  sim.commit();
  check(w.commit(), "final commit");
  check(w.finish(), "finish");
}

}  // namespace

JobSimOptions small_job(int minutes, int slow_from_min) {
  JobSimOptions o;
  o.ranks = 16;
  o.nodes = 4;
  o.duration_ns = int64_t{minutes} * 60'000 * kMsNs;
  o.slow_node = 2;
  o.slow_from_ns = int64_t{slow_from_min} * 60'000 * kMsNs;
  o.threads = 1;
  return o;
}

JobSimTruth write_sim_job(const std::string& dir, const JobSimOptions& o) {
  JobSimTruth truth;
  const int R = std::max(1, o.ranks), N = std::max(1, std::min(o.nodes, R));
  const int per_node = std::max(1, R / N);
  const int W = std::max(1, o.workers), PW = std::max(1, o.prefetch) * W;
  auto node_of = [&](int r) { return std::min(N - 1, r / per_node); };
  // Each recording starts a little after the earliest: ranks of a node a few ms apart.
  auto offset_of = [&](int r) { return static_cast<int64_t>(node_of(r)) * 700 * kUs + (r % per_node) * 3 * kMsNs; };
  int64_t latest_offset = 0;
  for (int r = 0; r < R; ++r) latest_offset = std::max(latest_offset, offset_of(r));
  const int64_t start = latest_offset + 200 * kMsNs;  // every rank's first dl.epoch_begin
  truth.start_ns = start;

  std::vector<RankRun> runs(static_cast<size_t>(R));
  auto fetch = [&](int r, size_t b, int64_t at) {
    const double x = o.slow_node == node_of(r) && at >= o.slow_from_ns ? o.slow_x : 1.0;
    const double j = 0.9 + 0.2 * draw(static_cast<uint64_t>(r), b, 1);
    return static_cast<int64_t>(static_cast<double>(o.fetch_ns) * x * j);
  };
  auto send = [&](int r, size_t b, int64_t at) {
    RankRun& run = runs[static_cast<size_t>(r)];
    if (run.sent.size() <= b) {
      run.sent.resize(b + 1, -1);
      run.fetch_start.resize(b + 1, 0);
      run.fetch_end.resize(b + 1, 0);
    }
    int64_t& free = run.free[b % static_cast<size_t>(W)];
    run.sent[b] = at;
    run.fetch_start[b] = std::max(free, at + 20 * kUs);
    run.fetch_end[b] = run.fetch_start[b] + fetch(r, b, run.fetch_start[b]);
    free = run.fetch_end[b] + 20 * kUs;
  };
  for (int r = 0; r < R; ++r) {
    runs[static_cast<size_t>(r)].free.assign(static_cast<size_t>(W), start + 20 * kMsNs);
    for (int b = 0; b < PW; ++b) send(r, static_cast<size_t>(b), start + 1 * kMsNs + b * 50 * kUs);
  }
  std::vector<int64_t> call, leave;
  int64_t c = start + 1 * kMsNs + PW * 50 * kUs;
  while (c < start + o.duration_ns) {
    const size_t k = call.size();
    call.push_back(c);
    int64_t last = 0;
    for (int r = 0; r < R; ++r) {
      RankRun& run = runs[static_cast<size_t>(r)];
      const int64_t handed = std::max(c, run.fetch_end[k] + 10 * kUs) + 35 * kUs;
      const double j = 0.98 + 0.04 * draw(static_cast<uint64_t>(r), k, 2);
      const int64_t arrive = handed + static_cast<int64_t>(static_cast<double>(o.compute_ns) * j);
      run.handed.push_back(handed);
      run.arrive.push_back(arrive);
      last = std::max(last, arrive);
      send(r, k + static_cast<size_t>(PW), handed + 10 * kUs);
    }
    leave.push_back(last + o.comm_ns);
    c = leave.back() + o.optim_ns;
  }
  truth.steps = static_cast<int64_t>(call.size());
  for (int r = 0; r < R; ++r) {
    char name[32];
    std::snprintf(name, sizeof name, "node-%02d", node_of(r));
    truth.nodes.push_back(name);
    truth.paths.push_back(dir + "/part-" + std::to_string(r) + ".db");
  }
  // Write the recordings, a few at once; each rank's run is dropped once written.
  std::atomic<int> next{0};
  auto writer = [&] {
    for (int r = next++; r < R; r = next++) {
      write_rank(truth.paths[static_cast<size_t>(r)], o, r, truth.nodes[static_cast<size_t>(r)], offset_of(r),
                 runs[static_cast<size_t>(r)], call, leave, start);
      runs[static_cast<size_t>(r)] = RankRun{};
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < std::max(1, o.threads); ++i) pool.emplace_back(writer);
  writer();
  for (std::thread& th : pool) th.join();
  return truth;
}

}  // namespace stallscope::testing
