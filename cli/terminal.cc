// Terminal: raw mode, the alternate screen and the signals that end or resize `stallscope top`.
#include "cli/terminal.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace stallscope::cli {
namespace {

std::atomic<int> g_quit{0}, g_resize{0};

void on_quit(int) { g_quit.store(1); }
void on_resize(int) { g_resize.store(1); }

constexpr int kQuitSignals[] = {SIGINT, SIGTERM, SIGHUP};

void write_all(const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away: nothing more to show
    done += static_cast<size_t>(n);
  }
}

// Enter the alternate screen, hide the cursor; and back.
constexpr const char* kEnter = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J";
constexpr const char* kLeave = "\x1b[0m\x1b[?25h\x1b[?1049l";

}  // namespace

std::unique_ptr<Terminal> Terminal::open(std::string* why) {
  if (::isatty(STDIN_FILENO) != 1 || ::isatty(STDOUT_FILENO) != 1) {
    *why = "stdin and stdout are not both a terminal";
    return nullptr;
  }
  std::unique_ptr<Terminal> t(new Terminal());
  if (::tcgetattr(STDIN_FILENO, &t->saved_) != 0) {
    *why = std::string("cannot read the terminal's settings: ") + std::strerror(errno);
    return nullptr;
  }
  // The signals are blocked except inside wait()'s ppoll, so that one arriving between two waits
  // is taken by the next wait instead of being missed.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGWINCH);
  for (int s : kQuitSignals) sigaddset(&block, s);
  ::sigprocmask(SIG_BLOCK, &block, &t->old_mask_);
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_quit;
  for (int s : kQuitSignals) ::sigaction(s, &sa, nullptr);
  sa.sa_handler = on_resize;
  ::sigaction(SIGWINCH, &sa, nullptr);

  termios raw = t->saved_;
  // No echo, no line editing, Ctrl-C and Ctrl-Z read as keys (ISIG off): the loop quits on Ctrl-C
  // and gives the terminal back itself. Output processing stays (\n is written as \r\n anyway).
  raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | ISIG | IEXTEN);
  raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) {
    *why = std::string("cannot set the terminal's mode: ") + std::strerror(errno);
    ::sigprocmask(SIG_SETMASK, &t->old_mask_, nullptr);
    return nullptr;
  }
  write_all(kEnter);
  return t;
}

Terminal::~Terminal() { restore(); }

void Terminal::restore() {
  if (restored_) return;
  restored_ = true;
  write_all(kLeave);
  ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_DFL;
  for (int s : kQuitSignals) ::sigaction(s, &sa, nullptr);
  ::sigaction(SIGWINCH, &sa, nullptr);
  ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

TermSize Terminal::size() const {
  winsize ws{};
  TermSize s;
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    s.cols = ws.ws_col;
    s.rows = ws.ws_row;
  }
  return s;
}

void Terminal::draw(const std::vector<std::string>& lines) {
  std::string out = "\x1b[H";
  for (size_t i = 0; i < lines.size(); ++i) {
    out += lines[i];
    out += "\x1b[K";
    if (i + 1 < lines.size()) out += "\r\n";
  }
  out += "\x1b[J";
  write_all(out);
}

Terminal::Event Terminal::wait(int timeout_ms) {
  if (g_quit.exchange(0) != 0) return Event::kQuit;
  if (g_resize.exchange(0) != 0) return Event::kResize;
  pollfd p{STDIN_FILENO, POLLIN, 0};
  timespec ts{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  const int n = ::ppoll(&p, 1, &ts, &old_mask_);  // the signals are taken here only
  if (g_quit.exchange(0) != 0) return Event::kQuit;
  if (g_resize.exchange(0) != 0) return Event::kResize;
  if (n <= 0) return Event::kTimeout;
  if ((p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return Event::kQuit;  // the terminal is gone
  char buf[64];
  const ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
  if (got == 0) return Event::kQuit;
  for (ssize_t i = 0; i < got; ++i) {
    if (buf[i] == 'q' || buf[i] == 'Q' || buf[i] == 0x03 /* Ctrl-C */) return Event::kQuit;
  }
  return Event::kKey;
}

}  // namespace stallscope::cli
