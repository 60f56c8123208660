// LayoutDump as JSON; see layout_dump.h.
#include "ui/layout_dump.h"

#include "common/json.h"

namespace stallscope::ui {
namespace {

Json rect(const DumpRect& r) {
  return Json::array({static_cast<double>(r.x0), static_cast<double>(r.y0), static_cast<double>(r.x1),
                      static_cast<double>(r.y1)});
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

std::string LayoutDump::to_json() const {
  Json root = Json::object();
  root["state"] = state;
  root["message"] = message;
  root["view_ns"] = Json::array({view_t0, view_t1});
  Json ps = Json::array();
  for (const DumpPanel& p : panels) {
    Json o = Json::object();
    o["name"] = p.name;
    o["rect"] = rect(p.rect);
    ps.push_back(o);
  }
  root["panels"] = ps;
  Json ls = Json::array();
  for (const DumpLane& l : lanes) {
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
    ls.push_back(o);
  }
  root["lanes"] = ls;
  root["items_recorded"] = static_cast<int64_t>(items.size());
  root["headline"] = headline;
  root["recommendations"] = recommendations;
  root["sessions"] = sessions;
  if (hover) {
    Json h = Json::object();
    h["lane"] = hover->lane;
    h["item"] = hover->item;
    h["batch"] = hover->batch;
    h["loader"] = hover->loader;
    h["epoch"] = hover->epoch;
    h["index"] = hover->index;
    h["worker"] = hover->worker;
    h["worker_pid"] = hover->worker_pid;
    h["life"] = hover->life;
    root["hover"] = h;
  }
  root["queue_columns"] = queue_columns;
  root["queue_empty_drawn"] = queue_empty_drawn;
  root["heat_rows"] = heat_rows;
  root["heat_cells"] = heat_cells;
  root["heat_metric"] = heat_metric;
  root["stall_rects"] = stall_rects;
  return json::write(root) + "\n";
}

}  // namespace stallscope::ui
