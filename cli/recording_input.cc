// Reading a recording for a command; see recording_input.h.
#include "cli/recording_input.h"

#include <cstdio>

#include "analysis/session.h"

namespace stallscope::cli {

int read_error(std::string msg) {
  for (char& c : msg) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const bool has_hint = msg.find("pass ") != std::string::npos || msg.find("upgrade") != std::string::npos;
  if (!has_hint) {
    if (msg.find("damaged") != std::string::npos || msg.find("truncated") != std::string::npos ||
        msg.find("malformed") != std::string::npos) {
      msg += "; record the run again, or pass another .db file";
    } else {
      msg += "; pass a .db recording written by `stallscope run`";
    }
  }
  std::fprintf(stderr, "stallscope: %s\n", msg.c_str());
  return 1;
}

std::optional<analysis::Report> analyze_recording(const std::string& path) {
  auto session = analysis::load_session(path);
  if (!session.ok()) {
    (void)read_error(session.status().message());
    return std::nullopt;
  }
  return analysis::analyze(*session);
}

}  // namespace stallscope::cli
