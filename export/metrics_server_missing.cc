// MetricsServer in a build without cpp-httplib: start() says so in one line.
#include "export/metrics_server.h"

namespace stallscope::metrics {

struct MetricsServer::Impl {};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;
void MetricsServer::stop() {}
bool MetricsServer::available() { return false; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string&, int, Handler) {
  return Status::Error(
      "this build has no metrics endpoint (cpp-httplib was missing at configure time: install "
      "libcpp-httplib-dev, scripts/setup.sh, and build again)");
}

}  // namespace stallscope::metrics
