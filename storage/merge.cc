// Merging recordings; see merge.h.
#include "storage/merge.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/json.h"
#include "common/vocabulary.h"
#include "storage/reader.h"
#include "storage/writer.h"

namespace stallscope {
namespace {

constexpr int64_t kPidShift = 10'000'000;  // above Linux's largest pid (2^22)
constexpr int64_t kChunk = 50'000;         // rows read at a time from each input
constexpr int64_t kFlushSpans = 4096;      // spans per flush row written (the time index)

struct Input {
  MergedInput out;
  std::unique_ptr<Reader> reader;
  std::map<std::string, std::string> meta;
  std::map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, uint32_t> string_id;  // input's -> output's
  std::unordered_map<uint32_t, vocab::Event> event;  // input's string id -> event
  std::unordered_map<int64_t, int64_t> process_id;   // input's processes.id -> output's
  std::unordered_map<int64_t, int64_t> thread_id;    // input's threads.id -> output's
  std::unordered_map<int64_t, int64_t> track_id;     // input's counter_tracks.id -> output's
  TableHeads heads;
  std::map<int64_t, int64_t> completions;  // collective seq -> completion (input's clock)
  // Recorded with --keep-detail and its older detail deleted: its summary rows are carried over
  // (carry_summaries) instead of being made again from the rows that are left.
  bool carry = false;
};

int64_t meta_int(const std::map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10);
}

// When each collective of the input's first rank process completed: dist.collective span ends,
// dist.done instants; by sequence number.
Status read_completions(Input& in) {
  std::vector<uint32_t> spans, dones;
  for (const auto& [id, e] : in.event) {
    if (e == vocab::Event::kDistCollective) spans.push_back(id);
    if (e == vocab::Event::kDistDone) dones.push_back(id);
  }
  auto threads = in.reader->threads();
  if (!threads.ok()) return threads.status();
  std::unordered_map<int64_t, int64_t> process_of;
  for (const ThreadRow& t : *threads) process_of[t.id] = t.process_id;
  std::optional<int64_t> process;  // the first process with a collective
  auto take = [&](int64_t thread, std::optional<int64_t> seq, int64_t at) {
    if (!seq) return;
    const int64_t p = process_of[thread];
    if (!process) process = p;
    if (p == *process) in.completions.emplace(*seq, at);
  };
  auto sp = in.reader->spans_named(spans);
  if (!sp.ok()) return sp.status();
  for (const SpanRow& r : *sp) {
    if (r.dur_ns) take(r.thread_id, r.arg1, r.start_ns + *r.dur_ns);
  }
  auto ins = in.reader->instants_named(dones);
  if (!ins.ok()) return ins.status();
  for (const InstantRow& r : *ins) take(r.thread_id, r.arg1, r.ts_ns);
  return Status::Ok();
}

// The clock offset of `in` against `base`, and how it was found.
void align(const Input& base, Input& in) {
  const std::string base_host = base.meta.count("host") ? base.meta.at("host") : "";
  if (!in.out.host.empty() && in.out.host == base_host) {
    in.out.offset_ns = meta_int(in.meta, "start_mono_ns") - meta_int(base.meta, "start_mono_ns");
    in.out.clock = "same host";
    return;
  }
  const int64_t realtime = meta_int(in.meta, "start_real_ns") - meta_int(base.meta, "start_real_ns");
  in.out.offset_ns = realtime;
  in.out.clock = "realtime";
  std::vector<int64_t> d;
  for (const auto& [seq, at] : in.completions) {
    auto b = base.completions.find(seq);
    if (b != base.completions.end()) d.push_back(b->second - (at + realtime));
  }
  if (d.empty()) return;
  std::sort(d.begin(), d.end());
  const int64_t median = d[d.size() / 2];
  std::vector<int64_t> dev;
  for (int64_t x : d) dev.push_back(std::llabs(x - median));
  std::sort(dev.begin(), dev.end());
  in.out.offset_ns = realtime + median;
  in.out.clock = "collectives";
  in.out.matched = static_cast<int64_t>(d.size());
  in.out.residual_ns = dev[dev.size() / 2];
}

// An event's arguments in the output's ids: string ids re-interned, pids moved.
void remap_args(const Input& in, uint32_t name_id, std::optional<int64_t>* args[3]) {
  auto e = in.event.find(name_id);
  if (e == in.event.end() || e->second == vocab::Event::kNone) return;
  const vocab::Args& layout = vocab::args_of(e->second, false);
  for (size_t i = 0; i < 3; ++i) {
    std::optional<int64_t>& a = *args[i];
    if (!a) continue;
    if (layout[i] == vocab::Arg::kText || (layout[i] == vocab::Arg::kDomain && *a != 0)) {
      auto s = in.string_id.find(static_cast<uint32_t>(*a));
      if (s != in.string_id.end()) a = s->second;
    } else if (layout[i] == vocab::Arg::kPid) {
      a = *a + in.out.pid_shift;
    }
  }
}

Status in_input(const Input& in, const Status& s) {
  return s.ok() ? s : Status::Error(in.out.path + ": " + s.message());
}

// The first pair of inputs that cannot be parts of one job, said in one line; Ok when none.
Status check_one_job(const std::vector<Input>& inputs, bool allow_mismatch) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      const Input &a = inputs[j], &b = inputs[i];
      char ra[PATH_MAX], rb[PATH_MAX];
      if (::realpath(a.out.path.c_str(), ra) && ::realpath(b.out.path.c_str(), rb) && std::string(ra) == rb) {
        return Status::Error(b.out.path + " is given twice; pass each part of the job once");
      }
      if (allow_mismatch) continue;
      const auto value = [](const Input& in, const char* key) -> std::string {
        auto it = in.meta.find(key);
        return it == in.meta.end() ? "" : it->second;
      };
      const std::string what = a.out.path + " and " + b.out.path;
      const std::string fix = "; merge the recordings of one job (or pass --allow-mismatch)";
      if (const std::string ja = value(a, "job"), jb = value(b, "job"); !ja.empty() && !jb.empty() && ja != jb) {
        return Status::Error(what + " are of different jobs (" + ja + ", " + jb + ")" + fix);
      }
      if (const std::string wa = value(a, "world_size"), wb = value(b, "world_size");
          !wa.empty() && !wb.empty() && wa != wb) {
        return Status::Error(what + " have different world sizes (" + wa + ", " + wb + ")" + fix);
      }
      if (const std::string ra_ = value(a, "rank"), rb_ = value(b, "rank");
          !ra_.empty() && ra_ == rb_ && value(a, "job") == value(b, "job")) {
        return Status::Error(what + " both hold rank " + ra_ + fix);
      }
    }
  }
  return Status::Ok();
}

// The summary rows of an input whose older detail was deleted, in the output's ids, each bucket
// moved by the input's clock offset: to the output's bucket where its start lands. Counts and sums
// are the input's; a bucket's place is within one bucket length of its events' (docs/schema.md).
Status carry_summaries(Input& in, Writer& out) {
  Status failed = Status::Ok();
  int64_t rows = 0;
  auto shifted = [&](int64_t bucket, int64_t level_ns, int64_t* to) {
    return !__builtin_add_overflow(bucket, summary_bucket(in.out.offset_ns, level_ns), to);
  };
  auto added = [&] {
    if (++rows % kChunk != 0 || !failed.ok()) return;
    if (Status c = out.commit(); !c.ok()) failed = c;
    if (Status b = out.begin(); failed.ok() && !b.ok()) failed = b;
  };
  // Span and instant summaries: per thread and name.
  auto by_thread = [&](const auto& r) {
    auto t = in.thread_id.find(r.thread_id);
    auto n = in.string_id.find(r.name_id);
    auto o = r;
    if (t == in.thread_id.end() || n == in.string_id.end() || !shifted(r.bucket, r.level_ns, &o.bucket)) return;
    o.thread_id = t->second;
    o.name_id = n->second;
    out.summaries().add_summary(o);
    added();
  };
  Reader::SummaryVisitor to;
  to.span = by_thread;
  to.instant = by_thread;
  to.counter = [&](const CounterSummaryRow& r) {
    auto k = in.track_id.find(r.track_id);
    CounterSummaryRow o = r;
    if (k == in.track_id.end() || !shifted(r.bucket, r.level_ns, &o.bucket) ||
        __builtin_add_overflow(r.last_ts_ns, in.out.offset_ns, &o.last_ts_ns))
      return;
    o.track_id = k->second;
    out.summaries().add_summary(o);
    added();
  };
  // GPU and queue summaries: per process.
  auto by_process = [&](const auto& r) {
    auto p = in.process_id.find(r.process_id);
    auto o = r;
    if (p == in.process_id.end() || !shifted(r.bucket, r.level_ns, &o.bucket)) return;
    o.process_id = p->second;
    out.summaries().add_summary(o);
    added();
  };
  to.gpu = by_process;
  to.queue = by_process;
  to.handoff = [&](const HandoffSummaryRow& r) {
    auto t = in.thread_id.find(r.thread_id);
    HandoffSummaryRow o = r;
    if (t == in.thread_id.end() || !shifted(r.bucket, r.level_ns, &o.bucket)) return;
    o.thread_id = t->second;
    out.summaries().add_summary(o);
    added();
  };
  if (Status s = out.begin(); !s.ok()) return s;
  Status s = in.reader->for_each_summary_row(to);
  if (!s.ok()) return s;
  if (!failed.ok()) return failed;
  return out.commit();
}

}  // namespace

Result<std::vector<MergedInput>> merge_recordings(const std::vector<std::string>& paths, const std::string& output,
                                                  bool allow_mismatch) {
  if (paths.size() < 2) return Status::Error("merge needs two recordings or more");
  std::vector<Input> inputs(paths.size());
  std::map<std::string, int64_t> host_shift;
  for (size_t i = 0; i < paths.size(); ++i) {
    Input& in = inputs[i];
    in.out.path = paths[i];
    auto r = Reader::open(paths[i]);
    if (!r.ok()) return r.status();
    in.reader = std::move(*r);
    auto meta = in.reader->meta();
    if (!meta.ok()) return in_input(in, meta.status());
    in.meta = std::move(*meta);
    in.out.host = in.meta.count("host") ? in.meta["host"] : "";
    auto strings = in.reader->strings();
    if (!strings.ok()) return in_input(in, strings.status());
    in.strings = std::move(*strings);
    for (const auto& [id, value] : in.strings) in.event[id] = vocab::event_of(value);
    auto heads = in.reader->heads();
    if (!heads.ok()) return in_input(in, heads.status());
    in.heads = *heads;
    if (Status s = read_completions(in); !s.ok()) return in_input(in, s);
    if (in.meta.count("detail_from_ns") != 0) {
      auto has = in.reader->has_summaries();
      if (!has.ok()) return in_input(in, has.status());
      in.carry = *has;
    }
    auto [shift, fresh] = host_shift.try_emplace(in.out.host, static_cast<int64_t>(host_shift.size()) * kPidShift);
    in.out.pid_shift = shift->second;
    if (i > 0) {
      align(inputs[0], in);
    } else {
      in.out.clock = "base";
    }
  }
  if (Status s = check_one_job(inputs, allow_mismatch); !s.ok()) return s;

  auto w = Writer::create(output);
  if (!w.ok()) return w.status();
  Writer& out = **w;
  out.summaries().set_queue_from_rows(false);  // the rows come table by table: built in time order below
  if (Status s = out.begin(); !s.ok()) return s;

  // Meta: the first input's, its end and completeness over all, and what was merged.
  int64_t end_ns = 0;
  bool complete = true;
  Json from = Json::array();
  for (const Input& in : inputs) {
    end_ns = std::max(end_ns, meta_int(in.meta, "end_ns") + in.out.offset_ns);
    complete = complete && in.meta.count("complete") && in.meta.at("complete") == "1";
  }
  for (const auto& [key, value] : inputs[0].meta) {
    if (key != "end_ns" && key != "complete" && key != "detail_from_ns") (void)out.set_meta(key, value);
  }
  // Inputs recorded with --keep-detail: every event is there from the latest of their cuts, on the
  // merged clock (docs/schema.md).
  std::optional<int64_t> detail_from;
  for (const Input& in : inputs) {
    if (in.meta.count("detail_from_ns") != 0) {
      detail_from = std::max(detail_from.value_or(INT64_MIN), meta_int(in.meta, "detail_from_ns") + in.out.offset_ns);
    }
  }
  if (detail_from) (void)out.set_meta("detail_from_ns", std::to_string(*detail_from));

  // Strings, processes, threads, counter tracks.
  std::map<std::string, uint32_t> interned;
  for (Input& in : inputs) {
    for (const auto& [id, value] : in.strings) {
      auto [it, fresh] = interned.try_emplace(value, static_cast<uint32_t>(interned.size() + 1));
      if (fresh) out.add_string(it->second, value);
      in.string_id[id] = it->second;
    }
    auto procs = in.reader->processes();
    if (!procs.ok()) return in_input(in, procs.status());
    for (ProcessRow p : *procs) {
      const int64_t old = p.id;
      p.pid += in.out.pid_shift;
      if (p.ppid && *p.ppid > 1) *p.ppid += in.out.pid_shift;
      if (p.start_ns) *p.start_ns += in.out.offset_ns;
      if (p.end_ns) *p.end_ns += in.out.offset_ns;
      in.process_id[old] = out.add_process(p);
    }
    auto threads = in.reader->threads();
    if (!threads.ok()) return in_input(in, threads.status());
    for (ThreadRow t : *threads) {
      const int64_t old = t.id;
      t.process_id = in.process_id[t.process_id];
      t.tid += in.out.pid_shift;
      in.thread_id[old] = out.add_thread(t);
    }
    auto tracks = in.reader->counter_tracks();
    if (!tracks.ok()) return in_input(in, tracks.status());
    for (CounterTrackRow t : *tracks) {
      const int64_t old = t.id;
      t.pid += in.out.pid_shift;
      in.track_id[old] = out.add_counter_track(t);
    }
  }
  if (Status s = out.commit(); !s.ok()) return s;

  // Instants, interleaved by time: each input's rows in id order, the earliest head first. Before the
  // spans, as an upgrade reads an older recording's rows: the summaries' hand-offs then know each
  // loader's dl.epoch_begin (its starts) and dl.worker_start (whose collates size its batches) when
  // its dl.next spans come.
  {
    std::vector<std::deque<InstantRow>> heads(inputs.size());
    std::vector<int64_t> read_to(inputs.size(), 0);
    auto refill = [&](size_t i) -> Status {
      Input& in = inputs[i];
      if (!heads[i].empty() || read_to[i] >= in.heads.instants) return Status::Ok();
      const int64_t upto = std::min(read_to[i] + kChunk, in.heads.instants);
      Status s = in.reader->for_each_instant(read_to[i], upto, [&](const InstantRow& r) { heads[i].push_back(r); });
      read_to[i] = upto;
      return in_input(in, s);
    };
    if (Status s = out.begin(); !s.ok()) return s;
    int64_t written = 0;
    for (;;) {
      size_t best = inputs.size();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (Status s = refill(i); !s.ok()) return s;
        if (heads[i].empty()) continue;
        if (best == inputs.size() ||
            heads[i].front().ts_ns + inputs[i].out.offset_ns < heads[best].front().ts_ns + inputs[best].out.offset_ns) {
          best = i;
        }
      }
      if (best == inputs.size()) break;
      Input& in = inputs[best];
      InstantRow o = heads[best].front();
      heads[best].pop_front();
      const uint32_t name = o.name_id;
      o.thread_id = in.thread_id[o.thread_id];
      o.name_id = in.string_id[name];
      o.ts_ns += in.out.offset_ns;
      std::optional<int64_t>* args[3] = {&o.arg0, &o.arg1, &o.arg2};
      remap_args(in, name, args);
      out.set_summarize(!in.carry);
      out.add_instant(o);
      ++in.out.instants;
      if (++written % kChunk == 0) {
        if (Status s = out.commit(); !s.ok()) return s;
        if (Status s = out.begin(); !s.ok()) return s;
      }
    }
    if (Status s = out.commit(); !s.ok()) return s;
  }

  // Spans, input by input, with a flush row (the time index) per kFlushSpans of them.
  for (Input& in : inputs) {
    out.set_summarize(!in.carry);
    for (int64_t after = 0; after < in.heads.spans; after += kChunk) {
      if (Status s = out.begin(); !s.ok()) return s;
      FlushRow flush;
      bool unended = false;
      auto close_flush = [&] {
        if (!flush.first_span_id) return;
        if (unended) flush.max_end_ns.reset();
        flush.ts_ns = flush.max_end_ns.value_or(end_ns);
        out.add_flush(flush);
        flush = FlushRow{};
        unended = false;
      };
      Status s = in.reader->for_each_span(after, std::min(after + kChunk, in.heads.spans), [&](const SpanRow& r) {
        SpanRow o = r;
        o.thread_id = in.thread_id[r.thread_id];
        o.name_id = in.string_id[r.name_id];
        o.start_ns += in.out.offset_ns;
        std::optional<int64_t>* args[3] = {&o.arg0, &o.arg1, &o.arg2};
        remap_args(in, r.name_id, args);
        const int64_t id = out.add_span(o);
        if (!flush.first_span_id) {
          flush.first_span_id = id;
          flush.min_start_ns = o.start_ns;
          flush.max_end_ns = o.start_ns;
        }
        flush.last_span_id = id;
        ++flush.events;
        flush.min_start_ns = std::min(*flush.min_start_ns, o.start_ns);
        if (o.dur_ns) {
          flush.max_end_ns = std::max(*flush.max_end_ns, o.start_ns + *o.dur_ns);
        } else {
          unended = true;
        }
        ++in.out.spans;
        if (flush.events >= kFlushSpans) close_flush();
      });
      if (!s.ok()) return in_input(in, s);
      close_flush();
      if (Status c = out.commit(); !c.ok()) return c;
    }
  }

  // Counter samples and GPU activities, input by input.
  for (Input& in : inputs) {
    out.set_summarize(!in.carry);
    if (Status s = out.begin(); !s.ok()) return s;
    Status s = in.reader->for_each_counter(0, in.heads.counters, [&](const CounterRow& r) {
      out.add_counter(CounterRow{in.track_id[r.track_id], r.ts_ns + in.out.offset_ns, r.value});
      ++in.out.counters;
    });
    if (s.ok()) {
      s = in.reader->for_each_gpu_activity(0, in.heads.gpu_activities, [&](const GpuActivityRow& r) {
        GpuActivityRow o = r;
        o.process_id = in.process_id[r.process_id];
        o.name_id = in.string_id[r.name_id];
        o.start_ns += in.out.offset_ns;
        out.add_gpu_activity(o);
        ++in.out.gpu_activities;
      });
    }
    if (!s.ok()) return in_input(in, s);
    if (Status c = out.commit(); !c.ok()) return c;
  }

  // The loaders' queues, from the merged rows in time order: those of the inputs summarised here.
  {
    std::unordered_set<int64_t> summarised;
    for (const Input& in : inputs) {
      if (in.carry) continue;
      for (const auto& [from, to] : in.thread_id) summarised.insert(to);
    }
    if (Status s = out.begin(); !s.ok()) return s;
    Status q = out.summaries().build_queues([&](int64_t thread) { return summarised.count(thread) != 0; });
    if (!q.ok()) {
      (void)out.commit();
      return q;
    }
    if (Status c = out.commit(); !c.ok()) return c;
  }

  out.set_summarize(true);
  // The summaries of inputs whose older detail was deleted: all of their run, not only what is left.
  for (Input& in : inputs) {
    if (!in.carry) continue;
    if (Status s = carry_summaries(in, out); !s.ok()) return in_input(in, s);
  }

  std::vector<MergedInput> result;
  for (const Input& in : inputs) {
    Json v = Json::object();
    v["path"] = in.out.path;
    v["host"] = in.out.host;
    v["offset_ns"] = in.out.offset_ns;
    v["pid_shift"] = in.out.pid_shift;
    v["clock"] = in.out.clock;
    v["matched_collectives"] = in.out.matched;
    v["residual_ns"] = in.out.residual_ns;
    from.push_back(std::move(v));
    result.push_back(in.out);
  }
  if (Status s = out.set_meta("merged_from", from.dump()); !s.ok()) return s;
  if (Status s = out.set_meta("end_ns", std::to_string(end_ns)); !s.ok()) return s;
  if (Status s = out.set_meta("complete", complete ? "1" : "0"); !s.ok()) return s;
  if (Status s = out.finish(); !s.ok()) return s;
  return result;
}

}  // namespace stallscope
