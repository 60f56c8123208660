// Rows of items and markers drawn with sub-pixel merging; see row_draw.h.
#include "ui/row_draw.h"

#include <algorithm>
#include <cmath>

#include "ui/palette.h"

namespace stallscope::ui {

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
  const GeometryCache::Key k{&what, ax.t0,          ax.t1,
                             ax.x0, ax.x1,          d.y0,
                             d.y1,  d.dim_after_ns, static_cast<double>(d.alpha) + (d.labels && d.tl ? 2.0 : 0.0)};
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
        d.dl->AddText(nullptr, 0.0f, ImVec2(xa + 3, ty), IM_COL32(16, 18, 22, 255), label.c_str(), nullptr, 0.0f,
                      &clip);
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
    const double frac = std::clamp(
        static_cast<double>(row.busy(i, j + 1)) / std::max<double>(1.0, static_cast<double>(g1 - g0)), 0.0, 1.0);
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

}  // namespace stallscope::ui
