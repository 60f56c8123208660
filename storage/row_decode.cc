// Row decoders; see row_decode.h.
#include "storage/row_decode.h"

#include <iterator>

namespace stallscope {

SpanRow decode_span(const Stmt& s) {
  SpanRow r;
  r.id = s.int64(0);
  r.thread_id = s.int64(1);
  r.start_ns = s.int64(2);
  r.dur_ns = column_opt(s, 3);
  r.name_id = static_cast<uint32_t>(s.int64(4));
  r.depth = static_cast<int32_t>(s.int64(5));
  r.arg0 = column_opt(s, 6);
  r.arg1 = column_opt(s, 7);
  r.arg2 = column_opt(s, 8);
  return r;
}

InstantRow decode_instant(const Stmt& s) {
  InstantRow r;
  r.id = s.int64(0);
  r.thread_id = s.int64(1);
  r.ts_ns = s.int64(2);
  r.name_id = static_cast<uint32_t>(s.int64(3));
  r.arg0 = column_opt(s, 4);
  r.arg1 = column_opt(s, 5);
  r.arg2 = column_opt(s, 6);
  return r;
}

GpuActivityRow decode_gpu_activity(const Stmt& s) {
  GpuActivityRow r;
  r.id = s.int64(0);
  r.process_id = s.int64(1);
  r.device = s.int64(2);
  r.stream = s.int64(3);
  r.context = s.int64(4);
  r.kind = s.text(5);
  r.start_ns = s.int64(6);
  r.dur_ns = s.int64(7);
  r.name_id = static_cast<uint32_t>(s.int64(8));
  r.bytes = s.is_null(9) ? 0 : s.int64(9);
  r.copy_kind = s.text(10);  // "" for NULL
  r.src_kind = s.text(11);
  r.dst_kind = s.text(12);
  r.correlation_id = s.int64(13);
  return r;
}

namespace {
// The key and count columns that span_summaries and instant_summaries share, in that order:
// level_ns, bucket, thread_id, name_id, grp, count.
template <typename Row>
Row decode_summary_key(const Stmt& s) {
  Row r;
  r.level_ns = s.int64(0);
  r.bucket = s.int64(1);
  r.thread_id = s.int64(2);
  r.name_id = static_cast<uint32_t>(s.int64(3));
  r.grp = s.int64(4);
  r.count = s.int64(5);
  return r;
}
}  // namespace

SpanSummaryRow decode_span_summary(const Stmt& s) {
  auto r = decode_summary_key<SpanSummaryRow>(s);
  r.total_ns = s.int64(6);
  r.min_ns = s.int64(7);
  r.max_ns = s.int64(8);
  r.sketch = s.blob(9);
  return r;
}

InstantSummaryRow decode_instant_summary(const Stmt& s) { return decode_summary_key<InstantSummaryRow>(s); }

CounterSummaryRow decode_counter_summary(const Stmt& s) {
  CounterSummaryRow r;
  r.level_ns = s.int64(0);
  r.bucket = s.int64(1);
  r.track_id = s.int64(2);
  r.count = s.int64(3);
  r.sum = s.real(4);
  r.min = s.real(5);
  r.max = s.real(6);
  r.last_ts_ns = s.int64(7);
  r.last = s.real(8);
  return r;
}

GpuSummaryRow decode_gpu_summary(const Stmt& s) {
  GpuSummaryRow r;
  r.level_ns = s.int64(0);
  r.bucket = s.int64(1);
  r.process_id = s.int64(2);
  r.device = s.int64(3);
  r.kind = s.text(4);
  r.count = s.int64(5);
  r.total_ns = s.int64(6);
  r.bytes = s.int64(7);
  return r;
}

HandoffSummaryRow decode_handoff_summary(const Stmt& s) {
  HandoffSummaryRow r;
  r.level_ns = s.int64(0);
  r.bucket = s.int64(1);
  r.thread_id = s.int64(2);
  r.loader = s.int64(3);
  r.batches = s.int64(4);
  r.samples = s.int64(5);
  r.unsized = s.int64(6);
  r.steps = s.int64(7);
  r.step_total_ns = s.int64(8);
  r.step_min_ns = s.int64(9);
  r.step_max_ns = s.int64(10);
  r.step_sketch = s.blob(11);
  r.starts = s.int64(12);
  r.start_total_ns = s.int64(13);
  return r;
}

QueueSummaryRow decode_queue_summary(const Stmt& s) {
  QueueSummaryRow r;
  int64_t* const columns[] = {&r.level_ns,  &r.bucket,    &r.process_id, &r.loader,    &r.covered_ns, &r.ready_ns,
                              &r.ready_min, &r.ready_max, &r.empty_ns,   &r.flight_ns, &r.flight_min, &r.flight_max};
  for (int c = 0; c < static_cast<int>(std::size(columns)); ++c) *columns[c] = s.int64(c);
  return r;
}

}  // namespace stallscope
