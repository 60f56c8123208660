// `stallscope serve --stdio | --port N`: answers a dashboard's reads of this machine's recordings
// (remote/server.h), for `stallscope ui ssh://THIS-HOST/...` (which runs `ssh HOST stallscope
// serve --stdio` itself) and `stallscope ui tcp://HOST:N/?token=...` (through a tunnel the user
// made). It only reads. Errors: a malformed frame, another protocol version, a wrong token: one
// line on stderr and exit 2.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "remote/server.h"

namespace stallscope::cli {
namespace {

struct ServeArgs {
  bool stdio = false;
  int port = -1;
  std::string token_file;
};

Body define(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.add_flag("--stdio", a->stdio, "speak the protocol on stdin/stdout (what `stallscope ui ssh://` starts)");
  parse_with(app.add_option("--port", "listen on 127.0.0.1:N (0: a free port), with a token")->type_name("N"),
             [a](const std::string& v) -> std::string {
               char* end = nullptr;
               const long p = std::strtol(v.c_str(), &end, 10);
               if (v.empty() || *end || p < 0 || p > 65535) return "needs a port from 0 to 65535";
               a->port = static_cast<int>(p);
               return "";
             });
  app.add_option("--token-file", a->token_file, "where --port writes its token (mode 0600)")->type_name("FILE");
  return [&app, a] {
    if (a->stdio == (a->port >= 0)) return usage_error(app, "serve: give --stdio or --port N (one of them)");
    if (a->port >= 0) return remote::serve_port(a->port, a->token_file);
    // stdout carries frames only: anything else that prints goes to stderr.
    const int out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (out < 0) {
      std::fprintf(stderr, "stallscope serve: stdout is not usable\n");
      return 1;
    }
    ::dup2(2, 1);
    std::string error;
    const int rc = remote::serve_connection(0, out, {}, &error);
    if (rc != 0) std::fprintf(stderr, "stallscope serve: %s\n", error.c_str());
    return rc;
  };
}

}  // namespace

extern const Command kServeCommand{
    "serve",
    "let a dashboard on another machine read this machine's recordings",
    "stallscope serve --stdio\n"
    "stallscope serve --port N [--token-file FILE]",
    "Answers the reads of a dashboard (or 'stallscope top') on another machine: the summaries of\n"
    "a run, the detail of a window, the rows since the last read of a live recording, and the\n"
    "list of this machine's sessions. It only reads; the recording and the training are never\n"
    "touched, and it opens only what the user it runs as may read.\n"
    "\n"
    "You rarely start it yourself: 'stallscope ui ssh://HOST/path/run.db' runs\n"
    "'ssh HOST stallscope serve --stdio' (your ssh config, keys and ProxyJump apply). For a tunnel\n"
    "of your own (ssh -L, kubectl port-forward), 'serve --port N' listens on 127.0.0.1 only, writes\n"
    "a token to a 0600 file and prints the tcp:// URI to give 'stallscope ui'. Described in\n"
    "docs/dashboard.md (Remote nodes).",
    "Exit status: 0 when the client closed the connection (--stdio) or on SIGINT/SIGTERM (--port),\n"
    "1 when the port cannot be opened, 2 on usage errors and on what this build does not speak\n"
    "(a malformed frame, another protocol version, a wrong token).\n"
    "\n"
    "Examples:\n"
    "  stallscope ui ssh://gpu-node-3/home/me/runs/run.db     # on your laptop\n"
    "  stallscope serve --port 8765                           # on the node, then ssh -L 8765:127.0.0.1:8765",
    define,
};

}  // namespace stallscope::cli
