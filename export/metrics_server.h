// MetricsServer: the HTTP endpoint of `--metrics-port`, the one file pair that sees the HTTP
// library (cpp-httplib). It binds when started, so that a busy port is an error before the program
// runs, then serves GET /metrics from threads of its own, which never take the signals that
// `stallscope run` passes on to the program. A build without cpp-httplib compiles
// metrics_server_missing.cc instead, whose start() says so.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace stallscope::metrics {

class MetricsServer {
 public:
  // The body of one scrape: the exposition text. Called on a server thread.
  using Handler = std::function<std::string()>;

  // Listens on address:port (port 1..65535); the error is one line fit for a user ("cannot listen
  // on 127.0.0.1:9400: the port is in use").
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address, int port, Handler body);
  // False in a build without the HTTP library.
  static bool available();

  ~MetricsServer();  // stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops listening and joins the server's threads; a scrape under way finishes first.
  void stop();

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stallscope::metrics
