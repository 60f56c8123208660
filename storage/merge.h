// `stallscope merge`: one recording of a whole job from the recordings of its parts (one per rank
// when each rank ran its own `stallscope run`, or per node), ranks and nodes kept apart, clocks
// aligned on the first input's session clock.
//
// Clocks. Recordings made on one host share CLOCK_MONOTONIC: the offset is the difference of their
// `start_mono_ns`, exactly. Across hosts the offset starts from the realtime clock recorded beside
// the monotonic one (`start_real_ns`, NTP-disciplined: typically within milliseconds) and is then
// refined from the collectives every rank records (docs/events.md, torch.distributed): all ranks
// leave a collective together, so the median difference of matched collectives' completion times
// is the offset; their spread (the median absolute deviation) is the residual error stated.
//
// Rows keep their meaning: string ids are re-interned (and the string-id arguments of the
// vocabulary's events follow), pids of another host are moved by multiples of 10^7 (above Linux's
// largest pid) so that processes of different nodes never share one (and pid arguments follow),
// instants are interleaved by time (readers rely on ids following time; see Reader), spans keep
// the flush index valid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope {

struct MergedInput {
  std::string path, host;
  int64_t offset_ns = 0;  // added to the input's times
  int64_t pid_shift = 0;  // added to its pids
  // How the offset was found: "same host" (monotonic clock, exact), "realtime" (start_real_ns
  // alone), or "collectives" (realtime refined by `matched` collectives; residual_ns their MAD).
  std::string clock;
  int64_t matched = 0;
  int64_t residual_ns = 0;
  int64_t spans = 0, instants = 0, counters = 0, gpu_activities = 0;
};

// Writes `output` (which must not exist) from `inputs` (two or more recordings). Refuses, naming
// the two files, a file given twice and, unless `allow_mismatch`, recordings that are not parts of
// one job: different job ids (meta `job`), different world sizes, or the same rank twice (meta
// `rank`; these keys are written by `stallscope run` under torchrun, see docs/schema.md).
Result<std::vector<MergedInput>> merge_recordings(const std::vector<std::string>& inputs, const std::string& output,
                                                  bool allow_mismatch = false);

}  // namespace stallscope
