// `stallscope serve`: answers a dashboard's (or `top`'s) reads of the recordings on this machine,
// over stdin/stdout (started by ssh: `ssh node stallscope serve --stdio`) or a loopback TCP port.
// It only reads: a recording and the training that writes it are never touched. It runs as the
// user who started it, so it opens what that user may read and nothing else.
#pragma once

#include <string>

namespace stallscope::remote {

struct ServeOptions {
  // The token a client's hello must carry (serve --port); empty: none (serve --stdio, where ssh
  // has already authenticated the user).
  std::string token;
};

// Answers one client on in_fd/out_fd until it closes the connection (returns 0) or sends what this
// build does not speak: a malformed frame, another protocol version, a wrong token (returns 2,
// with the one line in *error).
int serve_connection(int in_fd, int out_fd, const ServeOptions& opt, std::string* error);

// Listens on 127.0.0.1:port (0: any free port), writes a new token to a 0600 file in the session
// registry folder, prints the URI to use (with the token) and serves each connection in a thread of
// its own until SIGINT/SIGTERM. Returns the exit status.
int serve_port(int port, const std::string& token_file);

}  // namespace stallscope::remote
