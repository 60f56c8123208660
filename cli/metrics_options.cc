// The metrics endpoint options of the commands that record; see metrics_options.h.
#include "cli/metrics_options.h"

#include <arpa/inet.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli/command.h"

extern char** environ;

namespace stallscope::cli {

void add_metrics_options(CLI::App& app, MetricsSettings& s) {
  parse_with(app.add_option("--metrics-port")
                 ->type_name("PORT")
                 ->description("serve live metrics in the Prometheus text format at\n"
                               "http://ADDR:PORT/metrics while recording (docs/metrics.md); a port in\n"
                               "use is an error before anything starts"),
             [&s](const std::string& v) -> std::string {
               unsigned n = 0;
               if (!parse_count(v, &n) || n > 65535) return "needs a port number from 1 to 65535";
               s.port = static_cast<int>(n);
               return "";
             });
  parse_with(app.add_option("--metrics-address")
                 ->type_name("ADDR")
                 ->description("the address --metrics-port listens on (default 127.0.0.1, this machine\n"
                               "only; 0.0.0.0 or :: for every interface)"),
             [&s](const std::string& v) -> std::string {
               unsigned char buf[sizeof(struct in6_addr)];
               if (::inet_pton(AF_INET, v.c_str(), buf) != 1 && ::inet_pton(AF_INET6, v.c_str(), buf) != 1) {
                 return "needs a numeric IPv4 or IPv6 address, e.g. 127.0.0.1 or ::1 ('" + v + "')";
               }
               s.address = v;
               s.address_given = true;
               return "";
             });
  parse_with(app.add_option("--job")->type_name("NAME")->description(
                 "the metrics' job label (default: $TORCHELASTIC_RUN_ID, else the\n"
                 "recording's file name without .db)"),
             [&s](const std::string& v) -> std::string {
               if (v.empty()) return "needs a name";
               s.job = v;
               return "";
             });
}

int start_metrics(const CLI::App& app, const MetricsSettings& s, std::function<std::string()> path,
                  const std::map<std::string, std::string>& env, std::unique_ptr<MetricsEndpoint>* out) {
  if (s.port == 0) {
    if (s.address_given) return usage_error(app, "--metrics-address needs --metrics-port");
    if (!s.job.empty()) return usage_error(app, "--job needs --metrics-port");
    return 0;
  }
  auto endpoint = std::make_unique<MetricsEndpoint>();
  endpoint->live = std::make_unique<metrics::LiveMetrics>(std::move(path), metrics::session_labels(s.job, env, ""));
  metrics::LiveMetrics* live = endpoint->live.get();
  auto server = metrics::MetricsServer::start(s.address, s.port, [live] { return live->scrape(); });
  if (!server.ok()) {
    std::fprintf(stderr, "stallscope: --metrics-port: %s\n", server.status().message().c_str());
    return 1;
  }
  endpoint->server = std::move(*server);
  *out = std::move(endpoint);
  return 0;
}

std::map<std::string, std::string> own_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

std::map<std::string, std::string> process_environment(long pid) {
  std::map<std::string, std::string> env;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  while (at < all.size()) {
    size_t end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    const std::string kv = all.substr(at, end - at);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    at = end + 1;
  }
  return env;
}

}  // namespace stallscope::cli
