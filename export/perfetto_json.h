// The Chrome/Perfetto JSON trace format ("Trace Event Format"): what ui.perfetto.dev and
// chrome://tracing open. One object {"displayTimeUnit", "otherData", "traceEvents": [...]}, written
// as the rows stream (export/trace_export.h), one event a line:
//   - a process per recorded process and a thread per recorded thread, named like the dashboard's
//     lanes ("training (pid N)" / "main thread", "pin memory", "worker W"), in the dashboard's order
//     (process_sort_index, thread_sort_index);
//   - spans as complete events ("X"; a span that never ended reaches the end of the recording and
//     says so in its args), instants as thread-scoped instant events ("i"), arguments by their
//     vocabulary names (loader, batch, epoch, worker, us...);
//   - counter tracks as counter events ("C") in the process they describe: per-worker CPU and
//     run-queue delay, memory; and on the training process the series the analysis derives: when
//     the loop waited for data (1/0) and each loader's queue depth (batches in flight, ready);
//   - each batch's life as a flow ("s" where it was sent, "t" at its fetch in the worker, "f" where
//     it was handed to the loop), bound to the spans around those points;
//   - GPU kernels, copies, memsets and syncs in a process of their own per device and recording
//     process ("GPU d (pid N)"), a thread per stream.
// Times are microseconds since the session start with nanosecond decimals.
#pragma once

#include <cstdio>
#include <memory>

#include "export/trace_export.h"

namespace stallscope::exporting {

// A sink writing to `out` (not closed by the sink; end() flushes it and reports write errors).
std::unique_ptr<TraceSink> perfetto_json_sink(std::FILE* out);

}  // namespace stallscope::exporting
