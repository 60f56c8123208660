// TuneSet: the runs of one `stallscope tune -o DIR` (its tune.json, schema stallscope.tune/1) as the
// dashboard shows them: the baseline, every candidate in the order they ran, which one won, and
// the recording of each. `stallscope ui DIR` opens it as the compare view with the set's table on
// top: the baseline as A, a run of the set as B (the winner first), a click on a row to show
// another as B.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope::ui {

struct TuneRun {
  std::string name;       // its number in the folder: "00" (the baseline), "01", ...
  std::string file;       // its recording's file name without .db: "03-num_workers-4_prefetch..."
  std::string settings;   // "num_workers=4, prefetch_factor=2, ..." or "reference loader"
  std::string recording;  // its .db, as a path that opens from here
  std::string status;     // measured, stopped early, ended, failed, not applied, budget, interrupted
  std::optional<double> samples_per_s, stall;  // measured after the warm-up
  std::optional<double> predicted_samples_per_s, predicted_stall;
  std::optional<double> whole_samples_per_s;  // over the whole run, where it ended by itself
  int64_t steps = 0;                          // measured steps
  bool baseline = false, winner = false;
};

struct TuneSet {
  std::string dir;
  std::vector<TuneRun> runs;  // runs[0] is the baseline, then the candidates as they ran
  int winner = 0;             // index into runs
  // The run to show as B at first: the winner, or the first other measured run when the baseline
  // won; 0 when there is no other run (the baseline alone is then shown).
  int first_b() const;
  // The run named `name`: its number ("3" or "03"), its recording's file name with or without
  // .db, or its path.
  std::optional<int> find(const std::string& name) const;
};

// Reads DIR/tune.json. A recording path that does not open as written (the folder was moved, or
// tune ran from another directory) is looked for in DIR by its file name. Errors are one line that
// names the file and says what to pass instead.
Result<TuneSet> load_tune_set(const std::string& dir);

}  // namespace stallscope::ui
