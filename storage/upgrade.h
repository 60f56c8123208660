// Recordings made before the summaries (schema version 1): their summary tables are built from
// their rows and written back on first open, so that everything reading summaries reads every
// recording the same way (docs/schema.md, "Summaries").
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace stallscope {

class Db;

struct UpgradeOutcome {
  enum class What {
    kCurrent,      // version 2 already: nothing done
    kUpgraded,     // summaries built and written back; the file is version 2
    kNotWritable,  // version 1, but the file or its folder cannot be written: left as it is
    kNotFinished,  // version 1 and not closed cleanly (still being written, or cut off): left as it is
    kUnreadable,   // not a recording this build reads, or not there: what reads it next says why
  };
  What what = What::kCurrent;
  int64_t rows = 0;  // detail rows summarised
};

// Rows summarised so far, of the total.
using UpgradeProgress = std::function<void(int64_t done, int64_t total)>;

// Builds the summaries of a finished version 1 recording in one transaction (a run killed midway
// leaves the file as it was) and makes it version 2. Errors while building (a damaged file, a full
// disk) leave the file as it was.
Result<UpgradeOutcome> upgrade_to_summaries(const std::string& path, const UpgradeProgress& progress = {});

// For a version 1 recording that cannot be upgraded (read-only, or not closed cleanly): builds its
// summaries into TEMP tables of the connection `db` (read-only is enough), which its queries then
// read under the summary tables' names until it closes. The file is not touched. Call it outside
// any transaction of `db`.
Status build_temporary_summaries(Db& db, const UpgradeProgress& progress = {});

}  // namespace stallscope
