// LiveMetrics: what one scrape of `--metrics-port` does. It opens the session database read-only
// once it exists (storage's Reader), brings MetricsState up to date with the rows committed since
// the previous scrape, and renders the exposition text. Any failure is one line on stderr (once per
// distinct message) and `stallscope_up 0` in the text: the recording and the program go on.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "export/metrics.h"
#include "storage/reader.h"

namespace stallscope::metrics {

// The labels of a session: `job` from --job, else $TORCHELASTIC_RUN_ID, else the recording's file
// stem; `rank` from $RANK, else "0"; `host` the host name. `env` holds the program's environment
// (RANK, TORCHELASTIC_RUN_ID).
Labels session_labels(const std::string& job, const std::map<std::string, std::string>& env,
                      const std::string& db_path);

class LiveMetrics {
 public:
  // `path` says where the recording is ("" while not known yet); `labels` as session_labels()
  // makes them, with an empty job filled from the path once it is known.
  LiveMetrics(std::function<std::string()> path, Labels labels);
  // The exposition text as of now. Safe to call from several threads (one at a time inside).
  std::string scrape();

 private:
  void report(const std::string& line);
  std::function<std::string()> path_fn_;
  Labels labels_;
  std::mutex mu_;
  std::string path_;
  std::unique_ptr<Reader> reader_;
  MetricsState state_;
  std::string last_error_;
  int open_failures_ = 0;
};

}  // namespace stallscope::metrics
