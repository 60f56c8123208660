// The client's end of `stallscope serve`: a connection to one node, shared by every recording
// opened there, that carries many calls at once (each waits for its own answer) and reconnects
// after the link was lost. Two transports: the user's own ssh running `stallscope serve --stdio`
// on the node (their config, keys, agent and ProxyJump apply unchanged), or a TCP connection to
// `stallscope serve --port` (through a tunnel the user made).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "remote/protocol.h"
#include "remote/wire.h"

namespace stallscope::remote {

// ssh://[user@]host[:port][/path] or tcp://host:port[/path][?token=T]. A path after the host is
// the node's: ssh://node/home/me/run.db, ssh://node/~/run.db; none: the node's session list.
struct Endpoint {
  std::string scheme, user, host, token;
  int port = 0;
  std::string path;
  // scheme://[user@]host[:port]: what one link serves.
  std::string node() const;
};
Result<Endpoint> parse_uri(const std::string& uri);

// The command line that runs `stallscope ARGS` on `e`'s node through the user's ssh:
// $STALLSCOPE_SSH (default `ssh`), then `options` (e.g. -T or -t), the port and [user@]host, then
// $STALLSCOPE_REMOTE_COMMAND (default `stallscope`) and `args` as one remote command.
std::vector<std::string> ssh_command(const Endpoint& e, const std::vector<std::string>& options,
                                     const std::string& args);

// STALLSCOPE_LINK_TRACE=1: each call's method, time and bytes on stderr (where a slow link's time
// goes), and the answers sent ahead that no call took (Reader::expect's arguments drifted from the
// call's that follows).
bool trace_calls();

class Link {
  struct Call;  // one call's answer as it comes (private)

 public:
  // The link to `e`'s node, shared by every caller in this process (made on first use).
  static std::shared_ptr<Link> to(const Endpoint& e);
  ~Link();

  // Connects if not connected (again after a loss, at most once a second); the error is
  // transient when the node may come back.
  Status ensure();
  // How many times it has connected: a handle opened under another epoch is gone.
  uint64_t epoch();
  // One call: sends it, hands each kPart's payload to `on_part` (on this thread), and returns the
  // kDone's result bytes (after the ok byte), or the node's error line, or a transient error when
  // the link was lost meanwhile.
  Result<std::string> call(Method m, uint64_t handle, const std::string& args,
                           const std::function<void(std::string_view)>& on_part = {});
  // The same in two halves, so that many calls cost one round trip: start() sends the call,
  // finish() waits for its answer (its parts are held until then). A call started and never
  // finished costs only its answer's memory until that answer has come.
  struct Pending {
    std::shared_ptr<Call> call;
    Method method{};
    uint64_t handle = 0;
    int64_t t0_us = 0;             // STALLSCOPE_LINK_TRACE's clock
    bool ahead = false;            // sent before it was asked for (Reader::expect)
    Status failed = Status::Ok();  // not sent: the link was down
  };
  std::shared_ptr<Pending> start(Method m, uint64_t handle, const std::string& args);
  Result<std::string> finish(const std::shared_ptr<Pending>& p,
                             const std::function<void(std::string_view)>& on_part = {});
  // A call that wants no answer (begin and end of a read, hints); dropped when not connected.
  void tell(Method m, uint64_t handle, const std::string& args);
  const std::string& node() const { return node_; }
  // The node's host name and stallscope version, from its hello.
  std::string peer() const;
  // Bytes received so far (payloads as sent, deflated): what crossed the link.
  int64_t bytes_in() const { return bytes_in_; }
  // The same, of every link of this process.
  static int64_t total_bytes_in();

 private:
  explicit Link(Endpoint e);
  struct Call {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Frame> frames;
    bool lost = false;
  };
  Status connect_locked();
  void disconnect_locked(const std::string& why);
  void receive(int fd, uint64_t epoch);
  Status lost_status() const;

  Endpoint e_;
  std::string node_;
  std::mutex mu_;  // the connection's state and the calls' table
  std::mutex write_mu_;
  bool connected_ = false;
  uint64_t epoch_ = 0;
  int64_t last_attempt_ms_ = -1;
  std::string last_error_;
  int to_fd_ = -1, from_fd_ = -1;  // the node's stdin and stdout (one socket for tcp)
  pid_t child_ = -1;
  int err_fd_ = -1;
  std::string stderr_tail_;  // ssh's (and the node's) last words, for the error line
  std::thread receiver_, err_reader_;
  std::map<uint32_t, std::shared_ptr<Call>> calls_;
  uint32_t next_id_ = 1;
  std::string peer_;
  std::atomic<int64_t> bytes_in_{0};
};

}  // namespace stallscope::remote
