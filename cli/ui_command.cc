// `stallscope ui [OPTIONS] [FILE.db]`: the dashboard (ui/app.h). Parses the command line; usage
// errors print one line and exit 2.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "ui/app.h"

namespace {

constexpr const char* kUiHelp =
    "Usage: stallscope ui [OPTIONS] [FILE.db]\n"
    "\n"
    "Opens the dashboard. With FILE.db it shows that recording: followed live while `stallscope run`\n"
    "still writes it (new data within a quarter of a second), replayed with a playhead once it is\n"
    "finished. Without FILE.db it lists the live sessions on this machine and recent recordings.\n"
    "\n"
    "Options:\n"
    "      --screenshot PNG    render in a window, save the last frame as a PNG and exit\n"
    "      --frames N          frames to render, then exit (default with --screenshot: 3)\n"
    "      --layout-dump JSON  also write the last frame's layout (panels, lanes) as JSON\n"
    "      --size WxH          window size in pixels (default 1600x1000)\n"
    "      --range T0:T1       visible time range at start, seconds since the session start\n"
    "      --at T              replay: put the playhead at T seconds\n"
    "      --mouse X,Y         pretend the mouse is at X,Y (screenshots of tooltips)\n"
    "  -h, --help              show this help\n"
    "\n"
    "In the window: the mouse wheel zooms the time axis around the pointer, dragging pans,\n"
    "double-click fits the whole run; hover a span to see its batch's life, click to pin it;\n"
    "click a recommendation to jump to its evidence. See docs/dashboard.md.\n"
    "\n"
    "Examples:\n"
    "  stallscope ui run.db\n"
    "  stallscope ui --screenshot shot.png run.db\n";

int usage(const std::string& msg) {
  std::fprintf(stderr, "stallscope: %s (see 'stallscope ui --help')\n", msg.c_str());
  return 2;
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

bool parse_int(const std::string& s, int* out, int lo, int hi) {
  double v = 0;
  if (!parse_double(s, &v) || v != static_cast<int>(v) || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parse_pair(const std::string& s, char sep, double* a, double* b) {
  const size_t p = s.find(sep);
  return p != std::string::npos && parse_double(s.substr(0, p), a) && parse_double(s.substr(p + 1), b);
}

}  // namespace

int cmd_ui(int argc, char** argv) {
  stallscope::ui::AppOptions opt;
  bool files_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    bool has_value = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      value = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_value = true;
    }
    auto need = [&](std::string* out) {
      if (has_value) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUiHelp);
      return 0;
    }
    if (a == "--") {
      files_done = true;
      continue;
    }
    if (!files_done && a.size() > 1 && a[0] == '-') {
      std::string v;
      if (a == "--screenshot") {
        if (!need(&opt.screenshot) || opt.screenshot.empty()) return usage("--screenshot needs a file name");
      } else if (a == "--layout-dump") {
        if (!need(&opt.layout_dump) || opt.layout_dump.empty()) return usage("--layout-dump needs a file name");
      } else if (a == "--frames") {
        if (!need(&v) || !parse_int(v, &opt.frames, 1, 1000000)) return usage("--frames needs a positive number");
      } else if (a == "--size") {
        double w = 0, h = 0;
        if (!need(&v) || !parse_pair(v, 'x', &w, &h) || w < 320 || h < 240 || w > 8192 || h > 8192) {
          return usage("--size needs WIDTHxHEIGHT, e.g. 1600x1000");
        }
        opt.width = static_cast<int>(w);
        opt.height = static_cast<int>(h);
      } else if (a == "--range") {
        double t0 = 0, t1 = 0;
        if (!need(&v) || !parse_pair(v, ':', &t0, &t1) || t1 <= t0) return usage("--range needs T0:T1 in seconds, T0 < T1");
        opt.range_s = std::make_pair(t0, t1);
      } else if (a == "--at") {
        double t = 0;
        if (!need(&v) || !parse_double(v, &t) || t < 0) return usage("--at needs a time in seconds");
        opt.playhead_s = t;
      } else if (a == "--mouse") {
        double x = 0, y = 0;
        if (!need(&v) || !parse_pair(v, ',', &x, &y)) return usage("--mouse needs X,Y in pixels");
        opt.mouse = std::make_pair(static_cast<float>(x), static_cast<float>(y));
      } else {
        return usage("unknown option " + a);
      }
      continue;
    }
    if (!opt.path.empty()) return usage("one recording at a time: '" + opt.path + "' and '" + a + "'");
    opt.path = a;
  }
  return stallscope::ui::run_app(opt);
}
