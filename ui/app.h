// The `stallscope ui` window: GLFW + OpenGL 3 around the Dashboard. Opens a recording (followed
// live while it is written, replayed once finished), two recordings in the compare view, or, with
// no path, the session picker. --screenshot renders a few frames in a real window and saves the
// last one as a PNG.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "analysis/job.h"
#include "ui/tune_set.h"

namespace stallscope::ui {

struct AppOptions {
  std::string path;    // recording to open; empty: the session picker
  std::string path_b;  // a second recording: the compare view, `path` as A and this as B
  // With no path: the node whose sessions the picker lists (ssh://host, tcp://host:port); empty:
  // this machine's.
  std::string node;
  // A `stallscope tune` folder: its table over the compare view; `path` and `path_b` are then its
  // baseline's and run tune_b's recordings, and a click on a row opens that run as B.
  std::optional<TuneSet> tune;
  int tune_b = 0;
  // A job's folder of rank recordings (`stallscope ui JOB/`): its job view (ui/job_screen.h), read
  // before the window opens; `job_rank`: the rank to open at once (its index in job->ranks).
  std::optional<analysis::JobView> job;
  std::string job_dir;
  std::optional<size_t> job_rank;
  std::string screenshot;   // write the last frame here (PNG) and exit
  std::string layout_dump;  // write the last frame's layout (JSON) here
  int frames = 0;           // frames to render before the screenshot (0: 3); 0 without one: run until closed
  int width = 1600, height = 1000;
  // Visible range at start and the replay's playhead, seconds since the session start (compare
  // view: since each run's training start).
  std::optional<std::pair<double, double>> range_s;
  std::optional<std::pair<float, float>> mouse;  // simulated mouse position (screenshots)
  std::optional<double> playhead_s;
  int settle_timeout_s = 120;  // screenshot: wait at most this long for the data and analysis
  // Rows of detail held at once for a long recording (SourceOptions::detail_rows; 0: every row).
  int64_t detail_rows = 2'000'000;
};

// Runs the window; returns the exit status (0 ok, 1 failure: a recording that cannot be opened
// with --screenshot, no display, a screenshot that cannot be written).
int run_app(const AppOptions& opt);

}  // namespace stallscope::ui
