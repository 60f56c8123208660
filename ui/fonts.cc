// Font loading; see fonts.h.
#include "ui/fonts.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace stallscope::ui {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

}  // namespace

std::string find_assets_dir() {
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("STALLSCOPE_ASSETS"); e && *e) candidates.push_back(e);
  const std::string exe = exe_dir();
  if (!exe.empty()) {
    candidates.push_back(exe + "/../share/stallscope/assets");
    candidates.push_back(exe + "/../../assets");
  }
#ifdef STALLSCOPE_SOURCE_ASSETS
  candidates.push_back(STALLSCOPE_SOURCE_ASSETS);
#endif
  for (const std::string& c : candidates) {
    if (is_dir(c) && is_file(c + "/fonts/DejaVuSans.ttf")) return c;
  }
  return "";
}

UiFonts load_fonts(float scale) {
  UiFonts f;
  ImGuiIO& io = ImGui::GetIO();
  const std::string dir = find_assets_dir();
  if (dir.empty()) {
    f.regular = io.Fonts->AddFontDefault();
    return f;
  }
  static ImVector<ImWchar> ranges;  // must outlive the atlas build
  if (ranges.empty()) {
    ImFontGlyphRangesBuilder b;
    b.AddRanges(io.Fonts->GetGlyphRangesDefault());
    static const ImWchar extra[] = {0x00B0, 0x00FF,  // degree, micro, middle dot, multiplication
                                    0x2190, 0x21FF,  // arrows
                                    0x2022, 0x2026,  // bullet, ellipsis
                                    0x25A0, 0x25FF,  // geometric shapes: play triangle, squares
                                    0x275A, 0x275A,  // heavy vertical bar (pause)
                                    0};
    b.AddRanges(extra);
    b.BuildRanges(&ranges);
  }
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  const std::string sans = dir + "/fonts/DejaVuSans.ttf", mono = dir + "/fonts/DejaVuSansMono.ttf";
  f.regular = io.Fonts->AddFontFromFileTTF(sans.c_str(), 15.0f * scale, &cfg, ranges.Data);
  if (!f.regular) {
    f.regular = io.Fonts->AddFontDefault();
    return f;
  }
  f.mono = is_file(mono) ? io.Fonts->AddFontFromFileTTF(mono.c_str(), 13.5f * scale, &cfg, ranges.Data) : nullptr;
  f.big = io.Fonts->AddFontFromFileTTF(sans.c_str(), 28.0f * scale, &cfg, ranges.Data);
  f.unicode = true;
  return f;
}

}  // namespace stallscope::ui
