// The client's end of `stallscope serve`; see link.h.
#include "remote/link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "stallscope/version.h"

namespace stallscope::remote {
namespace {

std::atomic<int64_t> g_bytes_in{0};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n ");
  if (end == std::string::npos) return "";
  size_t begin = text.find_last_of('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

// Waits until `fd` is readable or `ms` passed.
bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  return r > 0;
}

}  // namespace

bool trace_calls() {
  static const bool on = [] {
    const char* v = std::getenv("STALLSCOPE_LINK_TRACE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

std::string Endpoint::node() const {
  std::string n = scheme + "://";
  if (!user.empty()) n += user + "@";
  n += host;
  if (port) n += ":" + std::to_string(port);
  return n;
}

Result<Endpoint> parse_uri(const std::string& uri) {
  Endpoint e;
  const size_t colon = uri.find("://");
  if (colon == std::string::npos) return Status::Error(uri + " is not a URI (ssh://host/path or tcp://host:port/path)");
  e.scheme = uri.substr(0, colon);
  if (e.scheme != "ssh" && e.scheme != "tcp")
    return Status::Error(uri + ": unknown scheme " + e.scheme +
                         "://; use ssh://[user@]host[:port]/path or tcp://host:port");
  std::string rest = uri.substr(colon + 3);
  if (size_t q = rest.find('?'); q != std::string::npos) {
    const std::string query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    for (const std::string& kv : words([&] {
           std::string s = query;
           for (char& c : s)
             if (c == '&') c = ' ';
           return s;
         }())) {
      if (kv.rfind("token=", 0) == 0) e.token = kv.substr(6);
    }
  }
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) {
    e.path = rest.substr(slash);
    if (e.path.rfind("/~", 0) == 0) e.path = e.path.substr(1);  // ssh://node/~/run.db: in the home folder
    if (e.path == "/") e.path.clear();
  }
  if (size_t at = authority.rfind('@'); at != std::string::npos) {
    e.user = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  if (size_t pc = authority.rfind(':'); pc != std::string::npos && authority.find(']') == std::string::npos) {
    const std::string port = authority.substr(pc + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end || p <= 0 || p > 65535)
      return Status::Error(uri + ": the port must be a number from 1 to 65535");
    e.port = static_cast<int>(p);
    authority = authority.substr(0, pc);
  }
  e.host = authority;
  if (e.host.empty()) return Status::Error(uri + ": no host; write ssh://[user@]host[:port]/path");
  if (e.host[0] == '-') return Status::Error(uri + ": a host may not start with '-'");
  if (e.scheme == "tcp" && !e.port) return Status::Error(uri + ": tcp:// needs the port serve --port printed");
  return e;
}

std::vector<std::string> ssh_command(const Endpoint& e, const std::vector<std::string>& options,
                                     const std::string& args) {
  const char* ssh_env = std::getenv("STALLSCOPE_SSH");
  std::vector<std::string> argv = words(ssh_env && *ssh_env ? ssh_env : "ssh");
  argv.insert(argv.end(), options.begin(), options.end());
  if (e.port) {
    argv.push_back("-p");
    argv.push_back(std::to_string(e.port));
  }
  argv.push_back(e.user.empty() ? e.host : e.user + "@" + e.host);
  const char* remote = std::getenv("STALLSCOPE_REMOTE_COMMAND");
  argv.push_back(std::string(remote && *remote ? remote : "stallscope") + " " + args);
  return argv;
}

std::shared_ptr<Link> Link::to(const Endpoint& e) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<Link>> links;
  const std::string key = e.node() + "?" + e.token;
  std::lock_guard<std::mutex> lock(mu);
  if (auto l = links[key].lock()) return l;
  std::shared_ptr<Link> l(new Link(e));
  links[key] = l;
  return l;
}

Link::Link(Endpoint e) : e_(std::move(e)), node_(e_.node()) {}

Link::~Link() {
  std::unique_lock<std::mutex> lock(mu_);
  disconnect_locked("closed");
  lock.unlock();
  if (receiver_.joinable()) receiver_.join();
  if (err_reader_.joinable()) err_reader_.join();
  if (child_ > 0) ::waitpid(child_, nullptr, 0);
}

uint64_t Link::epoch() {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

std::string Link::peer() const { return peer_; }

int64_t Link::total_bytes_in() { return g_bytes_in; }

Status Link::lost_status() const {
  return Status::Transient("the link to " + node_ + " is down (" + last_error_ + "); retrying");
}

// Called with mu_ held: marks the link down and fails the calls in flight. Closing the
// descriptors wakes the receiver; the threads are joined by the next connect.
void Link::disconnect_locked(const std::string& why) {
  if (connected_) last_error_ = why;
  connected_ = false;
  for (auto& [id, c] : calls_) {
    std::lock_guard<std::mutex> cl(c->mu);
    c->lost = true;
    c->cv.notify_all();
  }
  calls_.clear();
  if (to_fd_ >= 0) ::shutdown(to_fd_, SHUT_RDWR);
  if (from_fd_ >= 0 && from_fd_ != to_fd_) ::shutdown(from_fd_, SHUT_RDWR);
  if (child_ > 0) ::kill(child_, SIGTERM);
}

Status Link::ensure() {
  std::unique_lock<std::mutex> lock(mu_);
  if (connected_) return Status::Ok();
  const int64_t now = now_ms();
  if (last_attempt_ms_ >= 0 && now - last_attempt_ms_ < 1000) return lost_status();
  last_attempt_ms_ = now;
  // The previous connection's threads have ended (or end now that its descriptors are shut).
  lock.unlock();
  if (receiver_.joinable()) receiver_.join();
  if (err_reader_.joinable()) err_reader_.join();
  lock.lock();
  if (connected_) return Status::Ok();
  for (int* fd : {&to_fd_, &from_fd_, &err_fd_}) {
    if (*fd >= 0 && !(fd == &from_fd_ && from_fd_ == to_fd_)) ::close(*fd);
  }
  to_fd_ = from_fd_ = err_fd_ = -1;
  if (child_ > 0) {
    ::kill(child_, SIGTERM);
    ::waitpid(child_, nullptr, 0);
    child_ = -1;
  }
  const int64_t t0 = trace_calls() ? now_us() : 0;
  Status s = connect_locked();
  if (t0 != 0) std::fprintf(stderr, "stallscope link: connect to %s: %.1f ms\n", node_.c_str(), (now_us() - t0) / 1e3);
  if (!s.ok()) {
    last_error_ = s.message();
    // The first connection's failure is the user's to fix (no such host, no stallscope there):
    // said as it is. A later one is the link's, and may pass.
    return epoch_ == 0 ? Status::Error(s.message()) : lost_status();
  }
  return Status::Ok();
}

Status Link::connect_locked() {
  ::signal(SIGPIPE, SIG_IGN);
  stderr_tail_.clear();
  if (e_.scheme == "tcp") {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(e_.host.c_str(), std::to_string(e_.port).c_str(), &hints, &res); rc != 0)
      return Status::Error("cannot resolve " + e_.host + ": " + ::gai_strerror(rc));
    int fd = -1;
    std::string why = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
    ::freeaddrinfo(res);
    if (fd < 0)
      return Status::Error("cannot connect to " + node_ + ": " + why +
                           " (is `stallscope serve --port` running there, and the tunnel up?)");
    // TCP keep-alives, as ssh's ServerAliveInterval: a tunnel that died silently is found dead in
    // about 20 s rather than when TCP gives up (hours).
    const int on = 1, idle = 5, interval = 5, count = 3;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    to_fd_ = from_fd_ = fd;
  } else {
    // Keep-alives let a silent link be found dead; -T: no terminal, the channel carries frames.
    std::vector<std::string> argv =
        ssh_command(e_, {"-T", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"}, "serve --stdio");
    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
      return Status::Error(std::string("cannot make pipes: ") + std::strerror(errno));
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return Status::Error(std::string("cannot start ssh: ") + std::strerror(errno));
    if (pid == 0) {
      ::dup2(in_pipe[0], 0);
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      ::signal(SIGPIPE, SIG_DFL);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    child_ = pid;
    to_fd_ = in_pipe[1];
    from_fd_ = out_pipe[0];
    err_fd_ = err_pipe[0];
    err_reader_ = std::thread([this, fd = err_fd_] {
      char buf[1024];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
        if (n <= 0) continue;
        std::lock_guard<std::mutex> lock(write_mu_);
        stderr_tail_.append(buf, static_cast<size_t>(n));
        if (stderr_tail_.size() > 4096) stderr_tail_.erase(0, stderr_tail_.size() - 4096);
      }
    });
  }
  // The hello, both ways.
  Out hello;
  hello.str(STALLSCOPE_VERSION);
  hello.str(e_.token);
  auto fail = [&](const std::string& why) {
    std::string detail;
    if (e_.scheme == "ssh") {
      // ssh's own last line says more than a closed pipe: the host is unknown, the key refused,
      // the command not found on the node. Give it a moment to arrive.
      if (err_reader_.joinable()) {
        mu_.unlock();
        for (int i = 0; i < 20; ++i) {
          {
            std::lock_guard<std::mutex> l(write_mu_);
            if (!stderr_tail_.empty()) break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        mu_.lock();
      }
      std::lock_guard<std::mutex> l(write_mu_);
      detail = last_line(stderr_tail_);
    }
    std::string line = "cannot reach stallscope on " + node_ + ": " + (detail.empty() ? why : detail);
    if (detail.find("not found") != std::string::npos || detail.find("No such file") != std::string::npos)
      line +=
          " (install the stallscope wheel there, or set STALLSCOPE_REMOTE_COMMAND to its path, e.g. "
          "~/venv/bin/stallscope)";
    if (to_fd_ >= 0) ::shutdown(to_fd_, SHUT_RDWR);
    if (child_ > 0) ::kill(child_, SIGTERM);
    return Status::Error(line);
  };
  if (!write_all(to_fd_, encode_frame(Frame{FrameType::kHello, 0, hello.take(), 0})).ok())
    return fail("it closed the connection");
  if (!readable_within(from_fd_, 60000)) return fail("no answer within 60 s");
  bool eof = false;
  auto reply = read_frame(from_fd_, &eof);
  if (!reply.ok()) return fail(eof ? "it closed the connection" : reply.status().message());
  In in(reply->payload);
  if (reply->type != FrameType::kHello) return fail("malformed hello");
  const bool ok = in.b();
  const std::string text = in.str();
  if (!ok) return fail(text);
  const std::string host = in.str();
  peer_ = host + " (stallscope " + text + ")";
  connected_ = true;
  ++epoch_;
  receiver_ = std::thread([this, fd = from_fd_, epoch = epoch_] { receive(fd, epoch); });
  return Status::Ok();
}

void Link::receive(int fd, uint64_t epoch) {
  while (true) {
    bool eof = false;
    auto f = read_frame(fd, &eof);
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch != epoch_ || !connected_) return;
    if (!f.ok()) {
      disconnect_locked(eof ? "the connection closed" : f.status().message());
      return;
    }
    const auto got = static_cast<int64_t>(kHeaderBytes + f->wire_bytes);
    bytes_in_ += got;
    g_bytes_in += got;
    auto it = calls_.find(f->id);
    if (it == calls_.end()) continue;  // an answer nobody waits for
    auto c = it->second;
    if (f->type == FrameType::kDone) calls_.erase(it);
    std::lock_guard<std::mutex> cl(c->mu);
    c->frames.push_back(std::move(*f));
    c->cv.notify_all();
  }
}

std::shared_ptr<Link::Pending> Link::start(Method m, uint64_t handle, const std::string& args) {
  auto p = std::make_shared<Pending>();
  p->method = m;
  p->handle = handle;
  p->t0_us = trace_calls() ? now_us() : 0;
  int fd;
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) {
      p->failed = lost_status();
      return p;
    }
    id = next_id_++;
    if (next_id_ == 0) next_id_ = 1;
    p->call = std::make_shared<Call>();
    calls_[id] = p->call;
    fd = to_fd_;
  }
  Out req;
  req.u(static_cast<uint8_t>(m));
  req.u(handle);
  req.bytes() += args;
  Status w;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    w = write_all(fd, encode_frame(Frame{FrameType::kRequest, id, req.take(), 0}));
  }
  if (!w.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    disconnect_locked(w.message());
    p->failed = lost_status();
  }
  return p;
}

Result<std::string> Link::finish(const std::shared_ptr<Pending>& p,
                                 const std::function<void(std::string_view)>& on_part) {
  if (!p->failed.ok()) return p->failed;
  const std::shared_ptr<Call>& c = p->call;
  size_t got = 0;
  while (true) {
    Frame f;
    bool lost = false;
    {
      std::unique_lock<std::mutex> cl(c->mu);
      c->cv.wait(cl, [&] { return c->lost || !c->frames.empty(); });
      if (c->frames.empty()) {
        lost = true;
      } else {
        f = std::move(c->frames.front());
        c->frames.pop_front();
      }
    }
    if (lost) {
      std::lock_guard<std::mutex> lock(mu_);  // not under c->mu: the receiver takes mu_ first
      return lost_status();
    }
    got += f.payload.size();
    if (f.type == FrameType::kPart) {
      if (on_part) on_part(f.payload);
      continue;
    }
    if (p->t0_us != 0) {
      std::fprintf(stderr, "stallscope link: call %d on %llu%s: %.1f ms, %zu bytes\n", static_cast<int>(p->method),
                   static_cast<unsigned long long>(p->handle), p->ahead ? " (sent ahead)" : "",
                   (now_us() - p->t0_us) / 1e3, got);
    }
    if (f.payload.empty()) return Status::Error(node_ + ": malformed answer");
    if (f.payload[0] == 1) return f.payload.substr(1);
    In in(std::string_view(f.payload).substr(1));
    return Status::Error(in.str());
  }
}

Result<std::string> Link::call(Method m, uint64_t handle, const std::string& args,
                               const std::function<void(std::string_view)>& on_part) {
  return finish(start(m, handle, args), on_part);
}

void Link::tell(Method m, uint64_t handle, const std::string& args) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    fd = to_fd_;
  }
  Out req;
  req.u(static_cast<uint8_t>(m));
  req.u(handle);
  req.bytes() += args;
  std::lock_guard<std::mutex> lock(write_mu_);
  (void)write_all(fd, encode_frame(Frame{FrameType::kRequest, 0, req.take(), 0}));  // a loss shows at the next call
}

}  // namespace stallscope::remote
