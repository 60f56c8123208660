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
#include "ui/palette.h"

namespace stallscope::ui {
namespace {

// The panel table. A panel is drawn, laid out and timed from its row here: adding one is its view
// file, its declaration in views.h, a row here, its line in ui/CMakeLists.txt, its test and its
// line in docs/dashboard.md. (A table, not panels registering themselves from static
// constructors: the linker drops objects of a static library that nothing references.)
constexpr Panel kPanels[] = {
    {"header", draw_header, Place::fixed(Area::kBar, 40)},
    {"headline", draw_headline, Place::fixed(Area::kWide, 96)},
    {"timeline", draw_timeline, Place::rest(Area::kMain, 120)},
    {"queue", draw_queue, Place::fixed(Area::kMain, 124)},
    {"workers", draw_workers, Place::fitted(Area::kMain, workers_height)},
    {"recommendations", draw_recommendations, Place::share_of(Area::kSide, 0.56f)},
    {"batch", draw_batch, Place::rest(Area::kSide)},
};

}  // namespace

std::span<const Panel> dashboard_panels() { return kPanels; }

void Dashboard::update_clock(Frame& f) {
  ViewState& st = st_;
  if (f.replay) {
    if (st.playing) {
      if (st.playhead < 0) st.playhead = f.data_t0;
      st.playhead += static_cast<double>(st.dt) * static_cast<double>(st.speed) * 1e9;
      if (st.playhead >= f.data_t1) {
        st.playhead = f.data_t1;
        st.playing = false;
      }
    }
    f.now_ns = st.playhead < 0 ? f.data_t1 : std::clamp(st.playhead, f.data_t0, f.data_t1);
  } else {
    f.now_ns = f.data_t1;
  }
  if (!st.range_set) {
    if (f.replay || f.snap->state != SourceState::kLive) {
      st.t0 = f.data_t0;
      st.t1 = std::max(f.data_t1, f.data_t0 + 1e6);
      st.follow = false;
    } else {
      st.t0 = std::max(f.now_ns - st.live_span_ns, f.data_t0);
      st.t1 = f.now_ns;
    }
    // While a large recording is still read in parts, the view keeps fitting what has arrived.
    st.range_set = f.tl != nullptr && f.snap->state != SourceState::kLoading;
  }
  if (st.follow) {
    if (!f.replay && f.snap->state == SourceState::kLive) {
      // The newest data at the right edge; a run younger than the window fills it from its start.
      st.t1 = f.now_ns + st.live_span_ns * 0.02;
      st.t0 = std::max(st.t1 - st.live_span_ns, f.data_t0 - st.live_span_ns * 0.02);
    } else if (f.replay) {
      const double w = st.t1 - st.t0;
      if (f.now_ns > st.t1 - 0.05 * w || f.now_ns < st.t0) {
        st.t0 = f.now_ns - 0.8 * w;
        st.t1 = st.t0 + w;
      }
    }
  }
  if (st.t1 <= st.t0) st.t1 = st.t0 + 1e6;
}

void Dashboard::draw(const Snapshot& snap, LayoutDump* dump) {
  ImGuiIO& io = ImGui::GetIO();
  st_.dt = io.DeltaTime;
  st_.wall_s += static_cast<double>(io.DeltaTime);
  const ImVec2 display = io.DisplaySize;
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
  if (fonts_.regular) ImGui::PushFont(fonts_.regular);
  if (dump) dump->state = state_name(snap.state);
  times_.panels.clear();

  if (!snap.timeline && snap.state == SourceState::kError) {
    draw_message("Cannot open this recording", snap.error, dump, fonts_, ImVec2(0, 0), display);
  } else {
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
    update_clock(f);
    if (dump) {
      dump->view_t0 = st_.t0;
      dump->view_t1 = st_.t1;
      if (snap.state == SourceState::kError) dump->message = snap.error;
    }

    using Clock = std::chrono::steady_clock;
    const std::vector<PanelBox> boxes = lay_out(kPanels, f, display);
    for (size_t i = 0; i < std::size(kPanels); ++i) {
      const auto t = Clock::now();
      kPanels[i].draw(f, boxes[i].pos, boxes[i].size);
      times_.panels.push_back({kPanels[i].name, std::chrono::duration<double, std::milli>(Clock::now() - t).count()});
    }
    const float W = display.x, H = display.y;
    if (snap.state == SourceState::kError) {
      // Read before, failed since: keep what was read, say why.
      ImGui::GetForegroundDrawList()->AddRectFilled(ImVec2(W * 0.25f, H - 34), ImVec2(W * 0.75f, H - 8), kBad, 4.0f);
      ImGui::GetForegroundDrawList()->AddText(ImVec2(W * 0.25f + 10, H - 29), IM_COL32(255, 255, 255, 255), snap.error.c_str());
    }
  }
  if (fonts_.regular) ImGui::PopFont();
  ImGui::End();
  ImGui::PopStyleColor();
}

}  // namespace stallscope::ui
