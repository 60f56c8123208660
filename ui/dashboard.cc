// Dashboard: the panel table, its layout and the per-frame logic; see dashboard.h.
//
//   +---------------------------------------------------------------------------+
//   | header: file, LIVE/REPLAY, transport (play, speed, scrub), stats          |  bar
//   | headline: throughput | stalled on input | GPU busy / computing | ready    |  wide
//   +-------------------------------------------------------+-------------------+
//   | timeline (ruler, lanes: GPU, main, pin, workers, ...) | recommendations   |
//   | queue depth (ready, in flight, none ready)            |                   |
//   | workers heat strip (CPU, run queue, RSS, fetch time)  | batch life        |
//   +-------------------------------------------------------+-------------------+
//     main column                                             side column
#include "ui/dashboard.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "ui/analysis_view.h"
#include "ui/overview.h"
#include "ui/palette.h"

namespace stallscope::ui {
namespace {

// The panel table. A panel is drawn, laid out and timed from its row here: adding one is its view
// file, its declaration in views.h, a row here, its line in ui/CMakeLists.txt, its test and its
// line in docs/dashboard.md. (A table, not panels registering themselves from static
// constructors: the linker drops objects of a static library that nothing references.) The
// compact heights are those of a half of the compare view (compare_dashboard.h), where the table
// is laid out twice in the window's height: the timeline keeps what the others leave.
constexpr Panel kPanels[] = {
    {"header", draw_header, Place::fixed(Area::kBar, 40).compact(32)},
    {"headline", draw_headline, Place::fixed(Area::kWide, 96).compact(72)},
    {"timeline", draw_timeline, Place::rest(Area::kMain, 120)},
    {"queue", draw_queue, Place::fixed(Area::kMain, 124).compact(84)},
    {"workers", draw_workers, Place::fitted(Area::kMain, workers_height).compact(126)},
    {"recommendations", draw_recommendations, Place::share_of(Area::kSide, 0.56f)},
    {"batch", draw_batch, Place::rest(Area::kSide)},
};

}  // namespace

std::span<const Panel> dashboard_panels() { return kPanels; }

double advance_clock(ViewState& st, const ClockInput& in) {
  double now = in.data_t1;
  if (in.replay) {
    if (st.playing) {
      if (st.playhead < 0) st.playhead = in.data_t0;
      st.playhead += static_cast<double>(st.dt) * static_cast<double>(st.speed) * 1e9;
      if (st.playhead >= in.data_t1) {
        st.playhead = in.data_t1;
        st.playing = false;
      }
    }
    now = st.playhead < 0 ? in.data_t1 : std::clamp(st.playhead, in.data_t0, in.data_t1);
  }
  if (!st.range_set) {
    if (in.replay || !in.live) {
      st.t0 = in.data_t0;
      st.t1 = std::max(in.data_t1, in.data_t0 + 1e6);
      st.follow = false;
    } else {
      st.t0 = std::max(now - st.live_span_ns, in.data_t0);
      st.t1 = now;
    }
    // While a large recording is still read in parts, the view keeps fitting what has arrived.
    st.range_set = in.loaded;
  }
  if (st.follow) {
    if (!in.replay && in.live) {
      // The newest data at the right edge; a run younger than the window fills it from its start.
      st.t1 = now + st.live_span_ns * 0.02;
      st.t0 = std::max(st.t1 - st.live_span_ns, in.data_t0 - st.live_span_ns * 0.02);
    } else if (in.replay) {
      const double w = st.t1 - st.t0;
      if (now > st.t1 - 0.05 * w || now < st.t0) {
        st.t0 = now - 0.8 * w;
        st.t1 = st.t0 + w;
      }
    }
  }
  if (st.t1 <= st.t0) st.t1 = st.t0 + 1e6;
  return now;
}

Frame Dashboard::begin_frame(const Snapshot& snap, LayoutDump* dump) {
  ImGuiIO& io = ImGui::GetIO();
  st_.dt = io.DeltaTime;
  st_.wall_s += static_cast<double>(io.DeltaTime);
  if (dump) dump->state = state_name(snap.state);
  Frame f;
  f.snap = &snap;
  f.tl = snap.timeline.get();
  f.an = snap.analysis.get();
  f.st = &st_;
  f.dump = dump;
  f.fonts = &fonts_;
  geo_.new_frame(snap.timeline.get(), snap.analysis.get());
  f.geo = keep_geometry_ ? &geo_ : nullptr;
  f.replay = snap.state == SourceState::kFinished || snap.state == SourceState::kCutOff;
  if (f.tl) {
    f.data_t0 = static_cast<double>(std::min<int64_t>(f.tl->first_ns, f.tl->end_ns));
    f.data_t1 = static_cast<double>(std::max<int64_t>(f.tl->end_ns, f.tl->first_ns + 1000));
  }
  f.fit_t0 = f.data_t0;
  f.fit_t1 = f.data_t1;
  f.now_ns = f.data_t1;
  return f;
}

void Dashboard::draw_panels(Frame& f, const ImVec2& pos, const ImVec2& size, bool compact) {
  times_.panels.clear();
  const Snapshot& snap = *f.snap;
  if (!snap.timeline && snap.state == SourceState::kError) {
    draw_message("Cannot open this recording", snap.error, f.dump, fonts_, pos, size);
    return;
  }
  if (f.dump) {
    f.dump->view_t0 = st_.t0;
    f.dump->view_t1 = st_.t1;
    if (snap.state == SourceState::kError) f.dump->message = snap.error;
  }
  using Clock = std::chrono::steady_clock;
  const std::vector<PanelBox> boxes = lay_out(kPanels, f, pos, size, compact);
  for (size_t i = 0; i < std::size(kPanels); ++i) {
    const auto t = Clock::now();
    kPanels[i].draw(f, boxes[i].pos, boxes[i].size);
    times_.panels.push_back({kPanels[i].name, std::chrono::duration<double, std::milli>(Clock::now() - t).count()});
  }
  st_.detail_request = f.tl ? wanted_detail(*f.tl, st_.t0, st_.t1) : std::nullopt;
  if (snap.state == SourceState::kError) {
    // Read before, failed since: keep what was read, say why.
    const float x0 = pos.x + size.x * 0.25f, x1 = pos.x + size.x * 0.75f, y1 = pos.y + size.y;
    ImGui::GetForegroundDrawList()->AddRectFilled(ImVec2(x0, y1 - 34), ImVec2(x1, y1 - 8), kBad, 4.0f);
    ImGui::GetForegroundDrawList()->AddText(ImVec2(x0 + 10, y1 - 29), IM_COL32(255, 255, 255, 255), snap.error.c_str());
  }
}

void Dashboard::draw(const Snapshot& snap, LayoutDump* dump) {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  begin_window();
  if (fonts_.regular) ImGui::PushFont(fonts_.regular);
  Frame f = begin_frame(snap, dump);
  if (f.tl || snap.state != SourceState::kError) {
    ClockInput in;
    in.replay = f.replay;
    in.live = snap.state == SourceState::kLive;
    in.loaded = f.tl != nullptr && snap.state != SourceState::kLoading;
    in.data_t0 = f.data_t0;
    in.data_t1 = f.data_t1;
    f.now_ns = advance_clock(st_, in);
  }
  draw_panels(f, ImVec2(0, 0), display);
  if (fonts_.regular) ImGui::PopFont();
  end_window();
}

void begin_window() {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(display);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
  ImGui::PushStyleColor(ImGuiCol_WindowBg, kBackground);
  ImGui::Begin("stallscope", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus |
                   ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PopStyleVar(2);
}

void end_window() {
  ImGui::End();
  ImGui::PopStyleColor();
}

}  // namespace stallscope::ui
