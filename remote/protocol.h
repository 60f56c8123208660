// The calls of `stallscope serve` (docs/remote.md). A request's payload is
//   method u8 | handle varint | the method's arguments (remote/wire.h values)
// and its answer is any number of kPart frames (rows, streamed as the node reads them) and one
// kDone frame: ok u8, then the result, or the error line. Requests with id 0 get no answer (the
// read transaction's begin and end, hints). Methods only grow at the end: a node that does not
// know one answers with an error line, and the protocol version (remote/wire.h) changes only when
// an existing method's arguments or answer change.
#pragma once

#include <cstdint>
#include <string>

namespace stallscope::remote {

enum class Method : uint8_t {
  // Not bound to a handle.
  kOpenReader = 1,    // path -> handle, the path as the node resolved it
  kOpenTail = 2,      // path, cursor -> handle (a RecordingTail, resumed from the cursor)
  kClose = 3,         // (the handle's)
  kListSessions = 4,  // -> live sessions, recent sessions
  // A Reader's calls (storage/reader.h), in its order.
  kBeginRead = 10,
  kEndRead,
  kPreferLargeScans,
  kMeta,
  kStrings,
  kStringCount,
  kProcesses,
  kThreads,
  kCounterTracks,
  kFlushes,
  kLastFlush,
  kCount,
  kSpans,
  kAllSpans,
  kInstants,
  kCounters,
  kGpuActivities,
  kSpansNamed,
  kInstantsNamed,
  kFirstSpansPerThread,
  kSpansNamedIn,
  kInstantsNamedIn,
  kCountersOf,
  kCountersOfFrom,
  kGpuActivitiesFrom,
  kTimeOfLastRows,
  kHasSummaries,
  kBuildTemporarySummaries,
  kSpanSummaries,
  kInstantSummaries,
  kInstantSummariesRange,
  kHandoffSummaries,
  kQueueSummaries,
  kForEachSummaryRow,
  kFirstSpanBucket,
  kEdgeInstantBucket,
  kEndNs,
  kEndNsOfFlushesAndProcesses,
  kIdsBefore,
  kIdsThrough,
  kSpanIdRanges,
  kSpanTotals,
  kCounterTotals,
  kGpuTotals,
  kRowsPerBucket,
  kStringIds,
  kHeads,
  kNextIds,
  kForEachString,
  kForEachSpan,
  kForEachInstant,
  kForEachCounter,
  kForEachGpuActivity,
  kForEachFlush,
  kQueueSummariesRange,
  // A RecordingTail's calls (storage/recording_tail.h).
  kTailPoll = 80,   // max_rows, counter tracks decided so far -> the sink's calls as parts; stats
  kTailStartFrom,   // t0
  kTailReadWindow,  // t0, t1, tracks decided -> parts; stats
  kLast,
};

// The sink's calls in a tail's parts: a tag, then the call's arguments.
enum class SinkCall : uint8_t {
  kMeta = 1,
  kString,
  kProcesses,
  kThreads,
  kCounterTracks,
  kInstants,  // a list
  kSpans,     // a list
  kCounters,  // a list
  kGpu,       // a list
  kFlush,
};

// Rows per part of a streamed answer (about 1-2 MB before deflating).
constexpr size_t kRowsPerPart = 65536;

}  // namespace stallscope::remote
