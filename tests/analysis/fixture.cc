// Synthetic recordings; see fixture.h.
#include "tests/analysis/fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace stallscope::testing {

RecordingBuilder::RecordingBuilder(const std::string& path) {
  auto w = Writer::create(path);
  if (!w.ok()) {
    ADD_FAILURE() << w.status().message();
    std::abort();
  }
  w_ = std::move(*w);
  EXPECT_TRUE(w_->begin().ok());
  open_ = true;
  meta("format", "stallscope.session");
  meta("complete", "0");
}

RecordingBuilder::~RecordingBuilder() {
  if (open_) (void)w_->commit();  // a test that failed midway: its own assertion said why
}

uint32_t RecordingBuilder::str(std::string_view s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(strings_.size() + 1);
  strings_.emplace(std::string(s), id);
  w_->add_string(id, s);
  return id;
}

int64_t RecordingBuilder::process(int64_t pid, std::optional<int64_t> start_ns, std::optional<int64_t> end_ns,
                                  std::string cmdline, int64_t ppid) {
  ProcessRow p;
  p.pid = pid;
  p.ppid = ppid;
  p.cmdline = std::move(cmdline);
  p.start_ns = start_ns;
  p.end_ns = end_ns;
  return w_->add_process(p);
}

void RecordingBuilder::end_process(int64_t process_row, int64_t end_ns) {
  w_->update_process_end(process_row, end_ns, 0, std::nullopt);
}

int64_t RecordingBuilder::thread(int64_t process_row, int64_t tid, std::string name) {
  return w_->add_thread(ThreadRow{0, process_row, tid, std::move(name)});
}

int64_t RecordingBuilder::span(int64_t thread, std::string_view name, int64_t start_ns, std::optional<int64_t> dur_ns,
                               Arg a0, Arg a1, Arg a2, int depth) {
  SpanRow s;
  s.thread_id = thread;
  s.start_ns = start_ns;
  s.dur_ns = dur_ns;
  s.name_id = str(name);
  s.depth = depth;
  s.arg0 = a0;
  s.arg1 = a1;
  s.arg2 = a2;
  return w_->add_span(s);
}

void RecordingBuilder::instant(int64_t thread, std::string_view name, int64_t ts_ns, Arg a0, Arg a1, Arg a2) {
  w_->add_instant(InstantRow{0, thread, ts_ns, str(name), a0, a1, a2});
}

void RecordingBuilder::counter(int64_t pid, std::string_view name, std::string_view unit, int64_t ts_ns, double value) {
  auto key = std::make_pair(std::string(name), pid);
  auto it = tracks_.find(key);
  if (it == tracks_.end()) {
    it = tracks_.emplace(key, w_->add_counter_track(CounterTrackRow{0, std::string(name), std::string(unit), pid}))
             .first;
  }
  w_->add_counter(CounterRow{it->second, ts_ns, value});
}

void RecordingBuilder::meta(std::string_view key, std::string_view value) {
  EXPECT_TRUE(w_->set_meta(key, value).ok());
}

void RecordingBuilder::commit() {
  Status s = w_->commit();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(w_->begin().ok());
}

void RecordingBuilder::finish() {
  meta("complete", "1");
  Status s = w_->commit();
  EXPECT_TRUE(s.ok()) << s.message();
  open_ = false;
  EXPECT_TRUE(w_->finish().ok());
}

std::string config_json(const SimConfig& c) {
  const bool workers = c.num_workers > 0;
  return "{\"loader\": " + std::to_string(c.loader) + ", \"batch_size\": " + std::to_string(c.batch_size) +
         ", \"num_workers\": " + std::to_string(c.num_workers) +
         ", \"pin_memory\": false, \"pin_memory_effective\": false" +
         ", \"persistent_workers\": " + (c.persistent_workers ? "true" : "false") +
         ", \"prefetch_factor\": " + (workers ? std::to_string(c.prefetch_factor) : "null") +
         ", \"start_method\": " + (workers ? "\"" + c.start_method + "\"" : "null") + ", \"worker_start_method\": \"" +
         c.start_method + "\"" +
         ", \"dataset_type\": \"map\", \"dataset_class\": \"SyntheticDataset\", \"dataset_len\": " +
         std::to_string(c.batches_per_epoch * c.batch_size) +
         ", \"batches_per_epoch\": " + std::to_string(c.batches_per_epoch) +
         ", \"in_order\": true, \"drop_last\": false, \"created_at\": \"train.py:42\", \"torch_version\": \"2.4.0\", "
         "\"torch_threads\": " +
         std::to_string(c.torch_threads) + "}";
}

namespace {

struct Worker {
  int64_t pid = 0, row = 0, thread = 0, start_ns = 0;
  int64_t free_ns = 0;  // when it can start its next fetch
  bool layout = false;  // its dl.batch written (after its first collate)
};

void worker_counters(RecordingBuilder& b, const SimConfig& c, int64_t pid, int64_t t0, int64_t t1) {
  for (int64_t t = t0;; t = std::min(t + c.sample_period_ns, t1)) {
    if (c.worker_cpu) b.counter(pid, "proc.cpu", "cores", t, *c.worker_cpu);
    if (c.worker_runq) b.counter(pid, "proc.runq_wait", "ratio", t, *c.worker_runq);
    if (c.worker_private_start) {
      const double growth = static_cast<double>(c.worker_private_growth.value_or(0)) * static_cast<double>(t - t0) /
                            static_cast<double>(std::max<int64_t>(1, t1 - t0));
      b.counter(pid, "proc.private_dirty", "bytes", t, static_cast<double>(*c.worker_private_start) + growth);
    }
    if (t >= t1) break;
  }
}

// Microseconds of CPU for `cores` over `ns`.
int64_t cpu_us(double cores, int64_t ns) { return static_cast<int64_t>(cores * static_cast<double>(ns) / 1000.0); }

}  // namespace

SimTruth simulate(RecordingBuilder& b, const SimConfig& c) {
  SimTruth truth;
  if (!c.command.empty()) b.meta("command", c.command);
  if (c.usable_cores) b.meta("usable_cores", std::to_string(*c.usable_cores));
  const int64_t L = c.loader;
  const int64_t main_row = b.process(c.main_pid, 0);
  const int64_t main = b.thread(main_row, c.main_pid, "MainThread");
  truth.main_thread = main;
  int64_t next_pid = c.first_worker_pid;
  std::vector<Worker> workers;
  int64_t t = c.start_ns;
  const int n = c.num_workers;
  auto samples_of = [&](int batch) {
    return batch == c.batches_per_epoch - 1 && c.last_batch_size ? *c.last_batch_size : c.batch_size;
  };
  bool first_mark = true;
  for (int e = 0; e < c.epochs; ++e) {
    const int64_t begin = t;
    b.instant(main, "dl.epoch_begin", begin, L, e, n);
    if (e == 0 && c.write_config) b.instant(main, "dl.config", begin, L, b.str(config_json(c)));
    if (e == 0 && c.batch_layout && c.num_workers == 0) {
      b.instant(main, "dl.batch", begin, L, c.batch_layout->first, c.batch_layout->second);
    }
    int64_t generation = 0;
    if (n > 0 && (e == 0 || !c.persistent_workers)) {
      workers.clear();
      for (int w = 0; w < n; ++w) {
        Worker wk;
        wk.pid = next_pid++;
        wk.start_ns = begin;
        wk.row = b.process(wk.pid, begin + w * c.worker_birth_gap_ns, std::nullopt, "python train.py",
                           c.main_pid);  // forked by the loop, one after another
        wk.thread = b.thread(wk.row, wk.pid, "MainThread");
        wk.free_ns = begin + c.worker_boot_ns +
                     (static_cast<size_t>(w) < c.worker_boot_extra_ns.size() ? c.worker_boot_extra_ns[w] : 0);
        if (c.write_worker_start) b.instant(main, "dl.worker_start", begin, L, w, wk.pid);
        b.instant(wk.thread, "dl.worker_ready", wk.free_ns, w, 0);
        truth.worker_pids.push_back(wk.pid);
        workers.push_back(wk);
      }
    } else if (n > 0) {
      generation = e;
      for (int w = 0; w < n; ++w) {
        workers[w].free_ns = std::max(workers[w].free_ns, begin);
        b.instant(workers[w].thread, "dl.worker_ready", begin, w, generation);
      }
    }
    t = begin + c.iter_ns;
    // The window starts at the first __iter__; time inside it is input wait (loader_start).
    if (e == 0) truth.window_start_ns = begin;
    truth.stall_ns += c.iter_ns;
    const int batches = c.batches_per_epoch;
    std::vector<int64_t> sent(batches, -1), put(batches, -1);
    auto send = [&](int batch, int64_t ts) {
      if (batch >= batches) return;
      sent[batch] = ts;
      b.instant(main, "dl.sent", ts, L, batch, batch % n);
    };
    auto fetch = [&](int batch) {  // the worker runs it once sent and free
      Worker& wk = workers[batch % n];
      const int64_t start = std::max(sent[batch], wk.free_ns);
      const int64_t dur = c.fetch_ns(e, batch);
      const int64_t end = start + dur;
      b.span(wk.thread, "dl.fetch", start, dur, batch, batch % n, generation, 0);
      b.span(wk.thread, "dl.collate", end - dur / 4, dur / 4, batch, samples_of(batch), generation, 1);
      if (c.batch_layout && !wk.layout) {  // each worker process, after its first collate
        b.instant(wk.thread, "dl.batch", end, c.batch_layout->first, c.batch_layout->second);
        wk.layout = true;
      }
      b.instant(wk.thread, "dl.put", end, batch, batch % n, generation);
      if (c.fetch_cpu) b.instant(wk.thread, "dl.cpu", end, batch, cpu_us(*c.fetch_cpu, dur), c.worker_put_cpu_us);
      wk.free_ns = end;
      put[batch] = end;
      truth.fetch_ms.push_back(static_cast<double>(dur) / 1e6);
      truth.fetch_busy_ns += dur;
    };
    if (n > 0) {
      for (int i = 0; i < c.prefetch_factor * n; ++i) send(i, t);
    }
    bool first = true;
    int fetched = 0;
    int64_t prev_step = c.compute_ns;
    for (int batch = 0; batch < batches; ++batch) {
      const int64_t call = t;
      int64_t handed = 0;
      if (n == 0) {
        const int64_t dur = c.fetch_ns(e, batch);
        b.span(main, "dl.fetch", call, dur, L, batch, -1, 1);
        b.span(main, "dl.collate", call + dur - dur / 4, dur / 4, L, batch, samples_of(batch), 2);
        truth.fetch_ms.push_back(static_cast<double>(dur) / 1e6);
        truth.fetch_busy_ns += dur;
        handed = call + dur;
      } else {
        // Workers fetch their batches in index order; every batch up to this one was sent by now.
        while (fetched <= batch) fetch(fetched++);
        handed = std::max(call, put[batch]);
        b.instant(main, "dl.recv", handed, L, batch, batch % n);
      }
      b.span(main, "dl.next", call, handed - call, L, batch, e, 0);
      if ((c.fetch_cpu || c.compute_cpu) && batch % c.mark_every == 0) {
        const int64_t in_next = n == 0 ? cpu_us(c.fetch_cpu.value_or(1.0), handed - call) : 0;
        const int64_t before = first_mark ? -1 : cpu_us(c.compute_cpu.value_or(1.0), prev_step);
        b.instant(main, "dl.cpu", handed, c.others_cpu_us, in_next, before);
        if (c.parallel && !first_mark) {
          b.instant(main, "dl.parallel", handed, cpu_us(c.parallel->second, prev_step),
                    cpu_us(c.parallel->first, prev_step), 10);
        }
        first_mark = false;
      }
      if (first) truth.epoch_start_ns.push_back(handed - begin);
      first = false;
      truth.stall_ns += handed - call;
      truth.handoffs.push_back(handed);
      ++truth.steps;
      truth.samples += samples_of(batch);
      if (n > 0) send(batch + c.prefetch_factor * n, handed);
      prev_step = c.step_ns ? c.step_ns(e, batch) : c.compute_ns;
      t = handed + prev_step;
    }
    // The StopIteration call (non-persistent workers are shut down inside it), then the epoch's end.
    const bool last = e == c.epochs - 1;
    const int64_t stop = n > 0 && !c.persistent_workers ? c.shutdown_ns : 0;
    b.span(main, "dl.next", t, stop, L, -1, e, 0);
    truth.stall_ns += stop;
    if (n > 0 && (!c.persistent_workers || last)) {
      for (int w = 0; w < n; ++w) {
        b.instant(main, "dl.worker_stop", t + stop / 2, L, w, workers[w].pid);
        b.end_process(workers[w].row, t + stop / 2);
        worker_counters(b, c, workers[w].pid, workers[w].start_ns, t + stop / 2);
      }
    }
    t += stop;
    b.instant(main, "dl.epoch_end", t, L, e, batches);
    truth.window_end_ns = t;
    t += c.epoch_gap_ns;
  }
  b.end_process(main_row, t);
  if (c.finish) b.finish();
  return truth;
}

}  // namespace stallscope::testing
