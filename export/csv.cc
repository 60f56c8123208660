// The CSV sink: a FILE per table, opened at begin(), rows written as they stream.
#include "export/csv.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace stallscope::exporting {
namespace {

// A field as RFC 4180 writes it: quoted when it holds a comma, a quote or a line break.
std::string field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string num(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }

std::string real(double v) {
  char tmp[40];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  return std::string(tmp, r.ptr);
}

class CsvSink final : public TraceSink {
 public:
  explicit CsvSink(std::string dir) : dir_(std::move(dir)) {}
  ~CsvSink() override { (void)end(); }

  Status begin(const ExportContext& ctx) override {
    ctx_ = &ctx;
    for (const auto& [id, value] : ctx.strings) names_.emplace(id, field(value));
    for (const ThreadRow& t : ctx.threads) {
      const auto n = ctx.thread_names.find(t.id);
      thread_prefix_[t.id] = std::to_string(ctx.thread_pid.at(t.id)) + "," + std::to_string(t.tid) + "," +
                             field(n == ctx.thread_names.end() ? t.name : n->second.name) + ",";
    }
    for (const ProcessRow& p : ctx.processes) pid_of_process_[p.id] = p.pid;
    if (Status s = open(spans_, "spans.csv", "id,pid,tid,thread,name,start_ns,dur_ns,depth,arg0,arg1,arg2"); !s.ok())
      return s;
    if (Status s = open(instants_, "instants.csv", "id,pid,tid,thread,name,ts_ns,arg0,arg1,arg2"); !s.ok()) return s;
    if (Status s = open(counters_, "counters.csv", "name,unit,pid,ts_ns,value"); !s.ok()) return s;
    if (Status s = open(gpu_, "gpu_activities.csv",
                        "id,pid,device,stream,kind,name,start_ns,dur_ns,bytes,copy_kind,src_kind,dst_kind,correlation");
        !s.ok())
      return s;
    std::FILE* procs = nullptr;
    if (Status s = open(procs, "processes.csv", "pid,ppid,role,cmdline,start_ns,end_ns,exit_code,exit_signal"); !s.ok())
      return s;
    for (const ProcessRow& p : ctx.processes) {
      const auto n = ctx.process_names.find(p.pid);
      std::string role = "other";
      if (p.pid == ctx.train_pid) {
        role = "training";
      } else if (ctx.is_worker.count(p.pid) != 0 && n != ctx.process_names.end()) {
        role = n->second.name.substr(0, n->second.name.find(" (pid"));
      }
      line(procs, std::to_string(p.pid) + "," + num(p.ppid) + "," + field(role) + "," + field(p.cmdline) + "," +
                      num(p.start_ns) + "," + num(p.end_ns) + "," + num(p.exit_code) + "," + num(p.exit_signal));
    }
    close(procs);
    return status_;
  }

  void span(const SpanRow& r) override {
    line(spans_, std::to_string(r.id) + "," + thread(r.thread_id) + name(r.name_id) + "," + std::to_string(r.start_ns) +
                     "," + num(r.dur_ns) + "," + std::to_string(r.depth) + "," + num(r.arg0) + "," + num(r.arg1) + "," +
                     num(r.arg2));
  }
  void instant(const InstantRow& r) override {
    line(instants_, std::to_string(r.id) + "," + thread(r.thread_id) + name(r.name_id) + "," + std::to_string(r.ts_ns) +
                        "," + num(r.arg0) + "," + num(r.arg1) + "," + num(r.arg2));
  }
  void counter(const CounterRow& r) override {
    auto [it, fresh] = track_prefix_.try_emplace(r.track_id);
    if (fresh) {
      const auto t = ctx_->tracks.find(r.track_id);
      it->second = t == ctx_->tracks.end() ? "track " + std::to_string(r.track_id) + ",,0,"
                                           : field(t->second.name) + "," + field(t->second.unit) + "," +
                                                 std::to_string(t->second.pid) + ",";
    }
    line(counters_, it->second + std::to_string(r.ts_ns) + "," + real(r.value));
  }
  void gpu_activity(const GpuActivityRow& r) override {
    const auto pid = pid_of_process_.find(r.process_id);
    line(gpu_, std::to_string(r.id) + "," + std::to_string(pid == pid_of_process_.end() ? 0 : pid->second) + "," +
                   std::to_string(r.device) + "," + std::to_string(r.stream) + "," + field(r.kind) + "," +
                   name(r.name_id) + "," + std::to_string(r.start_ns) + "," + std::to_string(r.dur_ns) + "," +
                   std::to_string(r.bytes) + "," + field(r.copy_kind) + "," + field(r.src_kind) + "," +
                   field(r.dst_kind) + "," + std::to_string(r.correlation_id));
  }
  // The analysis's series and the batches' flows are drawings for a trace viewer; the CSV files
  // hold the recording's own rows.
  void derived(const DerivedSample&) override {}
  void flow(const BatchFlow&) override {}

  Status end() override {
    for (std::FILE** f : {&spans_, &instants_, &counters_, &gpu_}) close(*f);
    return status_;
  }

 private:
  Status open(std::FILE*& f, const char* file, const char* header) {
    const std::string path = dir_ + "/" + file;
    f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
      status_ = Status::Error("cannot write " + path + ": " + std::strerror(errno));
      return status_;
    }
    std::setvbuf(f, nullptr, _IOFBF, size_t{1} << 20);
    line(f, header);
    return status_;
  }
  void close(std::FILE*& f) {
    if (f == nullptr) return;
    if (std::fclose(f) != 0 && status_.ok())
      status_ = Status::Error(std::string("write failed: ") + std::strerror(errno));
    f = nullptr;
  }
  void line(std::FILE* f, const std::string& s) {
    if (f == nullptr) return;
    if ((std::fwrite(s.data(), 1, s.size(), f) != s.size() || std::fputc('\n', f) == EOF) && status_.ok()) {
      status_ = Status::Error(std::string("write failed: ") + std::strerror(errno));
    }
  }
  const std::string& thread(int64_t thread_id) {
    auto [it, fresh] = thread_prefix_.try_emplace(thread_id);
    if (fresh) it->second = "0," + std::to_string(thread_id) + ",,";
    return it->second;
  }
  const std::string& name(uint32_t id) {
    auto [it, fresh] = names_.try_emplace(id);
    if (fresh) it->second = "string " + std::to_string(id);
    return it->second;
  }

  std::string dir_;
  const ExportContext* ctx_ = nullptr;
  std::FILE *spans_ = nullptr, *instants_ = nullptr, *counters_ = nullptr, *gpu_ = nullptr;
  std::map<uint32_t, std::string> names_;
  std::map<int64_t, std::string> thread_prefix_, track_prefix_;
  std::map<int64_t, int64_t> pid_of_process_;
  Status status_;
};

}  // namespace

std::unique_ptr<TraceSink> csv_sink(const std::string& dir) { return std::make_unique<CsvSink>(dir); }

}  // namespace stallscope::exporting
