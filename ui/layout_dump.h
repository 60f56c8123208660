// LayoutDump: what the views laid out in one frame (panels, lanes, drawn rectangles, labels, the
// hovered batch, recommendations; in the compare view one such dump per recording and the
// comparison strip), filled while drawing when asked for. Tests assert on it, and
// `stallscope ui --layout-dump FILE` writes it as JSON beside a screenshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stallscope::ui {

struct DumpRect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

struct DumpPanel {
  std::string name;  // header, headline, timeline, queue, workers, recommendations, batch, sessions, message
  DumpRect rect;
};

struct DumpLane {
  std::string name;
  std::string role;  // gpu, main, pin, worker, other
  DumpRect rect;     // label column + time area (in screen coordinates, before clipping)
  int rows = 0;
  int64_t pid = 0;
  int worker = -1;
  int64_t drawn = 0;          // rectangles submitted for this lane's items
  int64_t merged_groups = 0;  // of which: merged runs of sub-pixel items
  int64_t merged_items = 0;   // items folded into those runs
  int64_t markers = 0;        // marker glyphs submitted
  int64_t overview = 0;       // bars drawn from the overview (a long recording, outside its detail)
};

struct DumpItem {
  int lane = -1;  // index into lanes; -1 for stall shading
  int row = 0;
  float x0 = 0, x1 = 0;
  int64_t count = 1;  // > 1: a merged run
  std::string label;  // text drawn inside (empty when too narrow)
  std::string style;
};

struct DumpHover {
  std::string lane;
  std::string item;    // what the tooltip's first line says
  bool batch = false;  // a batch was identified
  int64_t loader = 0, epoch = 0, index = -1;
  int worker = -2;
  int64_t worker_pid = 0;
  std::vector<std::string> life;  // the batch's life, one stage per line
};

// One headline card: which figure is drawn big and what it covers, and the smaller line under it.
struct DumpCard {
  std::string label;  // "throughput"
  std::string big;    // the big figure with its unit: "320 samples/s"
  std::string scope;  // what the big figure covers: "run" (a replay) or "last 2 s" (live)
  std::string small;  // the other figure, labelled: "last 2 s: 310 samples/s" or "run: ..."
};

struct LayoutDump {
  bool record_items = true;  // also record every rectangle (tests); lanes and panels always
  std::string state;         // snapshot state name; "compare" for the compare view's window
  std::string message;       // error or notice shown in the window
  std::string link_error;    // a remote recording's link is down (empty: up, or a local recording)
  std::string header_stats;  // the header's right-hand text: file size and growth, rows read, timings
  double view_t0 = 0, view_t1 = 0;
  // The compare view: each recording's own dump (A, B; their panels, lanes and range), and in
  // each the side's name and the time its axis counts from (its training-window start), so that
  // view_t0 - origin_ns is the same for both when the axes are aligned.
  std::vector<LayoutDump> sides;
  std::string side;
  double origin_ns = 0;
  // The comparison strip: compare()'s verdict (id and line) and each run's figures, one line each.
  std::string verdict, verdict_text;
  std::vector<std::string> compare_figures;
  // The tune set's table (`stallscope ui DIR`): a line per run, "A: ", "B: " or "   " first, then
  // its name, settings, measured and predicted samples/s, stall and status; and B's index.
  std::vector<std::string> tune_rows;
  int tune_b = -1;
  // The job view (`stallscope ui JOB/`): its lines on top (what slowed, the slow nodes), its sort
  // and heat metric, the rows drawn (a line each: "node NAME: ..." or "rank N NODE stall fetch [slow]")
  // and the heat cells drawn.
  std::vector<std::string> job_lines, job_rows;
  std::string job_sort, job_heat;
  int job_cells = 0;
  std::vector<DumpPanel> panels;
  std::vector<DumpLane> lanes;
  std::vector<DumpItem> items;
  std::vector<std::string> headline;         // "label: value", the big figure
  std::vector<DumpCard> cards;               // the same cards in full
  std::vector<std::string> recommendations;  // the actions as listed: "1. LINE  GAIN"
  // What an opened action shows under it: its why lines, then "id: message" per recommendation.
  std::vector<std::string> recommendation_details;
  std::vector<DumpRect> recommendation_folds;  // each action's "why and evidence" fold, to click
  std::vector<std::string> sessions;           // the session picker's entries
  std::optional<DumpHover> hover;
  int queue_columns = 0;      // pixel columns drawn in the queue plot
  int queue_empty_drawn = 0;  // empty-queue rectangles
  int heat_rows = 0, heat_cells = 0;
  int heat_cells_overview = 0;           // of those, outside the detail held: from the overview (summaries)
  int queue_overview_columns = 0;        // queue plot columns drawn from the overview
  int queue_overview_ready_columns = 0;  // those drawn from queue_summaries (ready and in flight)
  std::string heat_metric;
  int stall_rects = 0;
  // A long recording (Timeline::windowed): the detail window held, and the time ranges of the view
  // drawn from the overview (no detail there).
  bool windowed = false;
  int64_t detail_t0 = 0, detail_t1 = 0;
  std::vector<std::pair<double, double>> overview_ranges;

  void clear();
  const DumpPanel* panel(const std::string& name) const;
  std::string to_json() const;
};

}  // namespace stallscope::ui
