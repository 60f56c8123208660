// The Prometheus endpoint options of the commands that record (`stallscope run`, `stallscope
// attach`): --metrics-port, --metrics-address and --job, and starting the endpoint (export/) before
// the program starts or the attach begins, so that a port in use stops nothing that has begun.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "export/live_metrics.h"
#include "export/metrics_server.h"

namespace stallscope::cli {

struct MetricsSettings {
  int port = 0;  // 0: no endpoint
  std::string address = "127.0.0.1";
  bool address_given = false;
  std::string job;
};

// Adds --metrics-port PORT, --metrics-address ADDR and --job NAME to `app`.
void add_metrics_options(CLI::App& app, MetricsSettings& s);

// The endpoint while the command records; stops when destroyed.
struct MetricsEndpoint {
  std::unique_ptr<metrics::LiveMetrics> live;
  std::unique_ptr<metrics::MetricsServer> server;
};

// With --metrics-port: serves the recording that `path` names (asked at each scrape until known)
// with the labels of `env` (the program's environment). 0 and *out set, or (no --metrics-port) 0
// and nothing; 2 for a usage error only visible now; 1 after one line on stderr when the endpoint
// cannot listen (a port in use) or was not built.
int start_metrics(const CLI::App& app, const MetricsSettings& s, std::function<std::string()> path,
                  const std::map<std::string, std::string>& env, std::unique_ptr<MetricsEndpoint>* out);

// This process's environment, and another's (/proc/PID/environ; empty when unreadable).
std::map<std::string, std::string> own_environment();
std::map<std::string, std::string> process_environment(long pid);

}  // namespace stallscope::cli
