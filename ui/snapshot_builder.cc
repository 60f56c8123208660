// Database rows -> timeline model; see snapshot_builder.h.
#include "ui/snapshot_builder.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "analysis/dataloader.h"
#include "analysis/dl_event.h"
#include "ui/overview.h"

namespace stallscope::ui {
namespace {

int32_t arg32(const std::optional<int64_t>& v) {
  if (!v) return Item::kNoArg32;
  return static_cast<int32_t>(std::clamp<int64_t>(*v, INT32_MIN + 1, INT32_MAX));
}

// The dashboard's metric of a counter track (-1: not drawn).
int metric_of(const CounterTrackRow& t) { return counter_metric(vocab::counter_of(t.name)); }

template <typename Row>
analysis::DlEvent decode(vocab::Event e, bool in_worker, const Row& r) {
  return analysis::decode_dl(e, in_worker, r.arg0, r.arg1, r.arg2);
}

// A damaged row's time (the database holds any 64-bit value) within +-2^60 ns, so that sums and
// differences of a few fit in 64 bits (fuzz_dashboard: a start plus a duration overflowed).
constexpr int64_t kTimeBound = int64_t{1} << 60;
int64_t bounded(int64_t t) { return std::clamp(t, -kTimeBound, kTimeBound); }

}  // namespace

SnapshotBuilder::SnapshotBuilder() : strings_(std::make_shared<std::vector<std::string>>()) {}

void SnapshotBuilder::on_meta(const std::map<std::string, std::string>& meta) {
  if (meta != meta_) {
    meta_ = meta;
    dirty_ = true;
  }
}

void SnapshotBuilder::on_string(uint32_t id, std::string value) {
  // The table is a vector by id. A session interns at most the arena's string capacity (16,384 by
  // default), so an id past 4 M is a damaged row: dropped, and rows naming it show no name (a
  // string id near 2^32 made this allocate 128 GB; fuzz_dashboard).
  if (id > kMaxStringId) return;
  if (strings_published_) {  // the published vector is immutable: copy on write
    strings_ = std::make_shared<std::vector<std::string>>(*strings_);
    strings_published_ = false;
  }
  if (id >= strings_->size()) strings_->resize(static_cast<size_t>(id) + 1);
  names_.add(id, value);
  (*strings_)[id] = std::move(value);
  dirty_ = true;
}

void SnapshotBuilder::on_processes(const std::vector<ProcessRow>& all) {
  for (const ProcessRow& p : all) {
    auto it = processes_.find(p.id);
    if (it == processes_.end() || it->second.end_ns != p.end_ns || it->second.cmdline != p.cmdline) {
      processes_[p.id] = p;
      dirty_ = true;
    }
    if (p.start_ns) see(*p.start_ns);
    if (p.end_ns) see(*p.end_ns);
  }
}

void SnapshotBuilder::on_threads(const std::vector<ThreadRow>& all) {
  for (const ThreadRow& t : all) {
    auto it = threads_.find(t.id);
    if (it == threads_.end() || it->second.name != t.name) {
      threads_[t.id] = t;
      dirty_ = true;
    }
  }
}

void SnapshotBuilder::on_counter_tracks(const std::vector<CounterTrackRow>& all) {
  for (const CounterTrackRow& t : all) {
    if (counter_tracks_.count(t.id)) continue;
    const int metric = metric_of(t);
    counter_tracks_[t.id] = {t.pid, metric};
    // A direct index for on_counter (track ids are small and dense); std::map nodes do not move.
    if (metric >= 0 && t.id >= 0 && t.id < (1 << 20)) {
      if (static_cast<size_t>(t.id) >= series_by_track_.size())
        series_by_track_.resize(static_cast<size_t>(t.id) + 1, nullptr);
      series_by_track_[static_cast<size_t>(t.id)] = &counters_[t.pid].series[metric];
    }
  }
}

bool SnapshotBuilder::wants_counter_track(const CounterTrackRow& t) const { return metric_of(t) >= 0; }

SnapshotBuilder::TrackState& SnapshotBuilder::thread_track(int64_t thread_id) {
  auto& slot = thread_tracks_[thread_id];
  if (!slot) {
    slot = std::make_unique<TrackState>();
    slot->track.thread_id = thread_id;
    auto th = threads_.find(thread_id);
    if (th != threads_.end()) {
      slot->process_row = th->second.process_id;
      slot->track.tid = th->second.tid;
      auto p = processes_.find(th->second.process_id);
      if (p != processes_.end()) slot->track.pid = p->second.pid;
    }
  }
  return *slot;
}

SnapshotBuilder::TrackState& SnapshotBuilder::gpu_track(int64_t process_id, int64_t device, int64_t stream) {
  auto& slot = gpu_tracks_[{process_id, device, stream}];
  if (!slot) {
    slot = std::make_unique<TrackState>();
    slot->is_gpu = true;
    slot->device = device;
    slot->stream = stream;
    slot->gpu_process = process_id;
    auto p = processes_.find(process_id);
    if (p != processes_.end()) slot->track.pid = p->second.pid;
  }
  return *slot;
}

void SnapshotBuilder::append(TrackState& t, Item it, int32_t depth) {
  depth = std::clamp(depth, 0, 63);
  if (static_cast<size_t>(depth) >= t.depth_rows.size()) t.depth_rows.resize(static_cast<size_t>(depth) + 1);
  for (size_t idx : t.depth_rows[depth]) {
    if (t.rows[idx].try_append(it)) {
      ++t.items;
      return;
    }
  }
  // Overlaps the row of its depth (or arrived out of order): a new overflow row keeps every row
  // sorted and non-overlapping.
  t.rows.emplace_back();
  t.rows.back().depth = depth;
  t.rows.back().try_append(it);
  t.depth_rows[depth].push_back(t.rows.size() - 1);
  ++t.items;
}

Bin& SnapshotBuilder::bin(int64_t t) {
  if (t > kMaxBinNs) return overflow_bin_;  // a damaged time: never published
  const size_t i = static_cast<size_t>(std::max<int64_t>(0, t) / kBinNs);
  if (i >= bins_.size()) bins_.resize(i + 1);
  bins_changed_ = true;
  return bins_[i];
}

void SnapshotBuilder::add_to_bins(int64_t Bin::*field, int64_t start, int64_t end) {
  start = std::max<int64_t>(0, start);
  end = std::min(end, kMaxBinNs);
  if (end <= start) return;
  for (int64_t b = start / kBinNs; b * kBinNs < end; ++b) {
    const int64_t lo = std::max(start, b * kBinNs), hi = std::min(end, (b + 1) * kBinNs);
    bin(b * kBinNs).*field += hi - lo;
  }
}

void SnapshotBuilder::see(int64_t t) {
  if (t > end_ns_) end_ns_ = t;
}

void SnapshotBuilder::on_instant(const InstantRow& r) {
  ++instants_;
  dirty_ = true;
  using vocab::Event;
  const Event e = names_.event(r.name_id);
  TrackState& t = thread_track(r.thread_id);
  Marker m;
  m.ts_ns = bounded(r.ts_ns);
  m.a0 = r.arg0.value_or(Item::kNoArg);
  m.a1 = arg32(r.arg1);
  m.a2 = arg32(r.arg2);
  m.name_id = r.name_id;
  switch (e) {
    case Event::kDlSent: m.kind = kMarkSent; break;
    case Event::kDlRecv: m.kind = kMarkRecv; break;
    case Event::kDlPut: m.kind = kMarkPut; break;
    case Event::kDlEpochBegin:
    case Event::kDlEpochEnd: m.kind = kMarkEpoch; break;
    case Event::kDlWorkerStart:
    case Event::kDlWorkerStop:
    case Event::kDlWorkerReady: m.kind = kMarkWorker; break;
    default: m.kind = kMarkOther; break;
  }
  if (e == Event::kDlWorkerStart) {
    const analysis::DlEvent d = decode(e, false, r);
    if (d.loader && d.worker && d.pid) {
      if (!workers_.count(*d.pid)) worker_pids_[*d.loader].push_back(*d.pid);
      workers_[*d.pid] = {*d.loader, static_cast<int32_t>(*d.worker)};
      worker_owner_thread_[*d.pid] = r.thread_id;
    }
  }
  if (e == Event::kDistRank && r.arg0) rank_thread_.emplace(r.thread_id, *r.arg0);
  if (e == Event::kDlConfig) {
    const analysis::DlEvent d = decode(e, false, r);
    if (d.loader && d.text && !loader_configs_.count(*d.loader))
      loader_configs_[*d.loader] = static_cast<uint32_t>(*d.text);
  }
  if (e == Event::kDlWorkerReady) {
    const analysis::DlEvent d = decode(e, true, r);
    if (d.worker) t.worker_hint = static_cast<int32_t>(*d.worker);
  }
  if (t.track.markers.empty() || t.track.markers.back().ts_ns <= m.ts_ns) t.track.markers.push_back(m);
  see(m.ts_ns);
  first_ns_ = std::min(first_ns_, m.ts_ns);
}

void SnapshotBuilder::on_span(const SpanRow& r) {
  ++spans_;
  dirty_ = true;
  using vocab::Event;
  const Event e = names_.event(r.name_id);
  TrackState& t = thread_track(r.thread_id);
  Item it;
  it.start_ns = bounded(r.start_ns);
  if (r.dur_ns) {
    it.end_ns = it.start_ns + std::clamp<int64_t>(*r.dur_ns, 0, kTimeBound);
  } else {
    it.end_ns = std::max(end_ns_, it.start_ns);
    it.flags |= kItemUnended;
  }
  it.name_id = r.name_id;
  it.a0 = r.arg0.value_or(Item::kNoArg);
  it.a1 = arg32(r.arg1);
  it.a2 = arg32(r.arg2);
  switch (e) {
    case Event::kDlNext: it.style = Style::kNext; break;
    case Event::kDlFetch: it.style = Style::kFetch; break;
    case Event::kDlCollate: it.style = Style::kCollate; break;
    case Event::kDlPin: it.style = Style::kPin; break;
    default: it.style = vocab::is_cuda_call(e) ? Style::kCudaSync : Style::kNvtx; break;
  }
  if (e == Event::kDlNext) {
    t.has_next = true;
    if (t.next_depth < 0) t.next_depth = std::clamp(r.depth, 0, 63);
    if (t.last_handed_end >= 0 && it.start_ns >= t.last_handed_end) {
      Item step;
      step.start_ns = t.last_handed_end;
      step.end_ns = it.start_ns;
      step.style = Style::kStep;
      if (t.track.steps.try_append(step)) add_to_bins(&Bin::step_ns, step.start_ns, step.end_ns);
    }
    const bool handed = r.dur_ns.has_value() && decode(e, false, r).batch.value_or(-1) >= 0;
    t.last_handed_end = handed ? it.end_ns : -1;
    if (handed) ++bin(it.end_ns).handed;
    add_to_bins(&Bin::stall_ns, it.start_ns, it.end_ns);
  }
  if (e == Event::kDlPin) t.has_pin = true;
  if (e == Event::kDlFetch && analysis::dl_fetch_in_worker(r.arg2)) {
    // W >= 0 in arg2: a worker process (layout B, W, G) or a reference loader's thread in the
    // training process (L, B, W). Both readings are kept; publish() knows the process then.
    const analysis::DlEvent as_worker = decode(e, true, r), as_thread = decode(e, false, r);
    if (as_worker.worker) t.worker_hint = static_cast<int32_t>(*as_worker.worker);
    t.thread_worker = static_cast<int32_t>(*as_thread.worker);
    t.thread_loader = as_thread.loader.value_or(-1);
  }
  append(t, it, r.depth);
  see(it.end_ns);
  first_ns_ = std::min(first_ns_, it.start_ns);
}

void SnapshotBuilder::on_counter(const CounterRow& r) {
  // May run on the tail's second thread: counter state only (see RowSink).
  ++counter_samples_;
  counters_dirty_ = true;
  counter_end_ns_ = std::max(counter_end_ns_, bounded(r.ts_ns));
  if (r.track_id < 0 || static_cast<size_t>(r.track_id) >= series_by_track_.size()) return;
  CounterSeries* s = series_by_track_[static_cast<size_t>(r.track_id)];
  if (!s) return;
  s->append(bounded(r.ts_ns), r.value);
  s->max_value = std::max(s->max_value, r.value);
}

void SnapshotBuilder::on_gpu(const GpuActivityRow& r) {
  ++gpu_;
  dirty_ = true;
  TrackState& t = gpu_track(r.process_id, r.device, r.stream);
  static const char* const kCopyKinds[] = {"", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"};
  static const char* const kMemKinds[] = {"", "pageable", "pinned", "device", "array", "managed"};
  auto index_of = [](const std::string& s, const char* const* list, size_t n) -> uint8_t {
    for (size_t i = 1; i < n; ++i) {
      if (s == list[i]) return static_cast<uint8_t>(i);
    }
    return 0;
  };
  GpuDetail d;
  d.bytes = r.bytes;
  d.correlation_id = r.correlation_id;
  d.copy_kind = index_of(r.copy_kind, kCopyKinds, 6);
  d.src_kind = index_of(r.src_kind, kMemKinds, 6);
  d.dst_kind = index_of(r.dst_kind, kMemKinds, 6);
  Item it;
  it.start_ns = bounded(r.start_ns);
  it.end_ns = it.start_ns + std::clamp<int64_t>(r.dur_ns, 0, kTimeBound);
  it.name_id = r.name_id;
  it.a0 = r.bytes;
  it.a1 = static_cast<int32_t>(t.track.gpu.size());
  if (r.kind == "kernel") {
    it.style = Style::kKernel;
  } else if (r.kind == "memcpy") {
    it.style = (r.src_kind == "pageable" || r.dst_kind == "pageable") ? Style::kCopyPageable : Style::kCopyPinned;
  } else if (r.kind == "memset") {
    it.style = Style::kMemset;
  } else {
    it.style = Style::kGpuSync;
  }
  t.track.gpu.push_back(d);
  append(t, it, 0);
  // Light mode's marks (recorded -> reached by the GPU) are drawn, but are not GPU work.
  if (r.kind != "mark") add_to_bins(&Bin::gpu_ns, it.start_ns, it.end_ns);
  see(it.end_ns);
  first_ns_ = std::min(first_ns_, it.start_ns);
}

void SnapshotBuilder::on_flush(int64_t ts_ns) {
  last_flush_ns_ = std::max(last_flush_ns_, ts_ns);
  see(ts_ns);
  dirty_ = true;
}

// A published copy of a track: rows in display order (by depth, overflow rows after their depth).
Track SnapshotBuilder::published_track(const TrackState& t) const {
  Track out = t.track;
  std::vector<size_t> order(t.rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.rows[a].depth < t.rows[b].depth; });
  for (size_t i : order) out.rows.push_back(t.rows[i]);
  auto th = threads_.find(t.track.thread_id);
  if (th != threads_.end()) out.thread_name = th->second.name;
  if (out.pid == 0 && th != threads_.end()) {
    auto p = processes_.find(th->second.process_id);
    if (p != processes_.end()) out.pid = p->second.pid;
  }
  return out;
}

// Tracks into lanes: one lane per DataLoader worker (W of a loader; a respawned worker's processes
// share it), the training loop's main thread, the pin-memory thread, other threads, GPU streams.
std::vector<Lane> SnapshotBuilder::group_lanes(std::set<int64_t>* loaders_with_workers) const {
  std::vector<Lane> lanes;
  // (the training process that started it, loader, W) -> index: each rank of a job has its own
  // loader 0 worker 0.
  std::map<std::tuple<int64_t, int64_t, int32_t>, size_t> worker_lane;
  auto pid_of_thread = [&](int64_t thread_id) -> int64_t {
    auto t = threads_.find(thread_id);
    if (t == threads_.end()) return 0;
    auto p = processes_.find(t->second.process_id);
    return p == processes_.end() ? 0 : p->second.pid;
  };
  std::set<int64_t> training_pids;  // processes with a training loop (dl.next)
  for (const auto& [id, ts] : thread_tracks_) {
    if (ts->has_next) training_pids.insert(ts->track.pid);
  }
  for (const auto& [id, ts] : thread_tracks_) {
    const TrackState& t = *ts;
    if (t.items == 0 && t.track.markers.empty() && t.track.steps.size() == 0) continue;
    Track tr = published_track(t);
    const int64_t pid = tr.pid;
    auto w = workers_.find(pid);
    const bool in_worker = w != workers_.end() && (tr.tid == pid || t.worker_hint >= 0);
    // A reference loader's thread: fetches with W, in the training process, off the training thread.
    const bool loader_thread = !in_worker && !t.has_next && t.thread_worker >= 0 && training_pids.count(pid) != 0;
    if (in_worker || loader_thread || (w == workers_.end() && t.worker_hint >= 0)) {
      const std::pair<int64_t, int32_t> key = in_worker ? w->second
                                              : loader_thread
                                                  ? std::pair<int64_t, int32_t>(t.thread_loader, t.thread_worker)
                                                  : std::pair<int64_t, int32_t>(-1, t.worker_hint);
      int64_t owner = loader_thread ? pid : -1;
      if (in_worker) {
        auto o = worker_owner_thread_.find(pid);
        if (o != worker_owner_thread_.end()) owner = pid_of_thread(o->second);
      }
      auto [it, fresh] = worker_lane.emplace(std::make_tuple(owner, key.first, key.second), lanes.size());
      if (fresh) {
        Lane l;
        l.role = LaneRole::kWorker;
        l.loader = key.first;
        l.worker = key.second;
        l.pid = pid;
        l.rank = owner;  // the owner's pid for now; ranks are given in name_lanes()
        lanes.push_back(std::move(l));
      }
      if (key.first >= 0) loaders_with_workers->insert(key.first);
      Lane& l = lanes[it->second];
      l.pids.push_back(pid);
      l.tracks.push_back(std::move(tr));
      continue;
    }
    Lane l;
    l.role = t.has_next ? LaneRole::kMain : t.has_pin ? LaneRole::kPin : LaneRole::kOther;
    l.pid = pid;
    l.pids.push_back(pid);
    l.tracks.push_back(std::move(tr));
    lanes.push_back(std::move(l));
  }
  for (const auto& [key, ts] : gpu_tracks_) {
    Lane l;
    l.role = LaneRole::kGpu;
    l.device = ts->device;
    l.stream = ts->stream;
    l.pid = ts->track.pid;
    l.pids.push_back(l.pid);
    l.tracks.push_back(published_track(*ts));
    lanes.push_back(std::move(l));
  }
  return lanes;
}

namespace {

// A worker lane's tracks in time order (respawned workers: one process per epoch).
void order_worker_tracks(std::vector<Lane>& lanes) {
  auto first_time = [](const Track& t) {
    int64_t f = INT64_MAX;
    for (const Row& r : t.rows) {
      if (r.size() > 0) f = std::min(f, r[0].start_ns);
    }
    if (t.markers.size() > 0) f = std::min(f, t.markers[0].ts_ns);
    return f;
  };
  for (Lane& l : lanes) {
    if (l.role != LaneRole::kWorker || l.tracks.size() < 2) continue;
    std::stable_sort(l.tracks.begin(), l.tracks.end(),
                     [&](const Track& a, const Track& b) { return first_time(a) < first_time(b); });
    l.pids.clear();
    for (const Track& t : l.tracks) l.pids.push_back(t.pid);
    l.pid = l.pids.front();
  }
}

}  // namespace

// Each lane's label, tooltip and place in the display order.
void SnapshotBuilder::name_lanes(std::vector<Lane>& lanes, const std::set<int64_t>& loaders_with_workers) const {
  int mains = 0, pins = 0;
  std::set<int64_t> gpu_pids;
  for (const Lane& l : lanes) {
    mains += l.role == LaneRole::kMain;
    pins += l.role == LaneRole::kPin;
    if (l.role == LaneRole::kGpu) gpu_pids.insert(l.pid);
  }
  auto cmdline = [&](int64_t pid) -> std::string {
    for (const auto& [id, p] : processes_) {
      if (p.pid == pid) return p.cmdline;
    }
    return "";
  };
  // A worker lane says which loader it serves by the loader's name (analysis::loader_name).
  auto loader_label = [&](int64_t loader) -> std::string {
    auto it = loader_configs_.find(loader);
    if (it != loader_configs_.end() && it->second < strings_->size()) {
      auto doc = json::parse((*strings_)[it->second]);
      if (doc.ok() && doc->is_object()) return analysis::loader_name(analysis::parse_loader_config(*doc), loader);
    }
    return "L" + std::to_string(loader);
  };
  auto track_line = [&](const Track& t) {
    std::string s = "pid " + std::to_string(t.pid);
    if (t.tid) s += "  tid " + std::to_string(t.tid);
    if (!t.thread_name.empty()) s += "  " + t.thread_name;
    return s;
  };
  for (Lane& l : lanes) {
    const Track& t0 = l.tracks.front();
    switch (l.role) {
      case LaneRole::kGpu:
        l.name = "GPU " + std::to_string(l.device) + " stream " + std::to_string(l.stream);
        if (gpu_pids.size() > 1) l.name += " (pid " + std::to_string(l.pid) + ")";
        l.sort_key_tuple = {0, 0, l.pid, l.device, l.stream};
        break;
      case LaneRole::kMain:
        l.name = mains > 1 ? "main thread (pid " + std::to_string(l.pid) + ")" : "main thread";
        l.sort_key_tuple = {0, 1, l.pid, t0.tid, 0};
        break;
      case LaneRole::kPin:
        l.name = pins > 1 ? "pin memory (pid " + std::to_string(l.pid) + ")" : "pin memory";
        l.sort_key_tuple = {0, 2, l.pid, t0.tid, 0};
        break;
      case LaneRole::kWorker:
        l.name = (loaders_with_workers.size() > 1 && l.loader >= 0 ? loader_label(l.loader) + " " : std::string()) +
                 "worker " + std::to_string(l.worker);
        if (l.loader >= 0) l.detail = "loader " + std::to_string(l.loader) + ": " + loader_label(l.loader);
        l.sort_key_tuple = {0, 3, l.loader, l.worker, 0};
        break;
      case LaneRole::kOther:
        l.name = "pid " + std::to_string(l.pid) + " " +
                 (t0.thread_name.empty() ? "tid " + std::to_string(t0.tid) : t0.thread_name);
        l.sort_key_tuple = {0, 4, l.pid, t0.tid, 0};
        break;
    }
    for (const Track& t : l.tracks) {
      if (!l.detail.empty()) l.detail += "\n";
      l.detail += track_line(t);
    }
    const std::string cmd = cmdline(l.pid);
    if (!cmd.empty()) l.detail += "\n" + cmd;
  }

  // A multi-rank job: every lane of a rank's process or of its workers goes in that rank's group,
  // named after it, the ranks in order; lanes of no rank after them.
  std::map<int64_t, int64_t> rank_of_pid;
  for (const auto& [thread_id, rank] : rank_thread_) {
    auto t = threads_.find(thread_id);
    if (t == threads_.end()) continue;
    auto p = processes_.find(t->second.process_id);
    if (p != processes_.end()) rank_of_pid.emplace(p->second.pid, rank);
  }
  std::set<int64_t> ranks;
  for (const auto& [pid, rank] : rank_of_pid) ranks.insert(rank);
  for (Lane& l : lanes) {
    const int64_t owner = l.role == LaneRole::kWorker && l.rank > 0 ? l.rank : l.pid;
    auto r = rank_of_pid.find(owner);
    l.rank = ranks.size() >= 2 && r != rank_of_pid.end() ? r->second : -1;
    l.sort_key_tuple[0] = ranks.size() < 2 ? 0 : l.rank >= 0 ? l.rank : INT64_MAX;
    if (l.rank >= 0) {
      // The rank says whose lane it is: no "(pid N)" to tell several main threads apart.
      if (const size_t p = l.name.find(" (pid "); p != std::string::npos && l.role != LaneRole::kOther) {
        l.name.resize(p);
      }
      l.name = "rank " + std::to_string(l.rank) + " " + l.name;
      l.detail = "rank " + std::to_string(l.rank) + "\n" + l.detail;
    }
  }
}

// A lane's visual rows: the union over its tracks of (depth, overflow index); each track's rows,
// steps and markers are assigned to them.
void SnapshotBuilder::lay_out_rows(Lane& l) const {
  std::set<std::pair<int32_t, int32_t>> keys;
  for (const Track& t : l.tracks) {
    std::map<int32_t, int32_t> seen;
    for (const Row& r : t.rows) keys.insert({r.depth, seen[r.depth]++});
  }
  if (keys.empty()) keys.insert({0, 0});
  std::vector<std::pair<int32_t, int32_t>> vk(keys.begin(), keys.end());
  l.row_count = static_cast<int32_t>(vk.size());
  for (const auto& k : vk) l.row_depth.push_back(k.first);
  for (Track& t : l.tracks) {
    std::map<int32_t, int32_t> seen;
    for (const Row& r : t.rows) {
      const auto key = std::make_pair(r.depth, seen[r.depth]++);
      t.visual.push_back(static_cast<int32_t>(std::lower_bound(vk.begin(), vk.end(), key) - vk.begin()));
      l.items += static_cast<int64_t>(r.size());
    }
    auto ts = thread_tracks_.find(t.thread_id);
    const int32_t nd = (l.role != LaneRole::kGpu && ts != thread_tracks_.end()) ? ts->second->next_depth : -1;
    t.steps_visual =
        static_cast<int32_t>(std::lower_bound(vk.begin(), vk.end(), std::make_pair(std::max(nd, 0), 0)) - vk.begin());
    if (t.steps_visual >= l.row_count) t.steps_visual = 0;
    t.marker_visual = 0;
    l.items += static_cast<int64_t>(t.steps.size());
  }
}

void SnapshotBuilder::map_overview(std::vector<Lane>& lanes) const {
  std::set<int64_t> placed;
  for (Lane& l : lanes) {
    for (const Track& tr : l.tracks) {
      if (tr.thread_id == 0 || !overview_->threads.count(tr.thread_id)) continue;
      l.overview_threads.push_back(tr.thread_id);
      placed.insert(tr.thread_id);
    }
  }
  // Workers outside the detail held (started anew each epoch, their start not read): the children
  // of a training process that started together are its workers 0, 1, ... in order of start, as
  // torch starts them. Each goes to the lane of that W under the same parent.
  std::unordered_map<int64_t, const ProcessRow*> by_pid;
  for (const auto& [id, p] : processes_) by_pid[p.pid] = &p;
  std::map<std::pair<int64_t, int32_t>, Lane*> worker_lane;  // (parent pid, W)
  std::map<int64_t, int32_t> workers_of;                     // parent pid -> worker lanes
  for (Lane& l : lanes) {
    if (l.role != LaneRole::kWorker || l.worker < 0 || l.pids.empty()) continue;
    auto p = by_pid.find(l.pids.front());
    if (p == by_pid.end() || !p->second->ppid) continue;
    worker_lane.emplace(std::make_pair(*p->second->ppid, l.worker), &l);
    workers_of[*p->second->ppid] = std::max(workers_of[*p->second->ppid], l.worker + 1);
  }
  if (worker_lane.empty()) return;
  struct Started {
    int64_t start_ns, pid, thread_id;
    bool operator<(const Started& o) const {
      return std::tie(start_ns, pid, thread_id) < std::tie(o.start_ns, o.pid, o.thread_id);
    }
  };
  std::map<int64_t, std::vector<Started>> children;  // parent pid -> its fetching children
  for (const auto& [thread_id, share] : overview_->threads) {
    if (share.style != Style::kFetch || placed.count(thread_id)) continue;
    auto t = threads_.find(thread_id);
    if (t == threads_.end()) continue;
    auto p = processes_.find(t->second.process_id);
    if (p == processes_.end() || !p->second.ppid || !p->second.start_ns) continue;
    if (!workers_of.count(*p->second.ppid)) continue;
    children[*p->second.ppid].push_back({*p->second.start_ns, p->second.pid, thread_id});
  }
  constexpr int64_t kBurstGapNs = 1'000'000'000;  // workers of one start come within ms of each other
  for (auto& [parent, list] : children) {
    std::sort(list.begin(), list.end());
    const int32_t n = workers_of[parent];
    int32_t w = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      int64_t gap = 0;  // a damaged file's start times may be anywhere: a gap that overflows is a long one
      const bool far =
          i > 0 && (__builtin_sub_overflow(list[i].start_ns, list[i - 1].start_ns, &gap) || gap > kBurstGapNs);
      if (i > 0 && (far || w >= n)) w = 0;
      auto lane = worker_lane.find({parent, w++});
      if (lane != worker_lane.end()) lane->second->overview_threads.push_back(list[i].thread_id);
    }
  }
}

void SnapshotBuilder::set_window(std::shared_ptr<const Overview> overview, int64_t detail_t0, int64_t detail_t1,
                                 int64_t detail_rows) {
  overview_ = std::move(overview);
  detail_t0_ = detail_t0;
  detail_t1_ = detail_t1;
  detail_rows_ = detail_rows;
  dirty_ = true;
}

std::shared_ptr<const Timeline> SnapshotBuilder::publish() {
  auto tl = std::make_shared<Timeline>();
  tl->meta = meta_;
  tl->strings = strings_;
  strings_published_ = true;
  if (bins_changed_ || !published_bins_) {
    // Cap each bin's GPU time at the bin: streams may overlap.
    auto bins = std::make_shared<std::vector<Bin>>(bins_);
    for (Bin& b : *bins) b.gpu_ns = std::min(b.gpu_ns, kBinNs);
    published_bins_ = std::move(bins);
    bins_changed_ = false;
  }
  tl->bins = published_bins_;
  tl->counters = counters_;
  end_ns_ = std::max(end_ns_, counter_end_ns_);
  tl->end_ns = end_ns_;
  tl->first_ns = first_ns_ == INT64_MAX ? 0 : first_ns_;
  if (overview_) {  // the whole run's ends, as the overview's buckets have them
    tl->overview = overview_;
    tl->detail_t0 = detail_t0_;
    tl->detail_t1 = detail_t1_;
    tl->detail_rows = detail_rows_;
    if (overview_->size() > 0) {
      tl->first_ns = first_ns_ == INT64_MAX ? overview_->first_ns : std::min(tl->first_ns, overview_->first_ns);
      tl->end_ns = std::max(tl->end_ns, std::min(overview_->end_ns, std::max(end_ns_, last_flush_ns_)));
    }
  }
  tl->spans = spans_;
  tl->instants = instants_;
  tl->counter_samples = counter_samples_;
  tl->gpu_activities = gpu_;
  tl->rows_read = spans_ + instants_ + counter_samples_ + gpu_;
  tl->last_flush_ns = last_flush_ns_;
  tl->gpu_mode = gpu_ > 0;
  auto c = meta_.find("complete");
  tl->complete = c != meta_.end() && c->second == "1";

  std::set<int64_t> loaders_with_workers;
  std::vector<Lane> lanes = group_lanes(&loaders_with_workers);
  order_worker_tracks(lanes);
  name_lanes(lanes, loaders_with_workers);
  for (Lane& l : lanes) lay_out_rows(l);
  if (overview_) map_overview(lanes);
  std::sort(lanes.begin(), lanes.end(),
            [](const Lane& a, const Lane& b) { return a.sort_key_tuple < b.sort_key_tuple; });
  for (size_t i = 0; i < lanes.size(); ++i) {
    lanes[i].rank_lead = lanes[i].rank >= 0 && (i == 0 || lanes[i - 1].rank != lanes[i].rank);
  }
  tl->lanes = std::move(lanes);
  dirty_ = false;
  counters_dirty_ = false;
  return tl;
}

}  // namespace stallscope::ui
