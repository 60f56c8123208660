// The report as a JSON document (schema "stallscope.report/1"); fields are documented in
// docs/report.md. Unknown values are null, never omitted.
#include <algorithm>

#include "analysis/report.h"

namespace stallscope::analysis {
namespace {

constexpr size_t kMaxIntervals = 20;  // the longest stall intervals listed in the document

Json loader_json(const LoaderStats& l) {
  // The recorded configuration first, as the hooks wrote it; then what was measured.
  Json v = l.config.doc.is_object() ? l.config.doc : Json::object();
  v["loader"] = l.id;
  for (const char* key : {"batch_size", "num_workers", "pin_memory", "pin_memory_effective", "persistent_workers",
                          "prefetch_factor", "start_method"}) {
    if (!v.contains(key)) v[key] = nullptr;
  }
  if (!l.config.num_workers && l.num_workers) v["num_workers"] = *l.num_workers;
  if (!v.contains("kind")) v["kind"] = l.config.kind;
  if (l.stages.batches > 0) {
    Json st = Json::object();
    st["batches"] = l.stages.batches;
    st["read_s"] = l.stages.read_s;
    st["decode_s"] = l.stages.decode_s;
    st["augment_s"] = l.stages.augment_s;
    v["stages"] = std::move(st);
  } else {
    v["stages"] = nullptr;
  }
  v["role"] = l.role;
  v["name"] = l.name;
  v["optimizer_steps"] = l.steps;
  v["start_s"] = l.start_s;
  for (const char* key : {"batch_size_from", "made_by", "role_hint"}) {
    if (!v.contains(key)) v[key] = nullptr;
  }
  v["config_recorded"] = l.has_config;
  v["epochs"] = l.epochs;
  v["batches_handed"] = l.batches_handed;
  v["samples"] = l.samples;
  v["wait_s"] = l.wait_s;
  v["active_s"] = l.active_s;
  v["fetches"] = l.fetches;
  Json fetch = Json::object();
  fetch["p50"] = l.fetch_p50_ms;
  fetch["p90"] = l.fetch_p90_ms;
  fetch["p99"] = l.fetch_p99_ms;
  fetch["mean"] = l.fetch_mean_ms;
  v["fetch_ms"] = std::move(fetch);
  v["workers_busy_fraction"] = l.workers_busy_fraction;
  v["epoch_start_s"] = l.epoch_start_s;
  v["respawned_epochs"] = l.respawned_epochs;
  v["shutdown_s"] = l.shutdown_s;
  v["respawn_cost_s"] = l.respawn_excess_s;
  v["edge_wait_s"] = l.edge_wait_s;
  v["next_p50_ms"] = l.next_p50_ms;
  return v;
}

Json copy_json(const CopyStats& c) {
  Json v = Json::object();
  v["count"] = c.count;
  v["bytes"] = c.bytes;
  v["seconds"] = c.seconds;
  v["gbps"] = c.gbps;
  return v;
}

Json gpu_json(const GpuStats& g) {
  Json v = Json::object();
  v["device"] = g.device;
  v["busy_fraction"] = g.busy_fraction;
  Json devices = Json::array();
  for (const GpuDeviceStats& d : g.devices) {
    Json x = Json::object();
    x["device"] = d.device;
    x["busy_fraction"] = d.busy_fraction;
    x["busy_s"] = d.busy_s;
    x["kernels"] = d.kernels;
    x["kernel_s"] = d.kernel_s;
    x["copies"] = d.copies;
    x["copy_s"] = d.copy_s;
    devices.push_back(std::move(x));
  }
  v["devices"] = std::move(devices);
  Json h2d = Json::object();
  h2d["pinned"] = copy_json(g.h2d_pinned);
  h2d["pageable"] = copy_json(g.h2d_pageable);
  h2d["other"] = copy_json(g.h2d_other);
  v["h2d"] = std::move(h2d);
  v["d2h"] = copy_json(g.d2h);
  return v;
}

Json setting_json(const LoaderSetting& s) {
  Json x = Json::object();
  x["num_workers"] = s.num_workers;
  x["prefetch_factor"] = s.num_workers > 0 ? Json(s.prefetch_factor) : Json();
  x["persistent_workers"] = s.persistent_workers;
  x["pin_memory"] = s.pin_memory;
  x["arguments"] = s.arguments();
  return x;
}

Json whatif_json(const WhatIf& w) {
  Json x = Json::object();
  x["available"] = w.available;
  if (!w.available) {
    x["why_not"] = w.why_not;
    return x;
  }
  x["recorded"] = setting_json(w.recorded);
  x["measured_samples_per_s"] = w.measured_samples_per_s;
  x["predicted_recorded_samples_per_s"] = w.predicted_recorded_samples_per_s;
  x["fit_error"] = w.fit_error;
  x["confidence"] = w.confidence;
  x["best"] = w.best ? setting_json(w.candidates[*w.best].setting) : Json();
  x["best_samples_per_s"] = w.best ? Json(w.candidates[*w.best].samples_per_s) : Json();
  x["best_gain"] = w.best_gain;
  x["min_gain"] = w.min_gain;
  x["loader_advised"] = w.loader_advised;
  x["bound"] = w.bound;
  x["bound_text"] = w.bound_text;
  Json cands = Json::array();
  for (const WhatIfCandidate& c : w.candidates) {
    Json y = setting_json(c.setting);
    y["samples_per_s"] = c.samples_per_s;
    y["stall"] = c.stall;
    y["steady_step_ms"] = c.steady_step_ms;
    y["recorded"] = c.recorded;
    y["uncertain"] = c.uncertain;
    cands.push_back(std::move(y));
  }
  x["candidates"] = std::move(cands);
  Json threads = Json::array();
  for (const WhatIfCandidate& c : w.thread_candidates) {
    Json y = setting_json(c.setting);
    y["torch_threads"] = c.setting.torch_threads;
    y["samples_per_s"] = c.samples_per_s;
    y["stall"] = c.stall;
    y["steady_step_ms"] = c.steady_step_ms;
    threads.push_back(std::move(y));
  }
  x["thread_candidates"] = std::move(threads);
  x["threads_best"] = w.threads_best ? Json(*w.threads_best) : Json();
  x["threads_gain"] = w.threads_gain;
  x["threads_floor_gain"] = w.threads_floor_gain;
  x["threads_basis"] = w.threads_basis.empty() ? Json() : Json(w.threads_basis);
  x["best_beside_busy_workers"] = w.best_beside_busy_workers;
  auto with_threads = [](const WhatIfCandidate& c) {
    Json y = setting_json(c.setting);
    y["torch_threads"] = c.setting.torch_threads > 0 ? Json(c.setting.torch_threads) : Json();
    y["samples_per_s"] = c.samples_per_s;
    y["uncertain"] = c.uncertain;
    return y;
  };
  x["advised"] = with_threads(w.advised);
  Json same = Json::array();
  for (const WhatIfCandidate& c : w.about_the_same) same.push_back(with_threads(c));
  x["about_the_same"] = std::move(same);
  x["about_the_same_within"] = w.about_the_same_within;
  const WhatIfInputs& in = w.inputs;
  Json inputs = Json::object();
  inputs["usable_cores"] = in.usable_cores;
  inputs["torch_threads"] = in.torch_threads;
  inputs["compute_ms"] = in.compute_ms;
  inputs["compute_cpu_ms"] = in.compute_cpu_ms;
  inputs["fetch_ms"] = in.fetch_ms;
  inputs["fetch_cpu_ms"] = in.fetch_cpu_ms;
  inputs["fetch_one_thread_cpu_ms"] = in.fetch_one_cpu_ms >= 0 ? Json(in.fetch_one_cpu_ms) : Json(nullptr);
  inputs["recv_cpu_ms"] = in.recv_cpu_ms;
  inputs["put_cpu_ms"] = in.put_cpu_ms;
  inputs["handoff_estimated"] = in.handoff_estimated;
  inputs["share_cpu_ms"] = in.share_cpu_ms;
  if (in.batch_tensors >= 0) {
    inputs["batch_tensors"] = in.batch_tensors;
    inputs["batch_bytes"] = in.batch_bytes;
  } else {
    inputs["batch_tensors"] = nullptr;
    inputs["batch_bytes"] = nullptr;
  }
  inputs["others_cpu_ms"] = in.others_cpu_ms;
  inputs["parallel_ms"] = in.parallel_ms >= 0 ? Json(in.parallel_ms) : Json();
  inputs["parallel_body_ms"] = in.parallel_ms >= 0 ? Json(in.parallel_body_ms) : Json();
  inputs["spin_window_ms"] = in.spin_window_s * 1e3;
  inputs["wake_ms"] = in.wake_s * 1e3;
  inputs["startup_s"] = in.startup_s;
  inputs["startup_estimated"] = in.startup_estimated;
  inputs["startup_workers"] = in.startup_workers;
  inputs["startup_per_worker_s"] = in.startup_per_worker_s;
  inputs["shutdown_s"] = in.shutdown_s;
  inputs["fork_step_ms"] = in.fork_step_s * 1e3;
  inputs["fork_first_step_ms"] = in.fork_first_step_s * 1e3;
  inputs["epochs"] = in.epochs;
  inputs["steps"] = static_cast<int64_t>(in.steps.size());
  inputs["fetches"] = static_cast<int64_t>(in.fetches.size());
  inputs["train_s"] = in.train_s;
  inputs["other_s"] = in.other_s;
  x["inputs"] = std::move(inputs);
  x["assumptions"] = w.assumptions;
  return x;
}

Json over_time_period_json(const OverTimePeriod& p) {
  Json j = Json::object();
  j["start_ns"] = p.t0_ns;
  j["end_ns"] = p.t1_ns;
  j["next_calls"] = p.next_calls;
  j["wait_s"] = p.wait_s;
  j["wait_fraction"] = p.wait_fraction();
  j["steps"] = p.steps;
  j["fetches"] = p.fetches;
  j["fetch_p50_ms"] = p.fetch_p50_ms;
  j["fetch_p99_ms"] = p.fetch_p99_ms;
  j["batches"] = p.batches;
  j["samples"] = p.batches ? Json(p.samples) : Json();
  j["samples_unknown"] = p.batches ? Json(p.samples_unknown) : Json();
  j["samples_per_s"] = p.samples_per_s();
  j["loader_starts"] = p.batches ? Json(p.starts) : Json();
  j["loader_start_s"] = p.batches ? Json(p.start_s) : Json();
  j["stall_fraction"] = p.batches ? Json(p.stall_fraction()) : Json();
  j["step_p50_ms"] = p.step_p50_ms;
  j["step_p90_ms"] = p.step_p90_ms;
  j["step_p99_ms"] = p.step_p99_ms;
  Json q;
  if (p.queue) {
    q = Json::object();
    q["active_s"] = p.queue->covered_s();
    q["mean_ready"] = p.queue->ready_mean();
    q["min_ready"] = p.queue->ready_min;
    q["max_ready"] = p.queue->ready_max;
    q["empty_fraction"] = p.queue->empty_fraction();
    q["mean_in_flight"] = p.queue->in_flight_mean();
    q["min_in_flight"] = p.queue->flight_min;
    q["max_in_flight"] = p.queue->flight_max;
  }
  j["queue"] = std::move(q);
  return j;
}

Json over_time_json(const OverTime& o) {
  if (!o.available) return Json();
  Json periods = Json::array();
  for (const OverTimePeriod& p : o.periods) periods.push_back(over_time_period_json(p));
  Json j = Json::object();
  j["loader"] = o.loader;
  j["period_s"] = static_cast<double>(o.period_ns) / 1e9;
  j["level_s"] = static_cast<double>(o.level_ns) / 1e9;
  j["periods"] = std::move(periods);
  j["total"] = over_time_period_json(o.total);
  return j;
}

}  // namespace

Json to_json(const Report& r) {
  Json d = Json::object();
  d["schema"] = r.schema;
  d["source"] = r.source;
  d["complete"] = r.complete;
  d["mode"] = r.mode;
  d["dataloader_seen"] = r.dataloader_seen;
  d["training_pid"] = r.train_pid ? Json(r.train_pid) : Json();
  const bool has_window = r.steps > 0 || r.wall_s > 0;
  Json window = Json::object();
  window["start_ns"] = has_window ? Json(r.window_start_ns) : Json();
  window["end_ns"] = has_window ? Json(r.window_end_ns) : Json();
  d["window"] = std::move(window);
  d["wall_s"] = r.wall_s;
  d["steps"] = r.steps;
  d["samples"] = r.samples;
  d["samples_per_s"] = r.samples_per_s;
  Json train = Json::object();
  const LoaderStats* tl = r.loader();
  train["loader"] = tl ? Json(tl->id) : Json();
  train["name"] = tl ? Json(tl->name) : Json();
  train["identified_by"] = r.main_loader_by.empty() ? Json() : Json(r.main_loader_by);
  d["training_loader"] = std::move(train);
  d["optimizer_steps"] = r.optimizer_steps;
  d["eval_s"] = r.eval_s;
  Json steps = Json::object();
  steps["p50"] = r.step_time.p50_ms;
  steps["p90"] = r.step_time.p90_ms;
  steps["p99"] = r.step_time.p99_ms;
  steps["mean"] = r.step_time.mean_ms;
  steps["max"] = r.step_time.max_ms;
  d["step_time_ms"] = std::move(steps);
  d["compute_per_step_ms"] = r.steps > 0 ? Json(r.compute_per_step_ms) : Json();

  Json stall = Json::object();
  stall["fraction"] = r.stall.fraction;
  stall["seconds"] = r.stall.seconds;
  Json causes = Json::object();
  for (const auto& [cause, s] : r.stall.by_cause_s) causes[cause] = s;
  if (r.mode == vocab::kModeCpu && !causes.contains(kCauseDataWait)) causes[kCauseDataWait] = 0.0;
  stall["by_cause"] = std::move(causes);
  stall["count"] = static_cast<int64_t>(r.stall.intervals.size());
  std::vector<const StallInterval*> longest;
  for (const StallInterval& i : r.stall.intervals) longest.push_back(&i);
  std::stable_sort(longest.begin(), longest.end(), [](const StallInterval* a, const StallInterval* b) {
    return a->end_ns - a->start_ns > b->end_ns - b->start_ns;
  });
  if (longest.size() > kMaxIntervals) longest.resize(kMaxIntervals);
  Json iv = Json::array();
  for (const StallInterval* i : longest) {
    Json x = Json::object();
    x["start_ns"] = i->start_ns;
    x["dur_ms"] = static_cast<double>(i->end_ns - i->start_ns) / 1e6;
    x["cause"] = i->cause;
    x["loader"] = i->loader;
    x["epoch"] = i->epoch;
    x["batch"] = i->batch;
    iv.push_back(std::move(x));
  }
  stall["longest"] = std::move(iv);
  d["stall"] = std::move(stall);
  d["input_wait_fraction"] = r.input_wait_fraction;
  d["data_bound"] = r.data_bound;
  d["gpu"] = r.gpu.present ? gpu_json(r.gpu) : Json();
  if (r.gpu_light.present) {
    const GpuLightStats& g = r.gpu_light;
    d["gpu_light"] = Json{{"marks", g.marks},
                          {"calls", g.calls},
                          {"calls_marked", g.calls_marked},
                          {"host_wait_s", g.host_wait_s},
                          {"gpu_idle_s", g.gpu_idle_s},
                          {"queued_p50_ms", g.queued_p50_ms ? Json(*g.queued_p50_ms) : Json()}};
  } else {
    d["gpu_light"] = Json();
  }

  const LoaderStats* main = r.loader();
  d["loader"] = main ? loader_json(*main) : Json();
  Json loaders = Json::array();
  for (const LoaderStats& l : r.loaders) loaders.push_back(loader_json(l));
  d["loaders"] = std::move(loaders);

  Json q = Json::object();
  q["available"] = r.queue.available;
  q["mean_ready"] = r.queue.mean_ready;
  q["empty_fraction"] = r.queue.empty_fraction;
  q["mean_in_flight"] = r.queue.mean_in_flight;
  q["max_ready"] = r.queue.max_ready;
  q["active_s"] = r.queue.available ? Json(r.queue.active_s) : Json();
  q["note"] = r.queue.note.empty() ? Json() : Json(r.queue.note);
  d["queue"] = std::move(q);

  Json workers = Json::array();
  for (const WorkerStats& w : r.workers) {
    Json x = Json::object();
    x["pid"] = w.pid;
    x["thread"] = w.thread;
    x["loader"] = w.loader;
    x["worker_id"] = w.worker_id;
    x["start_epoch"] = w.start_epoch;
    x["life_s"] = w.life_s;
    x["startup_s"] = w.ready_seen ? Json(w.startup_s) : Json();
    x["cpu_util"] = w.cpu_util;
    x["runq_delay_fraction"] = w.runq_delay_fraction;
    x["private_growth_bytes"] = w.private_growth_bytes;
    x["fetch_p50_ms"] = w.fetch_p50_ms;
    x["fetch_p99_ms"] = w.fetch_p99_ms;
    x["fetch_mean_ms"] = w.fetch_mean_ms;
    x["batches"] = w.batches;
    x["busy_s"] = w.busy_s;
    x["busy_fraction"] = w.busy_fraction;
    x["private_start_bytes"] = w.private_first_bytes;
    workers.push_back(std::move(x));
  }
  d["workers"] = std::move(workers);

  Json recs = Json::array();
  for (size_t i = 0; i < r.recommendations.size(); ++i) {
    const Recommendation& rec = r.recommendations[i];
    Json x = Json::object();
    x["id"] = rec.id;
    x["severity"] = rec.severity;
    x["message"] = rec.message;
    x["action"] = rec.action;
    x["evidence"] = rec.evidence;
    // The numbered action of "What to do" that stands for it (1-based, as the text numbers them).
    Json number;
    for (size_t k = 0; k < r.actions.size(); ++k) {
      const std::vector<size_t>& of = r.actions[k].recommendations;
      if (std::find(of.begin(), of.end(), i) != of.end()) number = static_cast<int64_t>(k + 1);
    }
    x["plan_action"] = number;
    recs.push_back(std::move(x));
  }
  d["recommendations"] = std::move(recs);
  Json actions = Json::array();
  for (const Action& a : r.actions) {
    Json x = Json::object();
    x["line"] = a.line;
    x["basis"] = a.basis;
    x["speedup"] = a.speedup;
    x["uncertain"] = a.uncertain;
    x["speedup_low"] = a.speedup_low;
    x["speedup_high"] = a.speedup_high;
    x["confidence"] = a.confidence.empty() ? Json() : Json(a.confidence);
    x["gain_text"] = a.gain_text;
    x["why"] = a.why;
    x["recommendations"] = a.ids;
    actions.push_back(std::move(x));
  }
  d["actions"] = std::move(actions);
  d["cpu_count"] = r.cpu_count;
  d["usable_cores"] = r.usable_cores;
  d["whatif"] = whatif_json(r.whatif);
  d["recorded_by"] = r.recorded_by.empty() ? Json() : Json(r.recorded_by);
  Json proc = Json::object();
  proc["pid"] = r.train_pid ? Json(r.train_pid) : Json();
  proc["cpu_util"] = r.train_cpu_util;
  proc["runq_delay_fraction"] = r.train_runq_delay_fraction;
  proc["sys_cpu"] = r.train_sys_cpu;
  proc["minor_faults_per_step"] = r.train_faults_per_step;
  d["training_process"] = std::move(proc);
  Json ranks = Json::array();
  for (const RankStats& k : r.ranks.ranks) {
    Json v = Json::object();
    v["rank"] = k.rank;
    v["local_rank"] = k.local_rank;
    v["world_size"] = k.world_size;
    v["node"] = k.node;
    v["job"] = k.job.empty() ? Json() : Json(k.job);
    v["pid"] = k.pid;
    v["wall_s"] = k.wall_s;
    v["steps"] = k.steps;
    v["samples_per_s"] = k.samples_per_s;
    v["step_time_p50_ms"] = k.step_p50_ms;
    Json stall = Json::object();
    stall["fraction"] = k.stall_fraction;
    Json causes = Json::object();
    for (const auto& [cause, sec] : k.stall_by_cause_s) causes[cause] = sec;
    stall["by_cause"] = std::move(causes);
    v["stall"] = std::move(stall);
    v["collectives"] = k.collectives;
    v["collective_s"] = k.collective_s;
    v["collective_wait_s"] = k.collective_wait_s;
    v["last_at_collectives"] = k.last_at;
    ranks.push_back(std::move(v));
  }
  d["ranks"] = std::move(ranks);
  if (r.ranks.slowest) {
    Json v = Json::object();
    v["rank"] = r.ranks.slowest->rank;
    v["last_at_collectives"] = r.ranks.slowest->last_at;
    v["matched_collectives"] = r.ranks.matched;
    v["lost_s"] = r.ranks.slowest->lost_s;
    d["slowest_rank"] = std::move(v);
  } else {
    d["slowest_rank"] = nullptr;
  }
  d["detail_from_ns"] = r.detail_from_ns;
  if (r.detail_to_ns) d["detail_to_ns"] = r.detail_to_ns;
  d["over_time"] = over_time_json(r.over_time);
  d["notes"] = r.notes;
  return d;
}

}  // namespace stallscope::analysis
