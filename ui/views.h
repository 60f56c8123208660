// The dashboard's views: one function per view, one view per file (header_view.cc,
// headline_view.cc, timeline_view.cc, queue_view.cc, workers_view.cc, recommendations_view.cc,
// batch_view.cc, session_list_view.cc, message_view.cc, compare_view.cc). Each draws one panel in
// immediate mode from the current snapshot; the only state they edit is ViewState, which the
// caller owns. The dashboard lays out and draws the panels from its panel table (dashboard.cc).
#pragma once

#include <imgui.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analysis/compare.h"
#include "storage/session_registry.h"
#include "ui/analysis_view.h"
#include "ui/geometry_cache.h"
#include "ui/layout_dump.h"
#include "ui/snapshot.h"
#include "ui/tune_set.h"

namespace stallscope::ui {

// Fonts from assets/ (null: ImGui's built-in font at that size).
struct UiFonts {
  ImFont* regular = nullptr;  // ~15 px
  ImFont* mono = nullptr;     // ~13 px
  ImFont* big = nullptr;      // ~26 px, headline figures
  bool unicode = false;       // the fonts have the symbols (triangles, micro sign)
};

struct BatchKey {
  int64_t loader = 0, epoch = 0, batch = -1;
  bool operator==(const BatchKey&) const = default;
};

// Everything the user changes, owned by the caller (the app or a test) across frames.
struct ViewState {
  // The time range shown by the timeline, queue and worker views (shared x axis).
  double t0 = 0, t1 = 0;
  bool range_set = false;
  bool follow = true;          // live: keep the newest data in view; replay: keep the playhead
  double live_span_ns = 10e9;  // width of the followed window while live
  // Replay.
  double playhead = -1;  // ns; -1: at the end
  bool playing = false;
  float speed = 1.0f;
  // Selection and highlights.
  int heat_metric = 1;                // 0 cpu, 1 run queue (contention), 2 rss, 3 fetch time
  int64_t highlight_pid = 0;          // lane pointed at by a recommendation
  int64_t scroll_to_pid = 0;          // the timeline scrolls this lane into view once
  std::set<int64_t> collapsed_ranks;  // multi-rank jobs: ranks whose lanes show only their first
  double highlight_until = 0;         // wall seconds
  std::optional<BatchKey> pinned;     // clicked batch
  std::optional<BatchKey> hovered;    // this frame's hovered batch (set by the timeline)
  int selected_recommendation = -1;
  std::string evidence_note;  // what the last clicked recommendation points at
  // A long recording: the detail window this frame's view needs (wanted_detail), for the app to
  // pass to the source (SnapshotSource::request_detail).
  std::optional<std::pair<int64_t, int64_t>> detail_request;
  // Session picker: a path chosen this frame (the app opens it).
  std::string open_request;
  // Frame time.
  double wall_s = 0;
  float dt = 1.0f / 60;
};

// Per-frame context handed to every view.
struct Frame {
  const Snapshot* snap = nullptr;
  const Timeline* tl = nullptr;      // null until the first read
  const AnalysisView* an = nullptr;  // null until the analysis ran
  ViewState* st = nullptr;
  LayoutDump* dump = nullptr;  // null unless a layout dump was asked for
  const UiFonts* fonts = nullptr;
  double now_ns = 0;                // live: the newest data; replay: the playhead
  double data_t0 = 0, data_t1 = 1;  // the whole recording
  // What "fit" and double-click show, and what a zoom or pan keeps in view: the whole recording,
  // or in the compare view the same span of both runs (measured from each one's origin).
  double fit_t0 = 0, fit_t1 = 1;
  // Where the rulers count from: 0 (the session start), or in the compare view this run's
  // training-window start (its first dl.next), so that both runs' axes read the same times.
  double origin_ns = 0;
  const char* side = nullptr;  // the compare view: "A" or "B" (the header shows it)
  bool replay = false;
  GeometryCache* geo = nullptr;  // geometry kept across frames (null: draw everything)
};

void draw_header(Frame& f, const ImVec2& pos, const ImVec2& size);
void draw_headline(Frame& f, const ImVec2& pos, const ImVec2& size);
void draw_timeline(Frame& f, const ImVec2& pos, const ImVec2& size);
void draw_queue(Frame& f, const ImVec2& pos, const ImVec2& size);
void draw_workers(Frame& f, const ImVec2& pos, const ImVec2& size);
// The workers panel's height: its strips (at least two) and the colour scale, 80 to 240 px.
float workers_height(const Frame& f);
void draw_recommendations(Frame& f, const ImVec2& pos, const ImVec2& size);
void draw_batch(Frame& f, const ImVec2& pos, const ImVec2& size);
// The session picker (`stallscope ui` with no file); sets st->open_request on a click.
void draw_session_list(ViewState& st, const std::vector<SessionEntry>& live, const std::vector<SessionEntry>& recent,
                       const std::string& notice, LayoutDump* dump, const UiFonts& fonts, const ImVec2& pos,
                       const ImVec2& size);
// What the compare view's comparison strip shows.
struct CompareStrip {
  std::string name[2];                               // the recordings' file names, A and B
  const analysis::CompareSide* side[2] = {};         // each run's figures (null until its analysis ran)
  const analysis::Comparison* comparison = nullptr;  // once both analyses ran
  std::string waiting;                               // why there is no verdict yet
};
// The comparison strip on top of the compare view: both runs' key figures, one row each (samples/s,
// stall, step p50, loader), and compare()'s verdict line.
void draw_compare_strip(const CompareStrip& c, LayoutDump* dump, const ImVec2& pos, const ImVec2& size);
// The table of a `stallscope tune` folder over the compare view (`stallscope ui DIR`): a row per
// run (its settings, measured and predicted samples/s and stall, status), the winner marked, the
// baseline badged A and the run shown below as B badged B. Returns the row clicked this frame, or
// -1; a click on the baseline or on B changes nothing and returns -1.
int draw_tune_table(const TuneSet& set, int shown_b, LayoutDump* dump, const ImVec2& pos, const ImVec2& size);
// Its height at the current font: a heading and up to 8 rows (more scroll).
float tune_table_height(const TuneSet& set);

// A full-window message (a file that could not be opened, or loading).
void draw_message(const std::string& title, const std::string& message, LayoutDump* dump, const UiFonts& fonts,
                  const ImVec2& pos, const ImVec2& size);

}  // namespace stallscope::ui
