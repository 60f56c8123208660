// The terminal of `stallscope top`: termios and the VT100/ANSI escape sequences, the one file pair
// that sees them (no curses: docs/decisions.md, "stallscope top draws with VT100 sequences").
//
// A Terminal takes over an interactive terminal: no echo, keys read one by one, Ctrl-C read as a
// key, the alternate screen, the cursor hidden. Its destructor gives the terminal back as it was
// found, and so does every way out of the loop: `q`, Ctrl-C, SIGINT, SIGTERM or SIGHUP from outside.
#pragma once

#include <signal.h>
#include <termios.h>

#include <memory>
#include <string>
#include <vector>

namespace stallscope::cli {

struct TermSize {
  int cols = 80, rows = 24;
};

class Terminal {
 public:
  // Takes over the terminal on stdin/stdout; nullptr (and `why` says it) when either is not one.
  static std::unique_ptr<Terminal> open(std::string* why);
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  TermSize size() const;
  // Draws `lines` from the top-left corner, each cleared to its end, the rest of the screen
  // cleared; one write. The caller fits the lines to size() (top_frame.h).
  void draw(const std::vector<std::string>& lines);

  enum class Event { kTimeout, kQuit, kResize, kKey };
  // Waits up to `timeout_ms` for a key, a resize (SIGWINCH) or a request to quit (`q`, `Q`,
  // Ctrl-C, SIGINT, SIGTERM, SIGHUP). Signals are blocked outside this wait, so none is lost
  // between two waits.
  Event wait(int timeout_ms);

 private:
  Terminal() = default;
  void restore();
  termios saved_{};
  sigset_t old_mask_{};
  bool restored_ = false;
};

}  // namespace stallscope::cli
