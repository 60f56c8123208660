// MetricsServer over cpp-httplib: one listening thread, two handler threads.
#include "export/metrics_server.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace stallscope::metrics {

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> done{false};  // listen_after_bind() returned
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::available() { return true; }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address, int port, Handler body) {
  auto impl = std::make_unique<Impl>();
  httplib::Server& svr = impl->server;
  svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
  // SO_REUSEADDR only: the library's default adds SO_REUSEPORT, with which a second stallscope of
  // the same user would bind the same port and share its scrapes instead of being refused.
  svr.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  svr.Get("/metrics", [body = std::move(body)](const httplib::Request&, httplib::Response& res) {
    res.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("stallscope: the metrics are at /metrics\n", "text/plain; charset=utf-8");
  });
  errno = 0;
  if (!svr.bind_to_port(address, port)) {
    const int err = errno;
    std::string why = err == EADDRINUSE ? "the port is in use"
                      : err != 0        ? std::strerror(err)
                                        : "the address cannot be bound";
    return Status::Error("cannot listen on " + address + ":" + std::to_string(port) + ": " + why);
  }
  // The server's threads (this one and the pool it starts) take no asynchronous signal: those are
  // for the thread that passes them on to the program.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->done = true;
  });
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

void MetricsServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  // stop() only ends a server that listens already: wait for the thread to get there.
  for (int i = 0; i < 2000 && !impl_->server.is_running() && !impl_->done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace stallscope::metrics
