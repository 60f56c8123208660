// Text renderings of a Report: the full `stallscope report` page and the short end-of-run summary.
#include <algorithm>
#include <cstdio>

#include "analysis/format.h"
#include "analysis/report.h"
#include "common/units.h"

namespace stallscope::analysis {
namespace {

constexpr size_t kMaxWorkerRows = 16;
// The text shows the run over time from a window this long on (seconds).
constexpr double kOverTimeMinWindowS = 60;

std::string yes_no(const std::optional<bool>& b) { return b ? (*b ? "true" : "false") : "?"; }
std::string num(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "?"; }

// pin_memory as asked, and when torch ignored it (no accelerator to pin for) that it had no effect:
// "pin_memory true" alone reads as pinned batches on a CPU-only run.
std::string pin_text(const LoaderConfig& c) {
  std::string s = "pin_memory " + yes_no(c.pin_memory);
  if (c.pin_memory.value_or(false) && c.pin_memory_effective == false) s += " (no effect: no GPU)";
  return s;
}

std::string loader_line(const LoaderStats& l) {
  const LoaderConfig& c = l.config;
  if (c.kind == vocab::kLoaderReference) {
    return "stallscope.ReferenceLoader, batch_size " + num(c.batch_size) + ", " + num(l.num_workers) + " threads";
  }
  std::string s = c.kind == vocab::kLoaderTuned ? "torch DataLoader, tuned: " : "";
  s += "batch_size " + num(c.batch_size) + ", num_workers " + num(l.num_workers);
  if (l.has_config && l.num_workers.value_or(0) == 0) {
    s += ", " + pin_text(c);
  } else if (l.has_config) {
    s += ", persistent_workers " + yes_no(c.persistent_workers) + ", prefetch_factor " + num(c.prefetch_factor) + ", " +
         pin_text(c);
    if (c.start_method) s += ", start_method " + *c.start_method;
  }
  return s;
}

// What `stallscope run --loader tuned|reference` did to the script's DataLoader, from dl.config's
// "replaced" (docs/report.md, "Loader swap"): the settings it changed, those it kept and why, the
// reason a reference loader fell back; nothing for a loader left as the script made it.
std::string swap_lines(const LoaderConfig& c) {
  const Json* rep = c.doc.is_object() && c.doc.contains("replaced") ? &c.doc["replaced"] : nullptr;
  if (rep == nullptr || !rep->is_object()) return "";
  auto text = [](const Json& v) { return v.is_null() ? std::string("-") : v.dump(); };
  std::string o;
  const Json& settings = rep->contains("settings") ? (*rep)["settings"] : Json();
  if (c.kind == vocab::kLoaderReference) {
    std::string s;
    if (settings.is_object()) {
      for (const auto& [k, v] : settings.items()) s += (s.empty() ? "" : ", ") + k + " " + text(v);
    }
    o +=
        wrap("  --loader reference, in place of the script's DataLoader" + (s.empty() ? "" : ": " + s), 100, "      ") +
        "\n";
  } else if (c.kind == vocab::kLoaderTuned) {
    std::string s;
    if (rep->contains("changed") && (*rep)["changed"].is_object()) {
      for (const auto& [k, v] : (*rep)["changed"].items()) {
        const Json was = settings.is_object() && settings.contains(k) ? settings[k] : Json();
        s += (s.empty() ? "" : ", ") + k + " " + text(was) + " -> " + text(v);
      }
    }
    o += wrap("  --loader tuned " + (s.empty() ? "left the script's settings as they were" : "changed " + s), 100,
              "      ") +
         "\n";
  }
  if (rep->contains("kept") && (*rep)["kept"].is_object()) {
    for (const auto& [k, v] : (*rep)["kept"].items()) {
      o += wrap("  kept " + k + " as the script had it: " + (v.is_string() ? v.get<std::string>() : v.dump()), 100,
                "      ") +
           "\n";
    }
  }
  if (rep->contains("fallback") && (*rep)["fallback"].is_string()) {
    o += wrap("  --loader reference fell back to " + c.kind + ": " + (*rep)["fallback"].get<std::string>(), 100,
              "      ") +
         "\n";
  }
  return o;
}

// The what-if model's table: the recorded setting, the best, and the others it tried (at most
// kMaxWhatIfRows), then what bounds the loop and the assumptions.
constexpr size_t kMaxWhatIfRows = 12;
std::string whatif_lines(const Report& r) {
  const WhatIf& w = r.whatif;
  std::string o = "\nWhat-if (model of the training loader; docs/report.md)\n";
  if (!w.available) return o + "  not available: " + w.why_not + "\n";
  o += "  confidence " + w.confidence + ": on the recorded setting it predicts " +
       fixed(w.predicted_recorded_samples_per_s, 1) + " samples/s against " + fixed(w.measured_samples_per_s, 1) +
       " measured (" + (w.fit_error >= 0 ? "+" : "") + fixed(100 * w.fit_error, 1) + "%)\n";
  o += "  " + pad("setting", 64) + pad("samples/s", 11, true) + pad("stall", 8, true) + pad("step", 10, true) + "\n";
  // The recorded setting, then the best one's prefetch and persistence at every worker count.
  std::vector<size_t> rows;
  const LoaderSetting* best = w.best ? &w.candidates[*w.best].setting : nullptr;
  for (size_t i = 0; i < w.candidates.size(); ++i) {
    const LoaderSetting& st = w.candidates[i].setting;
    if (w.candidates[i].recorded || !best ||
        (st.num_workers == 0 ||
         (st.prefetch_factor == best->prefetch_factor && st.persistent_workers == best->persistent_workers))) {
      rows.push_back(i);
    }
  }
  std::stable_sort(rows.begin() + 1, rows.end(), [&](size_t a, size_t b) {
    return w.candidates[a].setting.num_workers < w.candidates[b].setting.num_workers;
  });
  bool starred = false;
  for (size_t k = 0; k < rows.size() && k < kMaxWhatIfRows; ++k) {
    const size_t i = rows[k];
    const WhatIfCandidate& c = w.candidates[i];
    const std::string tag = c.recorded ? " (recorded)" : (w.best && *w.best == i ? " (best)" : "");
    o += "  " + pad(c.setting.arguments() + tag, 64) +
         pad((c.uncertain ? "*" : "") + fixed(c.samples_per_s, 1), 11, true) + pad(percent(c.stall, 0), 8, true) +
         pad(duration_ms(c.steady_step_ms), 10, true) + "\n";
    starred |= c.uncertain;
  }
  if (w.candidates.size() > std::min(rows.size(), kMaxWhatIfRows)) {
    o += "  ... " + std::to_string(w.candidates.size() - std::min(rows.size(), kMaxWhatIfRows)) +
         " more settings were tried (see --json)\n";
  }
  if (starred) {
    o += wrap("  * uncertain: beside workers that keep more threads runnable than there are cores, torch's " +
                  std::to_string(w.inputs.torch_threads) +
                  " intra-op threads wait for each other at every parallel region, for as long as the scheduler "
                  "decides; the model takes the regions to gain nothing from the threads there",
              100, "    ") +
         "\n";
  }
  const bool advised = w.loader_advised;
  // Beside workers that keep more threads runnable than there are cores, the DataLoader setting is
  // advised with torch on one thread, not alone (recommend.cc, docs/report.md).
  const bool together = loader_with_one_thread(w);
  if (together) {
    const WhatIfCandidate& t = w.thread_candidates[*w.threads_best];
    const double rec = w.candidates.front().samples_per_s;
    const WhatIfCandidate& b = w.candidates[*w.best];
    o += wrap("  advised: " + t.setting.arguments() + " with torch.set_num_threads(1), predicted " +
                  fixed(t.samples_per_s, 1) + " samples/s (" + fixed(rec > 0 ? t.samples_per_s / rec : 1, 2) + "x)" +
                  (b.recorded ? std::string()
                              : "; on torch's " + std::to_string(w.inputs.torch_threads) + " threads the best, " +
                                    b.setting.arguments() + " (" + fixed(w.best_gain, 2) +
                                    "x), rests on the scheduler beside these busy workers and is not advised alone"),
              100, "    ") +
         "\n";
  } else {
    const bool held_back = !advised && w.best && !w.candidates[*w.best].recorded && w.best_gain >= w.min_gain;
    o += wrap(advised ? "  advised: " + w.candidates[*w.best].setting.arguments() + ", predicted " +
                            fixed(w.best_gain, 2) + "x"
              : held_back ? "  not advised: the best, " + w.candidates[*w.best].setting.arguments() + " (" +
                                fixed(w.best_gain, 2) +
                                "x), is uncertain beside busy workers, and at the low end of its range it does "
                                "not gain " +
                                percent(w.min_gain - 1, 0) + " (the least gain worth a change)"
                          : "  no setting is predicted to gain " + percent(w.min_gain - 1, 0) +
                                " or more (the least gain worth a change: 5% plus the model's fit error)",
              100, "    ") +
         "\n";
  }
  if (w.threads_best && !together) {
    const WhatIfCandidate& t = w.thread_candidates[*w.threads_best];
    o += wrap("  with torch.set_num_threads(1): " + t.setting.arguments() + ", predicted " + fixed(t.samples_per_s, 1) +
                  " samples/s (" + fixed(w.threads_gain, 2) +
                  "x the advised setting alone; the step's CPU all on one thread)",
              100, "    ") +
         "\n";
  }
  if (!w.about_the_same.empty()) {
    constexpr size_t kListed = 4;
    std::string list;
    for (size_t i = 0; i < w.about_the_same.size() && i < kListed; ++i) {
      const WhatIfCandidate& c = w.about_the_same[i];
      list += (i ? "; " : "") + c.setting.arguments() +
              (c.setting.torch_threads == 1 ? " with torch.set_num_threads(1)" : std::string()) + " (" +
              fixed(c.samples_per_s, 1) + ")";
    }
    if (w.about_the_same.size() > kListed) {
      list += "; " + std::to_string(w.about_the_same.size() - kListed) + " more (--json)";
    }
    o += wrap("  about the same as the " + std::string(w.advised.recorded ? "recorded setting" : "advice") +
                  " (within " + percent(w.about_the_same_within, 0) +
                  ", what the model cannot tell apart: 5% plus its fit error): " + list,
              100, "    ") +
         "\n";
  }
  o += wrap("  what bounds the loop: " + w.bound_text, 100, "    ") + "\n";
  for (const std::string& a : w.assumptions) o += wrap("  assumes: " + a, 100, "    ") + "\n";
  return o;
}

}  // namespace

namespace {

// The Ranks section of a multi-rank job: each rank's figures, and the rank the others wait for.
std::string rank_lines(const Report& r) {
  if (r.ranks.ranks.empty()) return "";
  std::string o = "\nRanks\n";
  o += "  rank  node              steps   samples/s   stall   in collectives   waiting there   last at\n";
  for (const RankStats& k : r.ranks.ranks) {
    o += "  " + pad(std::to_string(k.rank), 4, true) + "  " + pad(k.node.substr(0, 16), 16, false) +
         pad(grouped(k.steps), 7, true) +
         pad(or_dash(k.samples_per_s, [](double v) { return fixed(v, 1); }), 12, true) +
         pad(percent(k.stall_fraction), 8, true) + pad(fixed(k.collective_s, 2) + " s", 17, true) +
         pad(fixed(k.collective_wait_s, 2) + " s", 16, true) + pad(grouped(k.last_at), 10, true) + "\n";
  }
  if (r.ranks.slowest) {
    o += wrap("  slowest rank: " + std::to_string(r.ranks.slowest->rank) + ", the last to arrive at " +
                  grouped(r.ranks.slowest->last_at) + " of " + grouped(r.ranks.matched) +
                  " collectives; the job lost " + fixed(r.ranks.slowest->lost_s, 2) +
                  " s waiting for it (its arrival less the next-latest rank's, where it was last)",
              100, "    ") +
         "\n";
  } else {
    o += "  no collective was recorded on every rank: the slowest rank is not known\n";
  }
  return o;
}

// A period's bound: m:ss, or h:mm:ss when the table reaches an hour.
std::string period_clock(int64_t ns, bool hours) {
  const int64_t s = std::max<int64_t>(0, ns) / 1'000'000'000;
  char buf[48];
  if (hours) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

// "10 s", "5 min", "2 h", "1 d": a period's length (one of choose_period()'s).
std::string period_length(int64_t ns) {
  const int64_t s = ns / 1'000'000'000;
  if (s % 86400 == 0) return std::to_string(s / 86400) + " d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + " h";
  if (s % 60 == 0) return std::to_string(s / 60) + " min";
  return std::to_string(s) + " s";
}

// The training loader per period of the window (over_time.h): in the text from a window of a
// minute on, where whole-run means start to hide when things changed; the JSON has it always.
std::string over_time_lines(const Report& r) {
  const OverTime& ot = r.over_time;
  if (!ot.available || ot.periods.empty() || r.wall_s < kOverTimeMinWindowS) return "";
  std::string o = "\nOver time (training loader " + std::to_string(ot.loader) + ", per " + period_length(ot.period_ns) +
                  ", from the recording's summaries)\n";
  const bool hours = ot.periods.back().t1_ns >= int64_t{3600} * 1'000'000'000;
  // The hand-off columns where the recording has handoff_summaries.
  const bool handoffs = ot.total.batches.has_value();
  const bool queue = ot.total.queue.has_value();  // where the loader has workers and queue_summaries
  o += "  " + pad("period", 24) + pad("next() calls", 13, true) + pad("waiting", 9, true) + pad("steps", 10, true) +
       (handoffs ? pad("samples/s", 11, true) + pad("step p50", 11, true) : std::string()) +
       (queue ? pad("ready", 7, true) : std::string()) + pad("fetch p50", 11, true) + pad("fetch p99", 11, true) + "\n";
  auto row = [&](const std::string& what, const OverTimePeriod& p) {
    o += "  " + pad(what, 24) + pad(grouped(p.next_calls), 13, true) + pad(percent(p.wait_fraction()), 9, true) +
         pad(grouped(p.steps), 10, true) +
         (handoffs ? pad(or_dash(p.samples_per_s(), [](double v) { return fixed(v, 1); }), 11, true) +
                         pad(or_dash(p.step_p50_ms, duration_ms), 11, true)
                   : std::string()) +
         (queue ? pad(p.queue ? fixed(p.queue->ready_mean(), 1) : std::string("-"), 7, true) : std::string()) +
         pad(or_dash(p.fetch_p50_ms, duration_ms), 11, true) + pad(or_dash(p.fetch_p99_ms, duration_ms), 11, true) +
         "\n";
  };
  for (const OverTimePeriod& p : ot.periods)
    row(period_clock(p.t0_ns, hours) + " - " + period_clock(p.t1_ns, hours), p);
  if (ot.periods.size() > 1) row("whole run", ot.total);
  o += "  (a next() call counts in the period it started in; fetch times of the worker processes, within 1 %)\n";
  if (queue)
    o += "  (ready: batches put by the workers and not yet handed to the loop, on average over its active time)\n";
  return o;
}

// [SECTION] the first screen: what was lost, to what, and what to do
const char* cause_words(const std::string& cause) {
  if (cause == kCauseDataWait) return "waiting in next() for batches";
  if (cause == kCauseLoaderStart) return "starting the loader (DataLoader.__iter__)";
  if (cause == kCauseH2d) return "host-to-device copies";
  if (cause == kCauseSync) return "the host synchronising with the GPU";
  if (cause == kCauseHostOther) return "other host work";
  return "other";
}

// One line: how much of the window was lost, and to what, largest cause first.
std::string lost_line(const Report& r) {
  std::vector<std::pair<double, std::string>> causes;
  for (const auto& [cause, sec] : r.stall.by_cause_s) {
    if (sec > 0) causes.emplace_back(sec, cause);
  }
  std::stable_sort(causes.begin(), causes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string to;
  for (const auto& [sec, cause] : causes) to += (to.empty() ? "" : ", ") + fixed(sec, 3) + " s " + cause_words(cause);
  const std::string who = r.mode == vocab::kModeCpu ? "the training loop waited" : "the GPU sat idle";
  return "Lost: " + percent(r.stall.fraction) + " of the " + fixed(r.wall_s, 3) + " s training window, " + who + " " +
         fixed(r.stall.seconds, 3) + " s" + (to.empty() ? std::string() : ": " + to) +
         (r.data_bound ? std::string()
                       : " (not data-bound: the loop waits for input " + percent(r.input_wait_fraction) +
                             " of the window, under " + percent(kDataBoundFraction, 0) + ")");
}

// "What to do": the numbered actions, a line each, then each one's why.
std::string plan_lines(const Report& r) {
  std::string o = "\nWhat to do (predicted speed-up: the what-if model, docs/report.md)\n";
  if (r.actions.empty()) {
    o += r.data_bound ? "  nothing the recording points to: no change is predicted to gain enough\n"
                      : "  nothing for the input pipeline: it is not the bottleneck\n";
    return o;
  }
  size_t width = 0;
  for (const Action& a : r.actions) width = std::max(width, a.line.size());
  width = std::min<size_t>(width, 64);
  for (size_t i = 0; i < r.actions.size(); ++i) {
    const Action& a = r.actions[i];
    o += "  " + std::to_string(i + 1) + ". " + pad(a.line, width) + "   " + a.gain_text + "\n";
  }
  o += "Why\n";
  for (size_t i = 0; i < r.actions.size(); ++i) {
    const std::string num = std::to_string(i + 1) + ". ";
    for (size_t k = 0; k < r.actions[i].why.size(); ++k) {
      o += "  " + (k == 0 ? num : std::string(num.size(), ' ')) + r.actions[i].why[k] + "\n";
    }
  }
  o += "  (the evidence for each: stallscope report --explain " + r.source + "; every figure: --json)\n";
  return o;
}

}  // namespace

std::string render_text(const Report& r, const TextOptions& options) {
  std::string o;
  o += "stallscope report: " + r.source + (r.complete ? "" : "  (not finished: live or cut short)") + "\n";
  if (!r.dataloader_seen || r.steps == 0) {
    o += "\n";
    for (const std::string& n : r.notes) o += wrap("note: " + n, 100, "      ") + "\n";
    if (r.notes.empty()) o += "no DataLoader was seen\n";
    if (!r.recommendations.empty()) {
      o += "\nRecommendations\n";
      for (const Recommendation& rec : r.recommendations) {
        o += wrap("  [" + rec.severity + "] " + rec.id + ": " + rec.message, 100, "      ") + "\n";
      }
    }
    return o;
  }
  o += lost_line(r) + "\n";
  o += "Now:  " + or_dash(r.samples_per_s, [](double v) { return fixed(v, 1); }) + " samples/s, " + grouped(r.steps) +
       " steps, step p50 " + or_dash(r.step_time.p50_ms, duration_ms) + " (compute " +
       duration_ms(r.compute_per_step_ms) + " a step)\n";
  o += plan_lines(r);
  o += "\n";
  if (const LoaderStats* tl = r.loader()) {
    const char* by = r.main_loader_by == "optimizer_steps" ? "its batches fed the optimizer steps"
                     : r.main_loader_by == "framework"     ? "the framework made it for training"
                                                           : "it handed the most batches";
    o += "  Training loader  " + std::to_string(tl->id) + ": " + tl->name + "   (" + by + ")\n";
  }
  o += "  Training window  " + fixed(r.wall_s, 3) + " s   (mode: " + r.mode + ", training process pid " +
       std::to_string(r.train_pid) + ")" +
       (r.detail_to_ns ? "   the part from " + clock_time(r.detail_from_ns.value_or(0), 0) + " to " +
                             clock_time(*r.detail_to_ns, 0)
        : r.detail_from_ns ? "   the latest part, from " + clock_time(*r.detail_from_ns, 0)
                           : std::string()) +
       "\n";
  o += "  Steps            " + grouped(r.steps) + "   samples " + grouped(r.samples) + "   " +
       or_dash(r.samples_per_s, [](double v) { return fixed(v, 1); }) + " samples/s\n";
  if (r.mode == vocab::kModeGpu) {
    o += "  GPU busy         " + percent(r.gpu.busy_fraction) + " of the window (device " +
         std::to_string(r.gpu.device) + ")\n";
    o += "  GPU stall        " + percent(r.stall.fraction) + " of the window idle (" + fixed(r.stall.seconds, 3) +
         " s):";
    for (const auto& [cause, sec] : r.stall.by_cause_s) {
      if (sec > 0) o += " " + cause + " " + fixed(sec, 3) + " s";
    }
    o += std::string(r.data_bound ? "" : "  - not data-bound") + "\n";
    auto copies = [](const char* what, const CopyStats& c) {
      return std::string(what) + " " + bytes_text(static_cast<double>(c.bytes)) + " in " + std::to_string(c.count) +
             " copies" + (c.gbps ? " at " + fixed(*c.gbps, 2) + " GB/s" : "");
    };
    o += "  Host->device     " + copies("pinned", r.gpu.h2d_pinned) + "; " + copies("pageable", r.gpu.h2d_pageable) +
         "\n";
  } else if (r.mode == vocab::kModeGpuLight) {
    const GpuLightStats& g = r.gpu_light;
    auto cause_s = [&r](const char* c) {
      auto it = r.stall.by_cause_s.find(c);
      return it == r.stall.by_cause_s.end() ? 0.0 : it->second;
    };
    o += "  GPU stall        " + percent(r.stall.fraction) + " of the window (" + fixed(r.stall.seconds, 3) +
         " s: idle while waiting in next() " + fixed(cause_s(kCauseDataWait), 3) + " s of the loop's " +
         fixed(g.host_wait_s, 3) + " s there, starting the loader " + fixed(cause_s(kCauseLoaderStart), 3) + " s)" +
         (r.data_bound ? "" : "  - not data-bound") + "\n";
    o += "  GPU marks        light mode: " + grouped(g.calls_marked) + " of " + grouped(g.calls) +
         " next() calls marked; work still queued on the GPU when next() began: p50 " +
         or_dash(g.queued_p50_ms, duration_ms) + " (kernels and copies not recorded)\n";
  } else {
    auto cause_s = [&r](const char* c) {
      auto it = r.stall.by_cause_s.find(c);
      return it == r.stall.by_cause_s.end() ? 0.0 : it->second;
    };
    o += "  Data stall       " + percent(r.stall.fraction) + " of the window (" + fixed(r.stall.seconds, 3) +
         " s: waiting in next() " + fixed(cause_s(kCauseDataWait), 3) + " s, starting the loader " +
         fixed(cause_s(kCauseLoaderStart), 3) + " s)" + (r.data_bound ? "" : "  - not data-bound") + "\n";
  }
  o += "  Step time        p50 " + or_dash(r.step_time.p50_ms, duration_ms) + "   p90 " +
       or_dash(r.step_time.p90_ms, duration_ms) + "   p99 " + or_dash(r.step_time.p99_ms, duration_ms) +
       "   (compute " + duration_ms(r.compute_per_step_ms) + " per step)\n";
  if (r.train_cpu_util) {
    o += "  Process CPU      " + fixed(*r.train_cpu_util, 2) + " cores" +
         (r.train_sys_cpu ? " (" + fixed(*r.train_sys_cpu, 2) + " in the kernel)" : std::string()) + "   runq " +
         or_dash(r.train_runq_delay_fraction, [](double v) { return percent(v, 0); }) +
         (r.train_faults_per_step
              ? "   page faults " + grouped(static_cast<int64_t>(*r.train_faults_per_step)) + " a step"
              : std::string()) +
         "   (the training process)\n";
  }
  // A long recording read from a later point: the whole run's own figures, from the summaries.
  if (r.detail_from_ns && r.over_time.available && r.over_time.total.t1_ns > r.over_time.total.t0_ns) {
    const OverTimePeriod& w = r.over_time.total;
    o += "  Whole run        " + fixed(w.length_s(), 3) + " s from the summaries: next() calls " +
         grouped(w.next_calls) + ", waiting " + percent(w.wait_fraction()) +
         (w.batches ? ", batches " + grouped(*w.batches) + ", samples " + grouped(w.samples) + " (" +
                          or_dash(w.samples_per_s(), [](double v) { return fixed(v, 1); }) + " samples/s)"
                    : std::string()) +
         "\n";
    // The stall by cause, then the times, on lines of their own under the first's figures.
    if (w.batches) {
      o += std::string(19, ' ') + "data stall " + percent(w.stall_fraction()) + " (waiting in next() " +
           fixed(w.wait_s, 3) + " s, in DataLoader.__iter__ " + fixed(w.start_s, 3) + " s)\n";
    }
    std::vector<std::string> times;
    if (w.step_p50_ms) {
      times.push_back("step p50 " + duration_ms(*w.step_p50_ms) + " p90 " + or_dash(w.step_p90_ms, duration_ms) +
                      " p99 " + or_dash(w.step_p99_ms, duration_ms));
    }
    if (w.steps > 0) times.push_back("optimizer steps " + grouped(w.steps));
    if (w.fetch_p50_ms) {
      times.push_back("fetch p50 " + duration_ms(*w.fetch_p50_ms) + " p99 " + or_dash(w.fetch_p99_ms, duration_ms));
    }
    for (size_t i = 0; i < times.size(); ++i) o += (i == 0 ? std::string(19, ' ') : ", ") + times[i];
    if (!times.empty()) o += "\n";
    if (w.queue && w.queue->covered_ns > 0) {
      const QueuePeriod& q = *w.queue;
      o += std::string(19, ' ') + "queue ready " + fixed(q.ready_mean(), 2) + " batches on average (" +
           std::to_string(q.ready_min) + "-" + std::to_string(q.ready_max) + "), empty " + percent(q.empty_fraction()) +
           " of the time; in flight " + fixed(q.in_flight_mean(), 2) + "\n";
    }
  }
  for (const LoaderStats& l : r.loaders) {
    if (r.main_loader && l.id == *r.main_loader) continue;
    if (l.batches_handed == 0) continue;
    o += "  " + pad(l.role == "eval" ? "Evaluation" : "Other loader", 17) + std::to_string(l.id) + ": " + l.name +
         ": " + grouped(l.batches_handed) + " batches, " + grouped(l.samples) + " samples, waited " +
         fixed(l.wait_s + l.start_s, 3) + " s\n";
  }
  if (r.eval_s > 0) o += "  (evaluation took " + fixed(r.eval_s, 3) + " s of the window; not in the figures above)\n";

  for (const LoaderStats& l : r.loaders) {
    o += "\nLoader " + std::to_string(l.id) + " (" + l.role + "): " + l.name + "\n  " + loader_line(l) + "\n";
    const LoaderConfig& c = l.config;
    o += swap_lines(c);
    if (c.dataset_class || c.created_at) {
      o += "  dataset " + c.dataset_class.value_or("?") + (c.dataset_type ? " (" + *c.dataset_type + ")" : "") +
           (c.dataset_len ? ", " + grouped(*c.dataset_len) + " items" : "") +
           (c.created_at ? ", created at " + *c.created_at : "") + "\n";
    }
    o += "  epochs " + std::to_string(l.epochs) + ", batches handed " + grouped(l.batches_handed) + ", waited " +
         fixed(l.wait_s, 3) + " s, fetch p50 " + or_dash(l.fetch_p50_ms, duration_ms) + " p99 " +
         or_dash(l.fetch_p99_ms, duration_ms);
    if (l.workers_busy_fraction) o += ", workers busy " + percent(*l.workers_busy_fraction);
    o += "\n";
    if (l.stages.batches > 0) {
      const double total = l.stages.read_s + l.stages.decode_s + l.stages.augment_s;
      auto share = [&](double x) { return total > 0 ? percent(x / total, 0) : std::string("-"); };
      o += "  fetch time by stage: read " + fixed(l.stages.read_s, 3) + " s (" + share(l.stages.read_s) + "), decode " +
           fixed(l.stages.decode_s, 3) + " s (" + share(l.stages.decode_s) + "), augment " +
           fixed(l.stages.augment_s, 3) + " s (" + share(l.stages.augment_s) + ")\n";
    }
    if (l.epoch_start_s.size() > 1 || l.respawned_epochs > 0) {
      o += "  epoch start (epoch_begin -> first batch):";
      for (size_t i = 0; i < l.epoch_start_s.size() && i < 8; ++i) {
        o += ' ';  // appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) on " " + fixed(...)
        o += fixed(l.epoch_start_s[i], 3);
        o += 's';
      }
      if (l.epoch_start_s.size() > 8) o += " ...";
      o += "\n";
    }
  }

  o += "\nQueue (main loader)\n";
  if (r.queue.available) {
    o += "  ready " + fixed(*r.queue.mean_ready, 2) + " batches on average (max " + num(r.queue.max_ready) +
         "), empty " + percent(*r.queue.empty_fraction) + " of the time; in flight " +
         fixed(r.queue.mean_in_flight.value_or(0), 2) + "\n";
  } else {
    o += "  " + (r.queue.note.empty() ? std::string("unknown") : r.queue.note) + "\n";
  }

  o += over_time_lines(r);

  if (!r.workers.empty()) {
    o += "\nWorkers\n";
    o += "  " + pad("pid", 8, true) + pad("loader", 7, true) + pad("worker", 7, true) + pad("epoch", 6, true) +
         pad("start", 8, true) + pad("busy", 6, true) + pad("cpu", 7, true) + pad("runq", 7, true) +
         pad("mem growth", 12, true) + pad("fetch p50", 11, true) + pad("fetch p99", 11, true) +
         pad("batches", 9, true) + "\n";
    for (size_t i = 0; i < r.workers.size() && i < kMaxWorkerRows; ++i) {
      const WorkerStats& w = r.workers[i];
      o +=
          "  " + pad(std::to_string(w.pid), 8, true) + pad(std::to_string(w.loader), 7, true) +
          pad(std::to_string(w.worker_id), 7, true) + pad(std::to_string(w.start_epoch), 6, true) +
          pad(w.ready_seen ? fixed(w.startup_s, 2) + "s" : std::string("-"), 8, true) +
          pad(or_dash(w.busy_fraction, [](double v) { return percent(v, 0); }), 6, true) +
          pad(or_dash(w.cpu_util, [](double v) { return fixed(v, 2); }), 7, true) +
          pad(or_dash(w.runq_delay_fraction, [](double v) { return percent(v, 0); }), 7, true) +
          pad(or_dash(w.private_growth_bytes, [](int64_t v) { return bytes_text(static_cast<double>(v)); }), 12, true) +
          pad(or_dash(w.fetch_p50_ms, duration_ms), 11, true) + pad(or_dash(w.fetch_p99_ms, duration_ms), 11, true) +
          pad(grouped(w.batches), 9, true) + "\n";
    }
    if (r.workers.size() > kMaxWorkerRows) {
      o += "  ... " + std::to_string(r.workers.size() - kMaxWorkerRows) + " more (see --json)\n";
    }
    o += "  (start: birth to ready; busy, cpu (cores used), runq (share of time runnable but waiting for a CPU) and "
         "mem growth (private dirty memory, last - first) over the working life, from ready on)\n";
  }

  o += whatif_lines(r);
  o += rank_lines(r);

  o += "\nRecommendations\n";
  if (r.recommendations.empty()) {
    o += r.data_bound ? "  none\n"
                      : "  none: the loop waits for input " + percent(r.input_wait_fraction) + " of the window (< " +
                            percent(kDataBoundFraction, 0) + "), so the input pipeline is not the bottleneck\n";
  }
  for (const Recommendation& rec : r.recommendations) {
    const std::string text = options.explain || rec.action.empty() ? rec.message : rec.action;
    o += wrap("  [" + rec.severity + "] " + rec.id + ": " + text, 100, "      ") + "\n";
  }
  if (!r.recommendations.empty() && !options.explain) {
    o += "  (each one's measurements and reasoning: stallscope report --explain)\n";
  }
  if (!r.notes.empty()) {
    o += "\nNotes\n";
    for (const std::string& n : r.notes) o += wrap("  - " + n, 100, "    ") + "\n";
  }
  return o;
}

std::string short_summary(const Report& r) {
  std::string o;
  if (!r.dataloader_seen || r.steps == 0) {
    o += "stallscope: no DataLoader training loop was seen in this recording\n";
  } else {
    o += "stallscope: " + fixed(r.wall_s, 1) + " s of training" +
         (r.detail_from_ns ? " (the latest, from " + clock_time(*r.detail_from_ns, 0) + ")" : "") + ", " +
         grouped(r.steps) + " steps, " + or_dash(r.samples_per_s, [](double v) { return fixed(v, 1); }) +
         " samples/s\n";
    if (r.mode == vocab::kModeGpu) {
      o += "stallscope:   GPU busy " + percent(r.gpu.busy_fraction) + ", idle " + percent(r.stall.fraction) +
           " (waiting for data " + percent(r.data_wait_fraction()) + ", transfers " +
           percent(r.cause_fraction(kCauseH2d)) + ", syncs " + percent(r.cause_fraction(kCauseSync)) + ")\n";
    } else if (r.mode == vocab::kModeGpuLight) {
      o += "stallscope:   GPU idle waiting for data " + percent(r.stall.fraction) + " of the time (light GPU mode)" +
           (r.data_bound ? "" : " (not data-bound)") + "; step time p50 " + or_dash(r.step_time.p50_ms, duration_ms) +
           "\n";
    } else {
      o += "stallscope:   data stall " + percent(r.stall.fraction) + " of the time" +
           (r.data_bound ? "" : " (not data-bound)") + "; step time p50 " + or_dash(r.step_time.p50_ms, duration_ms) +
           "\n";
    }
  }
  const size_t shown = std::min<size_t>(r.recommendations.size(), 2);
  for (size_t i = 0; i < shown; ++i) {
    const Recommendation& rec = r.recommendations[i];
    o += "stallscope:   [" + rec.severity + "] " + rec.id + (rec.action.empty() ? "" : ": " + rec.action) + "\n";
  }
  if (!r.source.empty()) o += "stallscope:   details: stallscope report " + r.source + "\n";
  return o;
}

}  // namespace stallscope::analysis
