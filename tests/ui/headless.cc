// Headless ImGui and synchronous snapshots; see headless.h.
#include "tests/ui/headless.h"

#include <gtest/gtest.h>

#include "ui/analysis_view.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_builder.h"

namespace stallscope::testing {

Headless::Headless(float width, float height) {
  IMGUI_CHECKVERSION();
  ctx_ = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(width, height);
  io.DeltaTime = 1.0f / 60.0f;
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas: no renderer needed
  io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(1)));
}

Headless::~Headless() { ImGui::DestroyContext(ctx_); }

void Headless::frame(const std::function<void()>& draw, ImVec2 mouse, bool press, float wheel) {
  ImGuiIO& io = ImGui::GetIO();
  io.DeltaTime = 1.0f / 60.0f;
  io.MousePos = mouse;
  io.MouseDown[0] = press;
  io.MouseWheel = wheel;
  ImGui::NewFrame();
  draw();
  ImGui::Render();
}

ui::LayoutDump Headless::dashboard(ui::Dashboard& dash, const ui::Snapshot& snap, ImVec2 mouse, int frames,
                                   bool press) {
  ui::LayoutDump dump;
  for (int i = 0; i < frames; ++i) {
    dump.clear();
    frame([&] { dash.draw(snap, &dump); }, mouse, press && i == frames - 1);
  }
  return dump;
}

ui::LayoutDump Headless::compare(ui::CompareDashboard& cmp, const ui::Snapshot& a, const ui::Snapshot& b, ImVec2 mouse,
                                 int frames, bool press, float wheel) {
  ui::LayoutDump dump;
  for (int i = 0; i < frames; ++i) {
    dump.clear();
    const bool last = i == frames - 1;
    frame([&] { cmp.draw(a, b, &dump); }, mouse, press && last, last ? wheel : 0.0f);
  }
  return dump;
}

std::shared_ptr<const ui::Snapshot> load_snapshot(const std::string& path, bool analysis) {
  auto snap = std::make_shared<ui::Snapshot>();
  snap->path = path;
  auto tail = ui::RecordingTail::open(path);
  if (!tail.ok()) {
    snap->state = ui::SourceState::kError;
    snap->error = tail.status().message();
    return snap;
  }
  ui::SnapshotBuilder b;
  auto polled = (*tail)->poll(b);
  EXPECT_TRUE(polled.ok()) << polled.status().message();
  snap->timeline = b.publish();
  snap->state = snap->timeline->complete ? ui::SourceState::kFinished : ui::SourceState::kCutOff;
  if (analysis) {
    auto a = ui::run_analysis(path);
    EXPECT_TRUE(a.ok()) << a.status().message();
    if (a.ok()) snap->analysis = *a;
  }
  return snap;
}

}  // namespace stallscope::testing
