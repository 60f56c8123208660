// CSV files of a recording, for spreadsheets, pandas and `sqlite3`-less tools: in a folder, one
// file per table, each with a header line, fields quoted as RFC 4180 says (names may hold commas):
//   spans.csv           id, pid, tid, thread, name, start_ns, dur_ns (empty: never ended), depth, arg0..arg2
//   instants.csv        id, pid, tid, thread, name, ts_ns, arg0..arg2
//   counters.csv        name, unit, pid, ts_ns, value
//   gpu_activities.csv  id, pid, device, stream, kind, name, start_ns, dur_ns, bytes, copy_kind,
//                       src_kind, dst_kind, correlation
//   processes.csv       pid, ppid, role (training, worker W, other), cmdline, start_ns, end_ns, exit_code, exit_signal
// Times are nanoseconds since the session start, as in the database; `thread` and `role` are the
// names the Perfetto export and the dashboard give.
#pragma once

#include <memory>
#include <string>

#include "export/trace_export.h"

namespace stallscope::exporting {

// A sink writing into the folder `dir`, which must exist; files there of the same names are
// replaced.
std::unique_ptr<TraceSink> csv_sink(const std::string& dir);

}  // namespace stallscope::exporting
