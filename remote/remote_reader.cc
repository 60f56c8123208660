// Recordings on another machine; see remote_reader.h.
#include "remote/remote_reader.h"

#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include "remote/codec.h"
#include "remote/link.h"
#include "remote/protocol.h"
#include "storage/reader.h"
#include "storage/recording_tail.h"

namespace stallscope::remote {
namespace {

// A recording open on a node: its handle there, opened again after a reconnection.
class Remote {
 public:
  Remote(std::shared_ptr<Link> link, std::string uri, std::string node_path)
      : link_(std::move(link)), uri_(std::move(uri)), node_path_(std::move(node_path)) {}
  ~Remote() {
    if (handle_) link_->tell(Method::kClose, handle_, "");
  }

  // The link up and the recording open on it (again, after a reconnection).
  Status ready(Method open_method, const std::function<void(Out&)>& open_args = {}) {
    if (Status s = link_->ensure(); !s.ok()) return s;
    const uint64_t epoch = link_->epoch();
    if (epoch == epoch_ && handle_) return Status::Ok();
    expected_.clear();  // sent on the lost connection
    Out a;
    a.str(node_path_);
    if (open_args) open_args(a);
    auto r = link_->call(open_method, 0, a.bytes());
    if (!r.ok()) return r.status().transient() ? r.status() : Status::Error(r.status().message());
    In in(*r);
    handle_ = in.u();
    epoch_ = epoch;
    reopened_ = true;
    return Status::Ok();
  }
  Result<std::string> call(Method m, const Out& args, const std::function<void(std::string_view)>& on_part = {}) {
    auto expected = expected_.find({m, args.bytes()});
    if (expected == expected_.end()) return link_->call(m, handle_, args.bytes(), on_part);
    auto p = std::move(expected->second);
    expected_.erase(expected);
    p->ahead = true;
    return link_->finish(p, on_part);
  }
  // Sends the call now; call() with the same method and arguments takes its answer (Reader::expect).
  void send_ahead(Method m, const Out& args) { expected_[{m, args.bytes()}] = link_->start(m, handle_, args.bytes()); }
  // Answers sent ahead and not asked for: dropped (a dropped call's frames go once it is done).
  // Traced, since each is a round trip that expect() meant to save: its call came with other
  // arguments, or not at all.
  void drop_expected() {
    if (trace_calls())
      for (const auto& entry : expected_)
        std::fprintf(stderr, "stallscope link: call %d on %llu sent ahead and not asked for\n",
                     static_cast<int>(entry.first.first), static_cast<unsigned long long>(handle_));
    expected_.clear();
  }
  void tell(Method m, const std::string& args = "") { link_->tell(m, handle_, args); }
  Link& link() { return *link_; }
  const std::string& uri() const { return uri_; }
  // Whether ready() opened the recording anew since the last ask (the node forgot any state).
  bool take_reopened() {
    const bool r = reopened_;
    reopened_ = false;
    return r;
  }

 private:
  std::shared_ptr<Link> link_;
  std::string uri_, node_path_;
  uint64_t handle_ = 0, epoch_ = 0;
  bool reopened_ = false;
  std::map<std::pair<Method, std::string>, std::shared_ptr<Link::Pending>> expected_;
};

Result<std::pair<std::shared_ptr<Link>, Endpoint>> link_of(const std::string& uri) {
  auto e = parse_uri(uri);
  if (!e.ok()) return e.status();
  if (e->path.empty())
    return Status::Error(uri +
                         " names no recording: add its path on the node (ssh://host/path/run.db), or pass "
                         "ssh://host to stallscope ui to choose among its sessions");
  return std::make_pair(Link::to(*e), *e);
}

class RemoteReader final : public Reader {
 public:
  explicit RemoteReader(std::unique_ptr<Remote> r) : r_(std::move(r)) {}
  Status ready() { return r_->ready(Method::kOpenReader); }

  const std::string& path() const override { return r_->uri(); }
  void prefer_large_scans() override {}  // the node's reads are its own business
  void expect(const std::function<void(Reader&)>& calls) override {
    // Those sent ahead earlier in the same read stay (the plan's meta() is asked for after the
    // overview's batch); the read's end drops what is left.
    if (!ready().ok()) return;
    sending_ahead_ = true;
    calls(*this);
    sending_ahead_ = false;
  }
  bool begin_read() override {
    if (!ready().ok()) return false;
    r_->tell(Method::kBeginRead);
    return true;
  }
  void end_read() override {
    r_->drop_expected();  // their answers were the read's that ends here
    r_->tell(Method::kEndRead);
  }

  Result<std::map<std::string, std::string>> meta() override {
    return value<std::map<std::string, std::string>>(Method::kMeta);
  }
  Result<std::map<uint32_t, std::string>> strings() override {
    return value<std::map<uint32_t, std::string>>(Method::kStrings);
  }
  Result<int64_t> string_count() override { return value<int64_t>(Method::kStringCount); }
  Result<std::vector<ProcessRow>> processes() override { return rows<ProcessRow>(Method::kProcesses); }
  Result<std::vector<ThreadRow>> threads() override { return rows<ThreadRow>(Method::kThreads); }
  Result<std::vector<CounterTrackRow>> counter_tracks() override {
    return rows<CounterTrackRow>(Method::kCounterTracks);
  }
  Result<std::vector<FlushRow>> flushes() override { return rows<FlushRow>(Method::kFlushes); }
  Result<std::optional<FlushRow>> last_flush() override { return value<std::optional<FlushRow>>(Method::kLastFlush); }
  Result<int64_t> count(const std::string& table) override {
    return value<int64_t>(Method::kCount, [&](Out& a) { a.str(table); });
  }
  Result<std::vector<SpanRow>> spans(int64_t t0, int64_t t1) override {
    return rows<SpanRow>(Method::kSpans, two(t0, t1));
  }
  Result<std::vector<SpanRow>> all_spans() override { return rows<SpanRow>(Method::kAllSpans); }
  Result<std::vector<InstantRow>> instants() override { return rows<InstantRow>(Method::kInstants); }
  Result<std::vector<CounterRow>> counters(int64_t track_id) override {
    return rows<CounterRow>(Method::kCounters, [&](Out& a) { a.i(track_id); });
  }
  Result<std::vector<GpuActivityRow>> gpu_activities() override { return rows<GpuActivityRow>(Method::kGpuActivities); }
  Result<std::vector<SpanRow>> spans_named(const std::vector<uint32_t>& ids) override {
    return rows<SpanRow>(Method::kSpansNamed, [&](Out& a) { put_list(a, ids); });
  }
  Result<std::vector<InstantRow>> instants_named(const std::vector<uint32_t>& ids) override {
    return rows<InstantRow>(Method::kInstantsNamed, [&](Out& a) { put_list(a, ids); });
  }
  Result<std::vector<SpanRow>> first_spans_per_thread(const std::vector<uint32_t>& ids) override {
    return rows<SpanRow>(Method::kFirstSpansPerThread, [&](Out& a) { put_list(a, ids); });
  }
  Result<std::vector<SpanRow>> spans_named_in(const std::vector<uint32_t>& ids, int64_t t0, int64_t t1) override {
    return rows<SpanRow>(Method::kSpansNamedIn, [&](Out& a) {
      put_list(a, ids);
      a.i(t0);
      a.i(t1);
    });
  }
  Result<std::vector<InstantRow>> instants_named_in(const std::vector<uint32_t>& ids, int64_t t0, int64_t t1) override {
    return rows<InstantRow>(Method::kInstantsNamedIn, [&](Out& a) {
      put_list(a, ids);
      a.i(t0);
      a.i(t1);
    });
  }
  Result<std::vector<CounterRow>> counters_of(const std::vector<int64_t>& tracks) override {
    return rows<CounterRow>(Method::kCountersOf, [&](Out& a) { put_list(a, tracks); });
  }
  Result<std::vector<CounterRow>> counters_of_from(const std::vector<int64_t>& tracks, int64_t t0,
                                                   int64_t t1) override {
    return rows<CounterRow>(Method::kCountersOfFrom, [&](Out& a) {
      put_list(a, tracks);
      a.i(t0);
      a.i(t1);
    });
  }
  Result<std::vector<GpuActivityRow>> gpu_activities_from(int64_t t0, int64_t t1) override {
    return rows<GpuActivityRow>(Method::kGpuActivitiesFrom, two(t0, t1));
  }
  Result<std::optional<int64_t>> time_of_last_rows(int64_t n) override {
    return value<std::optional<int64_t>>(Method::kTimeOfLastRows, [&](Out& a) { a.i(n); });
  }
  Result<bool> has_summaries() override { return value<bool>(Method::kHasSummaries); }
  Status build_temporary_summaries(const std::function<void(int64_t, int64_t)>&) override {
    return done(Method::kBuildTemporarySummaries);
  }
  Result<std::vector<SpanSummaryRow>> span_summaries(int64_t level, const std::vector<uint32_t>& ids) override {
    return rows<SpanSummaryRow>(Method::kSpanSummaries, [&](Out& a) {
      a.i(level);
      put_list(a, ids);
    });
  }
  Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level, const std::vector<uint32_t>& ids) override {
    return rows<InstantSummaryRow>(Method::kInstantSummaries, [&](Out& a) {
      a.i(level);
      put_list(a, ids);
    });
  }
  Result<std::optional<std::vector<HandoffSummaryRow>>> handoff_summaries(int64_t level) override {
    return value<std::optional<std::vector<HandoffSummaryRow>>>(Method::kHandoffSummaries, [&](Out& a) { a.i(level); });
  }
  Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level) override {
    return value<std::optional<std::vector<QueueSummaryRow>>>(Method::kQueueSummaries, [&](Out& a) { a.i(level); });
  }
  Result<std::optional<std::vector<QueueSummaryRow>>> queue_summaries(int64_t level, int64_t b0, int64_t b1) override {
    return value<std::optional<std::vector<QueueSummaryRow>>>(Method::kQueueSummariesRange, [&](Out& a) {
      a.i(level);
      a.i(b0);
      a.i(b1);
    });
  }
  Result<std::vector<InstantSummaryRow>> instant_summaries(int64_t level, const std::vector<uint32_t>& ids, int64_t b0,
                                                           int64_t b1) override {
    return rows<InstantSummaryRow>(Method::kInstantSummariesRange, [&](Out& a) {
      a.i(level);
      put_list(a, ids);
      a.i(b0);
      a.i(b1);
    });
  }
  Status for_each_summary_row(const SummaryVisitor& to) override {
    return parts(Method::kForEachSummaryRow, {}, [&](In& in) {
      while (in.ok() && !in.at_end()) {
        switch (in.u()) {
          case 1: {
            auto r = get<SpanSummaryRow>(in);
            if (to.span && in.ok()) to.span(r);
            break;
          }
          case 2: {
            auto r = get<InstantSummaryRow>(in);
            if (to.instant && in.ok()) to.instant(r);
            break;
          }
          case 3: {
            auto r = get<CounterSummaryRow>(in);
            if (to.counter && in.ok()) to.counter(r);
            break;
          }
          case 4: {
            auto r = get<GpuSummaryRow>(in);
            if (to.gpu && in.ok()) to.gpu(r);
            break;
          }
          case 5: {
            auto r = get<HandoffSummaryRow>(in);
            if (to.handoff && in.ok()) to.handoff(r);
            break;
          }
          case 6: {
            auto r = get<QueueSummaryRow>(in);
            if (to.queue && in.ok()) to.queue(r);
            break;
          }
          default: return false;
        }
      }
      return in.ok();
    });
  }
  Result<std::optional<int64_t>> first_span_bucket(int64_t level, uint32_t name, std::optional<int64_t> grp,
                                                   bool last) override {
    return value<std::optional<int64_t>>(Method::kFirstSpanBucket, [&](Out& a) {
      a.i(level);
      a.u(name);
      a.opt(grp);
      a.b(last);
    });
  }
  Result<std::optional<int64_t>> edge_instant_bucket(int64_t level, uint32_t name, bool last) override {
    return value<std::optional<int64_t>>(Method::kEdgeInstantBucket, [&](Out& a) {
      a.i(level);
      a.u(name);
      a.b(last);
    });
  }
  Result<int64_t> end_ns() override { return value<int64_t>(Method::kEndNs); }
  Result<int64_t> end_ns_of_flushes_and_processes() override {
    return value<int64_t>(Method::kEndNsOfFlushesAndProcesses);
  }
  Result<TableHeads> ids_before(int64_t t0) override {
    return value<TableHeads>(Method::kIdsBefore, [&](Out& a) { a.i(t0); });
  }
  Result<TableHeads> ids_through(int64_t t1) override {
    return value<TableHeads>(Method::kIdsThrough, [&](Out& a) { a.i(t1); });
  }
  Result<std::vector<std::pair<int64_t, int64_t>>> span_id_ranges(int64_t t0, int64_t t1) override {
    return rows<std::pair<int64_t, int64_t>>(Method::kSpanIdRanges, two(t0, t1));
  }
  Result<std::vector<SpanTotal>> span_totals(int64_t level) override {
    return rows<SpanTotal>(Method::kSpanTotals, [&](Out& a) { a.i(level); });
  }
  Result<std::vector<CounterTotal>> counter_totals(int64_t level) override {
    return rows<CounterTotal>(Method::kCounterTotals, [&](Out& a) { a.i(level); });
  }
  Result<std::vector<GpuTotal>> gpu_totals(int64_t level) override {
    return rows<GpuTotal>(Method::kGpuTotals, [&](Out& a) { a.i(level); });
  }
  Result<std::vector<std::pair<int64_t, int64_t>>> rows_per_bucket(int64_t level) override {
    return rows<std::pair<int64_t, int64_t>>(Method::kRowsPerBucket, [&](Out& a) { a.i(level); });
  }
  Result<std::map<std::string, uint32_t>> string_ids(const std::vector<std::string>& values) override {
    return value<std::map<std::string, uint32_t>>(Method::kStringIds, [&](Out& a) {
      a.u(values.size());
      for (const auto& v : values) a.str(v);
    });
  }
  Result<TableHeads> heads() override { return value<TableHeads>(Method::kHeads); }
  Result<TableHeads> next_ids(const TableHeads& after) override {
    return value<TableHeads>(Method::kNextIds, [&](Out& a) { put(a, after); });
  }
  Status for_each_string(int64_t after, const std::function<void(uint32_t, std::string)>& row) override {
    return parts(
        Method::kForEachString, [&](Out& a) { a.i(after); },
        [&](In& in) {
          while (in.ok() && !in.at_end()) {
            const auto id = static_cast<uint32_t>(in.u());
            std::string v = in.str();
            if (in.ok()) row(id, std::move(v));
          }
          return in.ok();
        });
  }
  Status for_each_span(int64_t after, int64_t upto, const std::function<void(const SpanRow&)>& row) override {
    return each(Method::kForEachSpan, after, upto, row);
  }
  Status for_each_instant(int64_t after, int64_t upto, const std::function<void(const InstantRow&)>& row) override {
    return each(Method::kForEachInstant, after, upto, row);
  }
  Status for_each_counter(int64_t after, int64_t upto, const std::function<void(const CounterRow&)>& row) override {
    return each(Method::kForEachCounter, after, upto, row);
  }
  Status for_each_gpu_activity(int64_t after, int64_t upto,
                               const std::function<void(const GpuActivityRow&)>& row) override {
    return each(Method::kForEachGpuActivity, after, upto, row);
  }
  Status for_each_flush(int64_t after, const std::function<void(int64_t, int64_t)>& row) override {
    return parts(
        Method::kForEachFlush, [&](Out& a) { a.i(after); },
        [&](In& in) {
          for (auto& p : get_list<std::pair<int64_t, int64_t>>(in))
            if (in.ok()) row(p.first, p.second);
          return in.ok();
        });
  }

 private:
  using Args = std::function<void(Out&)>;
  static Args two(int64_t a, int64_t b) {
    return [a, b](Out& o) {
      o.i(a);
      o.i(b);
    };
  }
  Status damaged() const { return Status::Error(r_->uri() + ": a damaged answer from the node"); }

  // A call whose parts go to `part` (false: damaged); returns the kDone's bytes.
  Result<std::string> run(Method m, const Args& args, const std::function<bool(In&)>& part) {
    if (Status s = ready(); !s.ok()) return s;
    Out a;
    if (args) args(a);
    if (sending_ahead_) {
      r_->send_ahead(m, a);
      return Status::Error("sent ahead");  // expect()'s calls: their results are not used
    }
    bool bad = false;
    auto r = r_->call(m, a, [&](std::string_view p) {
      if (bad || !part) return;
      In in(p);
      bad = !part(in);
    });
    if (!r.ok()) return r.status();
    if (bad) return damaged();
    return r;
  }
  template <typename T>
  Result<T> value(Method m, const Args& args = {}) {
    auto r = run(m, args, {});
    if (!r.ok()) return r.status();
    In in(*r);
    T v{};
    dec(in, v);
    if (!in.ok()) return damaged();
    return v;
  }
  template <typename T>
  Result<std::vector<T>> rows(Method m, const Args& args = {}) {
    std::vector<T> out;
    auto r = run(m, args, [&](In& in) {
      auto part = get_list<T>(in);
      if (out.empty())
        out = std::move(part);
      else
        out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
      return in.ok();
    });
    if (!r.ok()) return r.status();
    return out;
  }
  Status done(Method m, const Args& args = {}) { return run(m, args, {}).status(); }
  Status parts(Method m, const Args& args, const std::function<bool(In&)>& part) { return run(m, args, part).status(); }
  template <typename T>
  Status each(Method m, int64_t after, int64_t upto, const std::function<void(const T&)>& row) {
    return parts(m, two(after, upto), [&](In& in) {
      for (const T& r : get_list<T>(in))
        if (in.ok()) row(r);
      return in.ok();
    });
  }

  std::unique_ptr<Remote> r_;
  bool sending_ahead_ = false;
};

// A sink's calls as the node streamed them, handed to the real sink here.
bool replay(In& in, RowSink& sink, std::map<int64_t, bool>& decided) {
  Prev instant, span, counter, gpu;
  while (in.ok() && !in.at_end()) {
    switch (static_cast<SinkCall>(in.u())) {
      case SinkCall::kMeta: {
        auto m = get_string_map(in);
        if (in.ok()) sink.on_meta(m);
        break;
      }
      case SinkCall::kString: {
        const auto id = static_cast<uint32_t>(in.u());
        std::string v = in.str();
        if (in.ok()) sink.on_string(id, std::move(v));
        break;
      }
      case SinkCall::kProcesses: {
        auto v = get_list<ProcessRow>(in);
        if (in.ok()) sink.on_processes(v);
        break;
      }
      case SinkCall::kThreads: {
        auto v = get_list<ThreadRow>(in);
        if (in.ok()) sink.on_threads(v);
        break;
      }
      case SinkCall::kCounterTracks: {
        auto v = get_list<CounterTrackRow>(in);
        if (!in.ok()) break;
        for (const auto& t : v) decided[t.id] = sink.wants_counter_track(t);
        sink.on_counter_tracks(v);
        break;
      }
      case SinkCall::kInstants: {
        InstantRow r;
        get(in, r, instant);
        if (in.ok()) sink.on_instant(r);
        break;
      }
      case SinkCall::kSpans: {
        SpanRow r;
        get(in, r, span);
        if (in.ok()) sink.on_span(r);
        break;
      }
      case SinkCall::kCounters: {
        CounterRow r;
        get(in, r, counter);
        // The node sends a track it had not been told about; this sink may not want it.
        auto it = decided.find(r.track_id);
        if (in.ok() && (it == decided.end() || it->second)) sink.on_counter(r);
        break;
      }
      case SinkCall::kGpu: {
        GpuActivityRow r;
        get(in, r, gpu);
        if (in.ok()) sink.on_gpu(r);
        break;
      }
      case SinkCall::kFlush: {
        const int64_t ts = in.i();
        if (in.ok()) sink.on_flush(ts);
        break;
      }
      default: return false;
    }
  }
  return in.ok();
}

class RemoteTail final : public RecordingTail {
 public:
  explicit RemoteTail(std::unique_ptr<Remote> r) : r_(std::move(r)) {}
  Status ready() {
    return r_->ready(Method::kOpenTail, [this](Out& a) {
      put(a, cursor_.last);
      for (int64_t v : {cursor_.last_flush, cursor_.last_string, cursor_.strings_seen, cursor_.from_ns, cursor_.to_ns})
        a.i(v);
    });
  }

  Result<PollStats> poll(RowSink& sink, int64_t max_rows) override {
    return read(sink, Method::kTailPoll, [&](Out& a) { a.i(max_rows); });
  }
  const std::string& path() const override { return r_->uri(); }
  Status start_from(int64_t t0) override {
    if (Status s = ready(); !s.ok()) return s;
    Out a;
    a.i(t0);
    auto r = r_->call(Method::kTailStartFrom, a);
    if (!r.ok()) return r.status();
    cursor_.from_ns = t0;
    cursor_.to_ns = INT64_MAX;
    return Status::Ok();
  }
  Result<PollStats> read_window(RowSink& sink, int64_t t0, int64_t t1) override {
    return read(sink, Method::kTailReadWindow, [&](Out& a) {
      a.i(t0);
      a.i(t1);
    });
  }
  int64_t file_bytes() override { return file_bytes_; }
  bool recorder_alive(const std::map<std::string, std::string>&) override { return alive_; }

 private:
  Result<PollStats> read(RowSink& sink, Method m, const std::function<void(Out&)>& args) {
    if (Status s = ready(); !s.ok()) return s;
    Out a;
    args(a);
    a.u(decided_.size());
    for (const auto& [id, want] : decided_) {
      a.i(id);
      a.b(want);
    }
    // The parts are kept until the poll's end has come: a poll cut off by a lost link hands the
    // sink nothing, and is read again whole from the same cursor.
    std::vector<std::string> parts;
    auto r = r_->call(m, a, [&](std::string_view p) { parts.emplace_back(p); });
    if (!r.ok()) return r.status();
    bool bad = false;
    for (const std::string& p : parts) {
      In part(p);
      if (!replay(part, sink, decided_)) bad = true;
    }
    In in(*r);
    PollStats st;
    for (int64_t* v : {&st.rows, &st.spans, &st.instants, &st.counters, &st.gpu, &st.pending}) *v = in.i();
    file_bytes_ = in.i();
    alive_ = in.b();
    TailCursor c;
    c.last = get<TableHeads>(in);
    for (int64_t* v : {&c.last_flush, &c.last_string, &c.strings_seen, &c.from_ns, &c.to_ns}) *v = in.i();
    if (bad || !in.ok()) return Status::Error(r_->uri() + ": a damaged answer from the node");
    if (m == Method::kTailPoll) cursor_ = c;  // a window's read does not move the polls
    return st;
  }

  std::unique_ptr<Remote> r_;
  TailCursor cursor_;
  std::map<int64_t, bool> decided_;
  int64_t file_bytes_ = -1;
  bool alive_ = false;
};

template <typename T>
Result<std::unique_ptr<T>> open_remote(const std::string& uri) {
  auto l = link_of(uri);
  if (!l.ok()) return l.status();
  auto obj = std::make_unique<T>(std::make_unique<Remote>(l->first, uri, l->second.path));
  if (Status s = obj->ready(); !s.ok()) return s;
  return obj;
}

}  // namespace

void install() {
  for (const char* scheme : {"ssh", "tcp"}) {
    Reader::set_uri_opener(scheme, [](const std::string& uri) -> Result<std::unique_ptr<Reader>> {
      auto r = open_remote<RemoteReader>(uri);
      if (!r.ok()) return r.status();
      return std::unique_ptr<Reader>(std::move(*r));
    });
    RecordingTail::set_uri_opener(scheme, [](const std::string& uri) -> Result<std::unique_ptr<RecordingTail>> {
      auto r = open_remote<RemoteTail>(uri);
      if (!r.ok()) return r.status();
      return std::unique_ptr<RecordingTail>(std::move(*r));
    });
  }
}

bool names_node_only(const std::string& uri) {
  auto e = parse_uri(uri);
  return e.ok() && e->path.empty();
}

std::string recording_uri(const std::string& uri, const std::string& node_path) {
  auto e = parse_uri(uri);
  if (!e.ok()) return uri;
  std::string out = e->node() + (node_path.rfind('/', 0) == 0 ? "" : "/") + node_path;
  if (!e->token.empty()) out += "?token=" + e->token;
  return out;
}

Result<NodeSessions> list_sessions(const std::string& uri) {
  auto e = parse_uri(uri);
  if (!e.ok()) return e.status();
  auto link = Link::to(*e);
  if (Status s = link->ensure(); !s.ok()) return s;
  auto r = link->call(Method::kListSessions, 0, "");
  if (!r.ok()) return r.status();
  In in(*r);
  NodeSessions out;
  out.peer = link->peer();
  out.live = get_list<SessionEntry>(in);
  out.recent = get_list<SessionEntry>(in);
  if (!in.ok()) return Status::Error(uri + ": a damaged answer from the node");
  return out;
}

int64_t bytes_received() { return Link::total_bytes_in(); }

}  // namespace stallscope::remote
