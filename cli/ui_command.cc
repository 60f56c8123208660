// `stallscope ui [OPTIONS] [A.db [B.db]]`: the dashboard (ui/app.h): a recording, live or replayed;
// two recordings side by side on one time axis (the compare view); or the list of sessions to pick
// one from. Linked into stallscope-ui only (cli/ui_main.cc); `stallscope ui` runs that with the same
// arguments (cli/ui_launcher.cc).
#include "cli/ui_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/job.h"
#include "cli/command.h"
#include "cli/recording_input.h"
#include "remote/link.h"
#include "remote/remote_reader.h"
#include "storage/reader.h"
#include "ui/app.h"
#include "ui/snapshot_source.h"
#include "ui/tune_set.h"

namespace stallscope::cli {
namespace {

struct UiArgs {
  ui::AppOptions opt;
  std::vector<std::string> files;  // more than two is a usage error, said in the command's words
  bool detail_rows_set = false;
};

// "AxB" with `sep` between two numbers.
bool parse_pair(const std::string& s, char sep, double* a, double* b) {
  const size_t p = s.find(sep);
  return p != std::string::npos && parse_number(s.substr(0, p), a) && parse_number(s.substr(p + 1), b);
}

// A file to write, into `out`: any name but an empty one.
std::function<std::string(const std::string&)> file_name(std::string& out) {
  return [&out](const std::string& v) {
    out = v;
    return v.empty() ? "needs a file name" : "";
  };
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

Body define(CLI::App& app) {
  auto a = std::make_shared<UiArgs>();
  ui::AppOptions& o = a->opt;
  parse_with(app.add_option("--screenshot")
                 ->type_name("PNG")
                 ->description("render in a window, save the last frame as a PNG and exit"),
             file_name(o.screenshot));
  parse_with(app.add_option("--frames")
                 ->type_name("N")
                 ->description("frames to render, then exit (default with --screenshot: 3)"),
             [&o](const std::string& v) {
               double n = 0;
               if (!parse_number(v, &n) || !(n >= 1 && n <= 1000000) || n != static_cast<int>(n))
                 return "needs a positive number";
               o.frames = static_cast<int>(n);
               return "";
             });
  parse_with(app.add_option("--layout-dump")
                 ->type_name("JSON")
                 ->description("also write the last frame's layout (panels, lanes) as JSON"),
             file_name(o.layout_dump));
  parse_with(app.add_option("--size")->type_name("WxH")->description("window size in pixels (default 1600x1000)"),
             [&o](const std::string& v) {
               double w = 0, h = 0;
               if (!parse_pair(v, 'x', &w, &h) || w < 320 || h < 240 || w > 8192 || h > 8192) {
                 return "needs WIDTHxHEIGHT, e.g. 1600x1000";
               }
               o.width = static_cast<int>(w);
               o.height = static_cast<int>(h);
               return "";
             });
  parse_with(app.add_option("--range")->type_name("T0:T1")->description(
                 "visible time range at start, seconds since the session start (two recordings: since "
                 "each run's training start)"),
             [&o](const std::string& v) {
               double t0 = 0, t1 = 0;
               if (!parse_pair(v, ':', &t0, &t1) || t1 <= t0) return "needs T0:T1 in seconds, T0 < T1";
               o.range_s = std::make_pair(t0, t1);
               return "";
             });
  parse_with(app.add_option("--at")->type_name("T")->description(
                 "replay: put the playhead at T seconds (two recordings: from the training start)"),
             [&o](const std::string& v) {
               double t = 0;
               if (!parse_number(v, &t) || t < 0) return "needs a time in seconds";
               o.playhead_s = t;
               return "";
             });
  parse_with(
      app.add_option("--mouse")->type_name("X,Y")->description("pretend the mouse is at X,Y (screenshots of tooltips)"),
      [&o](const std::string& v) {
        double x = 0, y = 0;
        if (!parse_pair(v, ',', &x, &y)) return "needs X,Y in pixels";
        o.mouse = std::make_pair(static_cast<float>(x), static_cast<float>(y));
        return "";
      });
  parse_with(app.add_option("--detail-rows")
                 ->type_name("N")
                 ->description(
                     "a long recording is held as an overview of the whole run plus the detail of N rows "
                     "at a time, read as the view moves (default 2000000, 250000 for a remote one; 0: read every row)"),
             [&o, a](const std::string& v) {
               double n = 0;
               if (!parse_number(v, &n) || !(n >= 0 && n <= 1e12) || n != static_cast<double>(static_cast<int64_t>(n)))
                 return "needs a number of rows (0: every row)";
               o.detail_rows = static_cast<int64_t>(n);
               a->detail_rows_set = true;
               return "";
             });
  app.add_option("A.db B.db", a->files,
                 "the recording to show (default: pick a session); with a second one, the two compared;\n"
                 "a folder `stallscope tune -o` wrote: its runs as a set, the baseline compared with the\n"
                 "winner, or with the run named second (its number: `ui tune-out 03`)")
      ->type_name("");
  return [&app, a] {
    if (a->files.size() > 2) {
      return usage_error(
          app, "at most two recordings (one to show, or two to compare); got " + std::to_string(a->files.size()));
    }
    if (!a->files.empty() && is_directory(a->files[0]) && !is_file(a->files[0] + "/tune.json")) {
      // A job's folder of rank recordings: its job view; a rank named second is opened at once.
      // Neither kind of folder: one line that names both.
      const std::string neither =
          "ui: '" + a->files[0] + "' is a folder without tune.json (not one `stallscope tune -o` wrote)";
      auto files = analysis::job_folder(a->files[0]);
      if (!files.ok()) {
        return read_error(neither + " and without rank recordings (*.db) for a job view; pass a recording (.db)");
      }
      auto view = analysis::job_view(*files);
      if (!view.ok()) return read_error(neither + "; as a job's folder: " + view.status().message());
      if (a->files.size() == 2) {
        double rank = 0;
        std::optional<size_t> index;
        if (parse_number(a->files[1], &rank)) {
          for (size_t i = 0; i < view->ranks.size(); ++i) {
            if (static_cast<double>(view->ranks[i].rank) == rank) index = i;
          }
        }
        if (!index) return usage_error(app, "'" + a->files[1] + "' is not a rank of the job in " + a->files[0]);
        a->opt.job_rank = *index;
      }
      a->opt.job = std::move(*view);
      a->opt.job_dir = a->files[0];
      if (!a->detail_rows_set) a->opt.detail_rows = ui::default_detail_rows({});
      return ui::run_app(a->opt);
    }
    if (!a->files.empty() && is_directory(a->files[0])) {
      // A `stallscope tune` folder: its set, the baseline as A, the winner or the run named as B.
      auto set = ui::load_tune_set(a->files[0]);
      if (!set.ok()) return read_error("ui: " + set.status().message());
      int b = set->first_b();
      if (a->files.size() == 2) {
        const auto named = set->find(a->files[1]);
        if (!named) {
          std::string names;
          for (const ui::TuneRun& r : set->runs) names += (names.empty() ? "" : "; ") + r.name + " " + r.settings;
          return usage_error(app, "'" + a->files[1] + "' is not a run of " + a->files[0] + "; its runs: " + names);
        }
        b = *named;
      }
      a->files = {set->runs[0].recording};
      if (b != 0) a->files.push_back(set->runs[static_cast<size_t>(b)].recording);
      std::fprintf(stderr, "stallscope: ui: %s is a tune of %zu runs: %s\n", set->dir.c_str(), set->runs.size(),
                   b != 0 ? ("the baseline (A) with " + set->runs[static_cast<size_t>(b)].file + " (B)").c_str()
                          : "no other run to compare; showing the baseline");
      if (b != 0) {
        a->opt.tune = std::move(*set);
        a->opt.tune_b = b;
      }
    }
    for (const std::string& f : a->files) {
      if (!Reader::is_uri(f)) continue;
      // ssh://[user@]host[:port][/path] or tcp://host:port[/path]: checked here, read over the link.
      auto e = remote::parse_uri(f);
      if (!e.ok()) return usage_error(app, "ui: " + e.status().message());
      if (e->path.empty() && a->files.size() == 2)
        return usage_error(app, "ui: " + f + " names no recording; to compare, give each one's path on its node");
    }
    if (a->files.size() == 1 && remote::names_node_only(a->files[0])) {
      a->opt.node = a->files[0];  // the node's session list
      a->files.clear();
    }
    if (!a->files.empty()) a->opt.path = a->files[0];
    if (a->files.size() == 2) a->opt.path_b = a->files[1];
    if (!a->detail_rows_set) a->opt.detail_rows = ui::default_detail_rows(a->files);
    // A recording made before the summaries gets them first (one line on stderr), as `report`
    // does: the dashboard holds a long one as its overview and a window of its detail. (A node's
    // recording is read as it is: the node builds what is missing in memory.)
    for (const std::string& f : a->files) {
      if (Reader::is_uri(f)) continue;
      const std::string warning = upgrade_if_older(f);
      if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
    }
    return ui::run_app(a->opt);
  };
}

}  // namespace

const Command kUiDashboardCommand = {
    "ui",
    kUiSummary,
    "stallscope ui [OPTIONS] [A.db [B.db] | TUNE-DIR [RUN] | JOB-DIR [RANK]]\n"
    "stallscope ui [OPTIONS] ssh://[user@]host[:port][/path/run.db] [B.db]",
    "Opens the dashboard. With one recording it shows it: followed live while `stallscope run`\n"
    "still writes it (new data within a quarter of a second), replayed with a playhead once it is\n"
    "finished. With two, A above B: the same panels for each, on one time axis measured from each\n"
    "run's training start (its first next()), so that the faster run pulls ahead; zooming, panning\n"
    "and the playhead move both, and a strip on top gives both runs' samples/s, stall, step time\n"
    "and loader with the verdict of `stallscope compare A.db B.db`. A folder `stallscope tune -o`\n"
    "wrote opens as a set: a table of its runs on top (settings, measured and predicted samples/s\n"
    "and stall, status, the winner marked), the baseline as A and the winner (or RUN) as B; click a\n"
    "row to show that run as B. A job's folder of rank recordings (part-{rank}.db) opens as the job\n"
    "view: a row per rank with its data stall (or fetch time) over the job as a heat strip, grouped\n"
    "by node or sorted by stall; click a rank to open it, shift-click another to see the two on one\n"
    "axis, Esc to come back (RANK: open that rank at once). Without a file it lists the live\n"
    "sessions on this machine and recent recordings.\n"
    "\n"
    "A recording on another machine: ssh://[user@]host[:port]/path/run.db, read through your own ssh\n"
    "(it runs 'stallscope serve --stdio' there; set STALLSCOPE_REMOTE_COMMAND when stallscope is not\n"
    "on the node's PATH, STALLSCOPE_SSH for another ssh command); ssh://host alone lists the node's\n"
    "sessions. tcp://host:port/path?token=T reads through 'stallscope serve --port' and a tunnel of\n"
    "your own. Only what the view shows crosses the link; a lost link is retried, keeping the view.",
    "In the window: the mouse wheel zooms the time axis around the pointer, dragging pans,\n"
    "double-click fits the whole run; hover a span to see its batch's life, click to pin it;\n"
    "click a recommendation to jump to its evidence. See docs/dashboard.md.\n"
    "\n"
    "Examples:\n"
    "  stallscope ui run.db\n"
    "  stallscope ui torch.db reference.db\n"
    "  stallscope ui tune-out/                # after stallscope tune -o tune-out: the set\n"
    "  stallscope ui tune-out/ 03             # the set, with run 03 as B\n"
    "  stallscope ui job/                     # a job's ranks (part-{rank}.db), slowest first\n"
    "  stallscope ui --screenshot shot.png run.db\n"
    "  stallscope ui ssh://gpu-node-3/home/me/runs/run.db\n"
    "  stallscope ui ssh://gpu-node-3            # its live sessions and recent recordings",
    define,
};

}  // namespace stallscope::cli
