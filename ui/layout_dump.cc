// LayoutDump as JSON; see layout_dump.h.
#include "ui/layout_dump.h"

#include "common/json.h"

namespace stallscope::ui {
namespace {

Json rect(const DumpRect& r) {
  return Json::array(
      {static_cast<double>(r.x0), static_cast<double>(r.y0), static_cast<double>(r.x1), static_cast<double>(r.y1)});
}

// The dump as a JSON object; the compare view's sides nest as whole dumps.
Json dump_json(const LayoutDump& d) {
  Json root = Json::object();
  root["state"] = d.state;
  root["message"] = d.message;
  root["header_stats"] = d.header_stats;
  if (!d.link_error.empty()) root["link_error"] = d.link_error;
  root["view_ns"] = Json::array({d.view_t0, d.view_t1});
  Json ps = Json::array();
  for (const DumpPanel& p : d.panels) {
    Json o = Json::object();
    o["name"] = p.name;
    o["rect"] = rect(p.rect);
    ps.push_back(o);
  }
  root["panels"] = ps;
  Json ls = Json::array();
  for (const DumpLane& l : d.lanes) {
    Json o = Json::object();
    o["name"] = l.name;
    o["role"] = l.role;
    o["rect"] = rect(l.rect);
    o["rows"] = l.rows;
    o["pid"] = l.pid;
    o["worker"] = l.worker;
    o["drawn"] = l.drawn;
    o["merged_groups"] = l.merged_groups;
    o["merged_items"] = l.merged_items;
    o["markers"] = l.markers;
    o["overview"] = l.overview;
    ls.push_back(o);
  }
  root["lanes"] = ls;
  root["items_recorded"] = static_cast<int64_t>(d.items.size());
  root["headline"] = d.headline;
  Json cards = Json::array();
  for (const DumpCard& c : d.cards) {
    Json o = Json::object();
    o["label"] = c.label;
    o["big"] = c.big;
    o["scope"] = c.scope;
    o["small"] = c.small;
    cards.push_back(o);
  }
  root["cards"] = cards;
  root["recommendations"] = d.recommendations;
  root["recommendation_details"] = d.recommendation_details;
  Json folds = Json::array();
  for (const DumpRect& r : d.recommendation_folds) folds.push_back(rect(r));
  root["recommendation_folds"] = folds;
  root["sessions"] = d.sessions;
  if (d.hover) {
    Json h = Json::object();
    h["lane"] = d.hover->lane;
    h["item"] = d.hover->item;
    h["batch"] = d.hover->batch;
    h["loader"] = d.hover->loader;
    h["epoch"] = d.hover->epoch;
    h["index"] = d.hover->index;
    h["worker"] = d.hover->worker;
    h["worker_pid"] = d.hover->worker_pid;
    h["life"] = d.hover->life;
    root["hover"] = h;
  }
  root["queue_columns"] = d.queue_columns;
  root["queue_empty_drawn"] = d.queue_empty_drawn;
  root["heat_rows"] = d.heat_rows;
  root["heat_cells"] = d.heat_cells;
  root["heat_cells_overview"] = d.heat_cells_overview;
  root["queue_overview_columns"] = d.queue_overview_columns;
  root["queue_overview_ready_columns"] = d.queue_overview_ready_columns;
  root["heat_metric"] = d.heat_metric;
  root["stall_rects"] = d.stall_rects;
  if (d.windowed) {
    Json ranges = Json::array();
    for (const auto& [a, b] : d.overview_ranges) ranges.push_back(Json::array({a, b}));
    root["detail"] = {{"t0", d.detail_t0}, {"t1", d.detail_t1}, {"overview_ranges", ranges}};
  }
  if (!d.side.empty()) {
    root["side"] = d.side;
    root["origin_ns"] = d.origin_ns;
  }
  if (!d.sides.empty()) {
    Json sides = Json::array();
    for (const LayoutDump& s : d.sides) sides.push_back(dump_json(s));
    root["sides"] = sides;
    Json c = Json::object();
    c["verdict"] = d.verdict;
    c["verdict_text"] = d.verdict_text;
    c["figures"] = d.compare_figures;
    root["compare"] = c;
    if (!d.tune_rows.empty()) root["tune"] = {{"rows", d.tune_rows}, {"b", d.tune_b}};
  }
  if (!d.job_rows.empty() || !d.job_lines.empty()) {
    root["job"] = {{"lines", d.job_lines},
                   {"sort", d.job_sort},
                   {"heat", d.job_heat},
                   {"rows", d.job_rows},
                   {"cells", d.job_cells}};
  }
  return root;
}

}  // namespace

void LayoutDump::clear() {
  const bool keep = record_items;
  *this = LayoutDump();
  record_items = keep;
}

const DumpPanel* LayoutDump::panel(const std::string& name) const {
  for (const DumpPanel& p : panels) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string LayoutDump::to_json() const { return json::write(dump_json(*this)) + "\n"; }

}  // namespace stallscope::ui
