// LiveMetrics: lazy open, incremental update, one line per new failure.
#include "export/live_metrics.h"

#include <unistd.h>

#include <cstdio>

namespace stallscope::metrics {

Labels session_labels(const std::string& job, const std::map<std::string, std::string>& env,
                      const std::string& db_path) {
  Labels l;
  auto get = [&env](const char* key) {
    auto it = env.find(key);
    return it == env.end() ? std::string() : it->second;
  };
  l.job = job;
  if (l.job.empty()) l.job = get("TORCHELASTIC_RUN_ID");
  if (l.job.empty() && !db_path.empty()) {
    std::string stem = db_path.substr(db_path.rfind('/') == std::string::npos ? 0 : db_path.rfind('/') + 1);
    if (const size_t dot = stem.rfind('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
    l.job = stem;
  }
  l.rank = get("RANK");
  if (l.rank.empty()) l.rank = "0";
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) l.host = host;
  return l;
}

LiveMetrics::LiveMetrics(std::function<std::string()> path, Labels labels)
    : path_fn_(std::move(path)), labels_(std::move(labels)) {}

void LiveMetrics::report(const std::string& line) {
  if (line == last_error_) return;
  last_error_ = line;
  std::fprintf(stderr, "stallscope: metrics: %s\n", line.c_str());
}

std::string LiveMetrics::scrape() {
  std::lock_guard<std::mutex> lock(mu_);
  bool up = false;
  if (!reader_) {
    if (path_.empty()) path_ = path_fn_();
    if (!path_.empty() && ::access(path_.c_str(), R_OK) == 0) {
      if (auto r = Reader::open(path_); r.ok()) {
        reader_ = std::move(*r);
      } else if (++open_failures_ >= 3) {  // not at once: the recorder may be writing the schema
        report(r.status().message());
      }
    }
    if (labels_.job.empty() && !path_.empty()) labels_.job = session_labels("", {}, path_).job;
  }
  if (reader_) {
    if (Status s = state_.update(*reader_); s.ok()) {
      up = true;
      last_error_.clear();
    } else {
      report(s.message());
    }
  }
  return MetricsState::render(state_.figures(), labels_, up);
}

}  // namespace stallscope::metrics
