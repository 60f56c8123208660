// Reading a recording for a command; see recording_input.h.
#include "cli/recording_input.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <utility>

#include "analysis/over_time.h"
#include "analysis/session.h"
#include "storage/reader.h"
#include "storage/upgrade.h"

namespace stallscope::cli {

std::string upgrade_if_older(const std::string& path) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto t0 = std::chrono::steady_clock::now();
  bool shown = false;
  auto r = upgrade_to_summaries(path, [&](int64_t done, int64_t total) {
    if (!shown && done < total) {
      std::fprintf(stderr, "stallscope: %s was recorded before summaries were kept; building them from its %lld rows%s",
                   path.c_str(), static_cast<long long>(total), tty ? "" : "\n");
      shown = true;
    }
    if (tty && shown)
      std::fprintf(stderr, "\rstallscope: building the summaries of %s: %3.0f %%", path.c_str(),
                   100.0 * static_cast<double>(done) / static_cast<double>(total > 0 ? total : 1));
  });
  if (tty && shown) std::fprintf(stderr, "\n");
  if (!r.ok()) {
    // Reading goes on from the detail rows.
    std::string msg = r.status().message();
    for (char& c : msg) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return "stallscope: warning: " + msg + "; reading it without summaries";
  }
  if (r->what == UpgradeOutcome::What::kUpgraded) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "stallscope: built the summaries of %s (an older recording; %lld rows, %.1f s) and wrote them back\n",
                 path.c_str(), static_cast<long long>(r->rows), s);
  }
  return "";
}

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

std::optional<analysis::Report> analyze_recording(const std::string& path, const analysis::DetailBudget& budget) {
  const std::string warning = upgrade_if_older(path);
  auto reader = Reader::open(path);
  if (!reader.ok()) {
    (void)read_error(reader.status().message());
    return std::nullopt;
  }
  auto from = analysis::choose_detail_from(**reader, budget);
  if (!from.ok()) {
    (void)read_error(from.status().message());
    return std::nullopt;
  }
  analysis::LoadOptions load;
  budget.apply(*from, &load);
  auto session = analysis::load_session(**reader, load);
  if (!session.ok()) {
    (void)read_error(session.status().message());  // the one line: it says what the warning would
    return std::nullopt;
  }
  if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
  analysis::Report report = analysis::analyze(*session);
  // The run over time, from the summaries: a part of the report, never a reason it fails. A
  // recording that could not be upgraded (read-only, not closed cleanly) gets them for this read.
  auto has = (*reader)->has_summaries();
  if (has.ok() && !*has) {
    const bool tty = ::isatty(STDERR_FILENO) == 1;
    Status built = (*reader)->build_temporary_summaries([&](int64_t done, int64_t total) {
      if (tty)
        std::fprintf(stderr, "\rstallscope: summarising %s for this report: %3.0f %%", path.c_str(),
                     100.0 * static_cast<double>(done) / static_cast<double>(total > 0 ? total : 1));
    });
    if (tty) std::fprintf(stderr, "\r\033[K");
    if (!built.ok()) report.notes.push_back("the run over time is not shown: " + built.message());
  }
  auto over_time = analysis::over_time(**reader, report);
  if (over_time.ok()) {
    report.over_time = std::move(*over_time);
  } else {
    report.notes.push_back("the run over time is not shown: " + over_time.status().message());
  }
  return report;
}

}  // namespace stallscope::cli
