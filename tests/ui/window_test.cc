// The real window: `stallscope ui --screenshot` under Xvfb (started here on a free display; the
// tests skip with a message when Xvfb is not installed) with Mesa's software OpenGL. Checks the
// PNG is a real picture with the expected panels where the layout dump says they are; that bad
// input (corrupt, truncated, foreign, newer schema, missing) renders a message, prints one
// `stallscope: ` line and exits 1; that a cut-off recording opens; two recordings in the compare
// view; the session picker; and the command line's --help and usage errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "common/json.h"
#include "storage/session_registry.h"
#include "storage/sqlite.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"

// stb_image, header-only: its implementation is compiled here (static), no stb library needed.
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>

namespace stallscope {
namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string which(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && ::access((dir + "/" + prog).c_str(), X_OK) == 0) return dir + "/" + prog;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// An Xvfb server on a free display number, for the lifetime of the test suite.
class Xvfb {
 public:
  static Xvfb& get() {
    static Xvfb x;
    return x;
  }
  bool ok() const { return display_ >= 0; }
  std::string display() const { return ":" + std::to_string(display_); }
  const std::string& why() const { return why_; }
  ~Xvfb() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st;
      ::waitpid(pid_, &st, 0);
    }
  }

 private:
  Xvfb() {
    const std::string bin = which("Xvfb");
    if (bin.empty()) {
      why_ = "Xvfb is not installed (apt-get install xvfb): the real-window tests need it";
      return;
    }
    for (int n = 90 + static_cast<int>(::getpid() % 50); n < 400; ++n) {
      if (exists("/tmp/.X" + std::to_string(n) + "-lock") || exists("/tmp/.X11-unix/X" + std::to_string(n))) continue;
      pid_ = testing::start_process({bin, ":" + std::to_string(n), "-screen", "0", "1600x1000x24", "-nolisten", "tcp"},
                                    dir_.path());
      for (int i = 0; i < 100 && !exists("/tmp/.X11-unix/X" + std::to_string(n)); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (exists("/tmp/.X11-unix/X" + std::to_string(n))) {
        display_ = n;
        return;
      }
      ::kill(pid_, SIGTERM);
      int st;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
    why_ = "could not start Xvfb on a free display";
  }
  testing::TempDir dir_;
  pid_t pid_ = -1;
  int display_ = -1;
  std::string why_;
};

#define NEED_XVFB()                                           \
  do {                                                        \
    if (!Xvfb::get().ok()) GTEST_SKIP() << Xvfb::get().why(); \
  } while (0)

struct Image {
  int w = 0, h = 0;
  std::vector<uint8_t> px;  // RGBA
  uint32_t at(int x, int y) const {
    const uint8_t* p = &px[(static_cast<size_t>(y) * static_cast<size_t>(w) + static_cast<size_t>(x)) * 4];
    return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2];
  }
};

Image load_png(const std::string& path) {
  Image img;
  int n = 0;
  unsigned char* data = stbi_load(path.c_str(), &img.w, &img.h, &n, 4);
  if (!data) return img;
  img.px.assign(data, data + static_cast<size_t>(img.w) * static_cast<size_t>(img.h) * 4);
  stbi_image_free(data);
  return img;
}

// Distinct colours and the share of pixels that differ from the most common one inside a rect.
struct Stats {
  size_t colours = 0;
  double non_background = 0;
};
Stats stats(const Image& img, int x0, int y0, int x1, int y1) {
  std::map<uint32_t, size_t> count;
  x0 = std::max(0, x0);
  y0 = std::max(0, y0);
  x1 = std::min(img.w, x1);
  y1 = std::min(img.h, y1);
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) ++count[img.at(x, y)];
  }
  Stats s;
  s.colours = count.size();
  size_t top = 0, total = 0;
  for (const auto& [c, n] : count) {
    top = std::max(top, n);
    total += n;
  }
  s.non_background = total ? 1.0 - static_cast<double>(top) / static_cast<double>(total) : 0;
  return s;
}

testing::ProcResult run_ui(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {STALLSCOPE_BIN, "ui"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> e = env;
  if (Xvfb::get().ok()) e["DISPLAY"] = Xvfb::get().display();
  e["LIBGL_ALWAYS_SOFTWARE"] = "1";
  return testing::run_process(argv, 120000, e);
}

Json load_json(const std::string& path) {
  auto v = json::parse(testing::read_file(path));
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? *v : Json();
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  size_t a = 0;
  while (a < s.size()) {
    size_t b = s.find('\n', a);
    if (b == std::string::npos) b = s.size();
    out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

TEST(WindowTest, ScreenshotShowsTheDashboard) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 4;
  o.epochs = 2;
  o.fetch_ns = [](int, int b) { return (b % 5 == 4 ? 80 : 30) * testing::kMsNs; };
  testing::write_sim_recording(dir.file("run.db"), o);
  const auto r = run_ui({"--screenshot", dir.file("shot.png"), "--layout-dump", dir.file("layout.json"), "--frames",
                         "4", dir.file("run.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Image img = load_png(dir.file("shot.png"));
  ASSERT_EQ(img.w, 1600);
  ASSERT_EQ(img.h, 1000);
  EXPECT_GT(stats(img, 0, 0, img.w, img.h).colours, 40u);

  const Json layout = load_json(dir.file("layout.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "finished");
  std::set<std::string> panels;
  ASSERT_TRUE(layout.contains("panels") && layout.at("panels").is_array());
  for (const Json& p : layout.at("panels")) {
    const std::string name = json::get_string(p, "name").value_or("");
    panels.insert(name);
    const Json& r4 = p.at("rect");
    const int x0 = r4[0].get<int>(), y0 = r4[1].get<int>(), x1 = r4[2].get<int>(), y1 = r4[3].get<int>();
    if (name == "scrub") continue;
    // Each panel holds drawing: not one flat colour.
    const Stats s = stats(img, x0, y0, x1, y1);
    EXPECT_GT(s.colours, 3u) << name;
    EXPECT_GT(s.non_background, 0.01) << name;
  }
  for (const char* p : {"header", "headline", "timeline", "queue", "workers", "recommendations", "batch"}) {
    EXPECT_TRUE(panels.count(p)) << p;
  }
  ASSERT_TRUE(layout.contains("lanes") && layout.at("lanes").is_array());
  const Json& lanes = layout.at("lanes");
  ASSERT_EQ(lanes.size(), 6u);
  EXPECT_EQ(json::get_string(lanes[0], "name").value_or(""), "main thread");
  EXPECT_EQ(json::get_string(lanes[5], "name").value_or(""), "worker 3");
  // The timeline's lanes area has the colours of dl.next (red) and dl.fetch (blue) somewhere.
  const Json& lr = lanes[2].at("rect");
  const Stats ws = stats(img, lr[0].get<int>() + 160, lr[1].get<int>(), lr[2].get<int>(), lr[3].get<int>());
  EXPECT_GT(ws.non_background, 0.05);
}

struct BadFile {
  const char* name;
  std::function<void(const std::string& path, const std::string& good)> make;
  const char* expect;  // in the message
};

TEST(WindowTest, BadInputShowsAMessageAndExitsNonZero) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  const std::string good = dir.file("good.db");
  testing::write_sim_recording(good, o);
  const std::string good_bytes = testing::read_file(good);
  const std::vector<BadFile> cases = {
      {"corrupt.db",
       [](const std::string& p, const std::string&) { testing::write_file(p, std::string(8192, '\x5a')); },
       "corrupt.db"},
      {"truncated.db",
       [&](const std::string& p, const std::string&) {
         testing::write_file(p, good_bytes.substr(0, good_bytes.size() / 2));
       },
       "truncated"},
      {"foreign.db",
       [](const std::string& p, const std::string&) {
         auto db = Db::open(p, Db::Mode::kCreate);
         ASSERT_TRUE(db.ok());
         ASSERT_TRUE(
             (*db)
                 ->exec(
                     "CREATE TABLE photos (id INTEGER PRIMARY KEY, data BLOB); INSERT INTO photos VALUES (1, x'00');")
                 .ok());
       },
       "not a stallscope recording"},
      {"newer.db",
       [&](const std::string& p, const std::string&) {
         testing::write_file(p, good_bytes);
         auto db = Db::open(p, Db::Mode::kReadWrite);
         ASSERT_TRUE(db.ok());
         ASSERT_TRUE((*db)->exec("PRAGMA user_version = 99").ok());
       },
       "upgrade"},
      {"empty.db", [](const std::string& p, const std::string&) { testing::write_file(p, ""); }, "empty"},
      {"missing.db", [](const std::string&, const std::string&) {}, "missing.db"},
  };
  for (const BadFile& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name);
    c.make(path, good);
    const std::string png = dir.file(std::string(c.name) + ".png"), js = dir.file(std::string(c.name) + ".json");
    const auto r = run_ui({"--screenshot", png, "--layout-dump", js, path});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    const auto err = lines(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("stallscope: ", 0), 0u) << err[0];
    EXPECT_NE(err[0].find(c.expect), std::string::npos) << err[0];
    // The window showed it too.
    const Json layout = load_json(js);
    EXPECT_EQ(json::get_string(layout, "state").value_or(""), "error");
    EXPECT_NE(json::get_string(layout, "message").value_or("").find(c.expect), std::string::npos);
    const Image img = load_png(png);
    ASSERT_EQ(img.w, 1600);
    EXPECT_GT(stats(img, 0, 0, img.w, img.h).colours, 8u);  // the message box and its text
  }
}

TEST(WindowTest, ARecordingCutOffMidRunOpens) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  o.complete = false;
  testing::write_sim_recording(dir.file("killed.db"), o);
  const auto r =
      run_ui({"--screenshot", dir.file("k.png"), "--layout-dump", dir.file("k.json"), dir.file("killed.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json layout = load_json(dir.file("k.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "cut off");
  EXPECT_EQ(layout.at("lanes").size(), 4u);  // main, pin, 2 workers
}

// A recording larger than --detail-rows: the whole run from its overview, with bars in the lanes
// before the detail held; an early range asked for with --range is read and drawn in detail.
TEST(WindowTest, ALongRecordingShowsItsWholeRunAndTheDetailOfTheRangeShown) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 4;
  o.batches = 100;
  o.step_ns = 100 * testing::kMsNs;  // a minute of run: many 1-s buckets
  o.commit_rows = 200;
  const auto truth = testing::write_sim_recording(dir.file("long.db"), o);
  const std::string rows = std::to_string(truth.events / 10);
  auto r = run_ui({"--detail-rows", rows, "--screenshot", dir.file("w.png"), "--layout-dump", dir.file("w.json"),
                   dir.file("long.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json layout = load_json(dir.file("w.json"));
  ASSERT_TRUE(layout.contains("detail")) << layout.dump();
  const Json& whole = layout.at("detail");
  EXPECT_GT(whole.at("t0").get<int64_t>(), truth.end_ns / 2);  // the latest part
  ASSERT_EQ(whole.at("overview_ranges").size(), 1u);
  for (const Json& lane : layout.at("lanes")) EXPECT_GT(lane.at("overview").get<int64_t>(), 2) << lane.dump();
  // The queue and workers panels there too, from the summaries: the queue's band across the part
  // of the run before the detail (927 of about 1,300 columns when written), and the run-queue
  // strips of the training process and the two workers (the latter of every epoch, each in the
  // lane of its worker id; 693 cells).
  EXPECT_GT(layout.at("queue_overview_columns").get<int>(), 400);
  // every one from queue_summaries: the batches ready and in flight, not sent less received
  EXPECT_EQ(layout.at("queue_overview_ready_columns").get<int>(), layout.at("queue_overview_columns").get<int>());
  EXPECT_GT(layout.at("heat_cells_overview").get<int>(), 300);
  // The bars are on screen: the main lane's row left of the detail is not the background alone.
  const Image img = load_png(dir.file("w.png"));
  // and the ready queue's mean (green ticks) in the queue panel there
  int queue_panels = 0;
  for (const Json& panel : layout.at("panels")) {
    if (json::get_string(panel, "name").value_or("") != "queue") continue;
    ++queue_panels;
    const Json& q = panel.at("rect");
    int green = 0;
    for (int y = q[1].get<int>(); y < std::min(img.h, q[3].get<int>()); ++y) {
      for (int x = q[0].get<int>() + 160; x < std::min(img.w, q[0].get<int>() + 600); ++x) {
        if (img.at(x, y) == 0x68C878u) ++green;  // kReady, 104 200 120
      }
    }
    EXPECT_GT(green, 300) << "ready ticks in the queue panel before the detail";
  }
  EXPECT_EQ(queue_panels, 1);
  const Json& main_rect = layout.at("lanes")[0].at("rect");
  const Stats bars = stats(img, main_rect[0].get<int>() + 160, main_rect[1].get<int>(), main_rect[0].get<int>() + 600,
                           main_rect[3].get<int>());
  EXPECT_GT(bars.non_background, 0.02);

  // A second and a half early in the run (well within the budget; ten seconds would not be, and
  // would be shown from the overview): read and drawn in detail before the screenshot, even of one
  // frame (whose draw asks for the detail: the screenshot is of a frame drawn after it).
  const double t0 = std::floor(static_cast<double>(truth.end_ns) * 0.2 / 1e9);
  r = run_ui({"--detail-rows", rows, "--range", std::to_string(t0) + ":" + std::to_string(t0 + 1.5), "--frames", "1",
              "--screenshot", dir.file("z.png"), "--layout-dump", dir.file("z.json"), dir.file("long.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  layout = load_json(dir.file("z.json"));
  const Json& zoomed = layout.at("detail");
  EXPECT_LE(zoomed.at("t0").get<int64_t>(), static_cast<int64_t>(t0 * 1e9));
  EXPECT_GE(zoomed.at("t1").get<int64_t>(), static_cast<int64_t>((t0 + 1.5) * 1e9));
  EXPECT_TRUE(zoomed.at("overview_ranges").empty());
  int64_t drawn = 0;
  for (const Json& lane : layout.at("lanes")) drawn += lane.at("drawn").get<int64_t>();
  EXPECT_GT(drawn, 50);
  // The compare view of the recording with itself, at that range: each side reads the detail its
  // view asks for before the screenshot, as the single view does.
  r = run_ui({"--detail-rows", rows, "--range", std::to_string(t0) + ":" + std::to_string(t0 + 1.5), "--frames", "1",
              "--screenshot", dir.file("c.png"), "--layout-dump", dir.file("c.json"), dir.file("long.db"),
              dir.file("long.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  layout = load_json(dir.file("c.json"));
  ASSERT_EQ(layout.at("sides").size(), 2u);
  for (const Json& side : layout.at("sides")) {
    ASSERT_TRUE(side.contains("detail")) << side.dump();
    const Json& view = side.at("view_ns");
    const Json& held = side.at("detail");
    EXPECT_LE(held.at("t0").get<double>(), view[0].get<double>()) << held.dump() << " " << view.dump();
    EXPECT_GE(held.at("t1").get<double>(), view[1].get<double>()) << held.dump() << " " << view.dump();
    EXPECT_TRUE(held.at("overview_ranges").empty()) << held.dump();
  }
  // Made before the summaries were kept: `ui` builds them first (one line), then shows its overview.
  {
    auto db = Db::open(dir.file("long.db"), Db::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->exec(stallscope::testing::kAsVersion1Sql).ok());
  }
  r = run_ui({"--detail-rows", rows, "--screenshot", dir.file("o.png"), "--layout-dump", dir.file("o.json"),
              dir.file("long.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("built the summaries of"), std::string::npos) << r.err;
  EXPECT_EQ(load_json(dir.file("o.json")).at("detail").at("overview_ranges").size(), 1u);
  // Read whole with --detail-rows 0: no overview at all.
  r = run_ui({"--detail-rows", "0", "--screenshot", dir.file("a.png"), "--layout-dump", dir.file("a.json"),
              dir.file("long.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(load_json(dir.file("a.json")).contains("detail"));
}

// Two recordings of different speed, the second starting later in its session: a fast one (4
// workers) and a slow one (2 workers, slower fetches), 2 x 100 steps each.
void write_compare_pair(const std::string& fast, const std::string& slow) {
  testing::SimOptions o;
  o.workers = 4;
  o.batches = 100;
  testing::write_sim_recording(fast, o);
  o.main_pid = 5000;
  o.start_ns = 700 * testing::kMsNs;
  o.workers = 2;
  o.fetch_ns = [](int, int) { return 40 * testing::kMsNs; };
  testing::write_sim_recording(slow, o);
}

TEST(WindowTest, CompareScreenshotShowsBothRecordingsOnOneAxis) {
  NEED_XVFB();
  testing::TempDir dir;
  write_compare_pair(dir.file("fast.db"), dir.file("slow.db"));
  const auto r = run_ui({"--screenshot", dir.file("cmp.png"), "--layout-dump", dir.file("cmp.json"), "--frames", "4",
                         dir.file("fast.db"), dir.file("slow.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Image img = load_png(dir.file("cmp.png"));
  ASSERT_EQ(img.w, 1600);
  ASSERT_EQ(img.h, 1000);
  EXPECT_GT(stats(img, 0, 0, img.w, img.h).colours, 40u);

  const Json layout = load_json(dir.file("cmp.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "compare");
  auto rect_stats = [&](const Json& r4) {
    return stats(img, r4[0].get<int>(), r4[1].get<int>(), r4[2].get<int>(), r4[3].get<int>());
  };
  std::set<std::string> top;
  for (const Json& p : layout.at("panels")) {
    top.insert(json::get_string(p, "name").value_or(""));
    const Stats st = rect_stats(p.at("rect"));
    EXPECT_GT(st.colours, 3u) << json::get_string(p, "name").value_or("");
    EXPECT_GT(st.non_background, 0.01) << json::get_string(p, "name").value_or("");
  }
  EXPECT_EQ(top, (std::set<std::string>{"compare", "A", "B"}));
  // The strip: compare()'s verdict (B is the slow one) and a line of figures per run.
  ASSERT_TRUE(layout.contains("compare"));
  const Json& c = layout.at("compare");
  EXPECT_EQ(json::get_string(c, "verdict").value_or(""), "slower");
  EXPECT_NE(json::get_string(c, "verdict_text").value_or("").find("B is slower"), std::string::npos);
  ASSERT_EQ(c.at("figures").size(), 2u);
  EXPECT_EQ(c.at("figures")[0].get<std::string>().rfind("A: fast.db", 0), 0u);
  EXPECT_EQ(c.at("figures")[1].get<std::string>().rfind("B: slow.db", 0), 0u);
  // Each side: its panels drawn in the picture, its lanes, and the same span from its origin.
  ASSERT_TRUE(layout.contains("sides") && layout.at("sides").size() == 2u);
  const size_t lanes[2] = {6, 4};
  double rel[2][2] = {};
  for (size_t i = 0; i < 2; ++i) {
    const Json& side = layout.at("sides")[i];
    SCOPED_TRACE(json::get_string(side, "side").value_or("?"));
    EXPECT_EQ(json::get_string(side, "state").value_or(""), "finished");
    std::set<std::string> panels;
    for (const Json& p : side.at("panels")) {
      const std::string name = json::get_string(p, "name").value_or("");
      panels.insert(name);
      if (name == "scrub") continue;
      const Stats st = rect_stats(p.at("rect"));
      EXPECT_GT(st.colours, 3u) << name;
      EXPECT_GT(st.non_background, 0.01) << name;
    }
    for (const char* p : {"header", "headline", "timeline", "queue", "workers", "recommendations", "batch"}) {
      EXPECT_TRUE(panels.count(p)) << p;
    }
    ASSERT_EQ(side.at("lanes").size(), lanes[i]);
    // A worker lane shows its fetches (where it is not scrolled out of the compact timeline).
    const Json& lr = side.at("lanes")[0].at("rect");
    const Stats ws = stats(img, lr[0].get<int>() + 160, lr[1].get<int>(), lr[2].get<int>(), lr[3].get<int>());
    EXPECT_GT(ws.non_background, 0.05);
    const double origin = side.at("origin_ns").get<double>();
    rel[i][0] = side.at("view_ns")[0].get<double>() - origin;
    rel[i][1] = side.at("view_ns")[1].get<double>() - origin;
  }
  EXPECT_NEAR(rel[0][0], rel[1][0], 1);
  EXPECT_NEAR(rel[0][1], rel[1][1], 1);
}

TEST(WindowTest, AJobFolderOpensAsTheJobViewAndARankNamedSecondOpensAtOnce) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::write_sim_job(dir.path(), testing::small_job(5, 3));
  auto r = run_ui({"--screenshot", dir.file("job.png"), "--layout-dump", dir.file("job.json"), dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json layout = load_json(dir.file("job.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "job");
  ASSERT_TRUE(layout.contains("job")) << layout.dump();
  const Json& job = layout.at("job");
  EXPECT_EQ(job.at("sort"), "node");
  ASSERT_GE(job.at("rows").size(), 20u);  // 4 node rows and 16 ranks
  EXPECT_EQ(job.at("rows")[0], "node node-02: 4 ranks, 4 slow");
  for (size_t i = 1; i <= 4; ++i) {
    EXPECT_NE(job.at("rows")[i].get<std::string>().find(" node-02 "), std::string::npos) << job.at("rows")[i];
  }
  EXPECT_GT(job.at("cells").get<int>(), 20 * 10);
  EXPECT_NE(job.at("lines")[1].get<std::string>().find("first on node-02"), std::string::npos) << job.at("lines");
  const Image img = load_png(dir.file("job.png"));
  ASSERT_EQ(img.w, 1600);
  EXPECT_GT(stats(img, 0, 0, img.w, img.h).colours, 20u);

  // `ui JOB/ 9`: rank 9's dashboard, as `ui part-9.db` shows it.
  r = run_ui({"--screenshot", dir.file("rank.png"), "--layout-dump", dir.file("rank.json"), dir.path(), "9"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  layout = load_json(dir.file("rank.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "finished");
  EXPECT_FALSE(layout.contains("job"));
  ASSERT_TRUE(layout.contains("lanes"));
  EXPECT_EQ(layout.at("lanes").size(), 5u);  // the main thread and 4 workers

  r = run_ui({"--screenshot", dir.file("x.png"), dir.path(), "99"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("not a rank of the job"), std::string::npos) << r.err;
}

TEST(WindowTest, CompareWithARecordingThatCannotBeReadExitsNonZero) {
  NEED_XVFB();
  testing::TempDir dir;
  write_compare_pair(dir.file("fast.db"), dir.file("slow.db"));
  const auto r = run_ui({"--screenshot", dir.file("bad.png"), "--layout-dump", dir.file("bad.json"),
                         dir.file("fast.db"), dir.file("missing.db")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind("stallscope: ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find("missing.db"), std::string::npos) << err[0];
  const Json layout = load_json(dir.file("bad.json"));
  ASSERT_EQ(layout.at("sides").size(), 2u);
  EXPECT_EQ(json::get_string(layout.at("sides")[0], "state").value_or(""), "finished");
  EXPECT_EQ(json::get_string(layout.at("sides")[1], "state").value_or(""), "error");
}

// CPU ticks (user + system, all threads) the process has used.
long cpu_ticks(pid_t pid) {
  const std::string stat = testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t rp = stat.rfind(')');
  if (rp == std::string::npos) return -1;
  std::vector<std::string> f;
  size_t a = rp + 2;
  while (a < stat.size()) {
    size_t b = stat.find(' ', a);
    if (b == std::string::npos) b = stat.size();
    f.push_back(stat.substr(a, b - a));
    a = b + 1;
  }
  // Fields 14 and 15 of the whole line are utime and stime; f[0] is field 3.
  return f.size() > 12 ? std::atol(f[11].c_str()) + std::atol(f[12].c_str()) : -1;
}

TEST(WindowTest, AnIdleReplayDrawsNothing) {
  // A finished recording on screen with no input: after the first frames the window loop sleeps.
  // Drawing the same picture continuously costs a core with software OpenGL (and CPU beside a
  // training job on any machine).
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 2;
  o.epochs = 1;
  testing::write_sim_recording(dir.file("idle.db"), o);
  const pid_t pid = testing::start_process({STALLSCOPE_BIN, "ui", dir.file("idle.db")}, dir.path(),
                                           {{"DISPLAY", Xvfb::get().display()}, {"LIBGL_ALWAYS_SOFTWARE", "1"}});
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // opened, analysed, drawn
  const long t0 = cpu_ticks(pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  const long t1 = cpu_ticks(pid);
  ::kill(pid, SIGTERM);
  const auto r = testing::wait_process(pid, 10000);
  ASSERT_GE(t0, 0);
  const long ticks_per_s = ::sysconf(_SC_CLK_TCK);
  // Under 5 % of one core while idle (drawing continuously, as before: 10-17 % here).
  EXPECT_LT(static_cast<double>(t1 - t0) / static_cast<double>(ticks_per_s) / 2.0, 0.05)
      << (t1 - t0) << " ticks in 2 s";
  EXPECT_FALSE(r.timed_out);
}

TEST(WindowTest, WithoutAFileTheSessionPickerListsRecordings) {
  NEED_XVFB();
  testing::TempDir dir;
  testing::SimOptions o;
  o.workers = 1;
  o.epochs = 1;
  testing::write_sim_recording(dir.file("recent.db"), o);
  const std::string runtime = dir.file("xdg");
  ::mkdir(runtime.c_str(), 0700);
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved = old ? old : "";
  ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
  SessionEntry e;
  e.launcher_pid = ::getpid();  // alive: listed as live
  e.db_path = dir.file("recent.db");
  e.command = "python train.py";
  e.started_unix = 1700000000;
  ASSERT_TRUE(register_live_session(e));
  if (old) {
    ::setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_RUNTIME_DIR");
  }
  const auto r =
      run_ui({"--screenshot", dir.file("p.png"), "--layout-dump", dir.file("p.json")}, {{"XDG_RUNTIME_DIR", runtime}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json layout = load_json(dir.file("p.json"));
  EXPECT_EQ(json::get_string(layout, "state").value_or(""), "picker");
  ASSERT_TRUE(layout.contains("sessions") && layout.at("sessions").size() == 1u);
  EXPECT_EQ(layout.at("sessions")[0].get<std::string>(), "live: " + dir.file("recent.db"));
}

TEST(CommandLineTest, HelpAndUsageErrors) {
  // The options are stallscope-ui's, parsed there: `stallscope ui` runs it where a display is named
  // (none is connected to before the command line parsed). Its --help needs none.
  const std::map<std::string, std::string> named_display = {{"DISPLAY", ":999"}};
  auto r = testing::run_process({STALLSCOPE_BIN, "ui", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Usage: stallscope ui"), std::string::npos);
  EXPECT_NE(r.out.find("--screenshot"), std::string::npos);
  EXPECT_NE(r.out.find("[A.db [B.db] | TUNE-DIR [RUN] | JOB-DIR [RANK]]"),
            std::string::npos);  // compare, tune set, job
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--bogus"},
                                              {"--frames", "zero"},
                                              {"--size", "12"},
                                              {"a.db", "b.db", "c.db"},
                                              {"--range", "2:1", "a.db", "b.db"},
                                              {"--detail-rows", "-5", "a.db"},
                                              {"--detail-rows", "lots", "a.db"},
                                              {"--screenshot"}}) {
    std::vector<std::string> argv = {STALLSCOPE_BIN, "ui"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    r = testing::run_process(argv, 60000, named_display);
    EXPECT_EQ(r.exit_code, 2) << bad[0];
    const auto err = lines(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("stallscope: ", 0), 0u);
  }
  // Three recordings: said in the command's words.
  r = testing::run_process({STALLSCOPE_BIN, "ui", "a.db", "b.db", "c.db"}, 60000, named_display);
  EXPECT_NE(r.err.find("at most two recordings"), std::string::npos) << r.err;
  r = testing::run_process({STALLSCOPE_BIN, "--help"});
  EXPECT_NE(r.out.find("  ui "), std::string::npos);
}

}  // namespace
}  // namespace stallscope
