// Header: the recording (in the compare view with its A or B badge), its state (live, replay, cut
// off), the transport (play/pause, speed, scrub bar) for a finished recording, "follow" and the
// window width while live, and what was read (rows, open time, analysis time).
#include <algorithm>
#include <cmath>

#include "ui/format.h"
#include "ui/overview.h"
#include "ui/palette.h"
#include "ui/panel.h"
#include "ui/time_axis.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

std::string base_name(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::string count_text(int64_t n) {
  if (n >= 1'000'000) return fmt_double(static_cast<double>(n) / 1e6, 1) + " M";
  if (n >= 10'000) return fmt_double(static_cast<double>(n) / 1e3, 0) + " k";
  return std::to_string(n);
}

void badge(ImDrawList* dl, ImVec2 p, const char* text, ImU32 col) {
  const ImVec2 ts = ImGui::CalcTextSize(text);
  dl->AddRectFilled(p, ImVec2(p.x + ts.x + 14, p.y + ts.y + 6), col, 4.0f);
  dl->AddText(ImVec2(p.x + 7, p.y + 3), IM_COL32(20, 20, 24, 255), text);
}

}  // namespace

void draw_header(Frame& f, const ImVec2& pos, const ImVec2& size) {
  begin_panel(f, "header", pos, size, kPanelBg, false,
              ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float cy = pos.y + (size.y - ImGui::GetFrameHeight()) * 0.5f;
  const UiFonts& fonts = *f.fonts;
  const bool uni = fonts.unicode;

  float x = pos.x + 10;
  if (f.side) {  // the compare view: which of the two recordings this is
    badge(dl, ImVec2(x, cy), f.side, f.side[0] == 'B' ? kSideB : kSideA);
    x += ImGui::CalcTextSize(f.side).x + 14 + 10;
  } else {
    dl->AddText(ImVec2(x, cy + 3), kAccent, "stallscope");
    x += ImGui::CalcTextSize("stallscope").x + 12;
  }
  const std::string name = base_name(f.snap->path);
  dl->AddText(ImVec2(x, cy + 3), kText, name.c_str());
  x += ImGui::CalcTextSize(name.c_str()).x + 12;

  const SourceState s = f.snap->state;
  switch (s) {
    case SourceState::kLive: {
      const float pulse = 0.6f + 0.4f * static_cast<float>(std::sin(f.st->wall_s * 4.0));
      badge(dl, ImVec2(x, cy), "LIVE", mix(kPanelBg, kGood, pulse));
      break;
    }
    case SourceState::kFinished: badge(dl, ImVec2(x, cy), "REPLAY", kAccent); break;
    case SourceState::kCutOff: badge(dl, ImVec2(x, cy), "CUT OFF", kWarn); break;
    case SourceState::kError: badge(dl, ImVec2(x, cy), "ERROR", kBad); break;
    case SourceState::kLoading: {
      const std::string text = f.tl ? "LOADING " + std::to_string(static_cast<int>(f.snap->load_fraction * 100)) + "%"
                                    : std::string("LOADING");
      badge(dl, ImVec2(x, cy), text.c_str(), kTextDim);
      x += 40;
      break;
    }
  }
  x += 90;

  ImGui::SetCursorScreenPos(ImVec2(x, cy));
  if (f.replay) {
    const char* label = f.st->playing ? (uni ? "\xe2\x9d\x9a\xe2\x9d\x9a##play" : "Pause##play")
                                      : (uni ? "\xe2\x96\xb6##play" : "Play##play");
    if (ImGui::Button(label, ImVec2(uni ? 34 : 54, 0))) {
      f.st->playing = !f.st->playing;
      if (f.st->playing) {
        if (f.st->playhead < 0 || f.st->playhead >= f.data_t1) f.st->playhead = f.data_t0;  // replay from the start
        f.st->follow = true;
      }
    }
    ImGui::SameLine();
    static const float kSpeeds[] = {0.1f, 0.25f, 0.5f, 1, 2, 4, 10, 30, 100};
    static const char* const kSpeedNames[] = {"0.1x", "0.25x", "0.5x", "1x", "2x", "4x", "10x", "30x", "100x"};
    int current = 3;
    for (int i = 0; i < 9; ++i) {
      if (std::fabs(kSpeeds[i] - f.st->speed) < 1e-4f) current = i;
    }
    ImGui::SetNextItemWidth(72);
    if (ImGui::Combo("##speed", &current, kSpeedNames, 9)) f.st->speed = kSpeeds[current];
    ImGui::SameLine();
    // Scrub bar over the whole recording.
    double ph = (f.st->playhead < 0 ? f.data_t1 : f.st->playhead) / 1e9;
    const double lo = f.data_t0 / 1e9, hi = f.data_t1 / 1e9;
    // As the rulers count: from the session start, or in the compare view from the training start.
    const std::string fmt = fmt_offset(ph * 1e9 - f.origin_ns, 3) + " / " + fmt_offset(hi * 1e9 - f.origin_ns, 1);
    ImGui::SetNextItemWidth(std::max(200.0f, size.x * 0.34f));
    if (ImGui::SliderScalar("##scrub", ImGuiDataType_Double, &ph, &lo, &hi, fmt.c_str())) {
      f.st->playhead = ph * 1e9;
      f.st->follow = true;
    }
    if (f.dump)
      f.dump->panels.push_back({"scrub",
                                {ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x,
                                 ImGui::GetItemRectMax().y}});
    ImGui::SameLine();
    ImGui::Checkbox("follow", &f.st->follow);
  } else if (s == SourceState::kLive) {
    ImGui::Checkbox("follow", &f.st->follow);
    ImGui::SameLine();
    static const double kSpans[] = {2e9, 10e9, 30e9, 60e9, 300e9};
    static const char* const kSpanNames[] = {"last 2 s", "last 10 s", "last 30 s", "last minute", "last 5 minutes"};
    int current = 1;
    for (int i = 0; i < 5; ++i) {
      if (std::fabs(kSpans[i] - f.st->live_span_ns) < 1) current = i;
    }
    ImGui::SetNextItemWidth(130);
    if (ImGui::Combo("##span", &current, kSpanNames, 5)) {
      f.st->live_span_ns = kSpans[current];
      f.st->follow = true;
    }
    ImGui::SameLine();
    ImGui::TextDisabled("new data every flush (~100 ms)");
  } else if (s == SourceState::kCutOff) {
    ImGui::TextColored(ImColor(kWarn), "the recording was cut off (recorder gone): showing what was flushed");
  }
  if (!f.snap->link_error.empty()) {
    // A remote recording whose link dropped: what was read stays; the reader reconnects.
    ImGui::SameLine();
    ImGui::TextColored(ImColor(kBad), "link lost, retrying: showing what was read");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", f.snap->link_error.c_str());
    if (f.dump) f.dump->link_error = f.snap->link_error;
  }
  ImGui::SameLine();
  if (ImGui::SmallButton("fit")) {
    set_range(f, f.fit_t0, f.fit_t1);
    f.st->follow = false;
  }

  // Right: the file and what was read, as much of it as fits beside the controls (the size
  // first: what a long run will need on disk).
  const float room = pos.x + size.x - 12 - (ImGui::GetItemRectMax().x + 16);
  std::string stats;
  if (f.tl) {
    std::string file, file_short;  // with and without the growth per hour
    if (f.snap->file_bytes >= 0) {
      file = file_short = bytes_text(static_cast<double>(f.snap->file_bytes));
      if (auto g = growth_per_hour(*f.snap)) file += " (" + bytes_text(*g) + " per hour)";
    }
    // A long recording: the rows of the detail held, of the whole run's (the overview's count).
    const std::string rows = count_text(f.tl->rows_read) +
                             (f.tl->overview ? " of " + count_text(f.tl->overview->total_rows) : std::string()) +
                             " rows";
    std::string timing =
        s == SourceState::kLoading ? std::string("reading...") : "read in " + fmt_duration(f.snap->open_seconds * 1e9);
    if (!f.snap->analysis_error.empty()) {
      timing += ", analysis failed";
    } else if (f.an) {
      timing += ", analysed in " + fmt_duration(f.snap->analysis_seconds * 1e9);
    } else if (f.snap->analysis_pending) {
      timing += ", analysing...";
    }
    auto join = [](std::initializer_list<const std::string*> parts) {
      std::string out;
      for (const std::string* p : parts) {
        if (p->empty()) continue;
        out += (out.empty() ? "" : ", ") + *p;
      }
      return out;
    };
    for (const std::string& c :
         {join({&file, &rows, &timing}), join({&file, &rows}), join({&file}), join({&file_short}), std::string()}) {
      stats = c;
      if (ImGui::CalcTextSize(stats.c_str()).x <= room) break;
    }
  }
  if (f.dump) f.dump->header_stats = stats;
  const float sw = ImGui::CalcTextSize(stats.c_str()).x;
  dl->AddText(ImVec2(pos.x + size.x - sw - 12, cy + 3), kTextDim, stats.c_str());
  if (!f.snap->analysis_error.empty() &&
      ImGui::IsMouseHoveringRect(ImVec2(pos.x + size.x - sw - 12, pos.y), ImVec2(pos.x + size.x, pos.y + size.y))) {
    ImGui::SetTooltip("%s", f.snap->analysis_error.c_str());
  }
  end_panel();
}

}  // namespace stallscope::ui
