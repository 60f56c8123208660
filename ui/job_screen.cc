// The job view and the ranks opened from it; see job_screen.h.
#include "ui/job_screen.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <utility>

#include "analysis/format.h"
#include "ui/format.h"
#include "ui/palette.h"

namespace stallscope::ui {
namespace {

// Column left edges of the table, from its left; the heat strip takes the rest.
constexpr float kRankX = 12, kNodeX = 62, kStallX = 200, kFetchX = 262, kStripX = 322;
constexpr float kHeaderLines = 4;  // title, slowdown, slow nodes, controls

ImU32 mix(ImU32 a, ImU32 b, double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto ch = [&](int shift) {
    const double x = static_cast<double>((a >> shift) & 0xFF), y = static_cast<double>((b >> shift) & 0xFF);
    return static_cast<ImU32>(std::lround(x + (y - x) * t)) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) | (0xFFu << IM_COL32_A_SHIFT);
}

constexpr ImU32 kCellLow = IM_COL32(44, 52, 60, 255);

// A heat value's colour: data stall from none to half the time and more; fetch time from the median
// rank's to three times it and more.
ImU32 heat_color(JobHeat h, double v) {
  if (h == JobHeat::kStall) return mix(kCellLow, kBad, std::sqrt(std::min(1.0, v * 2)));
  return v <= 1 ? mix(IM_COL32(30, 36, 44, 255), kCellLow, v) : mix(kCellLow, kBad, (v - 1) / 2);
}

std::string pct(double v) { return fmt_double(v * 100, v < 0.1 ? 1 : 0) + "%"; }

}  // namespace

JobTable::JobTable(const analysis::JobView& v) : v_(v) {
  node_ranks_.resize(v_.nodes.size());
  for (size_t i = 0; i < v_.ranks.size(); ++i) {  // the view's ranks are slowest first
    for (size_t j = 0; j < v_.nodes.size(); ++j) {
      if (v_.nodes[j].name == v_.ranks[i].node) node_ranks_[j].push_back(static_cast<int>(i));
    }
  }
  order();
}

void JobTable::set_sort(JobSort s) {
  sort_ = s;
  order();
}

void JobTable::order() {
  rows_.clear();
  if (sort_ == JobSort::kNode) {
    for (size_t j = 0; j < v_.nodes.size(); ++j) {
      rows_.push_back({static_cast<int>(j), -1});
      for (int i : node_ranks_[j]) rows_.push_back({-1, i});
    }
    return;
  }
  std::vector<int> idx(v_.ranks.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto rank = [&](int i) { return v_.ranks[static_cast<size_t>(i)]; };
  if (sort_ == JobSort::kFetch) {
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int a, int b) { return rank(a).fetch_x.value_or(0) > rank(b).fetch_x.value_or(0); });
  } else if (sort_ == JobSort::kRank) {
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return rank(a).rank < rank(b).rank; });
  }  // kStall: the view's own order, slow ranks first by data stall
  for (int i : idx) rows_.push_back({-1, i});
}

double JobTable::cell(int rank, size_t p) const {
  const analysis::JobRank& k = v_.ranks[static_cast<size_t>(rank)];
  if (heat_ == JobHeat::kStall) return p < k.stall.size() ? k.stall[p] : -1;
  if (p >= k.fetch_ms.size() || k.fetch_ms[p] < 0 || p >= v_.median_fetch_ms.size() || v_.median_fetch_ms[p] <= 0) {
    return -1;
  }
  return k.fetch_ms[p] / v_.median_fetch_ms[p];
}

double JobTable::node_cell(int node, size_t p) const {
  double sum = 0;
  int n = 0;
  for (int i : node_ranks_[static_cast<size_t>(node)]) {
    const double c = cell(i, p);
    if (c < 0) continue;
    sum += c;
    ++n;
  }
  return n ? sum / n : -1;
}

std::string JobTable::rank_line(const analysis::JobRank& k) const {
  return "rank " + std::to_string(k.rank) + " " + k.node + " " + pct(k.data_share()) + " " +
         (k.fetch_x ? fmt_double(*k.fetch_x, 1) + "x" : "-") + (k.slow ? " slow" : "");
}

std::optional<JobTable::Pick> JobTable::draw(LayoutDump* dump, const ImVec2& pos, const ImVec2& size) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  line_ = ImGui::GetFontSize() + 4;
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), kPanelBg);
  if (dump) {
    dump->panels.push_back({"job", {pos.x, pos.y, pos.x + size.x, pos.y + size.y}});
    dump->job_sort = sort_ == JobSort::kNode    ? "node"
                     : sort_ == JobSort::kStall ? "stall"
                     : sort_ == JobSort::kFetch ? "fetch"
                                                : "rank";
    dump->job_heat = heat_ == JobHeat::kStall ? "stall" : "fetch";
  }
  auto text = [&](float x, float y, ImU32 col, const std::string& s, float clip_x) {
    const ImVec4 clip(pos.x + x, pos.y, pos.x + clip_x - 6, pos.y + size.y);
    dl->AddText(nullptr, 0.0f, ImVec2(pos.x + x, y), col, s.c_str(), nullptr, 0.0f, &clip);
  };
  auto line = [&](int i, ImU32 col, const std::string& s) {
    text(kRankX, pos.y + 6 + line_ * static_cast<float>(i), col, s, size.x);
    if (dump) dump->job_lines.push_back(s);
  };

  // What the job view says, in its own words.
  std::set<std::string> node_names;
  for (const analysis::JobRank& k : v_.ranks) node_names.insert(k.node);
  std::string title = "job: " + std::to_string(v_.ranks.size()) + " ranks on " + std::to_string(node_names.size()) +
                      " node" + (node_names.size() == 1 ? "" : "s") + (v_.job.empty() ? "" : ", job " + v_.job) +
                      "; periods of " + analysis::clock_time(v_.period_ns, 0);
  line(0, kAccent, title);
  const auto at = [&](int p) { return analysis::clock_time(v_.start_ns + int64_t{p} * v_.period_ns, 0); };
  if (v_.slowdown) {
    std::string s = "slowed at " + at(v_.slowdown->period) + ": " + fmt_double(v_.slowdown->before, 0) + " -> " +
                    fmt_double(v_.slowdown->after, 0) + " samples/s";
    if (!v_.slowdown->first_nodes.empty()) {
      s += "; first on";
      for (const std::string& nd : v_.slowdown->first_nodes) s += " " + nd;
      s += " (ranks " + analysis::rank_list(v_.slowdown->first_ranks) + ")";
    } else if (!v_.slowdown->first_ranks.empty()) {
      s += "; first on ranks " + analysis::rank_list(v_.slowdown->first_ranks);
    }
    line(1, kWarn, s);
  } else {
    line(1, kTextDim, "samples/s held through the run");
  }
  if (!v_.slow_nodes.empty()) {
    std::string s = "slow node" + std::string(v_.slow_nodes.size() > 1 ? "s:" : ":");
    for (const std::string& nd : v_.slow_nodes) s += " " + nd;
    line(2, kBad, s + "  (every rank slow: its data stall or fetch time stands out)");
  } else if (!v_.slow.empty()) {
    line(2, kBad, "slow ranks: " + analysis::rank_list(v_.slow));
  } else {
    line(2, kGood, "no rank stands out");
  }

  // Controls: sort and heat metric.
  const float cy = pos.y + 6 + line_ * 3;
  ImGui::SetCursorScreenPos(ImVec2(pos.x + kRankX, cy - 2));
  ImGui::TextUnformatted("sort:");
  struct Opt {
    const char* label;
    JobSort s;
  };
  for (const Opt& o : {Opt{"node", JobSort::kNode}, Opt{"stall", JobSort::kStall}, Opt{"fetch", JobSort::kFetch},
                       Opt{"rank", JobSort::kRank}}) {
    ImGui::SameLine();
    if (ImGui::RadioButton(o.label, sort_ == o.s) && sort_ != o.s) set_sort(o.s);
  }
  ImGui::SameLine(0, 30);
  ImGui::TextUnformatted("heat:");
  ImGui::SameLine();
  if (ImGui::RadioButton("data stall", heat_ == JobHeat::kStall)) heat_ = JobHeat::kStall;
  ImGui::SameLine();
  if (ImGui::RadioButton("fetch time / median rank's", heat_ == JobHeat::kFetch)) heat_ = JobHeat::kFetch;
  ImGui::SameLine(0, 30);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kTextDim),
                     "click a rank: its dashboard; shift-click: beside the last one opened; Esc: back here");

  // Column heads and the period ruler.
  const float head_y = pos.y + 6 + line_ * kHeaderLines + 4;
  const float strip_x0 = pos.x + kStripX, strip_x1 = pos.x + size.x - 18;
  const size_t n = static_cast<size_t>(std::max(0, v_.periods));
  const float cw = n ? (strip_x1 - strip_x0) / static_cast<float>(n) : 0;
  text(kRankX, head_y, kTextDim, "rank", kNodeX);
  text(kNodeX, head_y, kTextDim, "node", kStallX);
  text(kStallX, head_y, kTextDim, "stall", kFetchX);
  text(kFetchX, head_y, kTextDim, "fetch", kStripX);
  const int label_every = std::max(1, static_cast<int>(std::ceil(90.0f / std::max(cw, 1.0f))));
  for (size_t p = 0; p < n; p += static_cast<size_t>(label_every)) {
    const float x = strip_x0 + cw * static_cast<float>(p);
    dl->AddLine(ImVec2(x, head_y + line_ - 2), ImVec2(x, pos.y + size.y), kGrid);
    dl->AddText(ImVec2(x + 2, head_y), kTextDim, at(static_cast<int>(p)).c_str());
  }
  if (v_.slowdown) {
    const float x = strip_x0 + cw * static_cast<float>(v_.slowdown->period);
    dl->AddLine(ImVec2(x, head_y), ImVec2(x, pos.y + size.y), kWarn, 1.5f);
  }

  // The rows, scrolled; only those in view are drawn.
  const float top = head_y + line_ + 2;
  const ImVec2 rows_pos(pos.x, top), rows_size(size.x, pos.y + size.y - top);
  ImGui::SetCursorScreenPos(rows_pos);
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kPanelBg);
  ImGui::BeginChild("job-rows", rows_size, false, ImGuiWindowFlags_None);
  if (scroll_request_) {
    ImGui::SetScrollY(*scroll_request_);
    scroll_request_.reset();
  }
  ImGui::Dummy(ImVec2(size.x - 20, line_ * static_cast<float>(rows_.size())));
  scroll_ = ImGui::GetScrollY();
  rows_top_ = top;
  ImDrawList* rl = ImGui::GetWindowDrawList();
  const bool hover_rows = ImGui::IsWindowHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const size_t first = static_cast<size_t>(std::max(0.0f, std::floor(scroll_ / line_)));
  const size_t last = std::min(rows_.size(), first + static_cast<size_t>(std::ceil(rows_size.y / line_)) + 1);
  std::optional<Pick> pick;
  auto rtext = [&](float x, float y, ImU32 col, const std::string& s, float clip_x) {
    const ImVec4 clip(pos.x + x, top, pos.x + clip_x - 6, top + rows_size.y);
    rl->AddText(nullptr, 0.0f, ImVec2(pos.x + x, y), col, s.c_str(), nullptr, 0.0f, &clip);
  };
  for (size_t r = first; r < last; ++r) {
    const Row& row = rows_[r];
    const float y = top + line_ * static_cast<float>(r) - scroll_;
    const ImVec2 a(pos.x, y), b(pos.x + size.x, y + line_);
    const bool hovered = hover_rows && ImGui::IsMouseHoveringRect(a, b);
    std::vector<double> cells(n, -1);
    if (row.node >= 0) {
      const analysis::JobNode& nd = v_.nodes[static_cast<size_t>(row.node)];
      rl->AddRectFilled(a, b, IM_COL32(255, 255, 255, 10));
      const std::string s = nd.name + " (" + std::to_string(nd.ranks.size()) + " ranks" +
                            (nd.slow_ranks ? ", " + std::to_string(nd.slow_ranks) + " slow" : "") + ")";
      rtext(kRankX, y + 1, nd.slow_ranks ? kBad : kText, s, kStallX);
      rtext(kStallX, y + 1, kText, pct(nd.data_share), kFetchX);
      rtext(kFetchX, y + 1, kText, nd.fetch_x ? fmt_double(*nd.fetch_x, 1) + "x" : "-", kStripX);
      for (size_t p = 0; p < n; ++p) cells[p] = node_cell(row.node, p);
      if (dump) {
        dump->job_rows.push_back("node " + nd.name + ": " + std::to_string(nd.ranks.size()) + " ranks, " +
                                 std::to_string(nd.slow_ranks) + " slow");
      }
    } else {
      const analysis::JobRank& k = v_.ranks[static_cast<size_t>(row.rank)];
      if (hovered) rl->AddRectFilled(a, b, IM_COL32(255, 255, 255, 18));
      const ImU32 col = k.slow ? kBad : kText;
      rtext(kRankX, y + 1, col, std::to_string(k.rank), kNodeX);
      rtext(kNodeX, y + 1, kTextDim, k.node, kStallX);
      rtext(kStallX, y + 1, col, pct(k.data_share()), kFetchX);
      rtext(kFetchX, y + 1, col, k.fetch_x ? fmt_double(*k.fetch_x, 1) + "x" : "-", kStripX);
      for (size_t p = 0; p < n; ++p) cells[p] = cell(row.rank, p);
      if (dump) dump->job_rows.push_back(rank_line(k));
      if (hovered && ImGui::IsMouseClicked(0)) pick = Pick{static_cast<size_t>(row.rank), ImGui::GetIO().KeyShift};
    }
    for (size_t p = 0; p < n; ++p) {
      if (cells[p] < 0) continue;
      const float x0 = strip_x0 + cw * static_cast<float>(p);
      rl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x0 + std::max(1.0f, cw - 1), y + line_ - 1),
                        heat_color(heat_, cells[p]));
      if (dump) ++dump->job_cells;
      if (hovered && mouse.x >= x0 && mouse.x < x0 + cw) {
        ImGui::BeginTooltip();
        const int pi = static_cast<int>(p);
        const std::string span =
            at(pi) + "-" + analysis::clock_time(std::min(v_.end_ns, v_.start_ns + int64_t{pi + 1} * v_.period_ns), 0);
        if (row.node >= 0) {
          ImGui::Text("%s, %s", v_.nodes[static_cast<size_t>(row.node)].name.c_str(), span.c_str());
        } else {
          const analysis::JobRank& k = v_.ranks[static_cast<size_t>(row.rank)];
          ImGui::Text("rank %lld on %s, %s", static_cast<long long>(k.rank), k.node.c_str(), span.c_str());
          if (p < k.stall.size() && k.stall[p] >= 0) ImGui::Text("data stall %s", pct(k.stall[p]).c_str());
          if (p < k.fetch_ms.size() && k.fetch_ms[p] >= 0) {
            ImGui::Text("fetch %s a batch (median rank %s)", fmt_double(k.fetch_ms[p], 1).c_str(),
                        fmt_double(v_.median_fetch_ms[p], 1).c_str());
          }
        }
        ImGui::Text(heat_ == JobHeat::kStall ? "mean data stall %s" : "fetch time %sx the median rank's",
                    heat_ == JobHeat::kStall ? pct(cells[p]).c_str() : fmt_double(cells[p], 2).c_str());
        ImGui::EndTooltip();
      }
    }
  }
  ImGui::EndChild();
  ImGui::PopStyleColor();
  return pick;
}

JobScreen::JobScreen(analysis::JobView view, std::string dir, SourceOptions so, UiFonts fonts)
    : v_(std::move(view)), dir_(std::move(dir)), so_(std::move(so)), fonts_(fonts), table_(v_) {}

JobScreen::~JobScreen() = default;

void JobScreen::open(size_t a, std::optional<size_t> b) {
  if (a >= v_.ranks.size() || (b && *b >= v_.ranks.size())) return;
  dash_.reset();
  cmp_.reset();
  src_[0] = std::make_unique<SnapshotSource>(v_.ranks[a].source, so_);
  src_[1].reset();
  shown_[0] = a;
  if (b) {
    src_[1] = std::make_unique<SnapshotSource>(v_.ranks[*b].source, so_);
    shown_[1] = *b;
    cmp_ = std::make_unique<CompareDashboard>(fonts_);
  } else {
    dash_ = std::make_unique<Dashboard>(fonts_);
  }
  last_ = b ? *b : a;
}

void JobScreen::back() {
  dash_.reset();
  cmp_.reset();
  src_[0].reset();
  src_[1].reset();
}

std::string JobScreen::title() const {
  if (!src_[0]) return "stallscope - job " + dir_;
  std::string t = "stallscope - rank " + std::to_string(v_.ranks[shown_[0]].rank);
  if (src_[1]) t += " vs rank " + std::to_string(v_.ranks[shown_[1]].rank);
  return t + " of " + dir_;
}

void JobScreen::draw(LayoutDump* dump) {
  if (src_[0]) {
    const bool esc = ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false);
    if (cmp_) {
      cmp_->draw(*src_[0]->current(), *src_[1]->current(), dump);
    } else {
      dash_->draw(*src_[0]->current(), dump);
    }
    // The way back, over the corner.
    const ImVec2 display = ImGui::GetIO().DisplaySize;
    ImGui::SetNextWindowPos(ImVec2(display.x - 8, display.y - 8), ImGuiCond_Always, ImVec2(1, 1));
    ImGui::SetNextWindowBgAlpha(0.85f);
    ImGui::Begin("job-back", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                     ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav);
    const bool clicked = ImGui::Button("< job view (Esc)");
    ImGui::End();
    if (clicked || esc) back();
    return;
  }
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  begin_window();
  if (fonts_.regular) ImGui::PushFont(fonts_.regular);
  if (dump) dump->state = "job";
  const std::optional<JobTable::Pick> pick = table_.draw(dump, ImVec2(0, 0), display);
  if (fonts_.regular) ImGui::PopFont();
  end_window();
  if (pick) {
    if (pick->beside && last_ && *last_ != pick->rank) {
      open(*last_, pick->rank);
    } else {
      open(pick->rank);
    }
  }
}

uint64_t JobScreen::generation() const {
  uint64_t g = 0;
  for (const auto& s : src_) {
    if (s) g += s->current()->generation;
  }
  return g;
}

bool JobScreen::live() const {
  for (const auto& s : src_) {
    if (s && s->current()->state == SourceState::kLive) return true;
  }
  return false;
}

bool JobScreen::playing() {
  if (cmp_) return cmp_->axis().playing;
  return dash_ && dash_->state().playing;
}

bool JobScreen::wants_detail() {
  if (cmp_) return cmp_->side(0).state().detail_request.has_value() || cmp_->side(1).state().detail_request.has_value();
  return dash_ && dash_->state().detail_request.has_value();
}

void JobScreen::ask_detail() {
  for (int i = 0; i < 2; ++i) {
    if (!src_[i]) continue;
    const ViewState& st = cmp_ ? cmp_->side(i).state() : dash_->state();
    if (st.detail_request) src_[i]->request_detail(st.detail_request->first, st.detail_request->second);
  }
}

}  // namespace stallscope::ui
