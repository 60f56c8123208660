// How a row of spans, instants or gpu_activities is read: the column list and the decoder, in one
// place for every reader of those tables (Reader, the analysis's bulk load, the dashboard's tail).
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

// NULL -> nullopt.
inline std::optional<int64_t> column_opt(const Stmt& s, int c) {
  if (s.is_null(c)) return std::nullopt;
  return s.int64(c);
}

// Each reads the current row of a statement that selected the matching column list first.
SpanRow decode_span(const Stmt& s);
InstantRow decode_instant(const Stmt& s);
GpuActivityRow decode_gpu_activity(const Stmt& s);

}  // namespace stallscope
