// Dashboard benchmark: a synthetic one-hour recording of ~10 M events (8 persistent DataLoader
// workers, pin memory, every /proc counter track at 20 Hz), then, headlessly (an ImGui context
// without a window):
//   open   the time from opening the file to the first timeline shown (the first part read), to
//          the whole recording read (the goal), twice, and to the analysis being ready;
//   frames the time to build a whole dashboard frame (NewFrame .. Render, CPU side: what the
//          render thread does before OpenGL) at several zoom levels while panning, mouse over the
//          timeline; median and p99 over the frames, and the median of the render thread's CPU
//          time per frame (the same work without the time other jobs took the core).
// A recording of more rows than the dashboard holds (SourceOptions::detail_rows: the 1-hour one,
// and a day's) opens as the overview of the whole run plus the detail of its latest part; views
// outside it ask for their window as the app does (the read is waited for outside the frame
// times, and counted apart), and pans go 0.5 % of twenty view widths a frame. Then also: the whole
// run shown (goal < 1 s), the time to show a minute's detail 30 % into the run, and the peak
// memory (goal < 1 GiB).
// Prints a table with the goals beside (open < 2 s, frame < 8 ms).
//
//   ui_bench [--db PATH] [--events N] [--frames N] [--open-only N] [--part-rows N] [--detail-rows N]
//            [--regen] [--compare B.db] [--generate-only]
// --generate-only writes the recording (if it is not there yet) and stops: a long one for
// `stallscope report` and the dashboard by hand (60 M events are about 6 hours of training).
// --part-rows N reads the recording in parts of N rows at open (0: one read; default: the UI's).
// --detail-rows N holds the detail of N rows at a time (SourceOptions::detail_rows; 0: every row).
// --open-only N opens the recording N times (timeline alone, no analysis) and prints each time.
// --compare B.db measures the compare view instead: the recording as A and B.db (say a copy of it)
// opened at once, then the compare view's frames (both sides and the strip) at the same zoom
// levels on the shared axis, the mouse over A's timeline.
// The recording is generated once and kept (default $TMPDIR/stallscope-ui-bench-<N>.db).
//
//   ui_bench --job DIR [--generate-only] [--ranks N] [--nodes N] [--minutes M] [--slow-node K]
//            [--slow-from-min M] [--slow-x X] [--reps N]
// writes a data-parallel job's recordings instead, one per rank (DIR/part-{rank}.db; default 256
// ranks on 32 nodes, 60 minutes, node 7's input 3x slower from minute 40; tests/ui/sim_recording.h,
// write_sim_job), unless DIR already holds part-0.db; then, unless --generate-only, measures the
// dashboard's job view headlessly (ui/job_screen.h): opening it (the job view read from the ranks'
// summaries and its first frames drawn; goal < 3 s), the peak memory (goal < 2 GiB), its frame,
// and drilling into the slowest rank against opening that rank's recording alone (each to its first
// timeline and to its analysis, --reps rounds interleaved; goal: no slower). bench/job_bench.py
// runs it beside `stallscope report JOB/`.
#include <imgui.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_rows.h"
#include "remote/remote_reader.h"
#include "storage/reader.h"
#include "tests/ui/sim_recording.h"
#include "ui/analysis_view.h"
#include "ui/compare_dashboard.h"
#include "ui/dashboard.h"
#include "ui/job_screen.h"
#include "ui/overview.h"
#include "ui/snapshot_source.h"

namespace {

using Clock = std::chrono::steady_clock;
using stallscope::testing::kMsNs;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

long status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + n) / 1024;
  }
  return -1;
}
long rss_mib() { return status_mib("VmRSS:"); }
long peak_rss_mib() { return status_mib("VmHWM:"); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t i = static_cast<size_t>(idx);
  const double f = idx - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// A headless ImGui context the size of the default window (no renderer: a built font atlas).
void start_imgui() {
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(1600, 1000);
  unsigned char* px = nullptr;
  int pw = 0, ph = 0;
  io.Fonts->GetTexDataAsRGBA32(&px, &pw, &ph);
  io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(1)));
}

struct FrameRow {
  std::string name;
  double median, p99, max;
  double vertices;
  double cpu_median;  // the frame's thread CPU time: what it costs without the other jobs' preemption
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Frame build times at four zoom levels over a run of `whole` ns from `first` (in the axis's own
// terms), two kinds of frames per level. "moving": the range changes every frame (a pan of 0.5 % of
// the run per frame; for the whole run, a zoom breathing between 96 and 100 % of it), so nothing
// drawn before can be reused: the goal's case. "hover": the range stays and the mouse moves over
// the timeline at `mouse_y` (tooltips, the batch under the pointer), the frames kept geometry
// serves. `set_range` puts the visible range, `draw` draws one frame; `whole_moving` is called after
// each measured moving whole-run frame (where its time went).
std::vector<FrameRow> measure_frames(double first, double whole, int frames, float mouse_y,
                                     const std::function<void(double, double)>& set_range,
                                     const std::function<void()>& draw, const std::function<void()>& whole_moving,
                                     bool windowed = false, const std::function<void()>& after_frame = {}) {
  struct Level {
    const char* name;
    double width_ns;
  };
  const Level levels[] = {{"whole run", whole}, {"1 minute", 60e9}, {"1 second", 1e9}, {"one batch (20 ms)", 20e6}};
  std::vector<FrameRow> rows;
  ImGuiIO& io = ImGui::GetIO();
  for (const Level& lv : levels) {
    for (int hover = 0; hover < 2; ++hover) {
      std::vector<double> times, cpu;
      double vtx = 0;
      constexpr int kWarmUp = 10;
      for (int f = 0; f < frames + kWarmUp; ++f) {
        const int g = hover ? 0 : f;
        if (lv.width_ns >= whole) {
          const double w = whole * (0.98 + 0.02 * std::sin(static_cast<double>(g) * 0.7));
          set_range(first + (whole - w) * 0.5, first + (whole - w) * 0.5 + w);
        } else {
          // A long recording's detail is read a window at a time: its pans go 0.5 % of twenty view
          // widths a frame (a pan of the whole run would read a new window every frame).
          const double pan = 0.005 * (windowed ? std::min(whole, 20 * lv.width_ns) : whole);
          const double t0 =
              first + std::fmod(static_cast<double>(g) * pan + whole * 0.3, std::max(1.0, whole - lv.width_ns));
          set_range(t0, t0 + lv.width_ns);
        }
        io.DeltaTime = 1.0f / 60.0f;
        // Over the timeline: hit testing and a tooltip every frame; moving along it when hovering.
        io.MousePos = ImVec2(hover ? 200.0f + static_cast<float>((f * 7) % 900) : 600.0f, mouse_y);
        const auto t0 = Clock::now();
        const double c0 = thread_cpu_ms();
        ImGui::NewFrame();
        draw();
        ImGui::Render();
        const double ms = ms_since(t0);
        const double cpu_ms = thread_cpu_ms() - c0;
        if (after_frame) after_frame();  // not timed
        if (f >= kWarmUp) {              // warm-up frames excluded
          times.push_back(ms);
          cpu.push_back(cpu_ms);
          vtx += ImGui::GetDrawData()->TotalVtxCount;
          if (!hover && lv.width_ns >= whole) whole_moving();
        }
      }
      rows.push_back({lv.name + std::string(hover ? ", hover" : ", moving"), percentile(times, 50),
                      percentile(times, 99), *std::max_element(times.begin(), times.end()),
                      vtx / static_cast<double>(times.size()), percentile(cpu, 50)});
    }
  }
  return rows;
}

void print_frames(const std::vector<FrameRow>& rows) {
  for (const FrameRow& r : rows) {
    char name[64];
    std::snprintf(name, sizeof name, "frame, %s: median", r.name.c_str());
    std::printf("  %-44s %10.2f ms %9s ms  %s   (thread CPU %.2f ms)\n", name, r.median, "< 8",
                r.median < 8 ? "ok" : "MISSED", r.cpu_median);
    std::snprintf(name, sizeof name, "frame, %s: p99 (max %.1f)", r.name.c_str(), r.max);
    std::printf("  %-44s %10.2f ms %9s ms  %s   (%.0f vertices)\n", name, r.p99, "< 8", r.p99 < 8 ? "ok" : "MISSED",
                r.vertices);
  }
}

// Adds a frame's per-panel times to `sum` (by name, in first-seen order).
void add_times(std::vector<std::pair<std::string, double>>& sum, const std::string& prefix,
               const stallscope::ui::ViewTimes& t) {
  for (const stallscope::ui::PanelTime& pt : t.panels) {
    const std::string name = prefix + pt.name;
    auto it = std::find_if(sum.begin(), sum.end(), [&](const auto& p) { return p.first == name; });
    if (it == sum.end()) it = sum.insert(sum.end(), {name, 0.0});
    it->second += pt.ms;
  }
}

// The compare view on `a` and `b`, both opened at once as the app does: the open, then frames.
int compare_bench(const std::string& a, const std::string& b, int frames, int64_t part_rows, int64_t detail_rows) {
  using namespace stallscope::ui;
  SourceOptions so;
  so.load_part_rows = part_rows;
  so.detail_rows = detail_rows;
  const auto t_open = Clock::now();
  SnapshotSource sa(a, so), sb(b, so);
  auto read = [](const Snapshot& s) { return s.state != SourceState::kLoading; };
  sa.wait_until(read, 600000);
  sb.wait_until(read, 600000);
  const double open_ms = ms_since(t_open);
  sa.wait_until(SnapshotSource::settled, 600000);
  sb.wait_until(SnapshotSource::settled, 600000);
  const double settled_ms = ms_since(t_open);
  const long rss = rss_mib();
  const auto snap_a = sa.current(), snap_b = sb.current();
  for (const auto& s : {snap_a, snap_b}) {
    if (s->state == SourceState::kError || !s->timeline) {
      std::fprintf(stderr, "ui_bench: %s\n", s->error.c_str());
      return 1;
    }
  }

  start_imgui();
  CompareDashboard cmp;
  ImGui::NewFrame();  // one frame to find the origins
  cmp.draw(*snap_a, *snap_b);
  ImGui::Render();
  double first = 0, last = 0;
  for (int i = 0; i < 2; ++i) {
    const Timeline& tl = *(i ? snap_b : snap_a)->timeline;
    first = std::min(first, static_cast<double>(tl.first_ns) - cmp.origin(i));
    last = std::max(last, static_cast<double>(tl.end_ns) - cmp.origin(i));
  }
  std::vector<std::pair<std::string, double>> panel_ms;
  int view_frames = 0;
  // The mouse over A's timeline (below the strip, A's header and headline).
  const auto rows = measure_frames(
      first, last - first, frames, 240, [&](double t0, double t1) { cmp.set_range(t0, t1); },
      [&] { cmp.draw(*snap_a, *snap_b); },
      [&] {
        auto it = std::find_if(panel_ms.begin(), panel_ms.end(), [](const auto& p) { return p.first == "strip"; });
        if (it == panel_ms.end()) it = panel_ms.insert(panel_ms.end(), {"strip", 0.0});
        it->second += cmp.strip_ms();
        add_times(panel_ms, "A ", cmp.side(0).last_times());
        add_times(panel_ms, "B ", cmp.side(1).last_times());
        ++view_frames;
      });
  ImGui::DestroyContext();

  std::printf("\nstallscope ui_bench, compare view: A %s, B %s\n", a.c_str(), b.c_str());
  for (const auto& s : {snap_a, snap_b}) {
    std::printf("  %s: %.2f M rows, %.0f s, %zu lanes\n", s->path.c_str(),
                static_cast<double>(s->timeline->rows_read) / 1e6,
                static_cast<double>(s->timeline->end_ns - s->timeline->first_ns) / 1e9, s->timeline->lanes.size());
  }
  std::printf("  memory with both loaded and analysed: %ld MiB resident\n\n", rss);
  std::printf("  %-44s %12s %12s  %s\n", "measure", "result", "goal", "");
  std::printf("  %-44s %10.0f ms %12s  %s\n", "open: both recordings read (at once)", open_ms, "-", "");
  std::printf("  %-44s %10.0f ms %12s  %s\n", "both analyses ready", settled_ms, "-", "");
  print_frames(rows);
  std::printf("\n  moving whole-run frame by panel (mean):");
  for (const auto& [name, ms] : panel_ms) std::printf("  %s %.2f ms", name.c_str(), ms / std::max(1, view_frames));
  std::printf("\n");
  return 0;
}
// The dashboard's job view on the job in `dir`: open, memory, frame, drilling into a rank.
int job_bench(const std::string& dir, int reps) {
  namespace ui = stallscope::ui;
  start_imgui();
  const auto t_open = Clock::now();
  auto files = stallscope::analysis::job_folder(dir);
  if (!files.ok()) {
    std::fprintf(stderr, "ui_bench: %s\n", files.status().message().c_str());
    return 1;
  }
  auto view = stallscope::analysis::job_view(*files);
  if (!view.ok()) {
    std::fprintf(stderr, "ui_bench: %s\n", view.status().message().c_str());
    return 1;
  }
  const double read_ms = ms_since(t_open);
  ui::JobScreen screen(std::move(*view), dir, {});
  auto frame = [&]() {
    ImGui::GetIO().DeltaTime = 1.0f / 60.0f;
    ImGui::NewFrame();
    screen.draw(nullptr);
    ImGui::Render();
  };
  frame();
  frame();
  const double open_ms = ms_since(t_open);
  std::vector<double> frame_ms;
  for (int i = 0; i < 60; ++i) {
    if (i % 10 == 0) screen.table().scroll_to(static_cast<size_t>(i * 3));
    const auto t0 = Clock::now();
    frame();
    frame_ms.push_back(ms_since(t0));
  }
  std::sort(frame_ms.begin(), frame_ms.end());
  const long rss_table = peak_rss_mib();

  // Drilling in: the job's slowest rank opened from the job view, and the same recording opened
  // alone, in interleaved rounds; each to its first timeline and to its analysis.
  const auto& rows = screen.table().rows();
  const size_t rank = rows.size() > 1 && rows[1].rank >= 0 ? static_cast<size_t>(rows[1].rank) : 0;
  const std::string path = screen.view().ranks[rank].source;
  auto has_timeline = [](const ui::Snapshot& s) { return s.timeline != nullptr; };
  std::vector<double> drill_tl, drill_settled, alone_tl, alone_settled;
  for (int r = 0; r < reps; ++r) {
    for (int which = 0; which < 2; ++which) {
      const auto t0 = Clock::now();
      std::unique_ptr<ui::SnapshotSource> own;
      ui::SnapshotSource* src = nullptr;
      if (which == 0) {
        screen.open(rank);
        frame();
        src = screen.source(0);
      } else {
        own = std::make_unique<ui::SnapshotSource>(path);
        src = own.get();
      }
      src->wait_until(has_timeline, 60000);
      const double tl = ms_since(t0);
      src->wait_until(ui::SnapshotSource::settled, 120000);
      const double settled = ms_since(t0);
      (which == 0 ? drill_tl : alone_tl).push_back(tl);
      (which == 0 ? drill_settled : alone_settled).push_back(settled);
      if (which == 0) screen.back();
    }
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const long rss_peak = peak_rss_mib();
  const double drill_ratio = med(drill_settled) / med(alone_settled);
  std::printf("\njob view of %s: %zu ranks (dashboard, headless)\n", dir.c_str(), screen.view().ranks.size());
  std::printf("  %-52s %12s %12s\n", "measure", "result", "goal");
  std::printf("  %-52s %9.0f ms %12s\n", "job view read from the ranks' summaries", read_ms, "-");
  if (!rows.empty() && rows[0].node >= 0) {
    const auto& nd = screen.view().nodes[static_cast<size_t>(rows[0].node)];
    std::printf("  %-52s %12s %12s  (%d of its %zu ranks slow)\n", "job view's first row, grouped by node",
                nd.name.c_str(), "slow node", nd.slow_ranks, nd.ranks.size());
  }
  std::printf("  %-52s %9.0f ms %12s  %s\n", "open: job view shown (read + first frames)", open_ms, "< 3000 ms",
              open_ms < 3000 ? "ok" : "MISSED");
  std::printf("  %-52s %9.2f ms %12s  max %.2f ms, scrolling\n", "job view frame (median)",
              frame_ms[frame_ms.size() / 2], "-", frame_ms.back());
  std::printf("  %-52s %8ld MiB %12s  %s\n", "memory, peak with the job view", rss_table, "< 2048 MiB",
              rss_table < 2048 ? "ok" : "MISSED");
  std::printf("  %-52s %9.0f ms %12s\n", "drill into the slowest rank: first timeline", med(drill_tl), "-");
  std::printf("  %-52s %9.0f ms %12s\n", "the same recording opened alone: first timeline", med(alone_tl), "-");
  std::printf("  %-52s %9.0f ms %12s\n", "drill into the slowest rank: analysed", med(drill_settled), "-");
  std::printf("  %-52s %9.0f ms %12s\n", "the same recording opened alone: analysed", med(alone_settled), "-");
  std::printf("  %-52s %10.2fx %12s  %s (%d rounds, interleaved)\n", "drilling in / opening alone (analysed)",
              drill_ratio, "<= 1.10x", drill_ratio <= 1.10 ? "ok" : "MISSED", reps);
  std::printf("  %-52s %8ld MiB %12s  %s\n", "memory, peak over the run", rss_peak, "< 2048 MiB",
              rss_peak < 2048 ? "ok" : "MISSED");
  namespace bench = stallscope::bench;
  const std::string at = std::to_string(screen.view().ranks.size()) + " ranks";
  bench::bench_row("dashboard job view open, " + at, bench::fmt("%.2f s", open_ms / 1e3), "< 3 s", "", open_ms < 3000);
  bench::bench_row("dashboard job view memory, peak, " + at, bench::fmt("%.0f MiB", static_cast<double>(rss_peak)),
                   "< 2 GiB", "", rss_peak < 2048);
  bench::bench_row("drilling into a rank / opening it alone, " + at, bench::fmt("%.2fx", drill_ratio), "<= 1.1x", "",
                   drill_ratio <= 1.10);
  ImGui::DestroyContext();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t events = 10'000'000;
  int frames = 200;
  int reps = 3;
  int open_only = 0;  // --open-only N: only the open (timeline alone), N times
  int64_t part_rows = stallscope::ui::SourceOptions{}.load_part_rows;
  int64_t detail_rows = stallscope::ui::SourceOptions{}.detail_rows;
  bool regen = false, generate_only = false;
  std::string db, compare_db, job_dir;
  stallscope::testing::JobSimOptions job;
  job.ranks = 256;
  job.nodes = 32;
  job.duration_ns = 60 * 60'000 * kMsNs;
  job.slow_node = 7;
  job.slow_from_ns = 40 * 60'000 * kMsNs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--db" && i + 1 < argc) {
      db = argv[++i];
    } else if (a == "--events" && i + 1 < argc) {
      events = std::atoll(argv[++i]);
    } else if (a == "--frames" && i + 1 < argc) {
      frames = std::atoi(argv[++i]);
    } else if (a == "--open-only" && i + 1 < argc) {
      open_only = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--part-rows" && i + 1 < argc) {
      part_rows = std::atoll(argv[++i]);
    } else if (a == "--detail-rows" && i + 1 < argc) {
      detail_rows = std::atoll(argv[++i]);
    } else if (a == "--regen") {
      regen = true;
    } else if (a == "--generate-only") {
      generate_only = true;
    } else if (a == "--compare" && i + 1 < argc) {
      compare_db = argv[++i];
    } else if (a == "--job" && i + 1 < argc) {
      job_dir = argv[++i];
    } else if (a == "--ranks" && i + 1 < argc) {
      job.ranks = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--nodes" && i + 1 < argc) {
      job.nodes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--minutes" && i + 1 < argc) {
      job.duration_ns = static_cast<int64_t>(std::atof(argv[++i]) * 60e9);
    } else if (a == "--slow-node" && i + 1 < argc) {
      job.slow_node = std::atoi(argv[++i]);
    } else if (a == "--slow-from-min" && i + 1 < argc) {
      job.slow_from_ns = static_cast<int64_t>(std::atof(argv[++i]) * 60e9);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--slow-x" && i + 1 < argc) {
      job.slow_x = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: ui_bench [--db PATH] [--events N] [--frames N] [--open-only N] [--part-rows N] "
                   "[--detail-rows N] [--regen] [--compare B.db] [--generate-only]\n"
                   "       ui_bench --job DIR [--generate-only] [--ranks N] [--nodes N] [--minutes M] [--slow-node K] "
                   "[--slow-from-min M] [--slow-x X] [--reps N]\n");
      return 2;
    }
  }
  if (!job_dir.empty()) {
    if (exists(job_dir + "/part-0.db")) {
      std::printf("%s already holds a job; kept\n", job_dir.c_str());
    } else {
      mkdir(job_dir.c_str(), 0755);
      const auto t0 = Clock::now();
      const auto truth = stallscope::testing::write_sim_job(job_dir, job);
      std::printf("%s: %d ranks on %d nodes, %lld steps each, written in %.1f s\n", job_dir.c_str(), job.ranks,
                  job.nodes, static_cast<long long>(truth.steps), ms_since(t0) / 1e3);
    }
    return generate_only ? 0 : job_bench(job_dir, reps);
  }

  if (db.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    db = std::string(tmp && *tmp ? tmp : "/tmp") + "/stallscope-ui-bench-" + std::to_string(events / 1000000) + "M.db";
  }

  const stallscope::testing::SimOptions o = stallscope::testing::hour_of_training(events);

  // A recording on another machine (ssh://host/path, tcp://...): read through the link, as the
  // dashboard does; nothing is generated there.
  const bool remote = stallscope::Reader::is_uri(db);
  if (remote) stallscope::remote::install();
  if (regen && !remote && exists(db)) {
    std::remove(db.c_str());
    std::remove((db + "-wal").c_str());
    std::remove((db + "-shm").c_str());
  }
  if (!remote && !exists(db)) {
    std::printf("generating %s (%d epochs x %d batches, 8 workers) ...\n", db.c_str(), o.epochs, o.batches);
    std::fflush(stdout);
    const auto t0 = Clock::now();
    const auto truth = stallscope::testing::write_sim_recording(db, o);
    std::printf("  %lld events, %.0f s of recording, written in %.1f s\n", static_cast<long long>(truth.events),
                static_cast<double>(truth.end_ns) / 1e9, ms_since(t0) / 1e3);
  }

  if (generate_only) return 0;

  // --- open ---------------------------------------------------------------------------------
  if (open_only > 0) {
    for (int k = 0; k < open_only; ++k) {
      stallscope::ui::SourceOptions so;
      so.analysis = false;
      so.load_part_rows = part_rows;
      so.detail_rows = detail_rows;
      const auto t0 = Clock::now();
      std::string parts;
      so.on_publish = [&](const stallscope::ui::Snapshot& s) {
        if (s.timeline) parts += " " + std::to_string(static_cast<int>(ms_since(t0)));
      };
      stallscope::ui::SnapshotSource alone(db, so);
      alone.wait_until(
          [](const stallscope::ui::Snapshot& s) { return s.state != stallscope::ui::SourceState::kLoading; }, 600000);
      std::printf("open (timeline alone): %.0f ms; timeline published at (ms):%s\n", ms_since(t0), parts.c_str());
    }
    return 0;
  }
  if (!compare_db.empty()) return compare_bench(db, compare_db, frames, part_rows, detail_rows);
  const auto t_open = Clock::now();
  stallscope::ui::SourceOptions main_opts;
  main_opts.load_part_rows = part_rows;
  main_opts.detail_rows = detail_rows;
  stallscope::ui::SnapshotSource src(db, main_opts);
  src.wait_until([](const stallscope::ui::Snapshot& s) { return s.state != stallscope::ui::SourceState::kLoading; },
                 600000);
  const double open_ms = ms_since(t_open);
  const long rss_timeline = rss_mib();
  src.wait_until(stallscope::ui::SnapshotSource::settled, 600000);
  const double settled_ms = ms_since(t_open);
  auto snap = src.current();
  const double first_tl_ms = snap->first_timeline_seconds * 1e3;
  if (snap->state == stallscope::ui::SourceState::kError) {
    std::fprintf(stderr, "ui_bench: %s\n", snap->error.c_str());
    return 1;
  }
  const auto& tl = *snap->timeline;
  int64_t items = 0;
  for (const auto& l : tl.lanes) items += l.items;
  const double run_s = static_cast<double>(tl.end_ns - tl.first_ns) / 1e9;

  // The open again (the analysis no longer competes: it starts once the read is done).
  double open_alone_ms = 0;
  {
    stallscope::ui::SourceOptions so;
    so.analysis = false;
    so.load_part_rows = part_rows;
    so.detail_rows = detail_rows;
    const auto t0 = Clock::now();
    stallscope::ui::SnapshotSource alone(db, so);
    alone.wait_until([](const stallscope::ui::Snapshot& s) { return s.state != stallscope::ui::SourceState::kLoading; },
                     600000);
    open_alone_ms = ms_since(t0);
  }

  // --- frames --------------------------------------------------------------------------------
  start_imgui();
  stallscope::ui::Dashboard dash;
  stallscope::ui::ViewState& st = dash.state();
  const bool windowed = tl.windowed();
  // A long recording: a view outside the detail held asks for its window, as the app does; the
  // read is waited for outside the frame's time and counted apart.
  std::vector<double> detail_reads_ms;
  auto serve_detail = [&] {
    if (!st.detail_request) return;
    const double v0 = st.t0, v1 = st.t1;
    const auto t0 = Clock::now();
    src.request_detail(st.detail_request->first, st.detail_request->second);
    src.wait_until([&](const stallscope::ui::Snapshot& s) { return s.timeline && !wanted_detail(*s.timeline, v0, v1); },
                   600000);
    detail_reads_ms.push_back(ms_since(t0));
  };
  // Zoomed into a minute 30 % into the run: how long until its detail is shown.
  double zoom_detail_ms = -1;
  const double whole_ns = static_cast<double>(tl.end_ns - tl.first_ns);
  if (windowed) {
    st.t0 = static_cast<double>(tl.first_ns) + whole_ns * 0.3;
    st.t1 = st.t0 + 60e9;
    st.range_set = true;
    st.follow = false;
    ImGui::NewFrame();
    dash.draw(*src.current());
    ImGui::Render();
    serve_detail();
    if (!detail_reads_ms.empty()) zoom_detail_ms = detail_reads_ms.back();
  }
  const long rss_zoomed = rss_mib();
  // Where a moving whole-run frame's time goes: the sum per panel, by the panel table's names.
  std::vector<std::pair<std::string, double>> panel_ms;
  int view_frames = 0;
  const auto rows = measure_frames(
      static_cast<double>(tl.first_ns), whole_ns, frames, 330,
      [&](double t0, double t1) {
        st.t0 = t0;
        st.t1 = t1;
        st.range_set = true;
        st.follow = false;
      },
      [&] { dash.draw(*src.current()); },
      [&] {
        add_times(panel_ms, "", dash.last_times());
        ++view_frames;
      },
      windowed, serve_detail);
  ImGui::DestroyContext();
  const long rss_peak = peak_rss_mib();

  std::printf("\nstallscope ui_bench: %s\n", db.c_str());
  std::printf(
      "  recording: %.2f M rows (%lld spans, %lld instants, %lld counter samples), %.0f s, %zu lanes, %.2f M items\n",
      static_cast<double>(tl.rows_read) / 1e6, static_cast<long long>(tl.spans), static_cast<long long>(tl.instants),
      static_cast<long long>(tl.counter_samples), run_s, tl.lanes.size(), static_cast<double>(items) / 1e6);
  std::printf("  memory after the timeline loaded: %ld MiB resident", rss_timeline);
  if (windowed) {
    std::printf("; zoomed in: %ld MiB; peak over the run: %ld MiB\n", rss_zoomed, rss_peak);
    std::printf("  detail held: the latest %.2f M rows of %.2f M (the overview covers the rest)\n",
                static_cast<double>(tl.rows_read) / 1e6, static_cast<double>(tl.overview->total_rows) / 1e6);
  } else {
    std::printf("\n");
  }
  std::printf("\n");
  std::printf("  %-44s %12s %12s  %s\n", "measure", "result", "goal", "");
  if (windowed) {
    std::printf("  %-44s %10.0f ms %9s ms  %s\n", "open: whole run shown (overview + first part)", first_tl_ms,
                "< 1000", first_tl_ms < 1000 ? "ok" : "MISSED");
    std::printf("  %-44s %10ld MiB %8s MiB  %s\n", "memory, peak", rss_peak, "< 1024",
                rss_peak < 1024 ? "ok" : "MISSED");
    std::printf("  %-44s %10.0f ms %12s  %s\n", "zoomed to a minute: its detail shown", zoom_detail_ms, "-", "");
    double sum = 0, most = 0;
    for (double ms : detail_reads_ms) sum += ms, most = std::max(most, ms);
    std::printf("  %-44s %10zu %12s  mean %.0f ms, max %.0f ms (outside the frame times)\n", "detail windows read",
                detail_reads_ms.size(), "-",
                detail_reads_ms.empty() ? 0.0 : sum / static_cast<double>(detail_reads_ms.size()), most);
  } else {
    std::printf("  %-44s %10.0f ms %12s  %s\n", "open: first timeline shown (first part)", first_tl_ms, "-",
                "fills in part by part");
  }
  const std::string read_what = windowed ? "open: the latest part's detail read" : "open: whole recording read";
  std::printf("  %-44s %10.0f ms %9s ms  %s\n", read_what.c_str(), open_ms, "< 2000", open_ms < 2000 ? "ok" : "MISSED");
  std::printf("  %-44s %10.0f ms %9s ms  %s\n", (read_what + " (again)").c_str(), open_alone_ms, "< 2000",
              open_alone_ms < 2000 ? "ok" : "MISSED");
  std::printf("  %-44s %10.0f ms %12s  %s\n", "analysis ready (starts once read)", settled_ms, "-", "shown when done");
  print_frames(rows);
  std::printf("\n  moving whole-run frame by panel (mean):");
  for (const auto& [name, ms] : panel_ms) std::printf("  %s %.2f ms", name.c_str(), ms / std::max(1, view_frames));
  std::printf("\n");
  namespace bench = stallscope::bench;
  const std::string at = bench::fmt("%.1f M events", static_cast<double>(events) / 1e6);
  const double read_ms = std::min(open_ms, open_alone_ms);
  if (windowed) {
    bench::bench_row("dashboard open, whole run shown, " + at, bench::fmt("%.2f s", first_tl_ms / 1e3), "< 1 s", "",
                     first_tl_ms < 1000);
    bench::bench_row("dashboard memory, peak, " + at, bench::fmt("%.0f MiB", static_cast<double>(rss_peak)), "< 1 GiB",
                     "", rss_peak < 1024);
  }
  bench::bench_row(
      std::string(windowed ? "dashboard open, latest part's detail read, " : "dashboard open, whole recording read, ") +
          at,
      bench::fmt("%.2f s", read_ms / 1e3), "< 2 s", "", read_ms < 2000);
  for (const FrameRow& r : rows) {
    if (r.name.find("moving") == std::string::npos) continue;
    bench::bench_row("dashboard frame, " + r.name + ", " + at + " (median / p99)",
                     bench::fmt("%.2f", r.median) + bench::fmt(" / %.2f ms", r.p99), "< 8 ms", "", r.p99 < 8);
  }
  return 0;
}
