// `stallscope serve`; see server.h. One thread reads the client's frames; each opened recording
// (a handle) has a worker thread of its own that answers its calls in order, so a long analysis
// read does not hold back the live tail's polls. Answers are written whole frames at a time under
// one lock.
#include "remote/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "remote/codec.h"
#include "remote/protocol.h"
#include "remote/wire.h"
#include "stallscope/version.h"
#include "storage/local_tail.h"
#include "storage/reader.h"
#include "storage/session_registry.h"

namespace stallscope::remote {
namespace {

std::string user_name() {
  if (const passwd* pw = ::getpwuid(::geteuid())) return pw->pw_name;
  return "uid " + std::to_string(::geteuid());
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

// A path as the client wrote it: "~" and "~/..." are the home folder's.
std::string resolve(const std::string& path) {
  if (path == "~" || path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (home && *home) return std::string(home) + path.substr(1);
  }
  return path;
}

// Refuses what this user may not read, in the words of the node (serve runs as the ssh user).
Status readable(const std::string& path) {
  if (Reader::is_uri(path)) return Status::Error(path + ": serve opens files on its own machine only");
  if (::access(path.c_str(), R_OK) != 0 && errno == EACCES)
    return Status::Error("cannot read " + path + " on " + host_name() + " as " + user_name() +
                         ": permission denied (serve reads as the ssh user; the recording's owner can share it "
                         "with chmod g+r or a copy)");
  return Status::Ok();
}

// A RowSink that sends what a tail's poll reads as kPart frames: each call a tag and its
// arguments. Counter samples may come from the tail's second thread: they have a buffer and lock
// of their own.
class StreamSink : public RowSink {
 public:
  using Send = std::function<void(std::string)>;
  StreamSink(Send send, std::map<int64_t, bool> decided) : send_(std::move(send)), decided_(std::move(decided)) {}

  void on_meta(const std::map<std::string, std::string>& meta) override {
    meta_ = meta;
    o_.u(static_cast<uint8_t>(SinkCall::kMeta));
    put_map(o_, meta);
    maybe_flush();
  }
  void on_string(uint32_t id, std::string value) override {
    o_.u(static_cast<uint8_t>(SinkCall::kString));
    o_.u(id);
    o_.str(value);
    maybe_flush();
  }
  void on_processes(const std::vector<ProcessRow>& all) override { whole(SinkCall::kProcesses, all); }
  void on_threads(const std::vector<ThreadRow>& all) override { whole(SinkCall::kThreads, all); }
  void on_counter_tracks(const std::vector<CounterTrackRow>& all) override { whole(SinkCall::kCounterTracks, all); }
  bool wants_counter_track(const CounterTrackRow& t) const override {
    auto it = decided_.find(t.id);
    return it == decided_.end() || it->second;  // a track the client has not seen yet is sent
  }
  void on_instant(const InstantRow& r) override { row(SinkCall::kInstants, r, instant_prev_); }
  void on_span(const SpanRow& r) override { row(SinkCall::kSpans, r, span_prev_); }
  void on_gpu(const GpuActivityRow& r) override { row(SinkCall::kGpu, r, gpu_prev_); }
  void on_counter(const CounterRow& r) override {
    std::lock_guard<std::mutex> lock(counter_mu_);
    counters_.u(static_cast<uint8_t>(SinkCall::kCounters));
    put(counters_, r, counter_prev_);
    if (++counter_rows_ >= kRowsPerPart) {
      send_(counters_.take());
      counter_rows_ = 0;
      counter_prev_ = {};
    }
  }
  void on_flush(int64_t ts_ns) override {
    o_.u(static_cast<uint8_t>(SinkCall::kFlush));
    o_.i(ts_ns);
    maybe_flush();
  }
  // Sends what is buffered.
  void finish() {
    if (!o_.bytes().empty()) send_(o_.take());
    std::lock_guard<std::mutex> lock(counter_mu_);
    if (!counters_.bytes().empty()) send_(counters_.take());
  }
  const std::map<std::string, std::string>& meta() const { return meta_; }

 private:
  template <typename T>
  void whole(SinkCall tag, const std::vector<T>& rows) {
    o_.u(static_cast<uint8_t>(tag));
    put_list(o_, rows);
    maybe_flush();
  }
  template <typename T>
  void row(SinkCall tag, const T& r, Prev& prev) {
    o_.u(static_cast<uint8_t>(tag));
    put(o_, r, prev);
    if (++rows_ >= kRowsPerPart) flush();
  }
  void maybe_flush() {
    if (o_.bytes().size() >= (1u << 20)) flush();
  }
  void flush() {
    send_(o_.take());
    rows_ = 0;
    instant_prev_ = span_prev_ = gpu_prev_ = {};
  }
  Send send_;
  std::map<int64_t, bool> decided_;
  std::map<std::string, std::string> meta_;
  Out o_;
  size_t rows_ = 0;
  Prev instant_prev_, span_prev_, gpu_prev_;
  std::mutex counter_mu_;
  Out counters_;
  size_t counter_rows_ = 0;
  Prev counter_prev_;
};

std::map<int64_t, bool> get_decided(In& in) {
  std::map<int64_t, bool> m;
  const size_t n = in.count();
  for (size_t k = 0; k < n && in.ok(); ++k) {
    const int64_t id = in.i();
    m[id] = in.b();
  }
  return m;
}

TailCursor get_cursor(In& in) {
  TailCursor c;
  c.last = get<TableHeads>(in);
  c.last_flush = in.i();
  c.last_string = in.i();
  c.strings_seen = in.i();
  c.from_ns = in.i();
  c.to_ns = in.i();
  return c;
}

struct Handle {
  std::unique_ptr<Reader> reader;
  std::unique_ptr<LocalTail> tail;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Frame> queue;
  bool stop = false;
  std::thread worker;
};

class Connection {
 public:
  Connection(int in, int out, const ServeOptions& opt) : in_(in), out_(out), opt_(opt) {}
  ~Connection() {
    for (auto& [id, h] : handles_) stop(*h);
  }

  int run(std::string* error) {
    bool eof = false;
    auto hello = read_frame(in_, &eof);
    if (!hello.ok()) return eof ? 0 : refuse(hello.status().message(), error);
    if (hello->type != FrameType::kHello) return refuse("malformed exchange: the first frame is not a hello", error);
    In in(hello->payload);
    const std::string client_version = in.str();
    const std::string token = in.str();
    if (!in.ok()) return refuse("malformed hello", error);
    Out o;
    if (!opt_.token.empty() && token != opt_.token) {
      o.b(false);
      o.str(
          "the token is missing or wrong: pass the one `stallscope serve --port` printed (tcp://HOST:PORT/?token=...)");
      send(FrameType::kHello, 0, o.take(), true);
      return refuse("refused a connection without the right token", error);
    }
    o.b(true);
    o.str(STALLSCOPE_VERSION);
    o.str(host_name());
    o.str(user_name());
    send(FrameType::kHello, 0, o.take(), true);
    while (!broken_) {
      auto f = read_frame(in_, &eof);
      if (!f.ok()) return eof ? 0 : refuse(f.status().message(), error);
      if (f->type != FrameType::kRequest) return refuse("malformed frame: a client sends requests only", error);
      if (!dispatch(std::move(*f), error)) return 2;
    }
    return 0;
  }

 private:
  int refuse(const std::string& line, std::string* error) {
    if (error) *error = line;
    return 2;
  }

  void send(FrameType type, uint32_t id, std::string payload, bool always = false) {
    if (id == 0 && !always) return;  // a request that wants no answer
    const std::string bytes = encode_frame(Frame{type, id, std::move(payload), 0});
    std::lock_guard<std::mutex> lock(write_mu_);
    if (broken_) return;
    if (!write_all(out_, bytes).ok()) broken_ = true;  // the client went away: stop reading too
  }
  void ok(uint32_t id, Out& o) {
    std::string p(1, '\1');
    p += o.bytes();
    send(FrameType::kDone, id, std::move(p));
  }
  void fail(uint32_t id, const std::string& message) {
    Out o;
    o.b(false);
    o.str(message);
    send(FrameType::kDone, id, o.take());
  }
  template <typename T>
  void result(uint32_t id, Result<T> r) {
    if (!r.ok()) return fail(id, r.status().message());
    Out o;
    enc(o, *r);
    ok(id, o);
  }
  // A list, in parts of kRowsPerPart rows, then an empty kDone.
  template <typename T>
  void list(uint32_t id, Result<std::vector<T>> r) {
    if (!r.ok()) return fail(id, r.status().message());
    for (size_t k = 0; k < r->size(); k += kRowsPerPart) {
      Out o;
      const size_t n = std::min(kRowsPerPart, r->size() - k);
      o.u(n);
      Prev p;
      for (size_t j = 0; j < n; ++j) put(o, (*r)[k + j], p);
      send(FrameType::kPart, id, o.take());
    }
    Out none;
    ok(id, none);
  }
  void status(uint32_t id, const Status& s) {
    if (!s.ok()) return fail(id, s.message());
    Out o;
    ok(id, o);
  }
  // Rows streamed to a callback: sent in parts as they come.
  template <typename T>
  struct Streamer {
    Streamer(Connection& conn, uint32_t call) : c(conn), id(call) {}
    Connection& c;
    uint32_t id;
    Out o;
    size_t n = 0;
    Prev p;
    void add(const T& r) {
      put(o, r, p);
      if (++n >= kRowsPerPart) flush();
    }
    void flush() {
      if (n == 0) return;
      Out framed;
      framed.u(n);
      framed.bytes() += o.bytes();
      c.send(FrameType::kPart, id, framed.take());
      o = Out();
      n = 0;
      p = {};
    }
  };

  // Returns false on a request this build cannot read (after the one line in *error).
  bool dispatch(Frame f, std::string* error) {
    In in(f.payload);
    const auto method = static_cast<Method>(in.u());
    const uint64_t handle = in.u();
    if (!in.ok()) return refuse("malformed request", error) == 0;
    switch (method) {
      case Method::kOpenReader:
      case Method::kOpenTail: {
        const std::string path = resolve(in.str());
        TailCursor cursor;
        if (method == Method::kOpenTail) cursor = get_cursor(in);
        if (!in.ok()) return refuse("malformed request", error) == 0;
        if (Status s = readable(path); !s.ok()) {
          fail(f.id, s.message());
          return true;
        }
        auto h = std::make_unique<Handle>();
        if (method == Method::kOpenReader) {
          auto r = Reader::open(path);
          if (!r.ok()) {
            fail(f.id, r.status().message());
            return true;
          }
          h->reader = std::move(*r);
        } else {
          auto t = LocalTail::open_local(path);
          if (!t.ok()) {
            fail(f.id, t.status().message());
            return true;
          }
          (*t)->resume(cursor);
          h->tail = std::move(*t);
        }
        const uint64_t id = next_handle_++;
        Handle* raw = h.get();
        h->worker = std::thread([this, raw] { work(*raw); });
        handles_[id] = std::move(h);
        Out o;
        o.u(id);
        o.str(path);
        ok(f.id, o);
        return true;
      }
      case Method::kClose: {
        auto it = handles_.find(handle);
        if (it != handles_.end()) {
          stop(*it->second);
          handles_.erase(it);
        }
        Out o;
        ok(f.id, o);
        return true;
      }
      case Method::kListSessions: {
        Out o;
        put_list(o, list_live_sessions());
        put_list(o, list_recent_sessions());
        ok(f.id, o);
        return true;
      }
      default: {
        auto it = handles_.find(handle);
        if (it == handles_.end()) {
          fail(f.id, "no recording is open as handle " + std::to_string(handle) + " (it was closed)");
          return true;
        }
        Handle& h = *it->second;
        std::lock_guard<std::mutex> lock(h.mu);
        h.queue.push_back(std::move(f));
        h.cv.notify_one();
        return true;
      }
    }
  }

  void stop(Handle& h) {
    {
      std::lock_guard<std::mutex> lock(h.mu);
      h.stop = true;
      h.cv.notify_one();
    }
    if (h.worker.joinable()) h.worker.join();
  }

  void work(Handle& h) {
    while (true) {
      Frame f;
      {
        std::unique_lock<std::mutex> lock(h.mu);
        h.cv.wait(lock, [&] { return h.stop || !h.queue.empty(); });
        if (h.queue.empty()) return;
        f = std::move(h.queue.front());
        h.queue.pop_front();
      }
      In in(f.payload);
      const auto method = static_cast<Method>(in.u());
      (void)in.u();  // the handle
      if (h.reader)
        answer_reader(*h.reader, method, in, f.id);
      else
        answer_tail(*h.tail, method, in, f.id);
    }
  }

  static std::vector<uint32_t> u32s(In& in) { return get_list<uint32_t>(in); }
  static std::vector<int64_t> i64s(In& in) { return get_list<int64_t>(in); }

  void answer_reader(Reader& r, Method m, In& in, uint32_t id) {
    switch (m) {
      case Method::kBeginRead:
        if (!r.begin_read()) fail(id, "could not begin a read");
        return;
      case Method::kEndRead: r.end_read(); return;
      case Method::kPreferLargeScans: r.prefer_large_scans(); return;
      case Method::kMeta: return result(id, r.meta());
      case Method::kStrings: return result(id, r.strings());
      case Method::kStringCount: return result(id, r.string_count());
      case Method::kProcesses: return list(id, r.processes());
      case Method::kThreads: return list(id, r.threads());
      case Method::kCounterTracks: return list(id, r.counter_tracks());
      case Method::kFlushes: return list(id, r.flushes());
      case Method::kLastFlush: return result(id, r.last_flush());
      case Method::kCount: {
        const std::string table = in.str();
        return result(id, r.count(table));
      }
      case Method::kSpans: {
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.spans(t0, t1));
      }
      case Method::kAllSpans: return list(id, r.all_spans());
      case Method::kInstants: return list(id, r.instants());
      case Method::kCounters: return list(id, r.counters(in.i()));
      case Method::kGpuActivities: return list(id, r.gpu_activities());
      case Method::kSpansNamed: return list(id, r.spans_named(u32s(in)));
      case Method::kInstantsNamed: return list(id, r.instants_named(u32s(in)));
      case Method::kFirstSpansPerThread: return list(id, r.first_spans_per_thread(u32s(in)));
      case Method::kSpansNamedIn: {
        auto names = u32s(in);
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.spans_named_in(names, t0, t1));
      }
      case Method::kInstantsNamedIn: {
        auto names = u32s(in);
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.instants_named_in(names, t0, t1));
      }
      case Method::kCountersOf: return list(id, r.counters_of(i64s(in)));
      case Method::kCountersOfFrom: {
        auto tracks = i64s(in);
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.counters_of_from(tracks, t0, t1));
      }
      case Method::kGpuActivitiesFrom: {
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.gpu_activities_from(t0, t1));
      }
      case Method::kTimeOfLastRows: return result(id, r.time_of_last_rows(in.i()));
      case Method::kHasSummaries: return result(id, r.has_summaries());
      case Method::kBuildTemporarySummaries: return status(id, r.build_temporary_summaries());
      case Method::kSpanSummaries: {
        const int64_t level = in.i();
        return list(id, r.span_summaries(level, u32s(in)));
      }
      case Method::kInstantSummaries: {
        const int64_t level = in.i();
        return list(id, r.instant_summaries(level, u32s(in)));
      }
      case Method::kInstantSummariesRange: {
        const int64_t level = in.i();
        auto names = u32s(in);
        const int64_t b0 = in.i(), b1 = in.i();
        return list(id, r.instant_summaries(level, names, b0, b1));
      }
      case Method::kHandoffSummaries: return result(id, r.handoff_summaries(in.i()));
      case Method::kQueueSummaries: return result(id, r.queue_summaries(in.i()));
      case Method::kQueueSummariesRange: {
        const int64_t level = in.i(), b0 = in.i(), b1 = in.i();
        return result(id, r.queue_summaries(level, b0, b1));
      }
      case Method::kForEachSummaryRow: {
        // Each table in parts of its own, tagged by the table's number.
        Out o;
        size_t n = 0;
        auto flush = [&] {
          if (n == 0) return;
          send(FrameType::kPart, id, o.take());
          n = 0;
        };
        auto add = [&](uint8_t tag, auto&& row) {
          o.u(tag);
          put(o, row);
          if (++n >= kRowsPerPart) flush();
        };
        Reader::SummaryVisitor v;
        v.span = [&](const SpanSummaryRow& x) { add(1, x); };
        v.instant = [&](const InstantSummaryRow& x) { add(2, x); };
        v.counter = [&](const CounterSummaryRow& x) { add(3, x); };
        v.gpu = [&](const GpuSummaryRow& x) { add(4, x); };
        v.handoff = [&](const HandoffSummaryRow& x) { add(5, x); };
        v.queue = [&](const QueueSummaryRow& x) { add(6, x); };
        Status s = r.for_each_summary_row(v);
        flush();
        return status(id, s);
      }
      case Method::kFirstSpanBucket: {
        const int64_t level = in.i();
        const auto name = static_cast<uint32_t>(in.u());
        const std::optional<int64_t> grp = in.opt();
        const bool last = in.b();
        return result(id, r.first_span_bucket(level, name, grp, last));
      }
      case Method::kEdgeInstantBucket: {
        const int64_t level = in.i();
        const auto name = static_cast<uint32_t>(in.u());
        const bool last = in.b();
        return result(id, r.edge_instant_bucket(level, name, last));
      }
      case Method::kEndNs: return result(id, r.end_ns());
      case Method::kEndNsOfFlushesAndProcesses: return result(id, r.end_ns_of_flushes_and_processes());
      case Method::kIdsBefore: return result(id, r.ids_before(in.i()));
      case Method::kIdsThrough: return result(id, r.ids_through(in.i()));
      case Method::kSpanIdRanges: {
        const int64_t t0 = in.i(), t1 = in.i();
        return list(id, r.span_id_ranges(t0, t1));
      }
      case Method::kSpanTotals: return list(id, r.span_totals(in.i()));
      case Method::kCounterTotals: return list(id, r.counter_totals(in.i()));
      case Method::kGpuTotals: return list(id, r.gpu_totals(in.i()));
      case Method::kRowsPerBucket: return list(id, r.rows_per_bucket(in.i()));
      case Method::kStringIds: {
        std::vector<std::string> values(in.count());
        for (auto& v : values) v = in.str();
        return result(id, r.string_ids(values));
      }
      case Method::kHeads: return result(id, r.heads());
      case Method::kNextIds: return result(id, r.next_ids(get<TableHeads>(in)));
      case Method::kForEachString: {
        Out o;
        size_t n = 0;
        Status s = r.for_each_string(in.i(), [&](uint32_t sid, std::string value) {
          o.u(sid);
          o.str(value);
          if (++n >= kRowsPerPart) {
            send(FrameType::kPart, id, o.take());
            n = 0;
          }
        });
        if (n) send(FrameType::kPart, id, o.take());
        return status(id, s);
      }
      case Method::kForEachSpan:
        return stream<SpanRow>(id, in, [&](int64_t a, int64_t b, auto&& f) { return r.for_each_span(a, b, f); });
      case Method::kForEachInstant:
        return stream<InstantRow>(id, in, [&](int64_t a, int64_t b, auto&& f) { return r.for_each_instant(a, b, f); });
      case Method::kForEachCounter:
        return stream<CounterRow>(id, in, [&](int64_t a, int64_t b, auto&& f) { return r.for_each_counter(a, b, f); });
      case Method::kForEachGpuActivity:
        return stream<GpuActivityRow>(id, in,
                                      [&](int64_t a, int64_t b, auto&& f) { return r.for_each_gpu_activity(a, b, f); });
      case Method::kForEachFlush: {
        Streamer<std::pair<int64_t, int64_t>> st(*this, id);
        Status s = r.for_each_flush(in.i(), [&](int64_t fid, int64_t ts) { st.add({fid, ts}); });
        st.flush();
        return status(id, s);
      }
      default:
        return fail(id, "this node's stallscope does not know call " + std::to_string(static_cast<int>(m)) +
                            ": install the same stallscope version on both machines");
    }
  }

  template <typename T, typename F>
  void stream(uint32_t id, In& in, F&& call) {
    const int64_t after = in.i(), upto = in.i();
    Streamer<T> st(*this, id);
    std::function<void(const T&)> each = [&](const T& row) { st.add(row); };
    Status s = call(after, upto, each);
    st.flush();
    status(id, s);
  }

  void answer_tail(LocalTail& t, Method m, In& in, uint32_t id) {
    switch (m) {
      case Method::kTailPoll:
      case Method::kTailReadWindow: {
        int64_t max_rows = 0, t0 = 0, t1 = 0;
        if (m == Method::kTailPoll) {
          max_rows = in.i();
        } else {
          t0 = in.i();
          t1 = in.i();
        }
        StreamSink sink([this, id](std::string part) { send(FrameType::kPart, id, std::move(part)); }, get_decided(in));
        auto st = m == Method::kTailPoll ? t.poll(sink, max_rows) : t.read_window(sink, t0, t1);
        sink.finish();
        if (!st.ok()) return fail(id, st.status().message());
        Out o;
        for (int64_t v : {st->rows, st->spans, st->instants, st->counters, st->gpu, st->pending}) o.i(v);
        o.i(t.file_bytes());
        o.b(t.recorder_alive(sink.meta()));
        const TailCursor c = t.cursor();
        put(o, c.last);
        for (int64_t v : {c.last_flush, c.last_string, c.strings_seen, c.from_ns, c.to_ns}) o.i(v);
        return ok(id, o);
      }
      case Method::kTailStartFrom: return status(id, t.start_from(in.i()));
      default: return fail(id, "not a call of a tail: " + std::to_string(static_cast<int>(m)));
    }
  }

  int in_, out_;
  ServeOptions opt_;
  std::mutex write_mu_;
  std::atomic<bool> broken_{false};
  std::map<uint64_t, std::unique_ptr<Handle>> handles_;
  uint64_t next_handle_ = 1;
};

std::atomic<bool> g_stop{false};
void on_stop(int) { g_stop = true; }

std::string random_token() {
  unsigned char bytes[24] = {};
  std::ifstream f("/dev/urandom", std::ios::binary);
  f.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (unsigned char b : bytes) {
    t.push_back(hex[b >> 4]);
    t.push_back(hex[b & 15]);
  }
  return t;
}

}  // namespace

int serve_connection(int in_fd, int out_fd, const ServeOptions& opt, std::string* error) {
  Connection c(in_fd, out_fd, opt);
  return c.run(error);
}

int serve_port(int port, const std::string& token_file_arg) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::fprintf(stderr, "stallscope serve: cannot make a socket: %s\n", std::strerror(errno));
    return 1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only: reach it through ssh -L or a tunnel
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) {
    std::fprintf(stderr, "stallscope serve: cannot listen on 127.0.0.1:%d: %s; pick another --port\n", port,
                 std::strerror(errno));
    ::close(fd);
    return 1;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = ntohs(addr.sin_port);

  const std::string token = random_token();
  std::string token_file = token_file_arg;
  if (token_file.empty()) {
    const std::string dir = registry_dir();
    token_file = (dir.empty() ? std::string("/tmp") : dir) + "/serve-" + std::to_string(bound) + ".token";
  }
  {
    const mode_t old = ::umask(077);
    std::ofstream f(token_file, std::ios::trunc);
    f << token << "\n";
    ::umask(old);
    if (!f) {
      std::fprintf(stderr, "stallscope serve: cannot write the token to %s; pass --token-file PATH\n",
                   token_file.c_str());
      ::close(fd);
      return 1;
    }
  }
  ::chmod(token_file.c_str(), 0600);
  std::printf("stallscope serve: listening on 127.0.0.1:%d (the token is in %s)\n", bound, token_file.c_str());
  std::printf("  on your machine: ssh -L %d:127.0.0.1:%d %s, then\n  stallscope ui tcp://127.0.0.1:%d/?token=%s\n",
              bound, bound, host_name().c_str(), bound, token.c_str());
  std::fflush(stdout);

  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  ServeOptions opt;
  opt.token = token;
  std::vector<std::thread> clients;
  while (!g_stop) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    clients.emplace_back([c, opt] {
      std::string error;
      if (serve_connection(c, c, opt, &error) != 0) std::fprintf(stderr, "stallscope serve: %s\n", error.c_str());
      ::close(c);
    });
  }
  ::close(fd);
  ::unlink(token_file.c_str());
  for (auto& t : clients) t.detach();  // a client still connected goes with the process
  return 0;
}

}  // namespace stallscope::remote
