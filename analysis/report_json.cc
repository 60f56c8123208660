// The report as a JSON document (schema "stallscope.report/1"); fields are documented in
// docs/report.md. Unknown values are null, never omitted.
#include <algorithm>

#include "analysis/report.h"

namespace stallscope::analysis {
namespace {

constexpr size_t kMaxIntervals = 20;  // the longest stall intervals listed in the document

json::Value loader_json(const LoaderStats& l) {
  json::Value v = json::Value::object();
  // The recorded configuration first, as the hooks wrote it; then what was measured.
  if (l.config.doc.is_object()) {
    for (const auto& [k, item] : l.config.doc.members()) v.set(k, item);
  }
  v.set("loader", l.id);
  for (const char* key : {"batch_size", "num_workers", "pin_memory", "persistent_workers", "prefetch_factor",
                          "start_method"}) {
    if (v.find(key) == nullptr) v.set(key, nullptr);
  }
  if (!l.config.num_workers && l.num_workers) v.set("num_workers", *l.num_workers);
  v.set("config_recorded", l.has_config);
  v.set("epochs", l.epochs);
  v.set("batches_handed", l.batches_handed);
  v.set("samples", l.samples);
  v.set("wait_s", l.wait_s);
  v.set("active_s", l.active_s);
  v.set("fetches", l.fetches);
  json::Value fetch = json::Value::object();
  fetch.set("p50", l.fetch_p50_ms);
  fetch.set("p90", l.fetch_p90_ms);
  fetch.set("p99", l.fetch_p99_ms);
  fetch.set("mean", l.fetch_mean_ms);
  v.set("fetch_ms", std::move(fetch));
  v.set("workers_busy_fraction", l.workers_busy_fraction);
  json::Value starts = json::Value::array();
  for (double s : l.epoch_start_s) starts.push(s);
  v.set("epoch_start_s", std::move(starts));
  v.set("respawned_epochs", l.respawned_epochs);
  v.set("shutdown_s", l.shutdown_s);
  v.set("respawn_cost_s", l.respawn_excess_s);
  v.set("edge_wait_s", l.edge_wait_s);
  v.set("next_p50_ms", l.next_p50_ms);
  return v;
}

json::Value copy_json(const CopyStats& c) {
  json::Value v = json::Value::object();
  v.set("count", c.count);
  v.set("bytes", c.bytes);
  v.set("seconds", c.seconds);
  v.set("gbps", c.gbps);
  return v;
}

json::Value gpu_json(const GpuStats& g) {
  json::Value v = json::Value::object();
  v.set("device", g.device);
  v.set("busy_fraction", g.busy_fraction);
  json::Value devices = json::Value::array();
  for (const GpuDeviceStats& d : g.devices) {
    json::Value x = json::Value::object();
    x.set("device", d.device);
    x.set("busy_fraction", d.busy_fraction);
    x.set("busy_s", d.busy_s);
    x.set("kernels", d.kernels);
    x.set("kernel_s", d.kernel_s);
    x.set("copies", d.copies);
    x.set("copy_s", d.copy_s);
    devices.push(std::move(x));
  }
  v.set("devices", std::move(devices));
  json::Value h2d = json::Value::object();
  h2d.set("pinned", copy_json(g.h2d_pinned));
  h2d.set("pageable", copy_json(g.h2d_pageable));
  h2d.set("other", copy_json(g.h2d_other));
  v.set("h2d", std::move(h2d));
  v.set("d2h", copy_json(g.d2h));
  return v;
}

}  // namespace

json::Value to_json(const Report& r) {
  json::Value d = json::Value::object();
  d.set("schema", r.schema);
  d.set("source", r.source);
  d.set("complete", r.complete);
  d.set("mode", r.mode);
  d.set("dataloader_seen", r.dataloader_seen);
  d.set("training_pid", r.train_pid ? json::Value(r.train_pid) : json::Value());
  const bool has_window = r.steps > 0 || r.wall_s > 0;
  json::Value window = json::Value::object();
  window.set("start_ns", has_window ? json::Value(r.window_start_ns) : json::Value());
  window.set("end_ns", has_window ? json::Value(r.window_end_ns) : json::Value());
  d.set("window", std::move(window));
  d.set("wall_s", r.wall_s);
  d.set("steps", r.steps);
  d.set("samples", r.samples);
  d.set("samples_per_s", r.samples_per_s);
  json::Value steps = json::Value::object();
  steps.set("p50", r.step_time.p50_ms);
  steps.set("p90", r.step_time.p90_ms);
  steps.set("p99", r.step_time.p99_ms);
  steps.set("mean", r.step_time.mean_ms);
  steps.set("max", r.step_time.max_ms);
  d.set("step_time_ms", std::move(steps));
  d.set("compute_per_step_ms", r.steps > 0 ? json::Value(r.compute_per_step_ms) : json::Value());

  json::Value stall = json::Value::object();
  stall.set("fraction", r.stall.fraction);
  stall.set("seconds", r.stall.seconds);
  json::Value causes = json::Value::object();
  for (const auto& [cause, s] : r.stall.by_cause_s) causes.set(cause, s);
  if (r.mode == "cpu" && causes.find(kCauseDataWait) == nullptr) causes.set(kCauseDataWait, 0.0);
  stall.set("by_cause", std::move(causes));
  stall.set("count", static_cast<int64_t>(r.stall.intervals.size()));
  std::vector<const StallInterval*> longest;
  for (const StallInterval& i : r.stall.intervals) longest.push_back(&i);
  std::stable_sort(longest.begin(), longest.end(), [](const StallInterval* a, const StallInterval* b) {
    return a->end_ns - a->start_ns > b->end_ns - b->start_ns;
  });
  if (longest.size() > kMaxIntervals) longest.resize(kMaxIntervals);
  json::Value iv = json::Value::array();
  for (const StallInterval* i : longest) {
    json::Value x = json::Value::object();
    x.set("start_ns", i->start_ns);
    x.set("dur_ms", static_cast<double>(i->end_ns - i->start_ns) / 1e6);
    x.set("cause", i->cause);
    x.set("loader", i->loader);
    x.set("epoch", i->epoch);
    x.set("batch", i->batch);
    iv.push(std::move(x));
  }
  stall.set("longest", std::move(iv));
  d.set("stall", std::move(stall));
  d.set("input_wait_fraction", r.input_wait_fraction);
  d.set("data_bound", r.data_bound);
  d.set("gpu", r.gpu.present ? gpu_json(r.gpu) : json::Value());

  const LoaderStats* main = r.loader();
  d.set("loader", main ? loader_json(*main) : json::Value());
  json::Value loaders = json::Value::array();
  for (const LoaderStats& l : r.loaders) loaders.push(loader_json(l));
  d.set("loaders", std::move(loaders));

  json::Value q = json::Value::object();
  q.set("available", r.queue.available);
  q.set("mean_ready", r.queue.mean_ready);
  q.set("empty_fraction", r.queue.empty_fraction);
  q.set("mean_in_flight", r.queue.mean_in_flight);
  q.set("max_ready", r.queue.max_ready);
  q.set("active_s", r.queue.available ? json::Value(r.queue.active_s) : json::Value());
  q.set("note", r.queue.note.empty() ? json::Value() : json::Value(r.queue.note));
  d.set("queue", std::move(q));

  json::Value workers = json::Value::array();
  for (const WorkerStats& w : r.workers) {
    json::Value x = json::Value::object();
    x.set("pid", w.pid);
    x.set("loader", w.loader);
    x.set("worker_id", w.worker_id);
    x.set("start_epoch", w.start_epoch);
    x.set("life_s", w.life_s);
    x.set("cpu_util", w.cpu_util);
    x.set("runq_delay_fraction", w.runq_delay_fraction);
    x.set("private_growth_bytes", w.private_growth_bytes);
    x.set("fetch_p50_ms", w.fetch_p50_ms);
    x.set("fetch_p99_ms", w.fetch_p99_ms);
    x.set("fetch_mean_ms", w.fetch_mean_ms);
    x.set("batches", w.batches);
    x.set("busy_s", w.busy_s);
    workers.push(std::move(x));
  }
  d.set("workers", std::move(workers));

  json::Value recs = json::Value::array();
  for (const Recommendation& rec : r.recommendations) {
    json::Value x = json::Value::object();
    x.set("id", rec.id);
    x.set("severity", rec.severity);
    x.set("message", rec.message);
    x.set("action", rec.action);
    x.set("evidence", rec.evidence);
    recs.push(std::move(x));
  }
  d.set("recommendations", std::move(recs));
  d.set("cpu_count", r.cpu_count);
  d.set("recorded_by", r.recorded_by.empty() ? json::Value() : json::Value(r.recorded_by));
  json::Value train = json::Value::object();
  train.set("pid", r.train_pid ? json::Value(r.train_pid) : json::Value());
  train.set("cpu_util", r.train_cpu_util);
  train.set("runq_delay_fraction", r.train_runq_delay_fraction);
  d.set("training_process", std::move(train));
  json::Value notes = json::Value::array();
  for (const std::string& n : r.notes) notes.push(n);
  d.set("notes", std::move(notes));
  return d;
}

}  // namespace stallscope::analysis
