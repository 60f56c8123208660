// Writes the Trace Event Format by hand, one event at a time into a buffer flushed every MiB: a
// JSON library would build a document per event (or the whole trace) for a format this regular.
// Strings are escaped once each (interned names), numbers written with std::to_chars.
#include "export/perfetto_json.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/vocabulary.h"

namespace stallscope::exporting {
namespace {

// Pids of the GPU's pseudo-processes: above Linux's largest pid (2^22).
constexpr int64_t kGpuPidBase = int64_t{1} << 30;
constexpr size_t kFlushBytes = size_t{1} << 20;

std::string json_string(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

class PerfettoJsonSink final : public TraceSink {
 public:
  explicit PerfettoJsonSink(std::FILE* out) : out_(out) { buf_.reserve(kFlushBytes + 4096); }

  Status begin(const ExportContext& ctx) override {
    ctx_ = &ctx;
    for (const auto& [id, value] : ctx.strings) {
      std::string cat = "span";
      if (const size_t dot = value.find('.'); dot != std::string::npos && dot > 0 && dot < 16)
        cat = value.substr(0, dot);
      names_.emplace(id, Name{json_string(value), json_string(cat), vocab::event_of(value)});
    }
    for (const ProcessRow& p : ctx.processes) pid_of_process_[p.id] = p.pid;
    buf_ += "{\"displayTimeUnit\":\"ns\",\"otherData\":{";
    bool first = true;
    for (const char* key : {"format", "host", "command", "start_real_ns", "stallscope_version", "complete"}) {
      auto it = ctx.meta.find(key);
      if (it == ctx.meta.end()) continue;
      if (!first) buf_ += ',';
      first = false;
      buf_ += json_string(key);
      buf_ += ':';
      buf_ += json_string(it->second);
    }
    buf_ += "},\"traceEvents\":[\n";
    for (const ProcessRow& p : ctx.processes) {
      const auto n = ctx.process_names.find(p.pid);
      if (n == ctx.process_names.end()) continue;
      metadata("process_name", p.pid, std::nullopt, "name", json_string(n->second.name));
      metadata("process_sort_index", p.pid, std::nullopt, "sort_index", std::to_string(n->second.sort_index));
      if (!p.cmdline.empty())
        metadata("process_labels", p.pid, std::nullopt, "labels", json_string(p.cmdline.substr(0, 200)));
    }
    for (const ThreadRow& t : ctx.threads) {
      const auto n = ctx.thread_names.find(t.id);
      const int64_t pid = ctx.thread_pid.at(t.id);
      if (n == ctx.thread_names.end()) continue;
      metadata("thread_name", pid, t.tid, "name", json_string(n->second.name));
      metadata("thread_sort_index", pid, t.tid, "sort_index", std::to_string(n->second.sort_index));
    }
    return flush_if_full();
  }

  void span(const SpanRow& r) override {
    const Name& n = name(r.name_id);
    const int64_t dur = r.dur_ns ? *r.dur_ns : std::max<int64_t>(0, ctx_->end_ns - r.start_ns);
    open_event("X", n, thread_pid(r.thread_id), tid(r.thread_id), r.start_ns);
    buf_ += ",\"dur\":";
    append_us(dur);
    args(n, thread_pid(r.thread_id), r.arg0, r.arg1, r.arg2, !r.dur_ns);
    close_event();
  }

  void instant(const InstantRow& r) override {
    const Name& n = name(r.name_id);
    open_event("i", n, thread_pid(r.thread_id), tid(r.thread_id), r.ts_ns);
    buf_ += ",\"s\":\"t\"";
    args(n, thread_pid(r.thread_id), r.arg0, r.arg1, r.arg2, false);
    close_event();
  }

  void counter(const CounterRow& r) override {
    if (!std::isfinite(r.value)) return;
    auto& name = counter_names_[r.track_id];
    int64_t pid = 0;
    if (const auto t = ctx_->tracks.find(r.track_id); t != ctx_->tracks.end()) {
      pid = t->second.pid;
      if (name.empty())
        name = json_string(t->second.name + (t->second.unit.empty() ? "" : " (" + t->second.unit + ")"));
    } else if (name.empty()) {
      name = json_string("track " + std::to_string(r.track_id));
    }
    counter_event(name, pid, r.ts_ns, r.value);
  }

  void derived(const DerivedSample& s) override {
    while (derived_names_.size() <= static_cast<size_t>(s.series)) {
      derived_names_.push_back(json_string(ctx_->series[derived_names_.size()]));
    }
    counter_event(derived_names_[static_cast<size_t>(s.series)], ctx_->train_pid, s.ts_ns,
                  static_cast<double>(s.value));
  }

  void flow(const BatchFlow& f) override {
    const std::string id = std::to_string(f.id);
    auto point = [&](const char* ph, const BatchFlow::Point& p, bool enclosing) {
      start_event();
      buf_ += "{\"ph\":\"";
      buf_ += ph;
      buf_ += "\",\"cat\":\"dl.batch\",\"name\":\"batch\",\"id\":";
      buf_ += id;
      buf_ += ",\"pid\":";
      buf_ += std::to_string(p.pid);
      buf_ += ",\"tid\":";
      buf_ += std::to_string(p.tid);
      buf_ += ",\"ts\":";
      append_us(p.ts_ns);
      if (enclosing) buf_ += ",\"bp\":\"e\"";
      close_event();
    };
    if (f.sent) {
      point("s", *f.sent, false);
      point("t", f.fetch, false);
    } else {
      point("s", f.fetch, false);
    }
    point("f", f.handed, true);
  }

  void gpu_activity(const GpuActivityRow& r) override {
    const int64_t owner = pid_of_process_.count(r.process_id) ? pid_of_process_[r.process_id] : 0;
    auto [it, fresh] = gpu_pids_.try_emplace({owner, r.device}, kGpuPidBase + static_cast<int64_t>(gpu_pids_.size()));
    const int64_t pid = it->second;
    if (fresh) {
      metadata("process_name", pid, std::nullopt, "name",
               json_string("GPU " + std::to_string(r.device) + " (pid " + std::to_string(owner) + ")"));
      metadata("process_sort_index", pid, std::nullopt, "sort_index", "0");
    }
    if (gpu_streams_.insert({pid, r.stream}).second) {
      metadata("thread_name", pid, r.stream, "name", json_string("stream " + std::to_string(r.stream)));
    }
    const Name& n = name(r.name_id);
    start_event();
    buf_ += "{\"ph\":\"X\",\"cat\":";
    buf_ += json_string("gpu." + r.kind);
    buf_ += ",\"name\":";
    buf_ += n.quoted;
    buf_ += ",\"pid\":";
    buf_ += std::to_string(pid);
    buf_ += ",\"tid\":";
    buf_ += std::to_string(r.stream);
    buf_ += ",\"ts\":";
    append_us(r.start_ns);
    buf_ += ",\"dur\":";
    append_us(std::max<int64_t>(0, r.dur_ns));
    buf_ += ",\"args\":{\"kind\":";
    buf_ += json_string(r.kind);
    buf_ += ",\"device\":" + std::to_string(r.device) + ",\"stream\":" + std::to_string(r.stream) +
            ",\"correlation\":" + std::to_string(r.correlation_id);
    if (r.kind == "memcpy" || r.kind == "memset") buf_ += ",\"bytes\":" + std::to_string(r.bytes);
    if (!r.copy_kind.empty()) buf_ += ",\"copy_kind\":" + json_string(r.copy_kind);
    if (!r.src_kind.empty()) buf_ += ",\"src_kind\":" + json_string(r.src_kind);
    if (!r.dst_kind.empty()) buf_ += ",\"dst_kind\":" + json_string(r.dst_kind);
    buf_ += '}';
    close_event();
  }

  Status end() override {
    if (ended_) return status_;
    ended_ = true;
    buf_ += "\n]}\n";
    write_out();
    if (std::fflush(out_) != 0 && status_.ok())
      status_ = Status::Error(std::string("write failed: ") + std::strerror(errno));
    return status_;
  }

 private:
  struct Name {
    std::string quoted, cat;
    vocab::Event event = vocab::Event::kNone;
  };

  const Name& name(uint32_t id) {
    auto it = names_.find(id);
    if (it != names_.end()) return it->second;
    return names_.emplace(id, Name{json_string("string " + std::to_string(id)), "\"span\"", vocab::Event::kNone})
        .first->second;
  }
  int64_t thread_pid(int64_t thread_id) const {
    const auto it = ctx_->thread_pid.find(thread_id);
    return it == ctx_->thread_pid.end() ? 0 : it->second;
  }
  int64_t tid(int64_t thread_id) const {
    const auto it = ctx_->thread_tid.find(thread_id);
    return it == ctx_->thread_tid.end() ? thread_id : it->second;
  }

  // Microseconds with three decimals: nanoseconds, exactly.
  void append_us(int64_t ns) {
    // The magnitude as unsigned: INT64_MIN (a damaged row) has no signed negation.
    uint64_t mag = static_cast<uint64_t>(ns);
    if (ns < 0) {
      buf_ += '-';
      mag = 0 - mag;
    }
    char tmp[32];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, mag / 1000);
    buf_.append(tmp, r.ptr);
    const int frac = static_cast<int>(mag % 1000);
    if (frac != 0) {
      const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                              static_cast<char>('0' + frac % 10)};
      buf_.append(digits, 4);
    }
  }
  void append_int(int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }

  void open_event(const char* ph, const Name& n, int64_t pid, int64_t tid, int64_t ts) {
    start_event();
    buf_ += "{\"ph\":\"";
    buf_ += ph;
    buf_ += "\",\"cat\":";
    buf_ += n.cat;
    buf_ += ",\"name\":";
    buf_ += n.quoted;
    buf_ += ",\"pid\":";
    append_int(pid);
    buf_ += ",\"tid\":";
    append_int(tid);
    buf_ += ",\"ts\":";
    append_us(ts);
  }
  // Events are separated by ",\n" written before each one but the first.
  void start_event() {
    if (events_ > 0) buf_ += ",\n";
  }
  void close_event() {
    buf_ += '}';
    ++events_;
    (void)flush_if_full();
  }

  // Arguments by their vocabulary names where the event has a layout, else arg0..arg2 as recorded.
  void args(const Name& n, int64_t pid, const std::optional<int64_t>& a0, const std::optional<int64_t>& a1,
            const std::optional<int64_t>& a2, bool unended) {
    const std::optional<int64_t>* values[3] = {&a0, &a1, &a2};
    const bool known = n.event != vocab::Event::kNone;
    const auto worker = ctx_->is_worker.find(pid);
    const vocab::Args& layout = vocab::args_of(n.event, worker != ctx_->is_worker.end() && worker->second);
    bool any = false;
    auto key = [&](std::string_view k) {
      buf_ += any ? ",\"" : ",\"args\":{\"";
      any = true;
      buf_ += k;
      buf_ += "\":";
    };
    for (int i = 0; i < 3; ++i) {
      if (!values[i]->has_value()) continue;
      const int64_t v = **values[i];
      if (!known) {
        key("arg" + std::to_string(i));
        append_int(v);
        continue;
      }
      const vocab::Arg a = layout[static_cast<size_t>(i)];
      if (a == vocab::Arg::kNone) continue;
      std::string k(vocab::arg_name(a));
      for (int j = 0; j < i; ++j) {
        if (layout[static_cast<size_t>(j)] == a) k += "_" + std::to_string(i);  // dl.cpu: us, us_1, us_2
      }
      key(k);
      if (a == vocab::Arg::kText) {
        const auto s = ctx_->strings.find(static_cast<uint32_t>(v));
        if (s != ctx_->strings.end()) {
          buf_ += json_string(s->second);
          continue;
        }
      }
      append_int(v);
    }
    if (unended) {
      key("unended");
      buf_ += "true";
    }
    if (any) buf_ += '}';
  }

  void counter_event(const std::string& quoted_name, int64_t pid, int64_t ts, double value) {
    start_event();
    buf_ += "{\"ph\":\"C\",\"name\":";
    buf_ += quoted_name;
    buf_ += ",\"pid\":";
    append_int(pid);
    buf_ += ",\"tid\":0,\"ts\":";
    append_us(ts);
    buf_ += ",\"args\":{\"value\":";
    char tmp[40];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, value);
    buf_.append(tmp, r.ptr);
    buf_ += "}";
    close_event();
  }

  void metadata(const char* what, int64_t pid, std::optional<int64_t> tid, const char* key, const std::string& value) {
    start_event();
    buf_ += "{\"ph\":\"M\",\"name\":\"";
    buf_ += what;
    buf_ += "\",\"pid\":";
    append_int(pid);
    if (tid) {
      buf_ += ",\"tid\":";
      append_int(*tid);
    }
    buf_ += ",\"args\":{\"";
    buf_ += key;
    buf_ += "\":";
    buf_ += value;
    buf_ += '}';
    close_event();
  }

  Status flush_if_full() {
    if (buf_.size() < kFlushBytes) return status_;
    write_out();
    return status_;
  }
  void write_out() {
    if (buf_.empty()) return;
    if (std::fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size() && status_.ok()) {
      status_ = Status::Error(std::string("write failed: ") + std::strerror(errno));
    }
    buf_.clear();
  }

  std::FILE* out_;
  const ExportContext* ctx_ = nullptr;
  std::string buf_;
  std::map<uint32_t, Name> names_;
  std::map<int64_t, int64_t> pid_of_process_;
  std::map<int64_t, std::string> counter_names_;
  std::vector<std::string> derived_names_;  // by series index
  std::map<std::pair<int64_t, int64_t>, int64_t> gpu_pids_;
  std::set<std::pair<int64_t, int64_t>> gpu_streams_;
  int64_t events_ = 0;
  bool ended_ = false;
  Status status_;
};

}  // namespace

std::unique_ptr<TraceSink> perfetto_json_sink(std::FILE* out) { return std::make_unique<PerfettoJsonSink>(out); }

}  // namespace stallscope::exporting
