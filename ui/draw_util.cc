// Drawing helpers shared by the views; see draw_util.h.
#include "ui/draw_util.h"

#include <algorithm>
#include <cmath>

#include "ui/format.h"

namespace stallscope::ui {

// ---------------------------------------------------------------------------------------------
// Palette
// ---------------------------------------------------------------------------------------------

ImU32 style_color(Style s) {
  switch (s) {
    case Style::kNext: return IM_COL32(226, 92, 82, 255);
    case Style::kStep: return IM_COL32(78, 168, 108, 255);
    case Style::kFetch: return IM_COL32(74, 138, 222, 255);
    case Style::kCollate: return IM_COL32(118, 194, 236, 255);
    case Style::kPin: return IM_COL32(168, 120, 222, 255);
    case Style::kCudaSync: return IM_COL32(232, 152, 58, 255);
    case Style::kNvtx: return IM_COL32(122, 150, 162, 255);
    case Style::kKernel: return IM_COL32(104, 196, 120, 255);
    case Style::kCopyPinned: return IM_COL32(64, 182, 192, 255);
    case Style::kCopyPageable: return IM_COL32(244, 118, 48, 255);
    case Style::kMemset: return IM_COL32(170, 168, 92, 255);
    case Style::kGpuSync: return IM_COL32(206, 86, 168, 255);
    case Style::kStallData: return IM_COL32(235, 70, 70, 255);
    case Style::kStallTransfer: return IM_COL32(245, 140, 40, 255);
    case Style::kStallSync: return IM_COL32(210, 80, 200, 255);
    case Style::kStallHost: return IM_COL32(150, 150, 160, 255);
    case Style::kQueueEmpty: return IM_COL32(235, 70, 70, 255);
    default: return IM_COL32(130, 130, 140, 255);
  }
}

ImU32 marker_color(uint8_t kind) {
  switch (kind) {
    case kMarkSent: return IM_COL32(250, 210, 90, 255);
    case kMarkRecv: return IM_COL32(120, 220, 250, 255);
    case kMarkPut: return IM_COL32(250, 210, 90, 255);
    case kMarkEpoch: return IM_COL32(255, 255, 255, 255);
    case kMarkWorker: return IM_COL32(200, 160, 250, 255);
    default: return IM_COL32(180, 180, 190, 255);
  }
}

ImU32 role_color(LaneRole r) {
  switch (r) {
    case LaneRole::kGpu: return IM_COL32(104, 196, 120, 255);
    case LaneRole::kMain: return IM_COL32(226, 92, 82, 255);
    case LaneRole::kPin: return IM_COL32(168, 120, 222, 255);
    case LaneRole::kWorker: return IM_COL32(74, 138, 222, 255);
    case LaneRole::kOther: return IM_COL32(122, 150, 162, 255);
  }
  return kTextDim;
}

ImU32 mix(ImU32 a, ImU32 b, float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  auto ch = [&](int shift) {
    const float x = static_cast<float>((a >> shift) & 0xFF), y = static_cast<float>((b >> shift) & 0xFF);
    return static_cast<ImU32>(x + (y - x) * t + 0.5f) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) | ch(IM_COL32_A_SHIFT);
}

ImU32 with_alpha(ImU32 c, float a) {
  const ImU32 alpha = static_cast<ImU32>(std::clamp(a, 0.0f, 1.0f) * 255.0f + 0.5f);
  return (c & ~IM_COL32_A_MASK) | (alpha << IM_COL32_A_SHIFT);
}

// ---------------------------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------------------------

std::string item_label(const Timeline& tl, const Item& it) {
  auto b = [](int64_t v) { return v == Item::kNoArg || v == Item::kNoArg32 ? std::string("?") : std::to_string(v); };
  const bool main_fetch = it.a2 == -1;  // num_workers=0: (L, B, -1)
  switch (it.style) {
    case Style::kNext: return it.a1 < 0 && it.a1 != Item::kNoArg32 ? "next (end of epoch)" : "next B" + b(it.a1);
    case Style::kStep: return "step";
    case Style::kFetch: return "fetch B" + b(main_fetch ? it.a1 : it.a0);
    case Style::kCollate: return "collate B" + b(main_fetch || it.a2 == Item::kNoArg32 ? it.a1 : it.a0);
    case Style::kPin: return "pin B" + b(it.a1);
    case Style::kStallData: return "data stall";
    case Style::kStallTransfer: return "transfer stall";
    case Style::kStallSync: return "sync stall";
    case Style::kStallHost: return "host stall";
    case Style::kQueueEmpty: return "queue empty";
    default: {
      const std::string& n = tl.str(it.name_id);
      return n.empty() ? style_name(it.style) : n;
    }
  }
}

namespace {

void dump_item(const RowDraw& d, float x0, float x1, int64_t count, const std::string& label, Style s) {
  if (!d.dump || !d.dump->record_items) return;
  DumpItem di;
  di.lane = d.dump_lane;
  di.row = d.dump_row;
  di.x0 = x0;
  di.x1 = x1;
  di.count = count;
  di.label = label;
  di.style = style_name(s);
  d.dump->items.push_back(std::move(di));
}

}  // namespace

// Through d.cache when there is one (and no layout dump): `draw` called with a copy of d that has
// no cache, or the geometry it drew before for the same data, range, place and look replayed.
namespace {

template <typename Data, typename Draw>
int64_t through_cache(const Data& what, const RowDraw& d, Draw draw) {
  RowDraw plain = d;
  plain.cache = nullptr;
  const TimeAxis& ax = *d.axis;
  const GeometryCache::Key k{&what, ax.t0, ax.t1, ax.x0, ax.x1, d.y0, d.y1, d.dim_after_ns,
                             static_cast<double>(d.alpha) + (d.labels && d.tl ? 2.0 : 0.0)};
  return d.cache->draw(d.dl, k, [&] { return draw(what, plain); });
}

}  // namespace

int64_t draw_row(const Row& row, const RowDraw& d) {
  if (d.cache && !d.dump) return through_cache(row, d, draw_row);
  const size_t n = row.size();
  if (n == 0) return 0;
  const TimeAxis& ax = *d.axis;
  const double npp = ax.ns_per_px();
  const double min_ns = kMinPx * npp;
  const int64_t t0 = static_cast<int64_t>(std::floor(ax.t0));
  const int64_t t1 = static_cast<int64_t>(std::ceil(ax.t1));
  const float y0 = d.y0, y1 = d.y1;
  int64_t drawn = 0;
  size_t i = row.first_ending_after(t0);
  while (i < n) {
    const Item& it = row[i];
    if (it.start_ns > t1) break;
    const double len = static_cast<double>(it.end_ns - it.start_ns);
    if (len >= min_ns) {
      const float xa = std::max(ax.x(static_cast<double>(it.start_ns)), ax.x0 - 2);
      const float xb = std::min(ax.x(static_cast<double>(it.end_ns)), ax.x1 + 2);
      ImU32 col = style_color(it.style);
      if (d.dim_after_ns >= 0 && static_cast<double>(it.start_ns) > d.dim_after_ns) col = mix(col, kBackground, 0.7f);
      if (d.alpha < 1) col = with_alpha(col, d.alpha);
      d.dl->AddRectFilled(ImVec2(xa, y0), ImVec2(xb, y1), col);
      std::string label;
      if (d.labels && d.tl && xb - xa > 36) {
        label = item_label(*d.tl, it);
        const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
        const float ty = y0 + (y1 - y0 - ts.y) * 0.5f;
        const ImVec4 clip(xa + 2, y0, xb - 2, y1);
        d.dl->AddText(nullptr, 0.0f, ImVec2(xa + 3, ty), IM_COL32(16, 18, 22, 255), label.c_str(), nullptr, 0.0f, &clip);
      }
      if (d.alpha >= 1 && xb - xa > 6) d.dl->AddRect(ImVec2(xa, y0), ImVec2(xb, y1), IM_COL32(0, 0, 0, 70));
      dump_item(d, xa, xb, 1, label, it.style);
      ++drawn;
      ++i;
      continue;
    }
    // A run of sub-pixel items: extend the run while the next item is narrow and close, jumping
    // with lower_bound over everything that ends within the run's last kMinPx (not touched).
    size_t j = i;
    const int64_t g0 = it.start_ns;
    int64_t g1 = it.end_ns;
    while (true) {
      const size_t k = row.first_ending_at_or_after(g1 + static_cast<int64_t>(min_ns), j + 1);
      if (k > j + 1) {
        j = k - 1;
        g1 = row[j].end_ns;
      }
      if (k >= n) break;
      const Item& nx = row[k];
      if (static_cast<double>(nx.start_ns - g1) > min_ns) break;
      if (static_cast<double>(nx.end_ns - nx.start_ns) >= min_ns) break;
      if (nx.start_ns > t1) break;
      j = k;
      g1 = nx.end_ns;
    }
    const int64_t count = static_cast<int64_t>(j - i + 1);
    const double frac = std::clamp(static_cast<double>(row.busy(i, j + 1)) / std::max<double>(1.0, static_cast<double>(g1 - g0)), 0.0, 1.0);
    const float xa = std::max(ax.x(static_cast<double>(g0)), ax.x0 - 2);
    const float xb = std::min(std::max(ax.x(static_cast<double>(g1)), xa + 1.0f), ax.x1 + 2);
    ImU32 col = mix(kBackground, style_color(it.style), 0.35f + 0.65f * static_cast<float>(frac));
    if (d.dim_after_ns >= 0 && static_cast<double>(g0) > d.dim_after_ns) col = mix(col, kBackground, 0.7f);
    if (d.alpha < 1) col = with_alpha(col, d.alpha);
    d.dl->AddRectFilled(ImVec2(xa, y0 + (count > 1 ? 1.0f : 0.0f)), ImVec2(xb, y1 - (count > 1 ? 1.0f : 0.0f)), col);
    dump_item(d, xa, xb, count, "", it.style);
    if (d.dump_stats && count > 1) {
      ++d.dump_stats->merged_groups;
      d.dump_stats->merged_items += count;
    }
    ++drawn;
    i = j + 1;
  }
  if (d.dump_stats) d.dump_stats->drawn += drawn;
  return drawn;
}

int64_t draw_markers(const MarkerLog& m, const RowDraw& d) {
  if (d.cache && !d.dump) return through_cache(m, d, draw_markers);
  const size_t n = m.size();
  if (n == 0) return 0;
  const TimeAxis& ax = *d.axis;
  size_t i = m.lower_bound(static_cast<int64_t>(std::floor(ax.t0)));
  const size_t end = m.lower_bound(static_cast<int64_t>(std::ceil(ax.t1)) + 1, i);
  const double per_px = static_cast<double>(end - i) / std::max(1.0, static_cast<double>(ax.x1 - ax.x0));
  const bool dense = per_px > 1.0 / (2 * kMinPx);
  int64_t drawn = 0;
  const float h = std::min(6.0f, (d.y1 - d.y0) * 0.45f);
  if (per_px > 4.0 && i < end) {
    // Several instants per pixel all along: single ticks carry nothing at this zoom. A thin band
    // says where they are; zooming in shows them.
    const float xa = std::max(ax.x0, ax.x(static_cast<double>(m[i].ts_ns)));
    const float xb = std::min(ax.x1, ax.x(static_cast<double>(m[end - 1].ts_ns)) + 1);
    d.dl->AddRectFilled(ImVec2(xa, d.y0), ImVec2(xb, d.y0 + 2), with_alpha(marker_color(m[i].kind), 0.5f));
    if (d.dump_stats) d.dump_stats->markers += 1;
    return 1;
  }
  while (i < end) {
    const Marker& mk = m[i];
    const float x = ax.x(static_cast<double>(mk.ts_ns));
    ImU32 col = marker_color(mk.kind);
    if (mk.kind == kMarkEpoch) {
      d.dl->AddLine(ImVec2(x, d.y0), ImVec2(x, d.y1), col, 1.5f);
    } else {
      d.dl->AddTriangleFilled(ImVec2(x - h * 0.6f, d.y0), ImVec2(x + h * 0.6f, d.y0), ImVec2(x, d.y0 + h), col);
    }
    ++drawn;
    if (dense) {  // one tick per kMinPx: jump over the rest
      i = std::min(end, m.lower_bound(static_cast<int64_t>(ax.t(x + kMinPx)), i + 1));
    } else {
      ++i;
    }
  }
  if (d.dump_stats) d.dump_stats->markers += drawn;
  return drawn;
}

// ---------------------------------------------------------------------------------------------
// Ruler, sparkline
// ---------------------------------------------------------------------------------------------

void draw_ruler(ImDrawList* dl, const TimeAxis& axis, float y0, float y1, float grid_y1) {
  const double npp = axis.ns_per_px();
  const double want = npp * 90;  // a label every ~90 px
  double step = 1;
  while (step < want) {
    if (step * 2 >= want) {
      step *= 2;
      break;
    }
    if (step * 5 >= want) {
      step *= 5;
      break;
    }
    step *= 10;
  }
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step / 1e9) - 1e-9)), 0, 9);
  dl->AddRectFilled(ImVec2(axis.x0, y0), ImVec2(axis.x1, y1), kPanelBg);
  const double first = std::ceil(axis.t0 / step) * step;
  for (double t = first; t <= axis.t1; t += step) {
    const float x = axis.x(t);
    dl->AddLine(ImVec2(x, y1 - 6), ImVec2(x, y1), kTextDim);
    if (grid_y1 > y1) dl->AddLine(ImVec2(x, y1), ImVec2(x, grid_y1), kGrid);
    const std::string s = fmt_time(t, decimals);
    dl->AddText(ImVec2(x + 3, y0 + 2), kTextDim, s.c_str());
    // Minor ticks.
    for (int k = 1; k < 5; ++k) {
      const float xm = axis.x(t + step * k / 5);
      if (xm > axis.x1) break;
      dl->AddLine(ImVec2(xm, y1 - 3), ImVec2(xm, y1), kTextDim);
    }
  }
}

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

// ---------------------------------------------------------------------------------------------
// Navigation
// ---------------------------------------------------------------------------------------------

void set_range(Frame& f, double t0, double t1) {
  const double min_w = 1000;  // 1 us
  const double span = std::max(1.0, f.data_t1 - f.data_t0);
  double w = std::clamp(t1 - t0, min_w, span * 1.5);
  const double mid = (t0 + t1) / 2;
  t0 = mid - w / 2;
  t1 = mid + w / 2;
  // Keep some of the recording in view.
  const double margin = w * 0.25;
  if (t1 < f.data_t0 + margin) {
    t0 = f.data_t0 + margin - w;
    t1 = t0 + w;
  }
  if (t0 > f.data_t1 - margin) {
    t0 = f.data_t1 - margin;
    t1 = t0 + w;
  }
  f.st->t0 = t0;
  f.st->t1 = t1;
  f.st->range_set = true;
}

void handle_time_navigation(Frame& f, const TimeAxis& axis, const ImVec2& a0, const ImVec2& a1) {
  ImGuiIO& io = ImGui::GetIO();
  const bool hovered = ImGui::IsMouseHoveringRect(a0, a1) && ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
  if (!hovered) return;
  if (io.MouseWheel != 0) {
    const double factor = std::pow(0.8, static_cast<double>(io.MouseWheel));
    const double tm = axis.t(io.MousePos.x);
    set_range(f, tm - (tm - axis.t0) * factor, tm + (axis.t1 - tm) * factor);
    f.st->follow = false;
  }
  if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f) && io.MouseDelta.x != 0) {
    const double dt = -static_cast<double>(io.MouseDelta.x) * axis.ns_per_px();
    set_range(f, axis.t0 + dt, axis.t1 + dt);
    f.st->follow = false;
  }
  if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    set_range(f, f.data_t0, f.data_t1);
    f.st->follow = !f.replay;
  }
}

// ---------------------------------------------------------------------------------------------
// Batch life
// ---------------------------------------------------------------------------------------------

const analysis::BatchInfo* find_batch(const Frame& f, const BatchKey& k) {
  if (!f.an) return nullptr;
  return f.an->model.batch(k.loader, k.epoch, k.batch);
}

std::string batch_title(const analysis::BatchInfo& b) {
  return "batch " + std::to_string(b.batch) + "  loader " + std::to_string(b.loader) + "  epoch " + std::to_string(b.epoch);
}

std::vector<std::string> batch_life(const Frame& f, const analysis::BatchInfo& b) {
  std::vector<std::string> out;
  const bool uni = f.fonts && f.fonts->unicode;
  const char* arrow = uni ? " \xe2\x86\x92 " : " -> ";
  std::optional<int64_t> origin = b.sent_ns ? b.sent_ns : b.fetch_start_ns;
  auto rel = [&](int64_t t) {
    if (!origin) return fmt_time(static_cast<double>(t), 6);
    return "+" + fmt_duration(static_cast<double>(t - *origin));
  };
  auto worker = [&]() -> std::string {
    if (b.worker == -1) return "the main process";
    if (b.worker < 0) return "an unknown worker";
    return "worker " + std::to_string(b.worker) + " (pid " + std::to_string(b.worker_pid) + ")";
  };
  if (b.sent_ns) out.push_back("sent     at " + fmt_time(static_cast<double>(*b.sent_ns), 6) + " to " + worker());
  if (b.fetch_start_ns) {
    std::string s = "fetch    " + rel(*b.fetch_start_ns);
    if (b.fetch_end_ns) {
      s += arrow + rel(*b.fetch_end_ns) + "  (" + fmt_duration(static_cast<double>(*b.fetch_end_ns - *b.fetch_start_ns)) + ")";
    }
    s += "  by " + worker();
    if (b.samples) s += ", " + std::to_string(*b.samples) + " samples";
    out.push_back(s);
  }
  if (b.put_ns) out.push_back("put      " + rel(*b.put_ns));
  // Pinning: the pin-memory thread's dl.pin span for this batch, between put and hand-off.
  if (f.tl && b.put_ns) {
    const int64_t until = b.handed_ns ? *b.handed_ns : (b.recv_ns ? *b.recv_ns : *b.put_ns + 60'000'000'000);
    for (const Lane& l : f.tl->lanes) {
      if (l.role != LaneRole::kPin) continue;
      for (const Track& t : l.tracks) {
        for (const Row& r : t.rows) {
          size_t i = r.first_starting_at_or_after(*b.put_ns);
          for (size_t k = 0; k < 256 && i < r.size() && r[i].start_ns <= until; ++k, ++i) {
            if (r[i].style == Style::kPin && r[i].a1 == b.batch && r[i].a0 == b.loader) {
              out.push_back("pin      " + rel(r[i].start_ns) + arrow + rel(r[i].end_ns) + "  (" +
                            fmt_duration(static_cast<double>(r[i].end_ns - r[i].start_ns)) + ")");
              k = 256;
              break;
            }
          }
        }
      }
    }
  }
  if (b.recv_ns) out.push_back("recv     " + rel(*b.recv_ns));
  if (b.handed_ns) {
    std::string s = "handed   " + rel(*b.handed_ns);
    if (b.put_ns) s += "  (ready for " + fmt_duration(static_cast<double>(*b.handed_ns - *b.put_ns)) + ")";
    out.push_back(s);
  } else {
    out.push_back("handed   not (yet) handed to the loop");
  }
  if (origin && b.handed_ns) out.push_back("total    " + fmt_duration(static_cast<double>(*b.handed_ns - *origin)) + " from sent to handed");
  return out;
}

void begin_panel(Frame& f, const char* name, const ImVec2& pos, const ImVec2& size, ImU32 bg, bool border,
                 ImGuiWindowFlags flags) {
  ImGui::SetCursorScreenPos(pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, bg);
  ImGui::BeginChild(name, size, border, flags);
  if (f.dump) f.dump->panels.push_back({name, {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
}

void end_panel() {
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

TimeAxis view_time_axis(const Frame& f) {
  const ImVec2 wp = ImGui::GetWindowPos(), ws = ImGui::GetWindowSize();
  TimeAxis ax;
  ax.t0 = f.st->t0;
  ax.t1 = f.st->t1;
  ax.x0 = wp.x + kLabelWidth;
  ax.x1 = wp.x + ws.x - ImGui::GetStyle().ScrollbarSize - 2;
  return ax;
}

}  // namespace stallscope::ui
