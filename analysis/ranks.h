// Multi-rank jobs (torchrun, torch.distributed): each rank's figures and the slowest rank.
//
// A rank is a process with a `dist.rank` instant (docs/events.md); its part of the recording is
// that process and the processes it started (its DataLoader workers), analysed as a recording of
// its own (analyze() on the part). Collectives are matched across ranks by their sequence number
// (the k-th collective every rank records is the same one) and op: a rank *arrives* at a
// collective when it calls it (a `dist.collective` span's start, a `dist.issue` instant) and all
// leave together, so at each collective every rank but the last waits for the last one. The
// rank last most often is the slowest rank; the job loses to it, at each collective where it was
// last, the time between its arrival and the arrival before it (what the collective would have
// saved had it been no later than the next-slowest rank).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/session.h"

namespace stallscope::analysis {

struct RankStats {
  int64_t rank = 0, world_size = 0;
  std::optional<int64_t> local_rank;
  std::string node, job;
  int64_t pid = 0;
  // The rank's own report (analyze() on its processes).
  double wall_s = 0;
  int64_t steps = 0;
  std::optional<double> samples_per_s, step_p50_ms;
  double stall_fraction = 0;
  std::map<std::string, double> stall_by_cause_s;
  // Collectives it recorded, the time inside them (arrival to completion), and the part of that
  // spent waiting for later ranks at the matched ones.
  int64_t collectives = 0;
  double collective_s = 0, collective_wait_s = 0;
  int64_t last_at = 0;  // matched collectives it arrived at last
};

struct RankSummary {
  std::vector<RankStats> ranks;  // by rank
  int64_t matched = 0;           // collectives every rank recorded, with one op
  struct Slowest {
    int64_t rank = 0;
    int64_t last_at = 0;  // of `matched`
    double lost_s = 0;    // the job's time lost to it
  };
  std::optional<Slowest> slowest;
};

// Empty when fewer than two processes of `s` say their rank.
RankSummary analyze_ranks(const Session& s);

// The part of `s` that rank `rank` recorded (its process and the processes it started or named
// as workers); nullopt when no process says it is that rank.
std::optional<Session> rank_part(const Session& s, int64_t rank);

}  // namespace stallscope::analysis
