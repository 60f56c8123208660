// Rows on the wire; see codec.h.
#include "remote/codec.h"

namespace stallscope::remote {
namespace {

// Id and time as differences from the row before (wrapping: a damaged file's values anywhere in
// int64 still round-trip).
void put_id(Out& o, int64_t v, Prev& p) {
  o.i(static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(p.id)));
  p.id = v;
}
int64_t get_id(In& in, Prev& p) {
  p.id = static_cast<int64_t>(static_cast<uint64_t>(p.id) + static_cast<uint64_t>(in.i()));
  return p.id;
}
void put_ts(Out& o, int64_t v, Prev& p) {
  o.i(static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(p.ts)));
  p.ts = v;
}
int64_t get_ts(In& in, Prev& p) {
  p.ts = static_cast<int64_t>(static_cast<uint64_t>(p.ts) + static_cast<uint64_t>(in.i()));
  return p.ts;
}

}  // namespace

void put(Out& o, const ProcessRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.i(r.pid);
  o.opt(r.ppid);
  o.str(r.cmdline);
  o.opt(r.start_ns);
  o.opt(r.end_ns);
  o.opt(r.exit_code);
  o.opt(r.exit_signal);
}
void get(In& in, ProcessRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.pid = in.i();
  r.ppid = in.opt();
  r.cmdline = in.str();
  r.start_ns = in.opt();
  r.end_ns = in.opt();
  r.exit_code = in.opt();
  r.exit_signal = in.opt();
}

void put(Out& o, const ThreadRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.i(r.process_id);
  o.i(r.tid);
  o.str(r.name);
}
void get(In& in, ThreadRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.process_id = in.i();
  r.tid = in.i();
  r.name = in.str();
}

void put(Out& o, const SpanRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.i(r.thread_id);
  put_ts(o, r.start_ns, p);
  o.opt(r.dur_ns);
  o.u(r.name_id);
  o.i(r.depth);
  o.opt(r.arg0);
  o.opt(r.arg1);
  o.opt(r.arg2);
}
void get(In& in, SpanRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.thread_id = in.i();
  r.start_ns = get_ts(in, p);
  r.dur_ns = in.opt();
  r.name_id = static_cast<uint32_t>(in.u());
  r.depth = static_cast<int32_t>(in.i());
  r.arg0 = in.opt();
  r.arg1 = in.opt();
  r.arg2 = in.opt();
}

void put(Out& o, const InstantRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.i(r.thread_id);
  put_ts(o, r.ts_ns, p);
  o.u(r.name_id);
  o.opt(r.arg0);
  o.opt(r.arg1);
  o.opt(r.arg2);
}
void get(In& in, InstantRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.thread_id = in.i();
  r.ts_ns = get_ts(in, p);
  r.name_id = static_cast<uint32_t>(in.u());
  r.arg0 = in.opt();
  r.arg1 = in.opt();
  r.arg2 = in.opt();
}

void put(Out& o, const CounterTrackRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.str(r.name);
  o.str(r.unit);
  o.i(r.pid);
}
void get(In& in, CounterTrackRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.name = in.str();
  r.unit = in.str();
  r.pid = in.i();
}

void put(Out& o, const CounterRow& r, Prev& p) {
  o.i(r.track_id);
  put_ts(o, r.ts_ns, p);
  o.d(r.value);
}
void get(In& in, CounterRow& r, Prev& p) {
  r.track_id = in.i();
  r.ts_ns = get_ts(in, p);
  r.value = in.d();
}

void put(Out& o, const GpuActivityRow& r, Prev& p) {
  put_id(o, r.id, p);
  o.i(r.process_id);
  o.i(r.device);
  o.i(r.stream);
  o.i(r.context);
  o.str(r.kind);
  put_ts(o, r.start_ns, p);
  o.i(r.dur_ns);
  o.u(r.name_id);
  o.i(r.bytes);
  o.str(r.copy_kind);
  o.str(r.src_kind);
  o.str(r.dst_kind);
  o.i(r.correlation_id);
}
void get(In& in, GpuActivityRow& r, Prev& p) {
  r.id = get_id(in, p);
  r.process_id = in.i();
  r.device = in.i();
  r.stream = in.i();
  r.context = in.i();
  r.kind = in.str();
  r.start_ns = get_ts(in, p);
  r.dur_ns = in.i();
  r.name_id = static_cast<uint32_t>(in.u());
  r.bytes = in.i();
  r.copy_kind = in.str();
  r.src_kind = in.str();
  r.dst_kind = in.str();
  r.correlation_id = in.i();
}

void put(Out& o, const FlushRow& r, Prev& p) {
  put_ts(o, r.ts_ns, p);
  o.i(r.events);
  o.i(r.dropped_total);
  o.opt(r.first_span_id);
  o.opt(r.last_span_id);
  o.opt(r.min_start_ns);
  o.opt(r.max_end_ns);
}
void get(In& in, FlushRow& r, Prev& p) {
  r.ts_ns = get_ts(in, p);
  r.events = in.i();
  r.dropped_total = in.i();
  r.first_span_id = in.opt();
  r.last_span_id = in.opt();
  r.min_start_ns = in.opt();
  r.max_end_ns = in.opt();
}

void put(Out& o, const SpanSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.thread_id);
  o.u(r.name_id);
  o.i(r.grp);
  o.i(r.count);
  o.i(r.total_ns);
  o.i(r.min_ns);
  o.i(r.max_ns);
  o.str(r.sketch);
}
void get(In& in, SpanSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.thread_id = in.i();
  r.name_id = static_cast<uint32_t>(in.u());
  r.grp = in.i();
  r.count = in.i();
  r.total_ns = in.i();
  r.min_ns = in.i();
  r.max_ns = in.i();
  r.sketch = in.str();
}

void put(Out& o, const InstantSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.thread_id);
  o.u(r.name_id);
  o.i(r.grp);
  o.i(r.count);
}
void get(In& in, InstantSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.thread_id = in.i();
  r.name_id = static_cast<uint32_t>(in.u());
  r.grp = in.i();
  r.count = in.i();
}

void put(Out& o, const HandoffSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.thread_id);
  o.i(r.loader);
  o.i(r.batches);
  o.i(r.samples);
  o.i(r.unsized);
  o.i(r.steps);
  o.i(r.step_total_ns);
  o.i(r.step_min_ns);
  o.i(r.step_max_ns);
  o.str(r.step_sketch);
  o.i(r.starts);
  o.i(r.start_total_ns);
}
void get(In& in, HandoffSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.thread_id = in.i();
  r.loader = in.i();
  r.batches = in.i();
  r.samples = in.i();
  r.unsized = in.i();
  r.steps = in.i();
  r.step_total_ns = in.i();
  r.step_min_ns = in.i();
  r.step_max_ns = in.i();
  r.step_sketch = in.str();
  r.starts = in.i();
  r.start_total_ns = in.i();
}

void put(Out& o, const QueueSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.process_id);
  o.i(r.loader);
  for (int64_t v :
       {r.covered_ns, r.ready_ns, r.ready_min, r.ready_max, r.empty_ns, r.flight_ns, r.flight_min, r.flight_max})
    o.i(v);
}
void get(In& in, QueueSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.process_id = in.i();
  r.loader = in.i();
  for (int64_t* v : {&r.covered_ns, &r.ready_ns, &r.ready_min, &r.ready_max, &r.empty_ns, &r.flight_ns, &r.flight_min,
                     &r.flight_max})
    *v = in.i();
}

void put(Out& o, const CounterSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.track_id);
  o.i(r.count);
  o.d(r.sum);
  o.d(r.min);
  o.d(r.max);
  o.i(r.last_ts_ns);
  o.d(r.last);
}
void get(In& in, CounterSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.track_id = in.i();
  r.count = in.i();
  r.sum = in.d();
  r.min = in.d();
  r.max = in.d();
  r.last_ts_ns = in.i();
  r.last = in.d();
}

void put(Out& o, const GpuSummaryRow& r, Prev& p) {
  o.i(r.level_ns);
  put_ts(o, r.bucket, p);
  o.i(r.process_id);
  o.i(r.device);
  o.str(r.kind);
  o.i(r.count);
  o.i(r.total_ns);
  o.i(r.bytes);
}
void get(In& in, GpuSummaryRow& r, Prev& p) {
  r.level_ns = in.i();
  r.bucket = get_ts(in, p);
  r.process_id = in.i();
  r.device = in.i();
  r.kind = in.str();
  r.count = in.i();
  r.total_ns = in.i();
  r.bytes = in.i();
}

void put(Out& o, const Reader::SpanTotal& r, Prev& p) {
  put_ts(o, r.bucket, p);
  o.i(r.thread_id);
  o.u(r.name_id);
  o.i(r.count);
  o.i(r.total_ns);
}
void get(In& in, Reader::SpanTotal& r, Prev& p) {
  r.bucket = get_ts(in, p);
  r.thread_id = in.i();
  r.name_id = static_cast<uint32_t>(in.u());
  r.count = in.i();
  r.total_ns = in.i();
}

void put(Out& o, const Reader::CounterTotal& r, Prev& p) {
  put_ts(o, r.bucket, p);
  o.i(r.track_id);
  o.i(r.count);
  o.d(r.sum);
}
void get(In& in, Reader::CounterTotal& r, Prev& p) {
  r.bucket = get_ts(in, p);
  r.track_id = in.i();
  r.count = in.i();
  r.sum = in.d();
}

void put(Out& o, const Reader::GpuTotal& r, Prev& p) {
  put_ts(o, r.bucket, p);
  o.i(r.device);
  o.i(r.count);
  o.i(r.total_ns);
}
void get(In& in, Reader::GpuTotal& r, Prev& p) {
  r.bucket = get_ts(in, p);
  r.device = in.i();
  r.count = in.i();
  r.total_ns = in.i();
}

void put(Out& o, const TableHeads& r, Prev&) {
  o.i(r.spans);
  o.i(r.instants);
  o.i(r.counters);
  o.i(r.gpu_activities);
}
void get(In& in, TableHeads& r, Prev&) {
  r.spans = in.i();
  r.instants = in.i();
  r.counters = in.i();
  r.gpu_activities = in.i();
}

void put(Out& o, const SessionEntry& r, Prev&) {
  o.i(r.launcher_pid);
  o.str(r.db_path);
  o.str(r.command);
  o.i(r.started_unix);
  o.i(r.ended_unix);
}
void get(In& in, SessionEntry& r, Prev&) {
  r.launcher_pid = static_cast<pid_t>(in.i());
  r.db_path = in.str();
  r.command = in.str();
  r.started_unix = in.i();
  r.ended_unix = in.i();
}

void put(Out& o, const std::pair<int64_t, int64_t>& r, Prev& p) {
  put_ts(o, r.first, p);
  o.i(r.second);
}
void get(In& in, std::pair<int64_t, int64_t>& r, Prev& p) {
  r.first = get_ts(in, p);
  r.second = in.i();
}

void put(Out& o, const int64_t& r, Prev& p) { put_ts(o, r, p); }
void get(In& in, int64_t& r, Prev& p) { r = get_ts(in, p); }
void put(Out& o, const uint32_t& r, Prev&) { o.u(r); }
void get(In& in, uint32_t& r, Prev&) { r = static_cast<uint32_t>(in.u()); }

}  // namespace stallscope::remote
