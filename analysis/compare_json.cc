// A comparison as a JSON document (schema "stallscope.compare/1"); fields are documented in
// docs/report.md, "compare". Unknown values are null, never omitted.
#include "analysis/compare.h"

namespace stallscope::analysis {
namespace {

Json side_json(const CompareSide& s) {
  Json d = Json::object();
  d["source"] = s.source;
  d["command"] = s.command.empty() ? Json() : Json(s.command);
  d["mode"] = s.mode;
  d["complete"] = s.complete;
  d["dataloader_seen"] = s.dataloader_seen;
  d["wall_s"] = s.wall_s;
  d["steps"] = s.steps;
  d["samples"] = s.samples;
  d["samples_per_step"] = s.samples_per_step;
  d["samples_per_s"] = s.samples_per_s;

  Json st = Json::object();
  st["p50"] = s.step_time.p50_ms;
  st["p90"] = s.step_time.p90_ms;
  st["p99"] = s.step_time.p99_ms;
  st["mean"] = s.step_time.mean_ms;
  st["mean_se"] = s.step_noise ? Json(s.step_noise->se) : Json();
  st["blocks"] = s.step_noise ? Json(s.step_noise->blocks) : Json();
  st["block_length"] = s.step_noise ? Json(s.step_noise->block_length) : Json();
  d["step_time_ms"] = std::move(st);

  Json stall = Json::object();
  stall["fraction"] = s.stall_fraction;
  Json causes = Json::object();
  for (const auto& [cause, f] : s.stall_by_cause) causes[cause] = f;
  stall["by_cause"] = std::move(causes);
  d["stall"] = std::move(stall);
  d["compute_per_step_ms"] = s.compute_per_step_ms;

  if (s.loader.present) {
    Json l = Json::object();
    l["kind"] = s.loader.kind;
    l["batch_size"] = s.loader.batch_size;
    l["num_workers"] = s.loader.num_workers;
    l["prefetch_factor"] = s.loader.prefetch_factor;
    l["pin_memory"] = s.loader.pin_memory;
    l["persistent_workers"] = s.loader.persistent_workers;
    l["dataset_len"] = s.loader.dataset_len;
    d["loader"] = std::move(l);
  } else {
    d["loader"] = nullptr;
  }

  Json q = Json::object();
  q["available"] = s.queue.available;
  q["mean_ready"] = s.queue.mean_ready;
  q["empty_fraction"] = s.queue.empty_fraction;
  d["queue"] = std::move(q);

  Json w = Json::object();
  w["count"] = s.workers.count;
  w["threads"] = s.workers.threads;
  w["busy_fraction"] = s.workers.busy_fraction;
  w["fetch_p50_ms"] = s.workers.fetch_p50_ms;
  w["fetch_p99_ms"] = s.workers.fetch_p99_ms;
  w["cpu_util"] = s.workers.cpu_util;
  d["workers"] = std::move(w);

  Json recs = Json::array();
  for (const CompareSide::Rec& r : s.recommendations) {
    Json x = Json::object();
    x["id"] = r.id;
    x["severity"] = r.severity;
    x["action"] = r.action;
    recs.push_back(std::move(x));
  }
  d["recommendations"] = std::move(recs);
  return d;
}

}  // namespace

Json to_json(const Comparison& c) {
  Json d = Json::object();
  d["schema"] = c.schema;
  d["verdict"] = c.verdict;
  d["verdict_text"] = c.verdict_text;
  if (c.ratio) {
    Json r = Json::object();
    r["samples_per_s"] = c.ratio->value;
    r["half_width"] = c.ratio->half_width;
    r["low"] = c.ratio->low;
    r["high"] = c.ratio->high;
    r["confidence"] = kCompareConfidence;
    r["dof"] = c.ratio->dof;  // infinite (noiseless runs): written as null
    r["run_to_run_sd"] = c.ratio->run_to_run_sd;
    d["ratio"] = std::move(r);
  } else {
    d["ratio"] = nullptr;
  }
  Json problems = Json::array();
  for (const CompareProblem& p : c.problems) {
    Json x = Json::object();
    x["id"] = p.id;
    x["blocking"] = p.blocking;
    x["message"] = p.message;
    problems.push_back(std::move(x));
  }
  d["problems"] = std::move(problems);
  d["a"] = side_json(c.a);
  d["b"] = side_json(c.b);
  return d;
}

}  // namespace stallscope::analysis
