// Multi-resolution summaries; see summaries.h.
#include "storage/summaries.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "common/saturating.h"

namespace stallscope {
namespace {

constexpr size_t kLevels = kSummaryLevelsNs.size();

struct SpanAgg {
  int64_t count = 0, total = 0, min = std::numeric_limits<int64_t>::max(), max = std::numeric_limits<int64_t>::min();
  DurationSketch sketch;
};
struct InstantAgg {
  int64_t count = 0;
};
struct CounterAgg {
  int64_t count = 0;
  double sum = 0, min = 0, max = 0;
  int64_t last_ts = std::numeric_limits<int64_t>::min();
  double last = 0;
};
struct GpuAgg {
  int64_t count = 0, total = 0, bytes = 0;
};

struct HandoffAgg {
  int64_t batches = 0, samples = 0, unsized = 0, starts = 0, start_total = 0;
  int64_t steps = 0, step_total = 0, step_min = std::numeric_limits<int64_t>::max(),
          step_max = std::numeric_limits<int64_t>::min();
  DurationSketch sketch;
};

// Keys start with (level index, bucket).
using SpanKey = std::tuple<size_t, int64_t, int64_t, int64_t, int64_t>;     // thread, name, grp
using CounterKey = std::tuple<size_t, int64_t, int64_t>;                    // track
using GpuKey = std::tuple<size_t, int64_t, int64_t, int64_t, std::string>;  // process, device, kind
using HandoffKey = std::tuple<size_t, int64_t, int64_t, int64_t>;           // thread, loader
using QueueKey = std::tuple<size_t, int64_t, int64_t, int64_t>;             // process, loader
// A batch of one loader of one process: (process row, loader, batch index).
using BatchKey = std::tuple<int64_t, int64_t, int64_t>;

struct KeyHash {
  template <typename... T>
  size_t operator()(const std::tuple<T...>& k) const {
    size_t h = 0;
    std::apply(
        [&h](const auto&... part) {
          ((h = h * 0x9E3779B97F4A7C15ull + std::hash<std::decay_t<decltype(part)>>()(part)), ...);
        },
        k);
    return h ^ (h >> 29);
  }
};

// The buckets of one table: those in memory, and below which bucket (per level) some were written
// and forgotten.
template <typename Key, typename Agg>
class Buckets {
 public:
  std::function<Result<bool>(const Key&, Agg&)> load;  // true when the row was there
  std::function<Status(const Key&, const Agg&)> store;

  Buckets() { forgotten_below_.fill(std::numeric_limits<int64_t>::min()); }

  // The aggregate of `key`, read back first when it may have been written and forgotten.
  Agg& at(const Key& key, Status& error) {
    auto it = mem_.find(key);
    if (it == mem_.end()) {
      it = mem_.emplace(key, Entry{}).first;
      if (std::get<1>(key) < forgotten_below_[std::get<0>(key)]) {
        auto found = load(key, it->second.agg);
        if (!found.ok() && error.ok()) error = found.status();
      }
    }
    it->second.dirty = true;
    return it->second.agg;
  }

  // The latest time this table has seen: buckets far enough behind it are forgotten.
  void see(int64_t t) { horizon_ = std::max(horizon_, t); }

  Status write_and_forget() {
    const int64_t horizon_ns = horizon_;
    for (auto it = mem_.begin(); it != mem_.end();) {
      if (it->second.dirty) {
        if (Status s = store(it->first, it->second.agg); !s.ok()) return s;
        it->second.dirty = false;
      }
      const size_t level = std::get<0>(it->first);
      const int64_t bucket = std::get<1>(it->first);
      const int64_t len = kSummaryLevelsNs[level];
      // Ends (bucket + 1) * len; forgotten once that is a whole length behind the horizon.
      if (bucket < summary_bucket(horizon_ns, len) - 1) {
        forgotten_below_[level] = std::max(forgotten_below_[level], bucket + 1);
        it = mem_.erase(it);
      } else {
        ++it;
      }
    }
    return Status::Ok();
  }

  size_t size() const { return mem_.size(); }

 private:
  struct Entry {
    Agg agg;
    bool dirty = false;
  };
  std::unordered_map<Key, Entry, KeyHash> mem_;
  std::array<int64_t, kLevels> forgotten_below_{};
  int64_t horizon_ = std::numeric_limits<int64_t>::min();
};

}  // namespace

int64_t summary_bucket(int64_t t, int64_t level) {
  const int64_t q = t / level;
  return (t % level != 0 && t < 0) ? q - 1 : q;
}

struct Summaries::Impl {
  Buckets<SpanKey, SpanAgg> spans;
  Buckets<SpanKey, InstantAgg> instants;
  Buckets<CounterKey, CounterAgg> counters;
  Buckets<GpuKey, GpuAgg> gpu;
  Buckets<HandoffKey, HandoffAgg> handoffs;
  Buckets<QueueKey, QueueFigures> queues;  // a loader's queue over one interval
  std::unique_ptr<Stmt> span_get, span_put, instant_get, instant_put, counter_get, counter_put, gpu_get, gpu_put,
      handoff_get, handoff_put, queue_get, queue_put;
  Status error;

  // What joins a hand-off to its batch's size. Every map is bounded: what outgrows its bound is
  // dropped, and the batches it would have sized count as unsized.
  static constexpr size_t kMaxPending = 1 << 14;        // batches collated and not handed, or the reverse
  static constexpr size_t kMaxEarly = 256;              // collates of one process not yet known as a worker
  std::unordered_map<int64_t, int64_t> thread_process;  // thread row -> process row
  std::unordered_map<int64_t, int64_t> process_pid;     // process row -> pid
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> worker_of;  // worker pid -> (parent process row, loader)
  struct Collate {
    int64_t a0 = 0, a1 = 0, a2 = 0, start = 0;
  };
  std::unordered_map<int64_t, Collate> last_collate;  // thread row -> its latest dl.collate
  // Either side waits in order of arrival: the same batch index of a later epoch can arrive before
  // the earlier one's other side (a late drain; an older recording's rows, table by table).
  struct Handed {  // a hand-off not yet sized: where its rows are
    int64_t end_ns, thread_id, loader;
  };
  std::unordered_map<BatchKey, std::deque<int64_t>, KeyHash> sizes;   // a worker's collates, not yet handed
  std::unordered_map<BatchKey, std::deque<Handed>, KeyHash> unsized;  // hand-offs not yet sized
  size_t sizes_n = 0, unsized_n = 0;
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> early;  // pid -> (batch, samples)
  std::map<std::pair<int64_t, int64_t>, int64_t> last_handoff;  // (thread row, loader) -> its latest end
  // (thread row, loader) -> its dl.epoch_begin times not yet followed by a next() call (an older
  // recording's instants are all read before its spans).
  std::map<std::pair<int64_t, int64_t>, std::deque<int64_t>> begun;
  static constexpr size_t kMaxBegun = 1 << 14;

  void size_later(const BatchKey& b, int64_t samples);

  // The queues (queue_summaries) follow each loader's batches in time order, which the rows do not
  // arrive in: a worker's puts come from its own ring, the hand-offs from the training thread's.
  // Their events wait here until the drainer's horizon (Summaries::set_queue_horizon: no earlier
  // row can come) or kQueueLagNs of later rows have come, whichever is sooner, then go through in
  // time order. One that comes later than that is taken at the time reached (counted in
  // queue_late).
  static constexpr int64_t kQueueLagNs = 5'000'000'000;
  static constexpr size_t kMaxQueueWaiting = 1 << 20;
  // In the order a batch's events follow each other: at equal times a put goes before the hand-off
  // it makes possible, whichever row came first.
  enum class QueueEventKind : uint8_t {
    kEpochBegin,   // arg1: the epoch
    kWorkerStart,  // arg2: the worker's pid
    kSent,
    kPut,  // a torch worker's: arg0 the batch, arg2 its generation
    kNextStart,
    kHanded,
    kStop,
    kEpochEnd
  };
  struct QueueEvent {
    int64_t t;
    uint64_t seq;
    int64_t thread_id, arg0, arg1, arg2;
    QueueEventKind kind;
  };
  struct Earlier {
    bool operator()(const QueueEvent& a, const QueueEvent& b) const {
      if (a.t != b.t) return a.t < b.t;
      return a.kind != b.kind ? a.kind < b.kind : a.seq < b.seq;
    }
  };
  // Waiting events in time order, and those come since they were last merged in (in the order
  // they came: each drain's are sorted and merged at its write, mostly after the waiting ones, so
  // the merge moves only the tail they overlap).
  std::deque<QueueEvent> queue_waiting;
  std::vector<QueueEvent> queue_fresh;
  // (thread, loader) whose latest dl.epoch_begin said num_workers=0: its iterator has no queue, so
  // its dl.next events are not held for kQueueLagNs only to be dropped (a fast loop's 25-30 MiB;
  // docs/decisions.md). The epoch_begin comes from the thread that then calls next(), so it is
  // drained before them. The reference loader's epoch_begin gives its threads (never 0).
  std::map<std::pair<int64_t, int64_t>, bool> queue_no_workers;
  uint64_t queue_seq = 0;
  int64_t queue_seen = std::numeric_limits<int64_t>::min();  // the latest time of an event that came
  int64_t queue_done = std::numeric_limits<int64_t>::min();  // events up to here went through
  int64_t queue_late = 0;
  struct QueueState {
    int64_t flight = 0, ready = 0, since = 0;
    bool active = false;
    // While not active, its values from when it stopped on (time, ready, in flight): a next() call
    // longer than the wait (the first of an epoch while the workers start) comes when its start
    // has gone by, and the time from its start is then covered with the values the queue held.
    std::deque<std::array<int64_t, 3>> idle;
  };
  static constexpr size_t kMaxIdleChanges = 1024;
  std::map<std::pair<int64_t, int64_t>, QueueState> queue_state;  // (process row, loader) -> now
  static constexpr size_t kMaxQueues = 1 << 10;                   // with their changes while not active: 25 MB at most
  // A torch worker's put of an earlier epoch than its loader's current one (a worker of an
  // abandoned iterator finishing its batch) is not in the queue: the epoch each loader is in, and
  // the epoch each worker started in (a put's epoch is that plus its generation).
  std::map<std::pair<int64_t, int64_t>, int64_t> queue_epoch;
  std::unordered_map<int64_t, int64_t> worker_epoch;  // worker pid -> its first epoch
  int64_t queue_stale = 0;

  void queue_event(int64_t t, int64_t thread_id, int64_t arg0, QueueEventKind kind, int64_t arg1 = 0, int64_t arg2 = 0);
  void queue_merge();
  void queue_until(int64_t t);
  void queue_apply(const QueueEvent& e);
  void queue_cover(std::pair<int64_t, int64_t> key, QueueState& q, int64_t t);
  void queue_cover(std::pair<int64_t, int64_t> key, int64_t from, int64_t to, int64_t ready, int64_t flight);
};

void Summaries::Impl::queue_event(int64_t t, int64_t thread_id, int64_t arg0, QueueEventKind kind, int64_t arg1,
                                  int64_t arg2) {
  if (kind == QueueEventKind::kEpochBegin) {
    if (queue_no_workers.size() >= kMaxQueues) queue_no_workers.clear();
    queue_no_workers[{thread_id, arg0}] = arg2 == 0;
  } else if (kind == QueueEventKind::kNextStart || kind == QueueEventKind::kHanded || kind == QueueEventKind::kStop) {
    auto it = queue_no_workers.find({thread_id, arg0});
    if (it != queue_no_workers.end() && it->second) return;
  }
  queue_fresh.push_back(QueueEvent{t, queue_seq++, thread_id, arg0, arg1, arg2, kind});
  queue_seen = std::max(queue_seen, t);
  if (queue_waiting.size() + queue_fresh.size() <= kMaxQueueWaiting) return;
  queue_merge();
  while (queue_waiting.size() > kMaxQueueWaiting / 2) {  // too many: the earliest go through now
    queue_apply(queue_waiting.front());
    queue_waiting.pop_front();
  }
}

void Summaries::Impl::queue_merge() {
  if (queue_fresh.empty()) return;
  std::sort(queue_fresh.begin(), queue_fresh.end(), Earlier());
  auto from = std::upper_bound(queue_waiting.begin(), queue_waiting.end(), queue_fresh.front(), Earlier());
  std::vector<QueueEvent> tail(std::make_move_iterator(from), std::make_move_iterator(queue_waiting.end()));
  queue_waiting.erase(from, queue_waiting.end());
  std::merge(tail.begin(), tail.end(), queue_fresh.begin(), queue_fresh.end(), std::back_inserter(queue_waiting),
             Earlier());
  queue_fresh.clear();
}

// Every waiting event up to `t`, in time order.
void Summaries::Impl::queue_until(int64_t t) {
  queue_merge();
  while (!queue_waiting.empty() && queue_waiting.front().t <= t) {
    queue_apply(queue_waiting.front());
    queue_waiting.pop_front();
  }
}

// The queue's time from its last change to `t`, with the values it held, added to the buckets it
// crosses while the loader is active.
void Summaries::Impl::queue_cover(std::pair<int64_t, int64_t> key, QueueState& q, int64_t t) {
  if (q.active) queue_cover(key, q.since, t, q.ready, q.flight);
  q.since = std::max(q.since, t);
}

void Summaries::Impl::queue_cover(std::pair<int64_t, int64_t> key, int64_t since, int64_t t, int64_t ready,
                                  int64_t flight) {
  if (t <= since) return;
  // A loader active for more than 10 days without a single event is a damaged file's times: its
  // buckets are not walked.
  constexpr int64_t kMaxCoverNs = int64_t{10} * 86400 * 1'000'000'000;
  int64_t length = 0;
  if (__builtin_sub_overflow(t, since, &length) || length > kMaxCoverNs) return;
  queues.see(t);
  for (size_t l = 0; l < kLevels; ++l) {
    const int64_t len = kSummaryLevelsNs[l];
    for (int64_t b = summary_bucket(since, len), last = summary_bucket(t - 1, len); b <= last; ++b) {
      const int64_t from = std::max(since, saturating_mul(b, len)), to = std::min(t, saturating_mul(b + 1, len));
      const int64_t d = to - from;
      if (d <= 0) continue;
      QueueFigures held;
      held.covered_ns = d;
      held.ready_ns = saturating_mul(ready, d);
      held.flight_ns = saturating_mul(flight, d);
      held.empty_ns = ready == 0 ? d : 0;
      held.ready_min = held.ready_max = ready;
      held.flight_min = held.flight_max = flight;
      queues.at({l, b, key.first, key.second}, error).merge(held);
    }
  }
}

void Summaries::Impl::queue_apply(const QueueEvent& e) {
  if (e.t < queue_done) ++queue_late;
  const int64_t t = std::max(e.t, queue_done);
  queue_done = t;
  auto proc = thread_process.find(e.thread_id);
  if (proc == thread_process.end()) return;
  std::pair<int64_t, int64_t> key{proc->second, e.arg0};
  if (e.kind == QueueEventKind::kEpochBegin) {
    if (queue_epoch.size() < kMaxQueues || queue_epoch.count(key) != 0) queue_epoch[key] = e.arg1;
  } else if (e.kind == QueueEventKind::kWorkerStart) {
    auto epoch = queue_epoch.find(key);
    if (worker_epoch.size() >= kMaxPending) worker_epoch.clear();
    if (epoch != queue_epoch.end()) worker_epoch[e.arg2] = epoch->second;
    return;
  } else if (e.kind == QueueEventKind::kPut) {
    // A torch worker's put (arg0: the batch) is its loader's, in the process that started it; the
    // reference loader's threads put in the training process (arg0: the loader).
    auto pid = process_pid.find(proc->second);
    auto w = pid == process_pid.end() ? worker_of.end() : worker_of.find(pid->second);
    if (w != worker_of.end()) {
      key = w->second;
      auto first = worker_epoch.find(pid->second);
      auto now = queue_epoch.find(key);
      int64_t epoch = 0;
      if (first != worker_epoch.end() && now != queue_epoch.end() &&
          (__builtin_add_overflow(first->second, e.arg2, &epoch) || epoch != now->second)) {
        ++queue_stale;
        return;
      }
    }
  }
  auto it = queue_state.find(key);
  if (it == queue_state.end()) {
    // A queue is a loader's that sends batches to workers: its first dl.sent opens it.
    if (e.kind != QueueEventKind::kSent || e.arg0 < 0 || queue_state.size() >= kMaxQueues) return;
    it = queue_state.emplace(key, QueueState{}).first;
    it->second.since = t;
  }
  QueueState& q = it->second;
  queue_cover(key, q, t);
  switch (e.kind) {
    case QueueEventKind::kWorkerStart: break;
    case QueueEventKind::kEpochBegin:
    case QueueEventKind::kEpochEnd:
      // A new iterator, or the end of one: what it had sent or queued is gone with it.
      q.flight = q.ready = 0;
      q.active = false;
      break;
    case QueueEventKind::kSent: ++q.flight; break;
    case QueueEventKind::kPut:
      q.flight = std::max<int64_t>(0, q.flight - 1);
      ++q.ready;
      break;
    case QueueEventKind::kNextStart:
      if (!q.active && e.t < t) {
        // Came after its time had gone by: the time from the call's start is covered with the
        // values the queue held then, as far back as they are known.
        for (size_t i = 0; i < q.idle.size(); ++i) {
          const int64_t from = std::max(e.t, q.idle[i][0]);
          const int64_t to = i + 1 < q.idle.size() ? q.idle[i + 1][0] : t;
          queue_cover(key, from, to, q.idle[i][1], q.idle[i][2]);
        }
      }
      q.active = true;
      break;
    case QueueEventKind::kHanded: q.ready = std::max<int64_t>(0, q.ready - 1); break;
    case QueueEventKind::kStop: q.active = false; break;
  }
  if (q.active) {
    q.idle.clear();
  } else {
    if (q.idle.size() >= kMaxIdleChanges) q.idle.pop_front();
    q.idle.push_back({t, q.ready, q.flight});
  }
}

// A worker's collate of batch `b`: sizes the hand-off already counted, or waits for it.
void Summaries::Impl::size_later(const BatchKey& b, int64_t samples) {
  auto it = unsized.find(b);
  if (it == unsized.end()) {
    if (sizes_n >= kMaxPending) {
      sizes.clear();
      sizes_n = 0;
    }
    sizes[b].push_back(samples);
    ++sizes_n;
    return;
  }
  const Handed h = it->second.front();
  for (size_t l = 0; l < kLevels; ++l) {
    HandoffAgg& a = handoffs.at({l, summary_bucket(h.end_ns, kSummaryLevelsNs[l]), h.thread_id, h.loader}, error);
    a.samples = saturating_add(a.samples, samples);
    if (a.unsized > 0) --a.unsized;
  }
  it->second.pop_front();
  --unsized_n;
  if (it->second.empty()) unsized.erase(it);
}

Summaries::Summaries(Db& db) : db_(db) {}
Summaries::~Summaries() = default;

Status Summaries::prepare() {
  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  struct Item {
    std::unique_ptr<Stmt>* slot;
    const char* sql;
  };
  const Item items[] = {
      {&m.span_get,
       "SELECT count, total_ns, min_ns, max_ns, sketch FROM span_summaries WHERE level_ns = ? AND bucket = ? AND "
       "thread_id = ? AND name_id = ? AND grp = ?"},
      {&m.span_put, "INSERT OR REPLACE INTO span_summaries VALUES (?,?,?,?,?,?,?,?,?,?)"},
      {&m.instant_get,
       "SELECT count FROM instant_summaries WHERE level_ns = ? AND bucket = ? AND thread_id = ? AND name_id = ? AND "
       "grp = ?"},
      {&m.instant_put, "INSERT OR REPLACE INTO instant_summaries VALUES (?,?,?,?,?,?)"},
      {&m.counter_get,
       "SELECT count, sum, min, max, last_ts_ns, last FROM counter_summaries WHERE level_ns = ? AND bucket = ? AND "
       "track_id = ?"},
      {&m.counter_put, "INSERT OR REPLACE INTO counter_summaries VALUES (?,?,?,?,?,?,?,?,?)"},
      {&m.gpu_get,
       "SELECT count, total_ns, bytes FROM gpu_summaries WHERE level_ns = ? AND bucket = ? AND process_id = ? AND "
       "device = ? AND kind = ?"},
      {&m.gpu_put, "INSERT OR REPLACE INTO gpu_summaries VALUES (?,?,?,?,?,?,?,?)"},
      {&m.handoff_get,
       "SELECT batches, samples, unsized, steps, step_total_ns, step_min_ns, step_max_ns, step_sketch, starts, "
       "start_total_ns FROM handoff_summaries WHERE level_ns = ? AND bucket = ? AND thread_id = ? AND loader = ?"},
      {&m.handoff_put, "INSERT OR REPLACE INTO handoff_summaries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"},
      {&m.queue_get,
       "SELECT covered_ns, ready_ns, ready_min, ready_max, empty_ns, flight_ns, flight_min, flight_max FROM "
       "queue_summaries WHERE level_ns = ? AND bucket = ? AND process_id = ? AND loader = ?"},
      {&m.queue_put, "INSERT OR REPLACE INTO queue_summaries VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"},
  };
  for (const Item& it : items) {
    auto s = db_.prepare(it.sql);
    if (!s.ok()) return Status::Error("cannot prepare statement: " + s.status().message());
    *it.slot = std::move(*s);
  }

  // Binds (level_ns, bucket, key columns...) from a key; returns the next parameter index.
  auto bind_span_key = [](Stmt& s, const SpanKey& k) {
    s.bind(1, kSummaryLevelsNs[std::get<0>(k)]).bind(2, std::get<1>(k)).bind(3, std::get<2>(k));
    s.bind(4, std::get<3>(k)).bind(5, std::get<4>(k));
    return 6;
  };
  // A read: the row when it is there; the statement is reset for its next use either way.
  auto read = [](Stmt& s, const std::function<Status(Stmt&)>& take) -> Result<bool> {
    const bool row = s.step();
    Status st = row ? take(s) : s.status();
    s.reset();
    if (!st.ok()) return st;
    return row;
  };

  m.spans.load = [&m, bind_span_key, read](const SpanKey& k, SpanAgg& a) {
    bind_span_key(*m.span_get, k);
    return read(*m.span_get, [&a](Stmt& s) {
      a.count = s.int64(0);
      a.total = s.int64(1);
      a.min = s.int64(2);
      a.max = s.int64(3);
      auto sk = DurationSketch::decode(s.blob(4));
      if (!sk.ok()) return sk.status();
      a.sketch = std::move(*sk);
      return Status::Ok();
    });
  };
  m.spans.store = [&m, bind_span_key](const SpanKey& k, const SpanAgg& a) {
    Stmt& s = *m.span_put;
    const int i = bind_span_key(s, k);
    s.bind(i, a.count).bind(i + 1, a.total).bind(i + 2, a.min).bind(i + 3, a.max).bind_blob(i + 4, a.sketch.encode());
    return s.run();
  };
  m.instants.load = [&m, bind_span_key, read](const SpanKey& k, InstantAgg& a) {
    bind_span_key(*m.instant_get, k);
    return read(*m.instant_get, [&a](Stmt& s) {
      a.count = s.int64(0);
      return Status::Ok();
    });
  };
  m.instants.store = [&m, bind_span_key](const SpanKey& k, const InstantAgg& a) {
    Stmt& s = *m.instant_put;
    s.bind(bind_span_key(s, k), a.count);
    return s.run();
  };
  auto bind_counter_key = [](Stmt& s, const CounterKey& k) {
    s.bind(1, kSummaryLevelsNs[std::get<0>(k)]).bind(2, std::get<1>(k)).bind(3, std::get<2>(k));
    return 4;
  };
  m.counters.load = [&m, bind_counter_key, read](const CounterKey& k, CounterAgg& a) {
    bind_counter_key(*m.counter_get, k);
    return read(*m.counter_get, [&a](Stmt& s) {
      a.count = s.int64(0);
      a.sum = s.real(1);
      a.min = s.real(2);
      a.max = s.real(3);
      a.last_ts = s.int64(4);
      a.last = s.real(5);
      return Status::Ok();
    });
  };
  m.counters.store = [&m, bind_counter_key](const CounterKey& k, const CounterAgg& a) {
    Stmt& s = *m.counter_put;
    const int i = bind_counter_key(s, k);
    s.bind(i, a.count).bind(i + 1, a.sum).bind(i + 2, a.min).bind(i + 3, a.max).bind(i + 4, a.last_ts);
    s.bind(i + 5, a.last);
    return s.run();
  };
  auto bind_gpu_key = [](Stmt& s, const GpuKey& k) {
    s.bind(1, kSummaryLevelsNs[std::get<0>(k)]).bind(2, std::get<1>(k)).bind(3, std::get<2>(k));
    s.bind(4, std::get<3>(k)).bind(5, std::string_view(std::get<4>(k)));
    return 6;
  };
  m.gpu.load = [&m, bind_gpu_key, read](const GpuKey& k, GpuAgg& a) {
    bind_gpu_key(*m.gpu_get, k);
    return read(*m.gpu_get, [&a](Stmt& s) {
      a.count = s.int64(0);
      a.total = s.int64(1);
      a.bytes = s.int64(2);
      return Status::Ok();
    });
  };
  m.gpu.store = [&m, bind_gpu_key](const GpuKey& k, const GpuAgg& a) {
    Stmt& s = *m.gpu_put;
    const int i = bind_gpu_key(s, k);
    s.bind(i, a.count).bind(i + 1, a.total).bind(i + 2, a.bytes);
    return s.run();
  };
  auto bind_handoff_key = [](Stmt& s, const HandoffKey& k) {
    s.bind(1, kSummaryLevelsNs[std::get<0>(k)]).bind(2, std::get<1>(k)).bind(3, std::get<2>(k));
    s.bind(4, std::get<3>(k));
    return 5;
  };
  m.handoffs.load = [&m, bind_handoff_key, read](const HandoffKey& k, HandoffAgg& a) {
    bind_handoff_key(*m.handoff_get, k);
    return read(*m.handoff_get, [&a](Stmt& s) {
      a.batches = s.int64(0);
      a.samples = s.int64(1);
      a.unsized = s.int64(2);
      a.steps = s.int64(3);
      a.step_total = s.int64(4);
      if (a.steps > 0) {
        a.step_min = s.int64(5);
        a.step_max = s.int64(6);
      }
      auto sk = DurationSketch::decode(s.blob(7));
      if (!sk.ok()) return sk.status();
      a.sketch = std::move(*sk);
      a.starts = s.int64(8);
      a.start_total = s.int64(9);
      return Status::Ok();
    });
  };
  m.handoffs.store = [&m, bind_handoff_key](const HandoffKey& k, const HandoffAgg& a) {
    Stmt& s = *m.handoff_put;
    const int i = bind_handoff_key(s, k);
    s.bind(i, a.batches).bind(i + 1, a.samples).bind(i + 2, a.unsized).bind(i + 3, a.steps);
    s.bind(i + 4, a.step_total).bind(i + 5, a.steps > 0 ? a.step_min : 0).bind(i + 6, a.steps > 0 ? a.step_max : 0);
    s.bind_blob(i + 7, a.sketch.encode()).bind(i + 8, a.starts).bind(i + 9, a.start_total);
    return s.run();
  };
  m.queues.load = [&m, bind_handoff_key, read](const QueueKey& k, QueueFigures& a) {
    bind_handoff_key(*m.queue_get, k);
    return read(*m.queue_get, [&a](Stmt& s) {
      int64_t* const columns[] = {&a.covered_ns, &a.ready_ns,  &a.ready_min,  &a.ready_max,
                                  &a.empty_ns,   &a.flight_ns, &a.flight_min, &a.flight_max};
      for (int c = 0; c < static_cast<int>(std::size(columns)); ++c) *columns[c] = s.int64(c);
      return Status::Ok();
    });
  };
  m.queues.store = [&m, bind_handoff_key](const QueueKey& k, const QueueFigures& a) {
    Stmt& s = *m.queue_put;
    int i = bind_handoff_key(s, k);
    for (int64_t v :
         {a.covered_ns, a.ready_ns, a.ready_min, a.ready_max, a.empty_ns, a.flight_ns, a.flight_min, a.flight_max})
      s.bind(i++, v);
    return s.run();
  };
  return Status::Ok();
}

void Summaries::on_string(uint32_t id, std::string_view value) {
  if (std::find(kGroupedByLoader.begin(), kGroupedByLoader.end(), value) != kGroupedByLoader.end()) {
    grouped_names_.insert(id);
  } else {
    grouped_names_.erase(id);
  }
  const std::pair<std::unordered_set<uint32_t>*, std::string_view> named[] = {{&next_names_, "dl.next"},
                                                                              {&collate_names_, "dl.collate"},
                                                                              {&worker_start_names_, "dl.worker_start"},
                                                                              {&epoch_begin_names_, "dl.epoch_begin"},
                                                                              {&epoch_end_names_, "dl.epoch_end"},
                                                                              {&sent_names_, "dl.sent"},
                                                                              {&put_names_, "dl.put"}};
  for (const auto& [set, name] : named) {
    if (value == name) {
      set->insert(id);
    } else {
      set->erase(id);
    }
  }
}

void Summaries::on_process(int64_t process_id, int64_t pid) { impl_->process_pid[process_id] = pid; }

void Summaries::on_thread(int64_t thread_id, int64_t process_id) { impl_->thread_process[thread_id] = process_id; }

void Summaries::add_span(const SpanRow& r) {
  if (!r.dur_ns) return;
  Impl& m = *impl_;
  const int64_t dur = *r.dur_ns;
  const int64_t grp = grouped_names_.count(r.name_id) ? r.arg0.value_or(-1) : -1;
  const int32_t bin = DurationSketch::bin_of(dur);
  m.spans.see(r.start_ns);
  for (size_t l = 0; l < kLevels; ++l) {
    SpanAgg& a = m.spans.at({l, summary_bucket(r.start_ns, kSummaryLevelsNs[l]), r.thread_id, r.name_id, grp}, m.error);
    ++a.count;
    a.total = saturating_add(a.total, dur);
    a.min = std::min(a.min, dur);
    a.max = std::max(a.max, dur);
    a.sketch.add_bin(bin, 1);
  }
  if (next_names_.count(r.name_id) != 0) {
    add_start(r);
    add_handoff(r);
    if (queue_from_rows_) queue_span(r);
  } else if (collate_names_.count(r.name_id) != 0) {
    add_collate(r);
  }
}

// A dl.collate: the thread's latest (a next() call on the same thread that ends after it may hand
// it), and, in a worker process, its batch's size for the hand-off.
void Summaries::add_collate(const SpanRow& r) {
  Impl& m = *impl_;
  const Impl::Collate c{r.arg0.value_or(-1), r.arg1.value_or(0), r.arg2.value_or(0), r.start_ns};
  m.last_collate[r.thread_id] = c;
  auto proc = m.thread_process.find(r.thread_id);
  if (proc == m.thread_process.end()) return;
  auto pid = m.process_pid.find(proc->second);
  if (pid == m.process_pid.end()) return;
  auto w = m.worker_of.find(pid->second);
  if (w != m.worker_of.end()) {  // a worker's: arg0 is the batch, arg1 its samples
    m.size_later({w->second.first, w->second.second, c.a0}, c.a1);
    return;
  }
  // Not known as a worker (yet: its dl.worker_start may come in a later drain), or the training
  // process's own (num_workers=0, sized by the next() around it): kept a little while.
  auto& early = m.early[pid->second];
  if (early.size() < Impl::kMaxEarly) early.emplace_back(c.a0, c.a1);
  if (m.early.size() > Impl::kMaxPending) m.early.clear();
}

// Any dl.next: the first of its loader on the thread since a dl.epoch_begin ends that loader's
// start, counted in the interval where the start began (the latest begin before the call: an
// __iter__ whose iterator was never asked for a batch is no start).
void Summaries::add_start(const SpanRow& r) {
  const int64_t loader = r.arg0.value_or(-1);
  Impl& m = *impl_;
  auto it = m.begun.find({r.thread_id, loader});
  if (it == m.begun.end()) return;
  std::optional<int64_t> begin;
  while (!it->second.empty() && it->second.front() <= r.start_ns) {
    begin = it->second.front();
    it->second.pop_front();
  }
  if (it->second.empty()) m.begun.erase(it);
  if (!begin) return;
  int64_t start = 0;  // a damaged file's times can be anything
  if (__builtin_sub_overflow(r.start_ns, *begin, &start)) start = std::numeric_limits<int64_t>::max();
  m.handoffs.see(*begin);
  for (size_t l = 0; l < kLevels; ++l) {
    HandoffAgg& a = m.handoffs.at({l, summary_bucket(*begin, kSummaryLevelsNs[l]), r.thread_id, loader}, m.error);
    ++a.starts;
    a.start_total = saturating_add(a.start_total, start);
  }
}

// A dl.next that handed a batch (arg1 >= 0): counted where it ended, with its size and step time.
void Summaries::add_handoff(const SpanRow& r) {
  const int64_t loader = r.arg0.value_or(-1), batch = r.arg1.value_or(-1);
  if (batch < 0 || loader < 0) return;  // StopIteration, or a call that raised
  Impl& m = *impl_;
  const int64_t end = saturating_add(r.start_ns, *r.dur_ns);
  std::optional<int64_t> samples;
  auto lc = m.last_collate.find(r.thread_id);
  if (lc != m.last_collate.end() && lc->second.a0 == loader && lc->second.a1 == batch &&
      lc->second.start >= r.start_ns) {
    samples = lc->second.a2;  // num_workers=0: collated inside this call
  }
  auto proc = m.thread_process.find(r.thread_id);
  const BatchKey key{proc != m.thread_process.end() ? proc->second : -1, loader, batch};
  if (!samples) {
    if (auto it = m.sizes.find(key); it != m.sizes.end()) {
      samples = it->second.front();
      it->second.pop_front();
      --m.sizes_n;
      if (it->second.empty()) m.sizes.erase(it);
    }
  }
  // The step that ends here: since the latest hand-off of the same loader on this thread.
  std::optional<int64_t> step;
  const std::pair<int64_t, int64_t> series{r.thread_id, loader};
  if (auto lh = m.last_handoff.find(series); lh != m.last_handoff.end()) {
    int64_t gap = 0;
    step = __builtin_sub_overflow(end, lh->second, &gap) ? (end > lh->second ? std::numeric_limits<int64_t>::max() : 0)
                                                         : std::max<int64_t>(0, gap);
    lh->second = std::max(lh->second, end);
  } else {
    m.last_handoff.emplace(series, end);
  }
  const int32_t bin = step ? DurationSketch::bin_of(*step) : 0;
  m.handoffs.see(end);
  for (size_t l = 0; l < kLevels; ++l) {
    HandoffAgg& a = m.handoffs.at({l, summary_bucket(end, kSummaryLevelsNs[l]), r.thread_id, loader}, m.error);
    ++a.batches;
    if (step) {
      ++a.steps;
      a.step_total = saturating_add(a.step_total, *step);
      a.step_min = std::min(a.step_min, *step);
      a.step_max = std::max(a.step_max, *step);
      a.sketch.add_bin(bin, 1);
    }
    if (samples) {
      a.samples = saturating_add(a.samples, *samples);
    } else {
      ++a.unsized;
    }
  }
  if (!samples) {
    if (m.unsized_n >= Impl::kMaxPending) {
      m.unsized.clear();
      m.unsized_n = 0;
    }
    m.unsized[key].push_back(Impl::Handed{end, r.thread_id, loader});
    ++m.unsized_n;
  }
}

// A dl.next, for the queue of its loader: the loader is active from the call's start; at its end it
// handed a batch (arg1 >= 0) or stopped.
void Summaries::queue_span(const SpanRow& r) {
  if (!r.arg0 || !r.dur_ns) return;
  Impl& m = *impl_;
  const int64_t end = saturating_add(r.start_ns, *r.dur_ns);
  m.queue_event(r.start_ns, r.thread_id, *r.arg0, Impl::QueueEventKind::kNextStart);
  m.queue_event(end, r.thread_id, *r.arg0,
                r.arg1.value_or(-1) >= 0 ? Impl::QueueEventKind::kHanded : Impl::QueueEventKind::kStop);
}

// dl.epoch_begin, dl.epoch_end, dl.sent and dl.put, for the queue of their loader.
void Summaries::queue_instant(const InstantRow& r) {
  if (!r.arg0) return;
  using K = Impl::QueueEventKind;
  const K kind = epoch_begin_names_.count(r.name_id)    ? K::kEpochBegin
                 : worker_start_names_.count(r.name_id) ? K::kWorkerStart
                 : epoch_end_names_.count(r.name_id)    ? K::kEpochEnd
                 : sent_names_.count(r.name_id)         ? K::kSent
                                                        : K::kPut;
  // An epoch_begin without num_workers (arg2) is not taken for one without workers.
  impl_->queue_event(r.ts_ns, r.thread_id, *r.arg0, kind, r.arg1.value_or(0),
                     r.arg2.value_or(kind == K::kEpochBegin ? -1 : 0));
}

bool Summaries::is_queue_instant(uint32_t name_id) const {
  return epoch_begin_names_.count(name_id) != 0 || epoch_end_names_.count(name_id) != 0 ||
         sent_names_.count(name_id) != 0 || put_names_.count(name_id) != 0 || worker_start_names_.count(name_id) != 0;
}

void Summaries::add_instant(const InstantRow& r) {
  Impl& m = *impl_;
  if (queue_from_rows_ && is_queue_instant(r.name_id)) queue_instant(r);
  const int64_t grp = grouped_names_.count(r.name_id) ? r.arg0.value_or(-1) : -1;
  m.instants.see(r.ts_ns);
  for (size_t l = 0; l < kLevels; ++l) {
    ++m.instants.at({l, summary_bucket(r.ts_ns, kSummaryLevelsNs[l]), r.thread_id, r.name_id, grp}, m.error).count;
  }
  if (epoch_begin_names_.count(r.name_id) != 0 && r.arg0) {
    auto& q = m.begun[{r.thread_id, *r.arg0}];
    if (q.size() >= Impl::kMaxBegun) q.pop_front();
    q.insert(std::upper_bound(q.begin(), q.end(), r.ts_ns), r.ts_ns);
    return;
  }
  if (worker_start_names_.count(r.name_id) == 0 || !r.arg0 || !r.arg2) return;
  // dl.worker_start (loader, worker, pid): that pid's collates size the loader's batches.
  auto proc = m.thread_process.find(r.thread_id);
  if (proc == m.thread_process.end()) return;
  if (m.worker_of.size() >= Impl::kMaxPending) m.worker_of.clear();
  m.worker_of[*r.arg2] = {proc->second, *r.arg0};
  if (auto early = m.early.find(*r.arg2); early != m.early.end()) {
    for (const auto& [batch, samples] : early->second) m.size_later({proc->second, *r.arg0, batch}, samples);
    m.early.erase(early);
  }
}

void Summaries::add_counter(const CounterRow& r) {
  Impl& m = *impl_;
  m.counters.see(r.ts_ns);
  for (size_t l = 0; l < kLevels; ++l) {
    CounterAgg& a = m.counters.at({l, summary_bucket(r.ts_ns, kSummaryLevelsNs[l]), r.track_id}, m.error);
    a.min = a.count ? std::min(a.min, r.value) : r.value;
    a.max = a.count ? std::max(a.max, r.value) : r.value;
    a.sum += r.value;
    ++a.count;
    if (r.ts_ns >= a.last_ts) {
      a.last_ts = r.ts_ns;
      a.last = r.value;
    }
  }
}

void Summaries::add_gpu(const GpuActivityRow& r) {
  Impl& m = *impl_;
  m.gpu.see(r.start_ns);
  for (size_t l = 0; l < kLevels; ++l) {
    GpuAgg& a = m.gpu.at({l, summary_bucket(r.start_ns, kSummaryLevelsNs[l]), r.process_id, r.device, r.kind}, m.error);
    ++a.count;
    a.total = saturating_add(a.total, std::max<int64_t>(0, r.dur_ns));
    if (r.kind == "memcpy" || r.kind == "memset") a.bytes = saturating_add(a.bytes, std::max<int64_t>(0, r.bytes));
  }
}

namespace {
// The index of `level_ns` in kSummaryLevelsNs, and where its bucket starts (held at the int64
// limits: a damaged file's bucket can be anything).
std::optional<size_t> level_index(int64_t level_ns) {
  for (size_t l = 0; l < kLevels; ++l) {
    if (kSummaryLevelsNs[l] == level_ns) return l;
  }
  return std::nullopt;
}
int64_t bucket_start(int64_t bucket, int64_t level_ns) {
  int64_t t = 0;
  if (__builtin_mul_overflow(bucket, level_ns, &t))
    return bucket > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  return t;
}
}  // namespace

void Summaries::add_summary(const SpanSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || r.count <= 0) return;
  Impl& m = *impl_;
  auto sketch = DurationSketch::decode(r.sketch);
  if (!sketch.ok()) {
    if (m.error.ok()) m.error = sketch.status();
    return;
  }
  m.spans.see(bucket_start(r.bucket, r.level_ns));
  SpanAgg& a = m.spans.at({*l, r.bucket, r.thread_id, r.name_id, r.grp}, m.error);
  a.count = saturating_add(a.count, r.count);
  a.total = saturating_add(a.total, r.total_ns);
  a.min = std::min(a.min, r.min_ns);
  a.max = std::max(a.max, r.max_ns);
  a.sketch.merge(*sketch);
}

void Summaries::add_summary(const InstantSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || r.count <= 0) return;
  Impl& m = *impl_;
  m.instants.see(bucket_start(r.bucket, r.level_ns));
  InstantAgg& a = m.instants.at({*l, r.bucket, r.thread_id, r.name_id, r.grp}, m.error);
  a.count = saturating_add(a.count, r.count);
}

void Summaries::add_summary(const CounterSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || r.count <= 0) return;
  Impl& m = *impl_;
  m.counters.see(bucket_start(r.bucket, r.level_ns));
  CounterAgg& a = m.counters.at({*l, r.bucket, r.track_id}, m.error);
  a.min = a.count ? std::min(a.min, r.min) : r.min;
  a.max = a.count ? std::max(a.max, r.max) : r.max;
  a.sum += r.sum;
  a.count = saturating_add(a.count, r.count);
  if (r.last_ts_ns >= a.last_ts) {
    a.last_ts = r.last_ts_ns;
    a.last = r.last;
  }
}

void Summaries::add_summary(const GpuSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || r.count <= 0) return;
  Impl& m = *impl_;
  m.gpu.see(bucket_start(r.bucket, r.level_ns));
  GpuAgg& a = m.gpu.at({*l, r.bucket, r.process_id, r.device, r.kind}, m.error);
  a.count = saturating_add(a.count, r.count);
  a.total = saturating_add(a.total, r.total_ns);
  a.bytes = saturating_add(a.bytes, r.bytes);
}

void Summaries::add_summary(const HandoffSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || (r.batches <= 0 && r.starts <= 0)) return;
  Impl& m = *impl_;
  auto sketch = DurationSketch::decode(r.step_sketch);
  if (!sketch.ok()) {
    if (m.error.ok()) m.error = sketch.status();
    return;
  }
  m.handoffs.see(bucket_start(r.bucket, r.level_ns));
  HandoffAgg& a = m.handoffs.at({*l, r.bucket, r.thread_id, r.loader}, m.error);
  a.batches = saturating_add(a.batches, r.batches);
  a.samples = saturating_add(a.samples, r.samples);
  a.unsized = saturating_add(a.unsized, r.unsized);
  a.starts = saturating_add(a.starts, r.starts);
  a.start_total = saturating_add(a.start_total, r.start_total_ns);
  if (r.steps > 0) {
    a.steps = saturating_add(a.steps, r.steps);
    a.step_total = saturating_add(a.step_total, r.step_total_ns);
    a.step_min = std::min(a.step_min, r.step_min_ns);
    a.step_max = std::max(a.step_max, r.step_max_ns);
    a.sketch.merge(*sketch);
  }
}

void Summaries::add_summary(const QueueSummaryRow& r) {
  const auto l = level_index(r.level_ns);
  if (!l || r.covered_ns <= 0) return;
  Impl& m = *impl_;
  m.queues.see(bucket_start(r.bucket, r.level_ns));
  m.queues.at({*l, r.bucket, r.process_id, r.loader}, m.error).merge(r);
}

void Summaries::finish_queues() {
  Impl& m = *impl_;
  m.queue_until(std::numeric_limits<int64_t>::max());
}

int64_t Summaries::queue_events_late() const { return impl_ ? impl_->queue_late : 0; }

size_t Summaries::queue_events_waiting() const {
  return impl_ ? impl_->queue_waiting.size() + impl_->queue_fresh.size() : 0;
}

Status Summaries::build_queues(const std::function<bool(int64_t thread_id)>& include) {
  Impl& m = *impl_;
  std::vector<uint32_t> instant_names, next_names(next_names_.begin(), next_names_.end());
  for (const auto* set : {&epoch_begin_names_, &epoch_end_names_, &sent_names_, &put_names_, &worker_start_names_})
    instant_names.insert(instant_names.end(), set->begin(), set->end());
  auto list = [](const std::vector<uint32_t>& ids) {
    std::string o = "-1";
    for (uint32_t id : ids) o += "," + std::to_string(id);
    return o;
  };
  // Both in time order (a dl.next by its start; its end waits among the events until its time).
  auto instants = db_.prepare("SELECT thread_id, name_id, ts_ns, arg0, arg1, arg2 FROM instants WHERE name_id IN (" +
                              list(instant_names) + ") ORDER BY ts_ns, id");
  if (!instants.ok()) return instants.status();
  auto spans = db_.prepare(
      "SELECT thread_id, start_ns, dur_ns, arg0, arg1 FROM spans WHERE dur_ns IS NOT NULL AND name_id IN (" +
      list(next_names) + ") ORDER BY start_ns, id");
  if (!spans.ok()) return spans.status();
  Stmt& in = **instants;
  Stmt& sp = **spans;
  bool has_in = in.step(), has_sp = sp.step();
  int64_t n = 0;
  while (has_in || has_sp) {
    if (has_in && (!has_sp || in.int64(2) <= sp.int64(1))) {
      InstantRow r;
      r.thread_id = in.int64(0);
      r.name_id = static_cast<uint32_t>(in.int64(1));
      r.ts_ns = in.int64(2);
      r.arg0 = in.is_null(3) ? std::nullopt : std::optional<int64_t>(in.int64(3));
      r.arg1 = in.is_null(4) ? std::nullopt : std::optional<int64_t>(in.int64(4));
      r.arg2 = in.is_null(5) ? std::nullopt : std::optional<int64_t>(in.int64(5));
      if (include(r.thread_id)) queue_instant(r);
      has_in = in.step();
    } else {
      SpanRow r;
      r.thread_id = sp.int64(0);
      r.start_ns = sp.int64(1);
      r.dur_ns = sp.int64(2);
      r.arg0 = sp.is_null(3) ? std::nullopt : std::optional<int64_t>(sp.int64(3));
      r.arg1 = sp.is_null(4) ? std::nullopt : std::optional<int64_t>(sp.int64(4));
      if (include(r.thread_id)) queue_span(r);
      has_sp = sp.step();
    }
    if (++n % 65536 == 0) {
      m.queue_until(saturating_add(m.queue_seen, -Impl::kQueueLagNs));
      if (Status w = m.queues.write_and_forget(); !w.ok()) return w;
    }
  }
  if (!in.status().ok()) return in.status();
  if (!sp.status().ok()) return sp.status();
  finish_queues();
  return Status::Ok();
}

Status Summaries::write() {
  Impl& m = *impl_;
  m.queue_until(std::max(saturating_add(m.queue_seen, -Impl::kQueueLagNs), queue_horizon_));
  if (!m.error.ok()) {
    Status e = m.error;
    m.error = Status::Ok();
    return e;
  }
  if (Status s = m.spans.write_and_forget(); !s.ok()) return s;
  if (Status s = m.instants.write_and_forget(); !s.ok()) return s;
  if (Status s = m.counters.write_and_forget(); !s.ok()) return s;
  if (Status s = m.handoffs.write_and_forget(); !s.ok()) return s;
  if (Status s = m.queues.write_and_forget(); !s.ok()) return s;
  return m.gpu.write_and_forget();
}

size_t Summaries::buckets_in_memory() const {
  return impl_ ? impl_->spans.size() + impl_->instants.size() + impl_->counters.size() + impl_->gpu.size() +
                     impl_->handoffs.size() + impl_->queues.size()
               : 0;
}

}  // namespace stallscope
