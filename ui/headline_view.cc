// Headline: four cards with the figures that say whether the input pipeline holds the job back:
// samples/s, stall %, GPU busy % (or, on a CPU-only run, the share of time the loop computes), and
// batches ready in the queue. Each has two figures, the run's (from the analysis, over the training
// window) and the last kNowNs before the live edge or the playhead, and a sparkline over the last
// minutes. The big figure is the run's in a replay, where a first look reads it as the run's
// result, and the last seconds' while following a live run; each is labelled.
#include <algorithm>
#include <cmath>

#include "analysis/format.h"
#include "ui/format.h"
#include "ui/palette.h"
#include "ui/views.h"

namespace stallscope::ui {
namespace {

constexpr int64_t kNowNs = 2'000'000'000;      // "now" = the last 2 s
constexpr int64_t kSparkNs = 120'000'000'000;  // sparklines: the last 2 minutes
constexpr int kSparkPoints = 120;

// A small line chart of `values` (already one per pixel-ish bucket), scaled to [0, vmax], filled
// below.
void draw_sparkline(ImDrawList* dl, const std::vector<float>& values, float vmax, ImVec2 p0, ImVec2 p1, ImU32 col) {
  if (values.size() < 2) return;
  if (vmax <= 0) vmax = 1;
  const float w = p1.x - p0.x, h = p1.y - p0.y;
  std::vector<ImVec2> pts;
  pts.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = p0.x + w * static_cast<float>(i) / static_cast<float>(values.size() - 1);
    const float y = p1.y - h * std::clamp(values[i] / vmax, 0.0f, 1.0f);
    pts.push_back(ImVec2(x, y));
  }
  for (size_t i = 1; i < pts.size(); ++i) {
    dl->AddQuadFilled(ImVec2(pts[i - 1].x, p1.y), pts[i - 1], pts[i], ImVec2(pts[i].x, p1.y), with_alpha(col, 0.18f));
  }
  dl->AddPolyline(pts.data(), static_cast<int>(pts.size()), col, 0, 1.5f);
}

struct Card {
  std::string label, unit;
  std::string now = "-", run = "-";  // the figures: the last kNowNs, the whole run ("-": unknown)
  std::string run_detail;            // said after the run's figure: "400 steps"
  std::string note;                  // in place of the smaller line when a card has no figures
  std::vector<float> spark;
  float spark_max = 1;
  ImU32 color = kAccent;
};

// A figure with its unit: "30.0%", "320 samples/s", "-".
std::string with_unit(const std::string& v, const std::string& unit) {
  if (v == "-" || unit.empty()) return v;
  return unit == "%" ? v + unit : v + " " + unit;
}

// What a card shows, by whether the run is followed live (see the file comment).
struct CardText {
  std::string big, scope, small;
};
// `run`: what the run's figures cover ("run", or "since 23:12:04" for a long recording analysed
// from its latest part).
CardText card_text(const Card& c, bool live, const std::string& run) {
  const std::string last = "last " + std::to_string(kNowNs / 1'000'000'000) + " s";
  const std::string detail = c.run_detail.empty() ? "" : ", " + c.run_detail;
  if (live) {
    return {c.now, last, c.note.empty() ? run + ": " + with_unit(c.run, c.unit) + detail : c.note};
  }
  return {c.run, run,
          c.note.empty() ? (c.run_detail.empty() ? "" : c.run_detail + "; ") + last + ": " + with_unit(c.now, c.unit)
                         : c.note};
}

// Sums a Bin field over [t0, t1) (whole bins).
template <typename F>
double bin_sum(const std::vector<Bin>& bins, int64_t t0, int64_t t1, F field) {
  double s = 0;
  const int64_t b0 = std::max<int64_t>(0, t0 / kBinNs),
                b1 = std::min<int64_t>(static_cast<int64_t>(bins.size()), (t1 + kBinNs - 1) / kBinNs);
  for (int64_t b = b0; b < b1; ++b) s += field(bins[static_cast<size_t>(b)]);
  return s;
}

void draw_card(ImDrawList* dl, const UiFonts& fonts, const Card& c, const CardText& t, ImVec2 p0, ImVec2 p1) {
  dl->AddRectFilled(p0, p1, kPanelBg, 4.0f);
  dl->AddRectFilled(p0, ImVec2(p0.x + 3, p1.y), c.color, 2.0f);
  const std::string top = c.label + " \xc2\xb7 " + t.scope;  // U+00B7, in every font's default range
  ImFont* big = fonts.big ? fonts.big : ImGui::GetFont();
  const float big_size = fonts.big ? fonts.big->FontSize : ImGui::GetFontSize() * 2.0f;
  const float vw = big->CalcTextSizeA(big_size, FLT_MAX, 0.0f, t.big.c_str()).x;
  // The sparkline takes the right of the card from where the text ends, keeping at least the right
  // 30% (at most 48%); on a narrow card it runs under the text, which is drawn over it.
  const float text_w = std::max({ImGui::CalcTextSize(top.c_str()).x, 4 + vw + ImGui::CalcTextSize(c.unit.c_str()).x,
                                 ImGui::CalcTextSize(t.small.c_str()).x});
  const float w = p1.x - p0.x;
  const float sx0 = std::clamp(p0.x + 12 + text_w + 12, p0.x + w * 0.52f, p0.x + w * 0.70f);
  draw_sparkline(dl, c.spark, c.spark_max, ImVec2(sx0, p0.y + 14), ImVec2(p1.x - 10, p1.y - 10), c.color);
  dl->AddText(ImVec2(p0.x + 12, p0.y + 6), kTextDim, top.c_str());
  dl->AddText(big, big_size, ImVec2(p0.x + 12, p0.y + 24), kText, t.big.c_str());
  dl->AddText(ImVec2(p0.x + 16 + vw, p0.y + 24 + big_size - ImGui::GetFontSize() - 4), kTextDim, c.unit.c_str());
  dl->AddText(ImVec2(p0.x + 12, p1.y - ImGui::GetFontSize() - 6), kTextDim, t.small.c_str());
}

}  // namespace

void draw_headline(Frame& f, const ImVec2& pos, const ImVec2& size) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::BeginChild("headline", size, false, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (f.dump) f.dump->panels.push_back({"headline", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
  ImDrawList* dl = ImGui::GetWindowDrawList();
  std::vector<Card> cards(4);
  const AnalysisView* an = f.an;
  const analysis::Report* rep = an ? &an->report : nullptr;

  // "Now" is the live edge or the playhead; a replay parked at the end of the recording shows the
  // end of the training loop rather than the idle tail after it.
  int64_t now = static_cast<int64_t>(f.now_ns);
  if (f.replay && rep && rep->window_end_ns > rep->window_start_ns && now > rep->window_end_ns)
    now = rep->window_end_ns;
  const int64_t start = static_cast<int64_t>(f.data_t0);
  const int64_t w_end = std::max<int64_t>(now, start + 1);
  const int64_t w_begin = std::max<int64_t>(start, w_end - kNowNs);
  const double w = static_cast<double>(w_end - w_begin);
  const int64_t s_begin = std::max<int64_t>(start, w_end - kSparkNs);
  const int64_t step = std::max<int64_t>(kBinNs, (w_end - s_begin) / kSparkPoints / kBinNs * kBinNs);
  const std::vector<Bin> empty_bins;
  const std::vector<Bin>& bins = f.tl && f.tl->bins ? *f.tl->bins : empty_bins;
  const double bs = an && an->batch_size > 0 ? static_cast<double>(an->batch_size) : 0;
  const bool gpu = f.tl && f.tl->gpu_mode;
  // A long recording's bins hold the detail window only: "now" outside it is not known from them
  // ("-"), nor is the whole window's compute share unless the window holds the analysis's.
  auto held = [&](int64_t t0, int64_t t1) {
    return !f.tl || !f.tl->windowed() ||
           (t0 >= f.tl->detail_t0 && (f.tl->detail_t1 == INT64_MAX || t1 <= f.tl->detail_t1));
  };
  const bool now_held = held(w_begin, w_end);

  // Sparkline points: one per `step` from s_begin to w_end.
  auto series = [&](auto value) {
    std::vector<float> v;
    for (int64_t t = s_begin; t + step <= w_end + step / 2 && v.size() < 400; t += step)
      v.push_back(static_cast<float>(value(t, t + step)));
    return v;
  };
  auto bin_series = [&](auto value) { return now_held ? series(value) : std::vector<float>{}; };
  auto vmax = [](const std::vector<float>& v, float floor) {
    float m = floor;
    for (float x : v) m = std::max(m, x);
    return m;
  };

  // Samples per second (batches per second until the batch size is known).
  {
    Card& c = cards[0];
    const double handed = bin_sum(bins, w_begin, w_end, [](const Bin& b) { return b.handed; });
    c.label = bs > 0 ? "throughput" : "throughput (batches)";
    c.unit = bs > 0 ? "samples/s" : "batches/s";
    c.now = w > 0 && now_held ? fmt_double(handed * (bs > 0 ? bs : 1) / (w / 1e9), 0) : "-";
    if (rep && rep->samples_per_s) {
      c.run = fmt_double(*rep->samples_per_s, 0);
      c.run_detail = std::to_string(rep->steps) + " steps";
    }
    c.spark = bin_series([&](int64_t a, int64_t b) {
      return bin_sum(bins, a, b, [](const Bin& x) { return x.handed; }) * (bs > 0 ? bs : 1) /
             (static_cast<double>(b - a) / 1e9);
    });
    c.spark_max = vmax(c.spark, 1);
    c.color = kAccent;
  }
  // Stall share.
  {
    Card& c = cards[1];
    const double st = bin_sum(bins, w_begin, w_end, [](const Bin& b) { return static_cast<double>(b.stall_ns); });
    c.label = "stalled on input";
    c.unit = "%";
    c.now = w > 0 && now_held ? fmt_double(std::min(100.0, 100 * st / w), 0) : "-";
    if (rep) {
      c.run = fmt_double(rep->stall.fraction * 100, 1);
      c.run_detail = fmt_duration(rep->stall.seconds * 1e9) + " waiting";
    }
    c.spark = bin_series([&](int64_t a, int64_t b) {
      return std::min(100.0, 100 * bin_sum(bins, a, b, [](const Bin& x) { return static_cast<double>(x.stall_ns); }) /
                                 static_cast<double>(b - a));
    });
    c.spark_max = 100;
    c.color = kBad;
  }
  // GPU busy, or the loop's compute share on a CPU-only run.
  {
    Card& c = cards[2];
    auto field = [gpu](const Bin& x) { return static_cast<double>(gpu ? x.gpu_ns : x.step_ns); };
    const double busy = bin_sum(bins, w_begin, w_end, field);
    c.label = gpu ? "GPU busy" : "loop computing (CPU mode)";
    c.unit = "%";
    c.now = w > 0 && now_held ? fmt_double(std::min(100.0, 100 * busy / w), 0) : "-";
    if (rep && rep->window_end_ns > rep->window_start_ns) {
      const double span = static_cast<double>(rep->window_end_ns - rep->window_start_ns);
      double whole = bin_sum(bins, rep->window_start_ns, rep->window_end_ns, field) / span;
      if (!held(rep->window_start_ns, rep->window_end_ns)) {  // the analysis's own figures
        whole = gpu ? rep->gpu.busy_fraction : rep->compute_per_step_ms * 1e6 * static_cast<double>(rep->steps) / span;
      }
      c.run = fmt_double(std::min(100.0, whole * 100), 1);
      if (!gpu) c.run_detail = fmt_double(rep->compute_per_step_ms, 1) + " ms/step";
    }
    c.spark = bin_series([&](int64_t a, int64_t b) {
      return std::min(100.0, 100 * bin_sum(bins, a, b, field) / static_cast<double>(b - a));
    });
    c.spark_max = 100;
    c.color = kGood;
  }
  // Batches ready.
  {
    Card& c = cards[3];
    c.label = "batches ready";
    c.unit = "in queue";
    if (an && !an->ready.empty()) {
      c.now = fmt_double(an->ready.mean(w_begin, w_end), 1);
      if (an->report.queue.mean_ready) {
        c.run = fmt_double(*an->report.queue.mean_ready, 1);
        c.run_detail = "empty " + fmt_double(an->report.queue.empty_fraction.value_or(0) * 100, 0) + "%";
      }
      c.spark = series([&](int64_t a, int64_t b) { return an->ready.mean(a, b); });
      c.spark_max = vmax(c.spark, 1);
    } else {
      c.note =
          an ? (an->report.queue.note.empty() ? "no queue events" : "no queue (num_workers=0)") : "analysis running...";
    }
    c.color = IM_COL32(104, 200, 120, 255);
  }

  // Following a recording still being written: the last seconds first. A replay (finished, cut
  // off, or a finished file still being read): the run's figures first.
  const SourceState state = f.snap ? f.snap->state : SourceState::kFinished;
  const bool live = state == SourceState::kLive || (state == SourceState::kLoading && f.tl && !f.tl->complete);
  const std::string run_scope =
      rep && rep->detail_from_ns ? "since " + analysis::clock_time(*rep->detail_from_ns, 0) : std::string("run");
  const float gap = 8;
  const float cw = (size.x - gap * 3) / 4;
  for (size_t i = 0; i < cards.size(); ++i) {
    const ImVec2 p0(pos.x + static_cast<float>(i) * (cw + gap), pos.y);
    const CardText t = card_text(cards[i], live, run_scope);
    draw_card(dl, *f.fonts, cards[i], t, p0, ImVec2(p0.x + cw, pos.y + size.y));
    if (f.dump) {
      f.dump->headline.push_back(cards[i].label + ": " + t.big + " " + cards[i].unit);
      f.dump->cards.push_back({cards[i].label, with_unit(t.big, cards[i].unit), t.scope, t.small});
    }
  }
  ImGui::EndChild();
}

}  // namespace stallscope::ui
