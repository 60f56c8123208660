// The layout of `stallscope top`'s screen; see top_frame.h.
#include "cli/top_frame.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>

#include "analysis/format.h"
#include "common/vocabulary.h"

namespace stallscope::cli {
namespace {

using analysis::duration_ms;
using analysis::fixed;
using analysis::grouped;
using analysis::pad;
using analysis::percent;

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Whole seconds as m:ss or h:mm:ss.
std::string elapsed(double s) {
  const int64_t t = static_cast<int64_t>(std::max(0.0, s));
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  }
  return buf;
}

// The label column: every figure line starts with a word padded to this width.
constexpr size_t kLabel = 9;
std::string labelled(const char* label, const std::string& rest) { return pad(label, kLabel) + rest; }

std::string state_text(const TopFrame& f) {
  switch (f.state) {
    case TopFrame::State::kOpening: return "opening";
    case TopFrame::State::kLive: return "live, " + elapsed(f.recorded_s) + " recorded";
    case TopFrame::State::kQuiet:
      return "no new data for " + elapsed(f.quiet_s) + " (recorder stopped?), " + elapsed(f.recorded_s) + " recorded";
    case TopFrame::State::kFinished: return "finished: its last state, at " + elapsed(f.recorded_s);
  }
  return "";
}

// The process table: the training process, then the workers by pid, then any other process.
std::vector<metrics::Figures::Process> ordered(const std::vector<metrics::Figures::Process>& ps) {
  std::vector<metrics::Figures::Process> out = ps;
  auto rank = [](const std::string& role) { return role == "train" ? 0 : role == "worker" ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return std::make_pair(rank(a.role), a.pid) < std::make_pair(rank(b.role), b.pid);
  });
  return out;
}

std::string process_row(const metrics::Figures::Process& p, int worker_no) {
  const std::string who = p.role == "worker" ? "worker " + std::to_string(worker_no) : p.role;
  return "  " + pad(who, 11) + pad(std::to_string(p.pid), 8, true) + "  " +
         pad(p.cpu_cores ? percent(*p.cpu_cores, 0) : "-", 9, true) + "  " +
         pad(p.runq_wait_ratio ? percent(*p.runq_wait_ratio) : "-", 10, true);
}

}  // namespace

size_t columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += continuation(c) ? 0 : 1;
  return n;
}

std::string fit(const std::string& line, size_t cols) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (continuation(static_cast<unsigned char>(line[i]))) continue;
    if (n == cols) return line.substr(0, i);
    ++n;
  }
  return line;
}

std::string sparkline(const std::vector<std::optional<double>>& values, double max, size_t width, bool utf8) {
  static const char* const kBlocks[] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
  static const char kAscii[] = "_.,-=+*#";
  const double top = std::max(1.0, max);
  std::string out;
  const size_t from = values.size() > width ? values.size() - width : 0;
  for (size_t i = from; i < values.size(); ++i) {
    if (!values[i]) {
      out += ' ';
      continue;
    }
    const double v = std::clamp(*values[i] / top, 0.0, 1.0);
    const int level = static_cast<int>(std::lround(v * 7));
    if (utf8) {
      out += kBlocks[level];
    } else {
      out += kAscii[level];
    }
  }
  return out;
}

std::vector<std::string> render_top(const TopFrame& f, int cols, int rows, bool utf8) {
  const std::string dot = utf8 ? " \u00b7 " : " | ";
  const metrics::Figures& m = f.figures;
  std::vector<std::string> head;
  {
    // The path gives way (its start elided) so that the state stays in view.
    const std::string before = "stallscope top" + (f.pid ? dot + "pid " + std::to_string(*f.pid) : "") + dot;
    const std::string after = dot + state_text(f);
    const std::string ellipsis = utf8 ? "\u2026" : "...";
    const size_t fixed_cols = columns(before) + columns(after) + columns(ellipsis);
    std::string source = f.source;
    if (cols > 0 && columns(before) + columns(source) + columns(after) > static_cast<size_t>(cols) &&
        static_cast<size_t>(cols) >= fixed_cols + 8) {
      const size_t keep = static_cast<size_t>(cols) - fixed_cols;
      size_t from = source.size();
      for (size_t n = 0; from > 0 && n < keep;) {
        --from;
        if (!continuation(static_cast<unsigned char>(source[from]))) ++n;
      }
      source = ellipsis + source.substr(from);
    }
    head.push_back(before + source + after);
  }
  head.push_back(f.command.empty() ? "" : "  " + f.command);
  if (!f.error.empty()) head.push_back("! " + f.error);

  const auto& a = f.analysis;
  if (!m.training_seen) {
    head.push_back(labelled("stall", f.state == TopFrame::State::kOpening ? "reading the recording ..."
                                                                          : "no DataLoader training loop seen yet"));
  } else {
    std::string stall = analysis::or_dash(m.recent_stall_fraction, [](double v) { return percent(v); }) +
                        " of the last " + std::to_string(metrics::kRecentSeconds) + " s waiting for data" + dot +
                        percent(m.stall_fraction) + " of " + elapsed(m.training_s) + " trained";
    head.push_back(labelled("stall", stall));
  }
  // The cause: the analysis's (GPU modes: what the GPU's idle time went to), else the live split.
  {
    std::string cause;
    if (a && !a->causes.empty()) {
      for (const auto& [name, share] : a->causes) {
        if (share < 0.005 && !cause.empty()) continue;
        cause += (cause.empty() ? "" : dot) + name + " " + percent(share, 0);
      }
      cause += " of the " + std::string(a->mode == vocab::kModeCpu ? "stall" : "GPU idle") + " in the " +
               elapsed(a->window_s) + " analysed";
    } else if (m.training_seen && m.stall_s > 0) {
      for (const auto& [name, s] : m.stall_by_cause_s) {
        if (s <= 0) continue;
        cause += (cause.empty() ? "" : dot) + name + " " + percent(s / m.stall_s, 0);
      }
      cause += " of the stall";
    } else {
      cause = "-";
    }
    head.push_back(labelled("cause", cause));
  }
  head.push_back(labelled("speed", (m.samples_per_s ? fixed(*m.samples_per_s, 1) : std::string("-")) + " samples/s" +
                                       dot + "step " +
                                       (m.recent_step_ms ? duration_ms(*m.recent_step_ms) : std::string("-")) + dot +
                                       grouped(m.steps) + " steps"));
  if (m.queue_seen) {
    head.push_back(labelled("queue", std::to_string(m.batches_ready) + (m.batches_ready == 1 ? " batch" : " batches") +
                                         " ready" + dot + std::to_string(m.batches_in_flight) + " in flight"));
    double max = 0;
    bool any = false;
    for (const auto& v : f.ready_history) {
      if (v) {
        max = std::max(max, *v);
        any = true;
      }
    }
    const std::string scale =
        "  ready, last " + std::to_string(kTopHistoryS) + " s, top " + fixed(std::max(1.0, max), 0);
    const size_t room = static_cast<size_t>(std::max(0, cols)) > kLabel + columns(scale)
                            ? static_cast<size_t>(cols) - kLabel - columns(scale)
                            : 8;
    head.push_back(pad("", kLabel) +
                   (any ? sparkline(f.ready_history, max, std::min<size_t>(room, kTopHistoryS), utf8) + scale
                        : std::string("(no history yet)")));
  } else {
    head.push_back(labelled("queue", m.training_seen ? "no worker processes (num_workers=0): no queue" : "-"));
  }
  head.push_back(labelled("GPU", m.gpu_busy_fraction ? "busy " + percent(*m.gpu_busy_fraction)
                                                     : std::string("not recorded (CPU mode, or no GPU activity)")));
  head.push_back(labelled(
      "advice", a ? (a->advice.empty() ? "none: nothing to change was found" : "[" + a->severity + "] " + a->advice)
                  : std::string("analysing ...")));

  const std::string footer = "q quit" + dot + "refresh " + fixed(f.interval_s, f.interval_s < 1 ? 1 : 0) + " s" +
                             (a ? dot + "analysed " + fixed(a->age_s, 0) + " s ago" : "");

  std::vector<std::string> table;
  table.push_back("  " + pad("process", 11) + pad("pid", 8, true) + "  " + pad("CPU", 9, true) + "  " +
                  pad("run-queue", 10, true));
  int worker_no = 0;
  const bool means = m.processes.empty() && a && !a->processes.empty();  // the processes have ended
  for (const auto& p : ordered(means ? a->processes : m.processes)) {
    table.push_back(process_row(p, p.role == "worker" ? worker_no++ : 0));
  }
  if (means) table.front() += "  (means, ended)";
  if (m.processes.empty() && !means) table.push_back("  (no /proc samples yet)");

  std::vector<std::string> out = head;
  out.push_back("");
  if (rows <= 0) {
    out.insert(out.end(), table.begin(), table.end());
    out.push_back(footer);
  } else {
    const size_t limit = static_cast<size_t>(rows);
    // The table takes what the head and footer leave; cut, it says how many rows it left out.
    const size_t room = limit > out.size() + 1 ? limit - out.size() - 1 : 0;
    if (table.size() <= room) {
      out.insert(out.end(), table.begin(), table.end());
    } else if (room >= 2) {
      out.insert(out.end(), table.begin(), table.begin() + static_cast<std::ptrdiff_t>(room - 1));
      out.push_back("  +" + std::to_string(table.size() - (room - 1)) + " more processes");
    } else if (room == 1) {
      out.push_back("  " + std::to_string(table.size() - 1) + " processes (a taller terminal shows them)");
    }
    if (out.size() + 1 <= limit) {
      out.push_back(footer);
    }
    if (out.size() > limit) out.resize(limit);
  }
  for (std::string& line : out) line = fit(line, static_cast<size_t>(std::max(1, cols)));
  // The bottom-right cell stays empty: a terminal without deferred wrap would scroll.
  if (rows > 0 && !out.empty() && out.size() == static_cast<size_t>(rows))
    out.back() = fit(out.back(), static_cast<size_t>(std::max(1, cols - 1)));
  return out;
}

}  // namespace stallscope::cli
