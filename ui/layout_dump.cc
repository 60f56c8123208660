// LayoutDump as JSON; see layout_dump.h.
#include "ui/layout_dump.h"

#include "analysis/json.h"

namespace stallscope::ui {
namespace {

json::Value rect(const DumpRect& r) {
  json::Value v = json::Value::array();
  v.push(static_cast<double>(r.x0));
  v.push(static_cast<double>(r.y0));
  v.push(static_cast<double>(r.x1));
  v.push(static_cast<double>(r.y1));
  return v;
}

json::Value strings(const std::vector<std::string>& list) {
  json::Value v = json::Value::array();
  for (const std::string& s : list) v.push(s);
  return v;
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
  json::Value root = json::Value::object();
  root.set("state", state);
  root.set("message", message);
  json::Value view = json::Value::array();
  view.push(view_t0);
  view.push(view_t1);
  root.set("view_ns", view);
  json::Value ps = json::Value::array();
  for (const DumpPanel& p : panels) {
    json::Value o = json::Value::object();
    o.set("name", p.name);
    o.set("rect", rect(p.rect));
    ps.push(o);
  }
  root.set("panels", ps);
  json::Value ls = json::Value::array();
  for (const DumpLane& l : lanes) {
    json::Value o = json::Value::object();
    o.set("name", l.name);
    o.set("role", l.role);
    o.set("rect", rect(l.rect));
    o.set("rows", l.rows);
    o.set("pid", l.pid);
    o.set("worker", l.worker);
    o.set("drawn", l.drawn);
    o.set("merged_groups", l.merged_groups);
    o.set("merged_items", l.merged_items);
    o.set("markers", l.markers);
    ls.push(o);
  }
  root.set("lanes", ls);
  root.set("items_recorded", static_cast<int64_t>(items.size()));
  root.set("headline", strings(headline));
  root.set("recommendations", strings(recommendations));
  root.set("sessions", strings(sessions));
  if (hover) {
    json::Value h = json::Value::object();
    h.set("lane", hover->lane);
    h.set("item", hover->item);
    h.set("batch", hover->batch);
    h.set("loader", hover->loader);
    h.set("epoch", hover->epoch);
    h.set("index", hover->index);
    h.set("worker", hover->worker);
    h.set("worker_pid", hover->worker_pid);
    h.set("life", strings(hover->life));
    root.set("hover", h);
  }
  root.set("queue_columns", queue_columns);
  root.set("queue_empty_drawn", queue_empty_drawn);
  root.set("heat_rows", heat_rows);
  root.set("heat_cells", heat_cells);
  root.set("heat_metric", heat_metric);
  root.set("stall_rects", stall_rects);
  return json::write(root, 2) + "\n";
}

}  // namespace stallscope::ui
