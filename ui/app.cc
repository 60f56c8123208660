// The window; see app.h. The only file that talks to GLFW and OpenGL: opening the window and
// ImGui's backends on it, pacing frames (nothing is drawn while nothing changes), the frame loop
// over the dashboard, the compare view or the session picker, and reading the last frame back as a
// screenshot. No GL header and no link to libGL: the few GL functions called here come from GLFW
// once the context is current (Gl below), as ImGui's backend loads its own.
#include "ui/app.h"

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "remote/remote_reader.h"
#include "storage/session_registry.h"
#include "ui/compare_dashboard.h"
#include "ui/dashboard.h"
#include "ui/fonts.h"
#include "ui/job_screen.h"
#include "ui/overview.h"
#include "ui/png_writer.h"
#include "ui/recording_tail.h"
#include "ui/snapshot_source.h"

namespace stallscope::ui {
namespace {

std::string g_glfw_error;

// The GL functions this file calls, and the constants it passes them (the values are OpenGL's,
// fixed by its specification). Filled by load_gl() from the current context.
struct Gl {
  static constexpr unsigned kColorBufferBit = 0x4000;
  static constexpr unsigned kBack = 0x0405;
  static constexpr unsigned kPackAlignment = 0x0D05;
  static constexpr unsigned kRgba = 0x1908;
  static constexpr unsigned kUnsignedByte = 0x1401;
  void (*viewport)(int x, int y, int width, int height) = nullptr;
  void (*clear_color)(float r, float g, float b, float a) = nullptr;
  void (*clear)(unsigned mask) = nullptr;
  void (*finish)() = nullptr;
  void (*read_buffer)(unsigned mode) = nullptr;
  void (*pixel_storei)(unsigned name, int value) = nullptr;
  void (*read_pixels)(int x, int y, int width, int height, unsigned format, unsigned type, void* pixels) = nullptr;
};
Gl gl;

// Fills `gl` from the window's context (current); the name of the first function missing, or "".
std::string load_gl() {
  std::string missing;
  auto get = [&missing](auto*& f, const char* name) {
    // GLFWglproc is void (*)(), which converts to any function pointer type and back.
    f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(glfwGetProcAddress(name));
    if (f == nullptr && missing.empty()) missing = name;
  };
  get(gl.viewport, "glViewport");
  get(gl.clear_color, "glClearColor");
  get(gl.clear, "glClear");
  get(gl.finish, "glFinish");
  get(gl.read_buffer, "glReadBuffer");
  get(gl.pixel_storei, "glPixelStorei");
  get(gl.read_pixels, "glReadPixels");
  return missing;
}

void glfw_error(int code, const char* text) {
  g_glfw_error = std::string(text ? text : "unknown error") + " (GLFW error " + std::to_string(code) + ")";
}

void apply_style() {
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0;
  s.ChildRounding = 4;
  s.FrameRounding = 3;
  s.GrabRounding = 3;
  s.ScrollbarSize = 12;
  s.WindowBorderSize = 0;
  s.ChildBorderSize = 1;
  s.ItemSpacing = ImVec2(8, 5);
  s.Colors[ImGuiCol_Border] = ImVec4(1, 1, 1, 0.08f);
  s.Colors[ImGuiCol_FrameBg] = ImVec4(0.18f, 0.20f, 0.24f, 1);
  s.Colors[ImGuiCol_Button] = ImVec4(0.22f, 0.26f, 0.33f, 1);
  s.Colors[ImGuiCol_ButtonHovered] = ImVec4(0.28f, 0.40f, 0.58f, 1);
  s.Colors[ImGuiCol_ButtonActive] = ImVec4(0.30f, 0.52f, 0.80f, 1);
  s.Colors[ImGuiCol_SliderGrab] = ImVec4(0.37f, 0.69f, 1.0f, 1);
  s.Colors[ImGuiCol_PopupBg] = ImVec4(0.10f, 0.11f, 0.13f, 0.96f);
}

// Input and window events, counted by callbacks installed before ImGui's (which chain to them):
// the loop draws only when something may have changed.
uint64_t g_events = 0;

void count_events(GLFWwindow* window) {
  glfwSetCursorPosCallback(window, [](GLFWwindow*, double, double) { ++g_events; });
  glfwSetMouseButtonCallback(window, [](GLFWwindow*, int, int, int) { ++g_events; });
  glfwSetScrollCallback(window, [](GLFWwindow*, double, double) { ++g_events; });
  glfwSetKeyCallback(window, [](GLFWwindow*, int, int, int, int) { ++g_events; });
  glfwSetCharCallback(window, [](GLFWwindow*, unsigned int) { ++g_events; });
  glfwSetCursorEnterCallback(window, [](GLFWwindow*, int) { ++g_events; });
  glfwSetWindowFocusCallback(window, [](GLFWwindow*, int) { ++g_events; });
  glfwSetWindowSizeCallback(window, [](GLFWwindow*, int, int) { ++g_events; });
  glfwSetFramebufferSizeCallback(window, [](GLFWwindow*, int, int) { ++g_events; });
  glfwSetWindowRefreshCallback(window, [](GLFWwindow*) { ++g_events; });
  glfwSetWindowIconifyCallback(window, [](GLFWwindow*, int) { ++g_events; });
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// Opens the window with an OpenGL 3.3 core context; null after printing why not. With no display
// at all, a file that cannot be read is still worth saying first.
GLFWwindow* open_window(const AppOptions& opt, bool shot) {
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) {
    for (const std::string& path : {opt.path, opt.path_b}) {
      if (path.empty()) continue;
      auto tail = RecordingTail::open(path);
      if (!tail.ok()) {
        std::fprintf(stderr, "stallscope: %s\n", tail.status().message().c_str());
        return nullptr;
      }
    }
    std::fprintf(stderr,
                 "stallscope: cannot open a window: %s (is DISPLAY set? `stallscope report` works without one)\n",
                 g_glfw_error.empty() ? "no display" : g_glfw_error.c_str());
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (shot) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
  std::string title = "stallscope";
  if (!opt.path.empty()) title += " - " + opt.path;
  if (!opt.path_b.empty()) title += " vs " + opt.path_b;
  GLFWwindow* window = glfwCreateWindow(opt.width, opt.height, title.c_str(), nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "stallscope: cannot open a window: %s\n",
                 g_glfw_error.empty() ? "no OpenGL 3.3" : g_glfw_error.c_str());
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(window);
  if (const std::string missing = load_gl(); !missing.empty()) {
    std::fprintf(stderr, "stallscope: cannot open a window: the OpenGL library has no %s\n", missing.c_str());
    glfwDestroyWindow(window);
    glfwTerminate();
    return nullptr;
  }
  glfwSwapInterval(shot ? 0 : 1);
  return window;
}

// ImGui on the window: a context with the dashboard's style, its fonts (returned), the input
// counting, then the GLFW and OpenGL backends (which chain to the counting callbacks).
UiFonts start_imgui(GLFWwindow* window) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed: nothing to remember
  apply_style();
  const UiFonts fonts = load_fonts();
  count_events(window);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  return fonts;
}

// --range and --at: the view and the playhead to start with.
void apply_start_options(const AppOptions& opt, ViewState& st) {
  if (opt.range_s) {
    st.t0 = opt.range_s->first * 1e9;
    st.t1 = opt.range_s->second * 1e9;
    st.range_set = true;
    st.follow = false;
  }
  if (opt.playhead_s) st.playhead = *opt.playhead_s * 1e9;
}

// What the frame pacer watches: the snapshots on screen.
struct Watched {
  uint64_t generation = 0;     // their generations, summed: a new snapshot of any changes it
  const void* what = nullptr;  // which source (another one opened: draw)
  bool ticking = true;         // a frame a second all the same: the session picker (its list), a
                               // live recording (the badge)
};

// When to draw. Idle: with no input, no new snapshot and nothing playing, no frame is drawn; the
// loop sleeps in glfwWaitEventsTimeout and looks for a new snapshot 20 times a second. A change
// draws a few frames (ImGui settles hover and layout over two). A dashboard left open beside a
// training job so costs next to no CPU instead of a core drawing the same picture 60 times a
// second.
class FramePacer {
 public:
  // Waits for something to draw (or only polls, with a fixed number of frames to render); true
  // when this frame is to be drawn.
  bool next(bool fixed_frames, const Watched& w, bool playing) {
    if (!fixed_frames && settle_ <= 0) {
      glfwWaitEventsTimeout(kIdleWaitS);
      if (!changed(w, playing)) return false;
      settle_ = kSettleFrames;
    } else {
      glfwPollEvents();
      settle_ = changed(w, playing) ? kSettleFrames : settle_ - 1;
    }
    return true;
  }
  void drawn() { last_drawn_ = std::chrono::steady_clock::now(); }

 private:
  static constexpr double kIdleWaitS = 0.05;
  static constexpr int kSettleFrames = 3;

  // Input, a new snapshot or another source, playback or a held button since the last call.
  bool changed(const Watched& w, bool playing) {
    const bool stale = w.ticking && std::chrono::steady_clock::now() - last_drawn_ > std::chrono::seconds(1);
    const bool c = g_events != seen_events_ || w.generation != seen_generation_ || w.what != seen_what_ || playing ||
                   ImGui::IsAnyMouseDown() || stale;
    seen_events_ = g_events;
    seen_generation_ = w.generation;
    seen_what_ = w.what;
    return c;
  }

  int settle_ = kSettleFrames;
  uint64_t seen_events_ = 0, seen_generation_ = 0;
  const void* seen_what_ = nullptr;
  std::chrono::steady_clock::time_point last_drawn_ = std::chrono::steady_clock::now();
};

// Starts an ImGui frame. Screenshots show what was asked for (--mouse), not what the pointer
// happens to hover.
void new_frame(const AppOptions& opt, bool shot) {
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (opt.mouse) {
    io.MousePos = ImVec2(opt.mouse->first, opt.mouse->second);
  } else if (shot) {
    io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  }
  ImGui::NewFrame();
}

// The source's current snapshot; a read error goes to stderr once (exit status 1).
std::shared_ptr<const Snapshot> current(const SnapshotSource& source, bool* reported_error, int* status) {
  std::shared_ptr<const Snapshot> snap = source.current();
  if (snap->state == SourceState::kError && !*reported_error) {
    std::fprintf(stderr, "stallscope: %s\n", snap->error.c_str());
    *reported_error = true;
    *status = 1;
  }
  return snap;
}

// The session picker (no file given): live sessions and recent recordings, listed again every
// second.
struct Picker {
  std::vector<SessionEntry> live, recent;
  std::chrono::steady_clock::time_point last_list = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::string notice;
  // Another node's sessions come over the link: listed by a thread of their own, never by the
  // render thread.
  std::string node;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool listed = false;  // the first answer (or error) came
  remote::NodeSessions remote_list;
  std::string remote_error;
  std::thread lister;

  explicit Picker(std::string n) : node(std::move(n)) {
    if (node.empty()) return;
    lister = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu);
      while (!stop) {
        lock.unlock();
        auto l = remote::list_sessions(node);
        lock.lock();
        if (l.ok()) {
          remote_list = std::move(*l);
          remote_error.clear();
        } else {
          remote_error = l.status().message();
        }
        listed = true;
        cv.wait_for(lock, std::chrono::seconds(1), [&] { return stop; });
      }
    });
  }
  ~Picker() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      cv.notify_all();
    }
    if (lister.joinable()) lister.join();
  }
};

// Draws the picker over the whole window; a clicked entry is left in the state's open_request.
void draw_picker(Picker& p, Dashboard& dash, LayoutDump* d) {
  const ImGuiIO& io = ImGui::GetIO();
  const auto now = std::chrono::steady_clock::now();
  if (!p.node.empty()) {
    std::lock_guard<std::mutex> lock(p.mu);
    p.live = p.remote_list.live;
    p.recent = p.remote_list.recent;
    p.notice = !p.listed ? "connecting to " + p.node + " ..." : p.remote_error;
  } else if (now - p.last_list > std::chrono::seconds(1)) {
    p.live = list_live_sessions();
    p.recent = list_recent_sessions();
    p.last_list = now;
  }
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::Begin("stallscope", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings);
  if (dash.fonts().regular) ImGui::PushFont(dash.fonts().regular);
  if (d) d->state = "picker";
  draw_session_list(dash.state(), p.live, p.recent, p.notice, d, dash.fonts(), ImVec2(10, 10),
                    ImVec2(io.DisplaySize.x - 20, io.DisplaySize.y - 20));
  if (dash.fonts().regular) ImGui::PopFont();
  ImGui::End();
}

// Renders the frame into the back buffer; *fb_w x *fb_h: the framebuffer's size.
void render(GLFWwindow* window, int* fb_w, int* fb_h) {
  ImGui::Render();
  glfwGetFramebufferSize(window, fb_w, fb_h);
  gl.viewport(0, 0, *fb_w, *fb_h);
  gl.clear_color(0.094f, 0.102f, 0.122f, 1.0f);
  gl.clear(Gl::kColorBufferBit);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

// Reads the back buffer and writes it as a PNG.
Status save_screenshot(const std::string& path, int fb_w, int fb_h) {
  std::vector<uint8_t> px(static_cast<size_t>(fb_w) * static_cast<size_t>(fb_h) * 4);
  gl.finish();
  gl.read_buffer(Gl::kBack);
  gl.pixel_storei(Gl::kPackAlignment, 1);
  gl.read_pixels(0, 0, fb_w, fb_h, Gl::kRgba, Gl::kUnsignedByte, px.data());
  // OpenGL's rows go bottom up; PNG's top down.
  std::vector<uint8_t> flipped(px.size());
  const size_t row = static_cast<size_t>(fb_w) * 4;
  for (int y = 0; y < fb_h; ++y) {
    std::copy_n(px.data() + static_cast<size_t>(fb_h - 1 - y) * row, row,
                flipped.data() + static_cast<size_t>(y) * row);
  }
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;
  return write_png(path, fb_w, fb_h, flipped);
}

// The window goes first: an analysis still running on a large recording finishes (and the
// process exits) without keeping a dead window on screen.
void shut_down(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// What the frame loop runs: the watched snapshots, whether a replay plays, one frame's drawing.
struct Screen {
  std::function<Watched()> watched;
  std::function<bool()> playing;
  std::function<void(LayoutDump*)> draw;
  // After a draw: whether a view drawn asked for detail its source did not hold yet (it was drawn
  // from the overview there; the draw waited for the detail, so the next frame has it).
  std::function<bool()> wants_detail;
};

// Frames a screenshot draws past its last while its views still want detail (each such draw waits
// for it, so one is enough unless the data changed meanwhile).
constexpr int kMaxCatchUpFrames = 2;

SourceOptions source_options(const AppOptions& opt) {
  SourceOptions so;
  so.detail_rows = opt.detail_rows;
  return so;
}

// The frame loop: wait for a change (or run the fixed frames of a screenshot), draw, render; the
// last fixed frame is saved as a screenshot and a layout; a failure to write them sets *status to 1.
void run_frames(GLFWwindow* window, const AppOptions& opt, const Screen& screen, int* status) {
  const bool shot = !opt.screenshot.empty();
  int frames = shot ? (opt.frames > 0 ? opt.frames : 3) : opt.frames;
  int catch_up = 0;
  LayoutDump dump;
  dump.record_items = false;
  FramePacer pacer;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    if (frames > 0 && frame >= frames) break;
    if (!pacer.next(frames > 0, screen.watched(), screen.playing())) continue;
    new_frame(opt, shot);
    pacer.drawn();
    bool last = frames > 0 && frame == frames - 1;
    LayoutDump* d = (last && !opt.layout_dump.empty()) ? &dump : nullptr;
    if (d) d->clear();
    screen.draw(d);
    if (last && shot && catch_up < kMaxCatchUpFrames && screen.wants_detail && screen.wants_detail()) {
      // A screenshot is of what its views asked for: one more frame, drawn with the detail.
      ++frames;
      ++catch_up;
      last = false;
      d = nullptr;
    }

    int fb_w = 0, fb_h = 0;
    render(window, &fb_w, &fb_h);
    if (last && shot) {
      if (Status s = save_screenshot(opt.screenshot, fb_w, fb_h); !s.ok()) {
        std::fprintf(stderr, "stallscope: %s\n", s.message().c_str());
        *status = 1;
      }
    }
    if (d && !write_text(opt.layout_dump, d->to_json())) {
      std::fprintf(stderr, "stallscope: cannot write %s\n", opt.layout_dump.c_str());
      *status = 1;
    }
    glfwSwapBuffers(window);
  }
}

// Asks `source` for the detail the view `st` wants, if any; for a screenshot, the frame waits for it
// (the picture shows what its view asked for).
void ask_detail(SnapshotSource& source, const ViewState& st, const AppOptions& opt) {
  if (!st.detail_request) return;
  source.request_detail(st.detail_request->first, st.detail_request->second);
  if (opt.screenshot.empty()) return;
  const double t0 = st.t0, t1 = st.t1;
  source.wait_until([&](const Snapshot& s) { return s.timeline && !wanted_detail(*s.timeline, t0, t1); },
                    opt.settle_timeout_s * 1000);
}

// One recording, or the session picker until one is picked.
int run_single(GLFWwindow* window, const AppOptions& opt, const UiFonts& fonts) {
  Dashboard dash(fonts);
  ViewState& st = dash.state();
  apply_start_options(opt, st);
  std::unique_ptr<SnapshotSource> source;
  if (!opt.path.empty()) source = std::make_unique<SnapshotSource>(opt.path, source_options(opt));
  if (!opt.screenshot.empty() && source) {
    // Render once the data is read and analysed, so that the picture shows them.
    source->wait_until(SnapshotSource::settled, opt.settle_timeout_s * 1000);
  }
  Picker picker(opt.node);
  int status = 0;
  bool reported_error = false;
  Screen screen;
  screen.watched = [&] {
    if (!source) return Watched{0, nullptr, true};
    const std::shared_ptr<const Snapshot> s = source->current();
    return Watched{s->generation, source.get(), s->state == SourceState::kLive};
  };
  screen.playing = [&] { return st.playing; };
  screen.wants_detail = [&] { return source && st.detail_request.has_value(); };
  screen.draw = [&](LayoutDump* d) {
    if (source) {
      dash.draw(*current(*source, &reported_error, &status), d);
      ask_detail(*source, st, opt);
      return;
    }
    draw_picker(picker, dash, d);
    if (!st.open_request.empty()) {
      // A node's entry names the node's path: opened through the same link.
      if (!opt.node.empty()) st.open_request = remote::recording_uri(opt.node, st.open_request);
      source = std::make_unique<SnapshotSource>(st.open_request, source_options(opt));
      glfwSetWindowTitle(window, ("stallscope - " + st.open_request).c_str());
      st.open_request.clear();
    }
  };
  run_frames(window, opt, screen, &status);
  shut_down(window);
  source.reset();
  return status;
}

// Two recordings in the compare view, each followed by its own source.
int run_compare(GLFWwindow* window, const AppOptions& opt, const UiFonts& fonts) {
  CompareDashboard cmp(fonts);
  if (opt.tune) cmp.set_tune(*opt.tune, opt.tune_b);
  if (opt.range_s) cmp.set_range(opt.range_s->first * 1e9, opt.range_s->second * 1e9);
  if (opt.playhead_s) cmp.set_playhead(*opt.playhead_s * 1e9);
  std::unique_ptr<SnapshotSource> sources[2] = {std::make_unique<SnapshotSource>(opt.path, source_options(opt)),
                                                std::make_unique<SnapshotSource>(opt.path_b, source_options(opt))};
  if (!opt.screenshot.empty()) {
    for (auto& s : sources) s->wait_until(SnapshotSource::settled, opt.settle_timeout_s * 1000);
  }
  int status = 0;
  bool reported_error[2] = {false, false};
  Screen screen;
  screen.watched = [&] {
    const std::shared_ptr<const Snapshot> a = sources[0]->current(), b = sources[1]->current();
    return Watched{a->generation + b->generation, sources[0].get(),
                   a->state == SourceState::kLive || b->state == SourceState::kLive};
  };
  screen.playing = [&] { return cmp.axis().playing; };
  screen.wants_detail = [&] {
    return cmp.side(0).state().detail_request.has_value() || cmp.side(1).state().detail_request.has_value();
  };
  screen.draw = [&](LayoutDump* d) {
    const std::shared_ptr<const Snapshot> a = current(*sources[0], &reported_error[0], &status);
    const std::shared_ptr<const Snapshot> b = current(*sources[1], &reported_error[1], &status);
    cmp.draw(*a, *b, d);
    for (int i = 0; i < 2; ++i) ask_detail(*sources[i], cmp.side(i).state(), opt);
    if (const std::optional<int> pick = cmp.take_pick(); pick && cmp.tune()) {
      // A row of the tune set clicked: that run as B.
      const TuneRun& run = cmp.tune()->runs[static_cast<size_t>(*pick)];
      sources[1] = std::make_unique<SnapshotSource>(run.recording, source_options(opt));
      reported_error[1] = false;
      cmp.set_tune_b(*pick);
      glfwSetWindowTitle(window, ("stallscope - " + opt.path + " vs " + run.recording).c_str());
    }
  };
  run_frames(window, opt, screen, &status);
  shut_down(window);
  for (auto& s : sources) s.reset();
  return status;
}

// A job's folder: the job view, and the ranks opened from it.
int run_job(GLFWwindow* window, const AppOptions& opt, const UiFonts& fonts) {
  JobScreen job(*opt.job, opt.job_dir, source_options(opt), fonts);
  if (opt.job_rank) {
    job.open(*opt.job_rank);
    if (!opt.screenshot.empty()) job.source(0)->wait_until(SnapshotSource::settled, opt.settle_timeout_s * 1000);
    if (opt.range_s) apply_start_options(opt, job.single()->state());
  }
  std::string title;
  int status = 0;
  Screen screen;
  screen.watched = [&] {
    return Watched{job.generation(), job.showing_table() ? static_cast<const void*>(&job) : job.source(0), job.live()};
  };
  screen.playing = [&] { return job.playing(); };
  screen.wants_detail = [&] { return job.wants_detail(); };
  screen.draw = [&](LayoutDump* d) {
    job.draw(d);
    job.ask_detail();
    if (job.title() != title) {
      title = job.title();
      glfwSetWindowTitle(window, title.c_str());
    }
  };
  run_frames(window, opt, screen, &status);
  shut_down(window);
  return status;
}

}  // namespace

int run_app(const AppOptions& opt) {
  GLFWwindow* window = open_window(opt, !opt.screenshot.empty());
  if (!window) return 1;
  const UiFonts fonts = start_imgui(window);
  if (opt.job) return run_job(window, opt, fonts);
  return opt.path_b.empty() ? run_single(window, opt, fonts) : run_compare(window, opt, fonts);
}

}  // namespace stallscope::ui
