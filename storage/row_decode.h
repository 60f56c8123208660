// How a row of spans, instants, gpu_activities or a summary table is read: the column list and the
// decoder, in one place for every reader of those tables (Reader, the analysis's bulk load, the dashboard's tail).
#pragma once

#include <optional>

#include "storage/rows.h"
#include "storage/sqlite.h"

namespace stallscope {

inline constexpr const char* kSpanColumns = "id, thread_id, start_ns, dur_ns, name_id, depth, arg0, arg1, arg2";
inline constexpr const char* kInstantColumns = "id, thread_id, ts_ns, name_id, arg0, arg1, arg2";
inline constexpr const char* kGpuActivityColumns =
    "id, process_id, device, stream, context, kind, start_ns, dur_ns, name_id, bytes, copy_kind, src_kind, dst_kind, "
    "correlation_id";

// The summary tables (docs/schema.md, "Summaries").
inline constexpr const char* kSpanSummaryColumns =
    "level_ns, bucket, thread_id, name_id, grp, count, total_ns, min_ns, max_ns, sketch";
inline constexpr const char* kInstantSummaryColumns = "level_ns, bucket, thread_id, name_id, grp, count";
inline constexpr const char* kCounterSummaryColumns =
    "level_ns, bucket, track_id, count, sum, min, max, last_ts_ns, last";
inline constexpr const char* kGpuSummaryColumns = "level_ns, bucket, process_id, device, kind, count, total_ns, bytes";
inline constexpr const char* kHandoffSummaryColumns =
    "level_ns, bucket, thread_id, loader, batches, samples, unsized, steps, step_total_ns, step_min_ns, step_max_ns, "
    "step_sketch, starts, start_total_ns";
inline constexpr const char* kQueueSummaryColumns =
    "level_ns, bucket, process_id, loader, covered_ns, ready_ns, ready_min, ready_max, empty_ns, flight_ns, "
    "flight_min, "
    "flight_max";

// NULL -> nullopt.
inline std::optional<int64_t> column_opt(const Stmt& s, int c) {
  if (s.is_null(c)) return std::nullopt;
  return s.int64(c);
}

// Each reads the current row of a statement that selected the matching column list first.
SpanRow decode_span(const Stmt& s);
InstantRow decode_instant(const Stmt& s);
GpuActivityRow decode_gpu_activity(const Stmt& s);
SpanSummaryRow decode_span_summary(const Stmt& s);
InstantSummaryRow decode_instant_summary(const Stmt& s);
CounterSummaryRow decode_counter_summary(const Stmt& s);
GpuSummaryRow decode_gpu_summary(const Stmt& s);
HandoffSummaryRow decode_handoff_summary(const Stmt& s);
QueueSummaryRow decode_queue_summary(const Stmt& s);

}  // namespace stallscope
