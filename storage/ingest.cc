// The drainer; see ingest.h.
#include "storage/ingest.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "collector/event.h"
#include "collector/gpu_activity.h"
#include "common/cpus.h"
#include "common/procfs.h"
#include "stallscope/version.h"
#include "storage/schema.h"

namespace stallscope {
namespace {

std::optional<int64_t> to_opt64(std::optional<int> v) {
  if (v) return static_cast<int64_t>(*v);
  return std::nullopt;
}

std::string join_cmdline(const char* raw, size_t cap) {
  size_t len = cap;
  while (len > 0 && raw[len - 1] == '\0') --len;
  std::string s(raw, len);
  std::replace(s.begin(), s.end(), '\0', ' ');
  return s;
}

}  // namespace

TickConverter::TickConverter(bool uses_tsc, ClockAnchor start) : uses_tsc_(uses_tsc), start_(start) {
  anchors_.push_back(start);
}

void TickConverter::add_anchor(ClockAnchor a) {
  if (!uses_tsc_) return;
  if (a.ticks <= anchors_.back().ticks || a.ns <= anchors_.back().ns) return;
  anchors_.push_back(a);
  while (anchors_.size() > 128) anchors_.pop_front();
}

int64_t TickConverter::to_session_ns(uint64_t ticks) const {
  if (!uses_tsc_) return static_cast<int64_t>(ticks - start_.ns);
  if (anchors_.size() < 2) return static_cast<int64_t>(ticks - start_.ticks);  // no rate known yet
  // The segment [a, b] that holds `ticks`; outside the kept range, the nearest segment's rate.
  size_t hi = 1;
  if (ticks >= anchors_.back().ticks) {
    hi = anchors_.size() - 1;
  } else if (hint_ < anchors_.size() && anchors_[hint_ - 1].ticks <= ticks && ticks < anchors_[hint_].ticks) {
    hi = hint_;
  } else if (ticks > anchors_.front().ticks) {
    auto it = std::upper_bound(anchors_.begin(), anchors_.end(), ticks,
                               [](uint64_t t, const ClockAnchor& x) { return t < x.ticks; });
    hi = static_cast<size_t>(it - anchors_.begin());
  }
  hint_ = hi;
  const ClockAnchor& a = anchors_[hi - 1];
  const ClockAnchor& b = anchors_[hi];
  const double rate = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.ticks - a.ticks);
  const double delta = static_cast<double>(static_cast<int64_t>(ticks - a.ticks)) * rate;
  return static_cast<int64_t>(a.ns - start_.ns) + static_cast<int64_t>(delta);
}

Ingest::Ingest(Arena* arena, Writer* writer)
    : arena_(arena),
      writer_(writer),
      clock_(arena->header()->uses_tsc != 0,
             ClockAnchor{arena->header()->start_ticks, arena->header()->start_mono_ns}) {
  // Two anchors at least 2 ms apart give a usable tick rate from the first drain on.
  const uint64_t since = monotonic_ns() - arena->header()->start_mono_ns;
  if (since < 2000000) std::this_thread::sleep_for(std::chrono::nanoseconds(2000000 - since));
  clock_.add_anchor(take_anchor());
  rings_.resize(arena->header()->config.ring_count);
  ring_dropped_seen_.resize(arena->header()->config.ring_count, 0);
  spilled_.resize(arena->header()->config.ring_count);
}

Status Ingest::write_meta(const std::map<std::string, std::string>& extra) {
  const ArenaHeader* h = arena_->header();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::map<std::string, std::string> m = {
      {"format", "stallscope.session"},
      {"schema_version", std::to_string(kSchemaVersion)},
      {"wire_format_version", std::to_string(kWireFormatVersion)},
      {"stallscope_version", STALLSCOPE_VERSION},
      {"host", host},
      {"start_real_ns", std::to_string(h->start_real_ns)},
      {"start_mono_ns", std::to_string(h->start_mono_ns)},
      {"clock", h->uses_tsc ? "tsc->CLOCK_MONOTONIC" : "CLOCK_MONOTONIC"},
      {"owner_pid", std::to_string(h->owner_pid)},
      {"cpu_count", std::to_string(::sysconf(_SC_NPROCESSORS_ONLN))},
      {"usable_cores", std::to_string(cpus::budget().usable)},
      {"ring_count", std::to_string(h->config.ring_count)},
      {"ring_capacity", std::to_string(h->config.ring_capacity)},
      {"complete", "0"},
  };
  for (const auto& [k, v] : extra) m[k] = v;
  if (Status s = writer_->begin(); !s.ok()) return s;
  for (const auto& [k, v] : m) {
    if (Status s = writer_->set_meta(k, v); !s.ok()) {
      (void)writer_->commit();  // the set_meta error is the one to report
      return s;
    }
  }
  return writer_->commit();
}

void Ingest::set_exit_status(int pid, std::optional<int> exit_code, std::optional<int> exit_signal) {
  pending_exit_[pid] = {exit_code, exit_signal};
}

int64_t Ingest::process_row_for(int pid) {
  auto it = pid_latest_.find(pid);
  if (it != pid_latest_.end()) return processes_[it->second].row;
  // Not in the arena's process table (it was full): a row with what we know.
  ProcessRow row;
  row.pid = pid;
  const int64_t id = writer_->add_process(row);
  processes_.push_back(ProcessTrack{id, pid, false, {}, {}, -1, 0, 0});
  pid_latest_[pid] = processes_.size() - 1;
  return id;
}

void Ingest::sync_processes(bool final, int64_t now_ns) {
  const ArenaHeader* h = arena_->header();
  const uint32_t n = h->process_count.load(std::memory_order_acquire);
  // Entries are appended in order; rows created for unregistered pids sit after them in
  // processes_, so track arena entries by their own count.
  while (arena_entries_seen_ < n) {
    ProcessEntry* p = arena_->process(arena_entries_seen_);
    const uint32_t execs = p->execs.load(std::memory_order_acquire);  // before the cmdline
    ProcessRow row;
    row.pid = p->pid;
    row.ppid = p->ppid;
    row.cmdline = join_cmdline(p->cmdline, sizeof p->cmdline);
    row.start_ns = clock_.to_session_ns(p->start_ticks);
    const int64_t id = writer_->add_process(row);
    processes_.push_back(ProcessTrack{id, p->pid, false, {}, {}, arena_entries_seen_, 0, execs});
    pid_latest_[p->pid] = processes_.size() - 1;
    ++arena_entries_seen_;
  }
  for (ProcessTrack& t : processes_) {
    auto pending = pending_exit_.find(t.pid);
    if (pending != pending_exit_.end() && pid_latest_[t.pid] == static_cast<size_t>(&t - processes_.data())) {
      t.exit_code = pending->second.first;
      t.exit_signal = pending->second.second;
      pending_exit_.erase(pending);
      if (t.ended) writer_->update_process_end(t.row, t.end_ns, to_opt64(t.exit_code), to_opt64(t.exit_signal));
    }
    if (t.entry >= 0) {
      ProcessEntry* p = arena_->process(static_cast<uint32_t>(t.entry));
      const uint32_t execs = p->execs.load(std::memory_order_acquire);
      if (execs != t.execs) {
        t.execs = execs;
        writer_->update_process_cmdline(t.row, join_cmdline(p->cmdline, sizeof p->cmdline));
      }
    }
    if (t.ended) continue;
    std::optional<int> code = t.exit_code;
    int64_t end_ns = now_ns;
    bool ended = false;
    if (t.entry >= 0) {
      ProcessEntry* p = arena_->process(static_cast<uint32_t>(t.entry));
      const uint64_t end_ticks = p->end_ticks.load(std::memory_order_acquire);
      if (end_ticks != 0) {
        ended = true;
        end_ns = clock_.to_session_ns(end_ticks);
        if (!code && p->has_exit_code.load(std::memory_order_acquire)) code = p->exit_code;
      }
    }
    if (!ended && t.pid != ::getpid() && !procfs::alive(t.pid)) ended = true;
    if (!ended && final) ended = true;
    if (ended) {
      t.ended = true;
      t.end_ns = end_ns;
      t.exit_code = code;
      writer_->update_process_end(t.row, end_ns, to_opt64(t.exit_code), to_opt64(t.exit_signal));
    }
  }
}

void Ingest::write_span(const ThreadTrack& t, const OpenSpan& o, std::optional<int64_t> dur, const OpenSpan& args) {
  SpanRow row;
  row.thread_id = t.row;
  row.start_ns = o.start_ns;
  row.dur_ns = dur;
  row.name_id = o.name;
  row.depth = static_cast<int32_t>(t.stack.size());
  if (args.flags & kFlagArg0) row.arg0 = args.a0;
  if (args.flags & kFlagArg1) row.arg1 = args.a1;
  if (args.flags & kFlagArg2) row.arg2 = args.a2;
  const int64_t id = writer_->add_span(row);
  if (!first_span_) first_span_ = id;
  last_span_ = id;
  min_start_ = min_start_ ? std::min(*min_start_, o.start_ns) : o.start_ns;
  if (dur) {
    const int64_t end = o.start_ns + *dur;
    max_end_ = max_end_ ? std::max(*max_end_, end) : end;
  } else {
    open_ended_ = true;
  }
  ++stats_.spans;
}

void Ingest::close_open_spans(ThreadTrack& t) {
  while (!t.stack.empty()) {
    OpenSpan o = t.stack.back();
    t.stack.pop_back();
    write_span(t, o, std::nullopt, o);
  }
}

int64_t Ingest::counter_track(uint32_t name, int pid) {
  auto key = std::make_pair(name, pid);
  auto it = tracks_.find(key);
  if (it != tracks_.end()) return it->second;
  const char* text = arena_->string(name);
  std::string full = text ? text : ("counter#" + std::to_string(name));
  CounterTrackRow row;
  const size_t sep = full.find('\x1f');
  row.name = full.substr(0, sep);
  row.unit = sep == std::string::npos ? "" : full.substr(sep + 1);
  row.pid = pid;
  const int64_t id = writer_->add_counter_track(row);
  tracks_[key] = id;
  return id;
}

int64_t Ingest::named_track(vocab::Counter counter, int pid) {
  const auto key = std::make_pair(counter, pid);
  auto it = named_tracks_.find(key);
  if (it != named_tracks_.end()) return it->second;
  const int64_t id = writer_->add_counter_track(
      CounterTrackRow{0, std::string(vocab::name_of(counter)), std::string(vocab::unit_of(counter)), pid});
  named_tracks_[key] = id;
  return id;
}

void Ingest::add_samples(std::vector<ProcSample> samples) {
  samples_.insert(samples_.end(), std::make_move_iterator(samples.begin()), std::make_move_iterator(samples.end()));
}

std::vector<int> Ingest::live_pids(const Arena& arena) {
  std::vector<int> pids;
  const uint32_t n = arena.header()->process_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const ProcessEntry* p = arena.process(i);
    if (p->end_ticks.load(std::memory_order_acquire) == 0) pids.push_back(p->pid);
  }
  return pids;
}

void Ingest::write_samples() {
  const int64_t start = static_cast<int64_t>(clock_.start_mono_ns());
  for (const ProcSample& s : samples_) {
    const int64_t ts = static_cast<int64_t>(s.mono_ns) - start;
    auto put = [&](vocab::Counter counter, double v) {
      writer_->add_counter(CounterRow{named_track(counter, s.pid), ts, v});
      ++stats_.counters;
    };
    using vocab::Counter;
    if (s.cpu_cores) put(Counter::kCpu, *s.cpu_cores);
    if (s.runq_wait_ratio) put(Counter::kRunqWait, *s.runq_wait_ratio);
    if (s.ctxsw_voluntary) put(Counter::kCtxswVoluntary, *s.ctxsw_voluntary);
    if (s.ctxsw_involuntary) put(Counter::kCtxswInvoluntary, *s.ctxsw_involuntary);
    if (s.read_bytes_per_s) put(Counter::kReadBytes, *s.read_bytes_per_s);
    if (s.sys_cpu_cores) put(Counter::kSysCpu, *s.sys_cpu_cores);
    if (s.minor_faults_per_s) put(Counter::kMinorFaults, *s.minor_faults_per_s);
    put(Counter::kRss, static_cast<double>(s.rss_bytes));
    if (s.pss_bytes) put(Counter::kPss, static_cast<double>(*s.pss_bytes));
    if (s.private_dirty_bytes) put(Counter::kPrivateDirty, static_cast<double>(*s.private_dirty_bytes));
  }
  samples_.clear();
}

void Ingest::drain_ring(uint32_t index, bool final) {
  Ring* r = arena_->ring(index);
  uint32_t state = r->h.state.load(std::memory_order_acquire);
  if (state != kRingActive && state != kRingRetired) return;
  ThreadTrack& t = rings_[index];
  if (t.uid != r->h.thread_uid) {
    close_open_spans(t);
    t = ThreadTrack{};
    t.uid = r->h.thread_uid;
    ThreadRow row;
    row.process_id = process_row_for(r->h.pid);
    row.tid = r->h.tid;
    row.name = std::string(r->h.name, strnlen(r->h.name, sizeof r->h.name));
    auto [known, added] = thread_rows_.try_emplace({row.process_id, row.tid, row.name}, 0);
    if (added) known->second = writer_->add_thread(row);
    t.row = known->second;
    ring_dropped_seen_[index] = 0;
  }
  if (state == kRingActive && r->h.pid != ::getpid() && !procfs::alive(r->h.pid)) {
    uint32_t expected = kRingActive;
    if (r->h.state.compare_exchange_strong(expected, kRingRetired, std::memory_order_acq_rel)) state = kRingRetired;
  }
  // What spill() took first, then the ring's rest, read after the state: a retired ring's head is
  // final.
  // The copies' memory is given back at once (spills are rare: a drain held up), and the batch's
  // when one was far larger than a ring.
  const size_t ring_capacity = arena_->header()->config.ring_capacity;
  if (batch_.capacity() > 4 * ring_capacity) std::vector<Event>().swap(batch_);
  batch_.clear();
  {
    std::lock_guard<std::mutex> g(spill_mu_);
    std::vector<Event>& held = spilled_[index];
    if (!held.empty()) {
      batch_.insert(batch_.end(), held.begin(), held.end());
      spilled_count_ -= held.size();
      std::vector<Event>().swap(held);
    }
    take_ring(r, batch_, SIZE_MAX);
    // Events stamped after this drain's anchor wait in `held` for the next drain (see drain()),
    // unless nothing will come after: the last drain, a retired ring.
    if (clock_.uses_tsc() && !final && state != kRingRetired) {
      const uint64_t cut = clock_.last_anchor_ticks();
      auto later = std::find_if(batch_.begin(), batch_.end(), [cut](const Event& e) {
        return !(e.flags & kFlagTimeNs) && e.kind != EventKind::kGpuActivityExt && e.ticks > cut;
      });
      if (later != batch_.end()) {
        held.assign(later, batch_.end());
        spilled_count_ += held.size();
        batch_.erase(later, batch_.end());
      }
    }
  }
  for (const Event& e : batch_) {
    const int64_t ns = (e.flags & kFlagTimeNs) ? clock_.mono_to_session_ns(e.ticks) : clock_.to_session_ns(e.ticks);
    ++stats_.events;
    switch (e.kind) {
      case EventKind::kSpanBegin: t.stack.push_back(OpenSpan{ns, e.name, e.flags, e.a0, e.a1, e.a2}); break;
      case EventKind::kSpanEnd: {
        if (t.stack.empty()) break;  // an end without a begin (began before recording)
        OpenSpan o = t.stack.back();
        t.stack.pop_back();
        if (e.flags & kFlagArgs) {
          write_span(t, o, ns - o.start_ns, OpenSpan{0, 0, e.flags, e.a0, e.a1, e.a2});
        } else {
          write_span(t, o, ns - o.start_ns, o);
        }
        break;
      }
      case EventKind::kInstant: {
        InstantRow row;
        row.thread_id = t.row;
        row.ts_ns = ns;
        row.name_id = e.name;
        if (e.flags & kFlagArg0) row.arg0 = e.a0;
        if (e.flags & kFlagArg1) row.arg1 = e.a1;
        if (e.flags & kFlagArg2) row.arg2 = e.a2;
        writer_->add_instant(row);
        ++stats_.instants;
        break;
      }
      case EventKind::kCounter: {
        double value;
        std::memcpy(&value, &e.a0, sizeof value);
        const int pid = (e.flags & kFlagArg1) ? static_cast<int>(e.a1) : r->h.pid;
        writer_->add_counter(CounterRow{counter_track(e.name, pid), ns, value});
        ++stats_.counters;
        break;
      }
      case EventKind::kGpuActivity:
        t.gpu_first = e;
        t.gpu_pending = true;
        break;
      case EventKind::kGpuActivityExt: {
        if (!t.gpu_pending) break;
        t.gpu_pending = false;
        uint32_t name_id = 0;
        const GpuActivity a = unpack_gpu_activity(GpuEventPair{t.gpu_first, e}, &name_id);
        GpuActivityRow row;
        row.process_id = process_row_for(r->h.pid);
        row.device = a.device;
        row.kind = gpu_activity_kind_name(a.kind);
        row.stream = a.stream;
        row.context = a.context;
        row.start_ns = clock_.mono_to_session_ns(a.start_ns);
        row.dur_ns = static_cast<int64_t>(a.end_ns - a.start_ns);
        row.name_id = name_id;
        row.bytes = static_cast<int64_t>(a.bytes);
        row.copy_kind = copy_kind_name(a.copy_kind);
        row.src_kind = memory_kind_name(a.src_kind);
        row.dst_kind = memory_kind_name(a.dst_kind);
        row.correlation_id = a.correlation;
        writer_->add_gpu_activity(row);
        ++stats_.gpu_activities;
        break;
      }
      case EventKind::kThreadName: {
        const char* text = arena_->string(e.name);
        if (text) writer_->set_thread_name(t.row, text);
        break;
      }
      default: break;  // a kind this build does not know; skipped
    }
  }
  ring_dropped_seen_[index] = r->h.dropped.load(std::memory_order_relaxed);
  if (state == kRingRetired || final) close_open_spans(t);
  if (state == kRingRetired) {
    dropped_retired_ += ring_dropped_seen_[index];
    ring_dropped_seen_[index] = 0;
    t = ThreadTrack{};
    std::lock_guard<std::mutex> g(spill_mu_);  // not while spill() copies from it
    r->h.state.store(kRingFree, std::memory_order_release);
  }
}

size_t Ingest::take_ring(Ring* r, std::vector<Event>& out, size_t room) {
  const uint64_t head = r->h.head.load(std::memory_order_acquire);
  uint64_t tail = r->h.tail.load(std::memory_order_relaxed);
  const uint64_t cap = arena_->header()->config.ring_capacity;
  if (head - tail > cap) tail = head - cap;  // cannot happen with a sane producer
  const uint64_t end = head - tail > room ? tail + room : head;
  const size_t n = static_cast<size_t>(end - tail);
  for (; tail != end; ++tail) out.push_back(r->events[tail & (cap - 1)]);
  r->h.tail.store(end, std::memory_order_release);  // the slots are the producer's again
  return n;
}

size_t Ingest::spill() {
  std::lock_guard<std::mutex> g(spill_mu_);
  size_t taken = 0;
  for (uint32_t i = 0; i < arena_->header()->config.ring_count && spilled_count_ < spill_cap_; ++i) {
    Ring* r = arena_->ring(i);
    const uint32_t state = r->h.state.load(std::memory_order_acquire);
    if (state != kRingActive && state != kRingRetired) continue;
    const size_t n = take_ring(r, spilled_[i], spill_cap_ - spilled_count_);
    spilled_count_ += n;
    taken += n;
  }
  return taken;
}

size_t Ingest::spilled_events() const {
  std::lock_guard<std::mutex> g(spill_mu_);
  return spilled_count_;
}

void Ingest::sync_strings() {
  const uint32_t n = arena_->header()->string_count.load(std::memory_order_acquire);
  for (uint32_t id = strings_written_ + 1; id <= n; ++id) {
    const char* s = arena_->string(id);
    if (s) writer_->add_string(id, s);
  }
  strings_written_ = n;
}

int64_t Ingest::queue_horizon(int64_t drain_start_ns) const {
  // Every event of the rings was stamped when written, and each ring was read after this drain
  // began: what comes later was written after drain_start_ns, bar a thread preempted between its
  // clock read and its publish (the margin). A span's row comes at its end with its start's time,
  // so a dl.next begun and not ended holds the horizon at its start.
  int64_t h = drain_start_ns - kHorizonMarginNs;
  const std::string_view next = vocab::name_of(vocab::Event::kDlNext);
  for (const ThreadTrack& t : rings_) {
    for (const OpenSpan& o : t.stack) {
      if (o.start_ns >= h) continue;
      const char* name = arena_->string(o.name);
      if (name != nullptr && next == name) h = o.start_ns;
    }
  }
  return h;
}

double Ingest::fullest_ring() const {
  const uint64_t cap = arena_->header()->config.ring_capacity;
  uint64_t most = 0;
  for (uint32_t i = 0; i < arena_->header()->config.ring_count; ++i) {
    const Ring* r = arena_->ring(i);
    const uint32_t state = r->h.state.load(std::memory_order_acquire);
    if (state != kRingActive && state != kRingRetired) continue;
    const uint64_t head = r->h.head.load(std::memory_order_acquire);
    const uint64_t tail = r->h.tail.load(std::memory_order_relaxed);
    if (head > tail) most = std::max(most, head - tail);
  }
  return static_cast<double>(std::min(most, cap)) / static_cast<double>(cap);
}

Status Ingest::drain(bool final) { return drain(final, take_anchor()); }

Status Ingest::drain(bool final, ClockAnchor anchor) {
  clock_.add_anchor(anchor);
  const int64_t now_ns = clock_.to_session_ns(now_ticks());
  first_span_.reset();
  last_span_.reset();
  min_start_.reset();
  max_end_.reset();
  open_ended_ = false;
  const uint64_t events_before = stats_.events;
  if (Status s = writer_->begin(); !s.ok()) return s;
  sync_processes(false, now_ns);
  write_samples();
  for (uint32_t i = 0; i < arena_->header()->config.ring_count; ++i) drain_ring(i, final);
  if (final) sync_processes(true, now_ns);
  sync_strings();  // after the rings: every id an event used was published before the event
  uint64_t dropped = dropped_retired_ + arena_->header()->dropped_no_ring.load(std::memory_order_relaxed);
  for (uint64_t d : ring_dropped_seen_) dropped += d;
  stats_.dropped = dropped;
  FlushRow f;
  f.ts_ns = now_ns;
  f.events = static_cast<int64_t>(stats_.events - events_before);
  f.dropped_total = static_cast<int64_t>(dropped);
  f.first_span_id = first_span_;
  f.last_span_id = last_span_;
  f.min_start_ns = min_start_;
  if (!open_ended_) f.max_end_ns = max_end_;  // NULL: a span of this flush never ended
  writer_->add_flush(f);
  // The end of the session, `complete` last: a reader trusts a recording that says complete=1, so
  // a failure to write any of these fails the drain (and the recorder says so).
  Status end = Status::Ok();
  if (final) {
    const std::pair<const char*, std::string> kEnd[] = {
        {"end_ns", std::to_string(now_ns)}, {"dropped_events", std::to_string(dropped)}, {"complete", "1"}};
    for (const auto& [key, value] : kEnd) {
      if (end.ok()) end = writer_->set_meta(key, value);
    }
  }
  ++stats_.drains;
  writer_->summaries().set_queue_horizon(queue_horizon(now_ns));
  if (final) writer_->summaries().finish_queues();  // the queues' events that waited for later rows
  Status committed = writer_->commit();
  return end.ok() ? committed : end;
}

}  // namespace stallscope
