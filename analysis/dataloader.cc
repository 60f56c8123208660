// DataLoader reconstruction; see dataloader.h. Event names and arguments: docs/events.md.
#include "analysis/dataloader.h"

#include <algorithm>
#include <limits>

#include "analysis/dl_event.h"

namespace stallscope::analysis {
namespace {

using vocab::Event;

}  // namespace

LoaderConfig parse_loader_config(const Json& doc) {
  LoaderConfig c;
  c.doc = doc;
  c.batch_size = json::get_int(doc, "batch_size");
  c.num_workers = json::get_int(doc, "num_workers");
  c.prefetch_factor = json::get_int(doc, "prefetch_factor");
  c.dataset_len = json::get_int(doc, "dataset_len");
  c.batches_per_epoch = json::get_int(doc, "batches_per_epoch");
  c.pin_memory = json::get_bool(doc, "pin_memory");
  c.pin_memory_effective = json::get_bool(doc, "pin_memory_effective");
  c.persistent_workers = json::get_bool(doc, "persistent_workers");
  c.in_order = json::get_bool(doc, "in_order");
  c.drop_last = json::get_bool(doc, "drop_last");
  c.start_method = json::get_string(doc, "start_method");
  c.worker_start_method = json::get_string(doc, "worker_start_method");
  c.dataset_type = json::get_string(doc, "dataset_type");
  c.dataset_class = json::get_string(doc, "dataset_class");
  c.created_at = json::get_string(doc, "created_at");
  c.torch_version = json::get_string(doc, "torch_version");
  c.batch_size_from = json::get_string(doc, "batch_size_from");
  c.made_by = json::get_string(doc, "made_by");
  c.role_hint = json::get_string(doc, "role_hint");
  c.kind = json::get_string(doc, "kind").value_or(vocab::kLoaderTorch);
  return c;
}

namespace {

class Builder {
 public:
  explicit Builder(const Session& s) : s_(s) {}

  DataLoaderModel build() {
    resolve_names();
    if (!m_.seen) return std::move(m_);
    pick_training_thread();
    read_main_instants();
    find_loader_threads();
    match_workers();
    read_spans();
    read_worker_instants();
    finish();
    return std::move(m_);
  }

 private:
  void resolve_names() {
    for (const SpanRow& sp : s_.spans) {
      if (ev(sp.name_id) != Event::kNone) {
        m_.seen = true;
        break;
      }
    }
    for (const InstantRow& in : s_.instants) {
      const Event e = ev(in.name_id);
      if (e == Event::kHooks) {
        const DlEvent d = decode(e, false, in);
        m_.notes.push_back("the DataLoader hooks could not attach fully: " +
                           s_.string(static_cast<uint32_t>(d.text.value_or(0))));
      } else if (e != Event::kNone) {
        m_.seen = true;
      }
    }
  }

  // The DataLoader event a row's name is (kNone for every other name).
  Event ev(uint32_t name_id) const {
    const Event e = s_.event(name_id);
    return vocab::is_dataloader(e) ? e : Event::kNone;
  }
  template <typename Row>
  static DlEvent decode(Event e, bool in_worker, const Row& r) {
    return decode_dl(e, in_worker, r.arg0, r.arg1, r.arg2);
  }

  // The training thread: the one whose next() calls handed the most batches (any next() call if
  // none handed one, then any thread with main-side DataLoader instants).
  void pick_training_thread() {
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> counts;  // thread -> (handed, calls)
    for (const SpanRow& sp : s_.spans) {
      if (ev(sp.name_id) != Event::kDlNext) continue;
      auto& c = counts[sp.thread_id];
      ++c.second;
      if (sp.dur_ns && decode(Event::kDlNext, false, sp).batch.value_or(-1) >= 0) ++c.first;
    }
    int64_t best = 0;
    std::pair<int64_t, int64_t> best_count{-1, -1};
    for (const auto& [tid, c] : counts) {
      if (c > best_count || (c == best_count && tid < best)) {
        best = tid;
        best_count = c;
      }
    }
    if (counts.empty()) {
      for (const InstantRow& in : s_.instants) {
        const Event e = ev(in.name_id);
        if (e == Event::kDlConfig || e == Event::kDlEpochBegin) {
          best = in.thread_id;
          break;
        }
      }
    }
    m_.train_thread_id = best;
    const ThreadRow* t = s_.thread(best);
    m_.train_process_id = t ? t->process_id : 0;
    m_.train_pid = s_.pid_of_thread(best);
  }

  bool in_training_process(int64_t thread_id) const {
    const ThreadRow* t = s_.thread(thread_id);
    return t != nullptr && t->process_id == m_.train_process_id;
  }

  LoaderInfo& loader(int64_t id) {
    auto it = loader_index_.find(id);
    if (it != loader_index_.end()) return m_.loaders[it->second];
    loader_index_[id] = m_.loaders.size();
    m_.loaders.push_back(LoaderInfo{});
    m_.loaders.back().id = id;
    return m_.loaders.back();
  }

  BatchInfo& batch(int64_t l, int64_t e, int64_t b) {
    const DataLoaderModel::BatchKey key{l, e, b};
    auto it = m_.batch_index.find(key);
    if (it != m_.batch_index.end()) return m_.batches[it->second];
    m_.batch_index.emplace(key, m_.batches.size());
    BatchInfo bi;
    bi.loader = l;
    bi.epoch = e;
    bi.batch = b;
    m_.batches.push_back(bi);
    return m_.batches.back();
  }

  int64_t epoch_at(int64_t l, int64_t ts) {
    auto it = loader_index_.find(l);
    if (it == loader_index_.end()) return 0;
    const auto& starts = m_.loaders[it->second].epoch_starts;
    auto up = std::upper_bound(starts.begin(), starts.end(), std::make_pair(ts, std::numeric_limits<int64_t>::max()));
    if (up == starts.begin()) return starts.empty() ? 0 : starts.front().second;
    return std::prev(up)->second;
  }

  void read_main_instants() {
    int other = 0;
    for (const InstantRow& in : s_.instants) {
      const Event e = ev(in.name_id);
      if (e != Event::kDlConfig && e != Event::kDlEpochBegin && e != Event::kDlEpochEnd && e != Event::kDlWorkerStart &&
          e != Event::kDlWorkerStop && e != Event::kDlStep && e != Event::kDlBatch) {
        continue;
      }
      if (!in_training_process(in.thread_id)) {
        if (e != Event::kDlBatch) ++other;  // a worker's dl.batch: read_worker_instants
        continue;
      }
      const DlEvent d = decode(e, false, in);
      if (e == Event::kDlStep) {  // an optimizer step: counted for the loader it names, if any
        ++m_.steps;
        if (d.loader && *d.loader >= 0) ++loader(*d.loader).steps;
        continue;
      }
      const int64_t l = d.loader.value_or(0);
      LoaderInfo& li = loader(l);
      switch (e) {
        case Event::kDlConfig: {
          const std::string& text = s_.string(static_cast<uint32_t>(d.text.value_or(0)));
          auto doc = json::parse(text);
          if (doc.ok() && doc->is_object()) {
            li.has_config = true;
            li.config = parse_loader_config(*doc);
          } else {
            m_.notes.push_back("loader " + std::to_string(l) + ": its dl.config document could not be read (" +
                               (doc.ok() ? std::string("not an object") : doc.status().message()) + ")");
          }
          break;
        }
        case Event::kDlBatch:
          if (d.count && *d.count >= 0 && d.bytes && *d.bytes >= 0) {
            li.batch_tensors = d.count;
            li.batch_bytes = d.bytes;
          }
          break;
        case Event::kDlEpochBegin: {
          const int64_t ep = d.epoch.value_or(0);
          EpochInfo& ei = li.epochs[ep];
          ei.epoch = ep;
          ei.begin_ns = in.ts_ns;
          ei.num_workers = d.count;
          li.epoch_starts.emplace_back(in.ts_ns, ep);
          break;
        }
        case Event::kDlEpochEnd: {
          const int64_t ep = d.epoch.value_or(0);
          EpochInfo& ei = li.epochs[ep];
          ei.epoch = ep;
          ei.end_ns = in.ts_ns;
          ei.batches_yielded = d.count;
          break;
        }
        case Event::kDlWorkerStart: {
          WorkerInfo w;
          w.loader = l;
          w.worker_id = static_cast<int32_t>(d.worker.value_or(0));
          w.pid = d.pid.value_or(0);
          w.start_ns = in.ts_ns;
          w.start_epoch = epoch_at(l, in.ts_ns);
          li.epochs[w.start_epoch].epoch = w.start_epoch;
          ++li.epochs[w.start_epoch].workers_started;
          m_.workers.push_back(w);
          break;
        }
        case Event::kDlWorkerStop: {
          const int64_t pid = d.pid.value_or(0);
          for (auto it = m_.workers.rbegin(); it != m_.workers.rend(); ++it) {
            if (it->pid == pid && it->loader == l && !it->stop_ns) {
              it->stop_ns = in.ts_ns;
              break;
            }
          }
          break;
        }
        default: break;
      }
    }
    if (other > 0) {
      m_.notes.push_back(std::to_string(other) +
                         " DataLoader events of other training processes were not analysed (only process " +
                         std::to_string(m_.train_pid) + ")");
    }
  }

  // Worker processes: each dl.worker_start names a pid; the events of that pid belong to the
  // latest worker started at or before them (pids can be reused across epochs).
  // Worker processes that no dl.worker_start names (the recording began after they started, e.g.
  // `stallscope attach` to a run with persistent workers): when the training process has exactly
  // one loader that may have workers, their events are attributed to it, with the start epoch
  // taken from the epoch running at their first event minus its generation G.
  void infer_unnamed_workers() {
    std::unordered_map<int64_t, bool> named;
    for (const WorkerInfo& w : m_.workers) named[w.pid] = true;
    struct First {
      int64_t ts, worker, generation;
    };
    std::map<int64_t, First> unnamed;  // pid -> first event
    auto consider = [&](int64_t thread_id, int64_t ts, int64_t worker, int64_t generation) {
      const ThreadRow* t = s_.thread(thread_id);
      if (t == nullptr || t->process_id == m_.train_process_id) return;
      const int64_t pid = s_.pid_of_thread(thread_id);
      if (named.count(pid) != 0) return;
      auto it = unnamed.find(pid);
      if (it == unnamed.end() || ts < it->second.ts) unnamed[pid] = First{ts, worker, generation};
    };
    std::map<int64_t, bool> loaders;  // loaders iterated by the training thread
    for (const SpanRow& sp : s_.spans) {
      const Event e = ev(sp.name_id);
      if (e == Event::kDlFetch) {  // outside the training process: a worker's
        const DlEvent d = decode(e, true, sp);
        consider(sp.thread_id, sp.start_ns, d.worker.value_or(0), d.generation.value_or(0));
      }
      if (e == Event::kDlNext && sp.thread_id == m_.train_thread_id)
        loaders[decode(e, false, sp).loader.value_or(0)] = true;
    }
    if (unnamed.empty()) return;
    for (const InstantRow& in : s_.instants) {
      const Event e = ev(in.name_id);
      if (e == Event::kDlPut || e == Event::kDlWorkerReady) {
        const DlEvent d = decode(e, true, in);
        consider(in.thread_id, in.ts_ns, d.worker.value_or(0), d.generation.value_or(0));
      }
    }
    for (const LoaderInfo& l : m_.loaders) loaders[l.id] = true;
    std::vector<int64_t> candidates;
    for (const auto& [id, unused] : loaders) {
      auto it = loader_index_.find(id);
      const std::optional<int64_t> n = it == loader_index_.end() ? std::nullopt : m_.loaders[it->second].num_workers();
      if (!n || *n > 0) candidates.push_back(id);
    }
    if (candidates.size() != 1) {
      m_.notes.push_back(std::to_string(unnamed.size()) +
                         " worker processes have no dl.worker_start and could not be tied to one loader; their events "
                         "were left out");
      return;
    }
    const int64_t l = candidates.front();
    for (const auto& [pid, first] : unnamed) {
      WorkerInfo w;
      w.pid = pid;
      w.loader = l;
      w.worker_id = static_cast<int32_t>(first.worker);
      w.start_ns = first.ts;
      w.start_epoch = std::max<int64_t>(0, epoch_at(l, first.ts) - first.generation);
      m_.workers.push_back(w);
    }
    m_.notes.push_back(std::to_string(unnamed.size()) +
                       " worker processes have no dl.worker_start (recording began after "
                       "they started?); they were attributed to loader " +
                       std::to_string(l) + " by their events");
  }

  // The reference loader's worker threads: dl.fetch spans carrying W >= 0 on threads of the
  // training process other than the training thread (docs/events.md, "Reference loader"). One
  // worker per thread, alive from the start of its first fetch to the end of its last.
  void find_loader_threads() {
    for (const SpanRow& sp : s_.spans) {
      if (ev(sp.name_id) != Event::kDlFetch || sp.thread_id == m_.train_thread_id ||
          !in_training_process(sp.thread_id)) {
        continue;
      }
      const DlEvent d = decode(Event::kDlFetch, false, sp);
      if (d.worker.value_or(-1) < 0) continue;
      const int64_t end = s_.span_end(sp);
      auto [it, fresh] = thread_worker_.try_emplace(sp.thread_id, m_.workers.size());
      if (!fresh) {
        WorkerInfo& w = m_.workers[it->second];
        w.stop_ns = std::max(w.stop_ns.value_or(end), end);
        continue;
      }
      WorkerInfo w;
      w.pid = m_.train_pid;
      w.thread_id = sp.thread_id;
      w.loader = d.loader.value_or(0);
      w.worker_id = static_cast<int32_t>(*d.worker);
      w.start_ns = sp.start_ns;
      w.stop_ns = end;
      w.start_epoch = epoch_at(w.loader, sp.start_ns);
      m_.workers.push_back(w);
    }
  }

  void match_workers() {
    infer_unnamed_workers();
    std::unordered_map<int64_t, std::vector<const ProcessRow*>> rows;
    for (const ProcessRow& p : s_.processes) {
      if (p.id != m_.train_process_id) rows[p.pid].push_back(&p);
    }
    for (size_t i = 0; i < m_.workers.size(); ++i) {
      WorkerInfo& w = m_.workers[i];
      if (w.thread_id != 0) {  // a loader thread: its life is its fetches
        w.life_begin_ns = w.start_ns;
        w.life_end_ns = std::max(w.stop_ns.value_or(w.start_ns), w.start_ns);
        loader(w.loader).workers.push_back(i);
        continue;
      }
      by_pid_[w.pid].push_back(i);
      // Its process row: the one of that pid whose start is closest to the worker_start.
      const ProcessRow* best = nullptr;
      int64_t best_d = std::numeric_limits<int64_t>::max();
      for (const ProcessRow* p : rows[w.pid]) {
        const int64_t d = p->start_ns ? std::llabs(*p->start_ns - w.start_ns) : std::numeric_limits<int64_t>::max() - 1;
        if (best == nullptr || d < best_d) {
          best = p;
          best_d = d;
        }
      }
      w.life_begin_ns = best && best->start_ns ? std::min(*best->start_ns, w.start_ns) : w.start_ns;
      if (best && best->start_ns) w.birth_ns = *best->start_ns;
      if (best && best->end_ns) {
        w.life_end_ns = *best->end_ns;
      } else {
        w.life_end_ns = w.stop_ns ? *w.stop_ns : s_.end_ns;
      }
      w.life_end_ns = std::max(w.life_end_ns, w.life_begin_ns);
      loader(w.loader).workers.push_back(i);
    }
  }

  // The worker (index) that emitted an event on `thread_id` at `ts`; -1 when not a worker.
  int worker_of(int64_t thread_id, int64_t ts) const {
    const int64_t pid = s_.pid_of_thread(thread_id);
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end() || pid == m_.train_pid) return -1;
    const auto& list = it->second;  // by start time
    int found = static_cast<int>(list.front());
    for (size_t i : list) {
      if (m_.workers[i].start_ns <= ts) found = static_cast<int>(i);
    }
    return found;
  }

  void read_spans() {
    int unattributed = 0;
    for (const SpanRow& sp : s_.spans) {
      const Event e = ev(sp.name_id);
      if (e == Event::kNone) continue;
      const int64_t end = s_.span_end(sp);
      if (sp.thread_id == m_.train_thread_id && e == Event::kDlNext) {
        const DlEvent d = decode(e, false, sp);
        NextCall c;
        c.start_ns = sp.start_ns;
        c.end_ns = end;
        c.ended = sp.dur_ns.has_value();
        c.loader = d.loader.value_or(0);
        c.batch = c.ended ? d.batch.value_or(-1) : -1;
        c.epoch = d.epoch ? *d.epoch : epoch_at(c.loader, sp.start_ns);
        loader(c.loader);
        m_.next_calls.push_back(c);
        continue;
      }
      if (e != Event::kDlFetch && e != Event::kDlCollate) continue;
      if (in_training_process(sp.thread_id)) {
        // num_workers=0: fetch and collate run inside next().
        const DlEvent d = decode(e, false, sp);
        const int64_t l = d.loader.value_or(0);
        const int64_t b = d.batch.value_or(-1);
        if (b < 0) continue;
        auto loader_thread = thread_worker_.find(sp.thread_id);
        if (e == Event::kDlFetch && loader_thread != thread_worker_.end()) {  // a reference loader's thread
          WorkerInfo& w = m_.workers[loader_thread->second];
          const int64_t ep = epoch_at(l, sp.start_ns);
          BatchInfo& bi = batch(l, ep, b);
          bi.fetch_start_ns = sp.start_ns;
          bi.fetch_end_ns = end;
          bi.worker = w.worker_id;
          bi.worker_pid = m_.train_pid;
          bi.worker_thread = sp.thread_id;
          FetchInfo f;
          f.start_ns = sp.start_ns;
          f.end_ns = end;
          f.loader = l;
          f.epoch = ep;
          f.batch = b;
          f.worker = w.worker_id;
          f.worker_index = static_cast<int>(loader_thread->second);
          w.fetches.push_back(m_.fetches.size());
          m_.fetches.push_back(f);
        } else if (e == Event::kDlFetch) {
          const int64_t ep = epoch_at(l, sp.start_ns);
          BatchInfo& bi = batch(l, ep, b);
          bi.fetch_start_ns = sp.start_ns;
          bi.fetch_end_ns = end;
          bi.worker = -1;
          bi.worker_pid = m_.train_pid;
          FetchInfo f;
          f.start_ns = sp.start_ns;
          f.end_ns = end;
          f.loader = l;
          f.epoch = ep;
          f.batch = b;
          f.worker = -1;
          f.samples = bi.samples;
          m_.fetches.push_back(f);
        } else {
          BatchInfo& bi = batch(l, epoch_at(l, sp.start_ns), b);
          bi.samples = d.samples;
        }
        continue;
      }
      const int wi = worker_of(sp.thread_id, sp.start_ns);
      if (wi < 0) {
        ++unattributed;
        continue;
      }
      WorkerInfo& w = m_.workers[static_cast<size_t>(wi)];
      const DlEvent d = decode(e, true, sp);
      const int64_t b = d.batch.value_or(-1);
      if (b < 0) continue;
      const int64_t ep = w.start_epoch + d.generation.value_or(0);
      if (e == Event::kDlFetch) {
        BatchInfo& bi = batch(w.loader, ep, b);
        bi.fetch_start_ns = sp.start_ns;
        bi.fetch_end_ns = end;
        bi.worker = w.worker_id;
        bi.worker_pid = w.pid;
        FetchInfo f;
        f.start_ns = sp.start_ns;
        f.end_ns = end;
        f.loader = w.loader;
        f.epoch = ep;
        f.batch = b;
        f.worker = w.worker_id;
        f.worker_index = wi;
        w.fetches.push_back(m_.fetches.size());
        m_.fetches.push_back(f);
      } else {
        BatchInfo& bi = batch(w.loader, ep, b);
        bi.samples = d.samples;
        bi.collate_ns = end - sp.start_ns;
      }
    }
    if (unattributed > 0) {
      m_.notes.push_back(std::to_string(unattributed) +
                         " worker fetches came from processes no dl.worker_start names; they were left out");
    }
  }

  // The worker of the process on `thread_id` whose life holds `ts` gets `ts` as its ready instant
  // (a forked worker may say so before the training process's dl.worker_start names it).
  void worker_ready(int64_t thread_id, int64_t ts) {
    const int64_t pid = s_.pid_of_thread(thread_id);
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end() || pid == m_.train_pid) return;
    for (size_t i : it->second) {
      WorkerInfo& w = m_.workers[i];
      if (!w.ready_ns && ts >= w.life_begin_ns && ts <= w.life_end_ns) {
        w.ready_ns = ts;
        return;
      }
    }
    for (size_t i : it->second) {  // no process row: the first worker of that pid named after it
      WorkerInfo& w = m_.workers[i];
      if (!w.ready_ns && w.start_ns >= ts) {
        w.ready_ns = ts;
        return;
      }
    }
  }

  void read_worker_instants() {
    for (const InstantRow& in : s_.instants) {
      const Event e = ev(in.name_id);
      if (e != Event::kDlSent && e != Event::kDlRecv && e != Event::kDlPut && e != Event::kDlStages &&
          e != Event::kDlWorkerReady && e != Event::kDlBatch)
        continue;
      if (e == Event::kDlBatch) {  // a worker's: the layout of its loader's batches, unless known
        if (in_training_process(in.thread_id)) continue;  // read_main_instants
        const int wi = worker_of(in.thread_id, in.ts_ns);
        if (wi < 0) continue;
        const DlEvent d = decode(e, true, in);
        LoaderInfo& li = loader(m_.workers[static_cast<size_t>(wi)].loader);
        if (!li.batch_tensors && d.count && *d.count >= 0 && d.bytes && *d.bytes >= 0) {
          li.batch_tensors = d.count;
          li.batch_bytes = d.bytes;
        }
        continue;
      }
      if (e == Event::kDlWorkerReady) {  // a worker's first: the end of its start-up
        const DlEvent d = decode(e, true, in);
        if (d.generation.value_or(0) == 0) worker_ready(in.thread_id, in.ts_ns);
        continue;
      }
      if (e == Event::kDlStages) {  // the end of a reference loader thread's fetch
        auto loader_thread = thread_worker_.find(in.thread_id);
        if (loader_thread == thread_worker_.end()) continue;
        const DlEvent d = decode(e, false, in);  // read, decode, augment
        LoaderInfo::Stages& st = loader(m_.workers[loader_thread->second].loader).stages;
        ++st.batches;
        st.read_s += static_cast<double>(d.micros[0].value_or(0)) / 1e6;
        st.decode_s += static_cast<double>(d.micros[1].value_or(0)) / 1e6;
        st.augment_s += static_cast<double>(d.micros[2].value_or(0)) / 1e6;
        continue;
      }
      if (e == Event::kDlPut && in_training_process(in.thread_id)) {  // a reference loader's thread
        const DlEvent d = decode(e, false, in);
        const int64_t l = d.loader.value_or(0);
        const int64_t b = d.batch.value_or(-1);
        if (b < 0) continue;
        batch(l, epoch_at(l, in.ts_ns), b).put_ns = in.ts_ns;
        continue;
      }
      if (e == Event::kDlPut) {
        const int wi = worker_of(in.thread_id, in.ts_ns);
        if (wi < 0) continue;
        const WorkerInfo& w = m_.workers[static_cast<size_t>(wi)];
        const DlEvent d = decode(e, true, in);
        const int64_t b = d.batch.value_or(-1);
        if (b < 0) continue;
        BatchInfo& bi = batch(w.loader, w.start_epoch + d.generation.value_or(0), b);
        bi.put_ns = in.ts_ns;
        if (bi.worker == -2) {
          bi.worker = w.worker_id;
          bi.worker_pid = w.pid;
        }
        continue;
      }
      if (!in_training_process(in.thread_id)) continue;
      const DlEvent d = decode(e, false, in);
      const int64_t l = d.loader.value_or(0);
      const int64_t b = d.batch.value_or(-1);
      if (b < 0) continue;
      BatchInfo& bi = batch(l, epoch_at(l, in.ts_ns), b);
      if (e == Event::kDlSent) {
        bi.sent_ns = in.ts_ns;
        if (bi.worker == -2) bi.worker = static_cast<int32_t>(d.worker.value_or(-2));
      } else {
        bi.recv_ns = in.ts_ns;
      }
    }
  }

  void finish() {
    std::sort(m_.next_calls.begin(), m_.next_calls.end(),
              [](const NextCall& a, const NextCall& b) { return a.start_ns < b.start_ns; });
    for (const NextCall& c : m_.next_calls) {
      LoaderInfo& li = loader(c.loader);
      EpochInfo& ei = li.epochs[c.epoch];
      ei.epoch = c.epoch;
      ++ei.next_calls;
      if (!ei.first_next_ns) ei.first_next_ns = c.start_ns;
      ei.last_next_end_ns = std::max(ei.last_next_end_ns.value_or(c.end_ns), c.end_ns);
      if (c.handed()) {
        ++ei.handed;
        ++li.handed;
        if (!ei.first_handed_ns) ei.first_handed_ns = c.end_ns;
        BatchInfo& bi = batch(c.loader, c.epoch, c.batch);
        bi.handed_ns = c.end_ns;
      }
    }
    // Fetch records were made before every collate was seen (collate nests inside fetch).
    for (FetchInfo& f : m_.fetches) {
      if (const BatchInfo* bi = m_.batch(f.loader, f.epoch, f.batch)) {
        f.samples = bi->samples;
        if (f.worker_index >= 0) f.collate_ns = bi->collate_ns;
      }
    }
    for (size_t i = 0; i < m_.batches.size(); ++i) loader(m_.batches[i].loader).batches.push_back(i);
    std::sort(m_.loaders.begin(), m_.loaders.end(),
              [](const LoaderInfo& a, const LoaderInfo& b) { return a.id < b.id; });
    for (LoaderInfo& li : m_.loaders) {
      if (!li.has_config) {
        m_.notes.push_back("loader " + std::to_string(li.id) + " has no dl.config event; its settings are unknown");
      }
    }
  }

  const Session& s_;
  DataLoaderModel m_;
  std::unordered_map<int64_t, size_t> loader_index_;
  std::unordered_map<int64_t, std::vector<size_t>> by_pid_;
  std::unordered_map<int64_t, size_t> thread_worker_;  // loader thread (threads.id) -> its worker
};

}  // namespace

std::optional<int64_t> LoaderInfo::num_workers() const {
  if (config.num_workers) return config.num_workers;
  for (const auto& [e, info] : epochs) {
    if (info.num_workers) return info.num_workers;
  }
  return std::nullopt;
}

size_t DataLoaderModel::BatchKeyHash::operator()(const BatchKey& k) const {
  uint64_t h = static_cast<uint64_t>(k.batch) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(k.epoch) + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= (static_cast<uint64_t>(k.loader) + 0x85EBCA77C2B2AE63ull) * 0x165667B19E3779F9ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

const LoaderInfo* DataLoaderModel::loader(int64_t id) const {
  for (const LoaderInfo& l : loaders) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

const BatchInfo* DataLoaderModel::batch(int64_t loader, int64_t epoch, int64_t b) const {
  auto it = batch_index.find(BatchKey{loader, epoch, b});
  return it == batch_index.end() ? nullptr : &batches[it->second];
}

int64_t DataLoaderModel::epoch_at(int64_t l, int64_t ts) const {
  const LoaderInfo* li = loader(l);
  if (li == nullptr || li->epoch_starts.empty()) return 0;
  const auto& starts = li->epoch_starts;
  auto up = std::upper_bound(starts.begin(), starts.end(), std::make_pair(ts, std::numeric_limits<int64_t>::max()));
  if (up == starts.begin()) return starts.front().second;
  return std::prev(up)->second;
}

DataLoaderModel build_dataloader_model(const Session& s) { return Builder(s).build(); }

QueueDepth queue_depth(const DataLoaderModel& m, const LoaderInfo& loader, int64_t end_ns) {
  // When each epoch closes: its dl.epoch_end, else the next epoch's begin, else the end.
  std::map<int64_t, int64_t> close;
  for (const auto& [e, info] : loader.epochs) {
    int64_t c = end_ns;
    if (info.end_ns) {
      c = *info.end_ns;
    } else if (info.begin_ns) {
      for (const auto& [ts, other] : loader.epoch_starts) {
        if (ts > *info.begin_ns) {
          c = ts;
          break;
        }
      }
    }
    close[e] = c;
  }
  std::vector<std::pair<int64_t, int>> flight, ready;  // (ts, +1/-1)
  for (size_t i : loader.batches) {
    const BatchInfo& b = m.batches[i];
    auto it = close.find(b.epoch);
    const int64_t closes = it == close.end() ? end_ns : it->second;
    // The batch left the worker at its put (else, if that event was lost, when it was received or
    // handed; a fetch with none of these found the end of an iterable dataset's stream).
    std::optional<int64_t> out = b.put_ns      ? b.put_ns
                                 : b.recv_ns   ? b.recv_ns
                                 : b.handed_ns ? b.handed_ns
                                               : b.fetch_end_ns;
    if (b.sent_ns && *b.sent_ns < closes) {
      const int64_t leave = out ? std::max(*b.sent_ns, std::min(*out, closes)) : closes;
      flight.emplace_back(*b.sent_ns, +1);
      flight.emplace_back(leave, -1);
    }
    if (b.put_ns && *b.put_ns < closes) {
      const int64_t leave = b.handed_ns ? std::max(*b.put_ns, std::min(*b.handed_ns, closes)) : closes;
      ready.emplace_back(*b.put_ns, +1);
      ready.emplace_back(leave, -1);
    }
  }
  auto to_steps = [](std::vector<std::pair<int64_t, int>>& deltas) {
    std::sort(deltas.begin(), deltas.end());
    StepFunction f;
    int64_t v = 0;
    for (size_t i = 0; i < deltas.size();) {
      const int64_t ts = deltas[i].first;
      while (i < deltas.size() && deltas[i].first == ts) v += deltas[i++].second;
      f.push_back(StepPoint{ts, v});
    }
    return f;
  };
  QueueDepth q;
  q.in_flight = to_steps(flight);
  q.ready = to_steps(ready);
  return q;
}

std::vector<LoaderStart> loader_starts(const DataLoaderModel& m, const LoaderInfo& loader) {
  std::map<int64_t, int64_t> first_ready;  // epoch -> earliest ready of the workers it started
  for (size_t i : loader.workers) {
    const WorkerInfo& w = m.workers[i];
    if (!w.ready_ns || w.thread_id != 0) continue;
    auto it = first_ready.find(w.start_epoch);
    if (it == first_ready.end() || *w.ready_ns < it->second) first_ready[w.start_epoch] = *w.ready_ns;
  }
  std::vector<LoaderStart> out;
  for (const auto& [e, info] : loader.epochs) {
    if (!info.begin_ns || !info.first_next_ns || *info.first_next_ns < *info.begin_ns) continue;
    int64_t end = *info.first_next_ns;
    auto ready = first_ready.find(e);
    if (ready != first_ready.end() && ready->second > end) {
      end = info.first_handed_ns ? std::min(ready->second, *info.first_handed_ns) : ready->second;
    }
    out.push_back(LoaderStart{e, *info.begin_ns, std::max(end, *info.first_next_ns)});
  }
  return out;
}

std::string loader_name(const LoaderConfig& c, int64_t id) {
  std::string n;
  auto add = [&n](const std::string& part) { n += (n.empty() ? "" : " ") + part; };
  if (c.made_by) add(*c.made_by);
  if (c.dataset_class) add(*c.dataset_class);
  if (c.created_at) add("(" + *c.created_at + ")");
  return n.empty() ? "loader " + std::to_string(id) : n;
}

}  // namespace stallscope::analysis
