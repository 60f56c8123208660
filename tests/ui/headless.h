// Headless ImGui for the dashboard tests: a context with a display size and a built font atlas,
// frames run without any window or renderer, the mouse placed by the test. Also builds snapshots
// of a recording synchronously (the reader and the analysis the background threads would run).
#pragma once

#include <imgui.h>

#include <functional>
#include <memory>
#include <string>

#include "ui/compare_dashboard.h"
#include "ui/dashboard.h"
#include "ui/snapshot.h"

namespace stallscope::testing {

class Headless {
 public:
  explicit Headless(float width = 1600, float height = 1000);
  ~Headless();
  Headless(const Headless&) = delete;
  Headless& operator=(const Headless&) = delete;

  // One frame: NewFrame, draw(), Render. The mouse is at `mouse` (off screen by default); with
  // `press`, the left button is down during this frame; `wheel`: the mouse wheel turned.
  void frame(const std::function<void()>& draw, ImVec2 mouse = ImVec2(-1000, -1000), bool press = false,
             float wheel = 0);
  // Runs `frames` frames of the dashboard on `snap` and returns the last frame's layout.
  ui::LayoutDump dashboard(ui::Dashboard& dash, const ui::Snapshot& snap, ImVec2 mouse = ImVec2(-1000, -1000),
                           int frames = 2, bool press = false);
  // The same for the compare view on `a` and `b`; `wheel` turns in the last frame.
  ui::LayoutDump compare(ui::CompareDashboard& cmp, const ui::Snapshot& a, const ui::Snapshot& b,
                         ImVec2 mouse = ImVec2(-1000, -1000), int frames = 2, bool press = false, float wheel = 0);

 private:
  ImGuiContext* ctx_;
};

// A snapshot of `path` as the background threads would publish it once settled (state from the
// meta; analysis included unless `analysis` is false).
std::shared_ptr<const ui::Snapshot> load_snapshot(const std::string& path, bool analysis = true);

}  // namespace stallscope::testing
