// `stallscope tune`'s analysis; see tune.h.
#include "analysis/tune.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "analysis/dataloader.h"
#include "analysis/report.h"

namespace stallscope::analysis {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::optional<int64_t> whole(const std::string& s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return std::strtoll(s.c_str(), nullptr, 10);
}

std::optional<bool> truth(const std::string& s) {
  if (s == "True" || s == "true" || s == "1") return true;
  if (s == "False" || s == "false" || s == "0") return false;
  return std::nullopt;
}

bool contains(const std::vector<WhatIfCandidate>& v, const LoaderSetting& s) {
  return std::any_of(v.begin(), v.end(), [&](const WhatIfCandidate& c) { return c.setting == s; });
}

}  // namespace

std::optional<LoaderArgs> parse_loader_args(const std::string& text, std::string* error) {
  LoaderArgs a;
  bool have_workers = false;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = trim(text.substr(at, comma - at));
    at = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string key = trim(item.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
    if (key == "num_workers") {
      auto n = whole(value);
      if (!n || *n > 1024) {
        *error = "num_workers='" + value + "': needs a whole number from 0 to 1024";
        return std::nullopt;
      }
      a.num_workers = *n;
      have_workers = true;
    } else if (key == "prefetch_factor") {
      auto n = whole(value);
      if (!n || *n < 1 || *n > 1024) {
        *error = "prefetch_factor='" + value + "': needs a whole number from 1 to 1024";
        return std::nullopt;
      }
      a.prefetch_factor = *n;
    } else if (key == "persistent_workers") {
      auto b = truth(value);
      if (!b) {
        *error = "persistent_workers='" + value + "': needs True or False";
        return std::nullopt;
      }
      a.persistent_workers = *b;
    } else if (key == "torch_threads") {
      auto n = whole(value);
      if (!n || *n < 1 || *n > 1024) {
        *error = "torch_threads='" + value + "': needs a whole number from 1 to 1024";
        return std::nullopt;
      }
      a.torch_threads = *n;
    } else {
      *error = "'" + key + "' is not one of num_workers, prefetch_factor, persistent_workers, torch_threads";
      return std::nullopt;
    }
  }
  if (!have_workers) {
    *error = "needs num_workers=N, e.g. \"num_workers=4, prefetch_factor=4, persistent_workers=True\"";
    return std::nullopt;
  }
  return a;
}

Json loader_args_json(const LoaderArgs& a, int64_t usable_cores) {
  Json j = Json::object();
  j["num_workers"] = a.num_workers;
  if (a.prefetch_factor) j["prefetch_factor"] = *a.prefetch_factor;
  if (a.persistent_workers) j["persistent_workers"] = *a.persistent_workers;
  if (a.torch_threads) j["torch_threads"] = *a.torch_threads;
  j["usable_cores"] = usable_cores;
  j["basis"] = "--loader-args";
  j["exact"] = true;
  return j;
}

LoaderArgs loader_args_of(const LoaderSetting& s) {
  LoaderArgs a;
  a.num_workers = s.num_workers;
  if (s.num_workers > 0) {
    a.prefetch_factor = s.prefetch_factor;
    a.persistent_workers = s.persistent_workers;
  }
  if (s.torch_threads > 0) a.torch_threads = s.torch_threads;
  return a;
}

std::string loader_args_text(const LoaderSetting& s) {
  std::string t = s.arguments();
  if (s.torch_threads > 0) t += ", torch_threads=" + std::to_string(s.torch_threads);
  return t;
}

std::optional<LoaderSetting> one_thread_trial(const WhatIf& w, const LoaderSetting& best) {
  if (!w.available || best.torch_threads > 0) return std::nullopt;
  if (std::min(w.inputs.torch_threads, w.inputs.usable_cores) <= 1) return std::nullopt;
  LoaderSetting s = best;
  s.torch_threads = 1;
  return s;
}

std::optional<WhatIfCandidate> predicted(const WhatIf& w, const LoaderSetting& s) {
  if (!w.available) return std::nullopt;
  for (const WhatIfCandidate& c : w.candidates) {
    if (c.setting == s) return c;
  }
  return what_if_candidate(w, s);  // not among the model's: predicted the same way
}

std::vector<LoaderSetting> worker_neighbours(const LoaderSetting& s, int64_t max_workers) {
  std::vector<LoaderSetting> out;
  for (int64_t n : {s.num_workers - 1, s.num_workers + 1}) {
    if (n < 0 || n > max_workers) continue;
    LoaderSetting t = s;
    t.num_workers = n;
    if (n == 0) {
      t.prefetch_factor = 2;
      t.persistent_workers = false;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<WhatIfCandidate> tune_candidates(const WhatIf& w, size_t max) {
  std::vector<WhatIfCandidate> out;
  if (!w.available || max == 0) return out;
  auto add = [&](const LoaderSetting& s) {
    if (out.size() >= max || s == w.recorded || contains(out, s)) return;
    if (auto c = predicted(w, s)) out.push_back(*c);
  };
  const LoaderSetting advised = w.best ? w.candidates[*w.best].setting : w.recorded;
  add(advised);
  int64_t grid_max = 0;
  for (const WhatIfCandidate& c : w.candidates) grid_max = std::max(grid_max, c.setting.num_workers);
  for (const LoaderSetting& s : worker_neighbours(advised, grid_max)) add(s);
  if (advised.num_workers > 0) {
    LoaderSetting s = advised;
    s.persistent_workers = !s.persistent_workers;
    add(s);
    s = advised;
    s.prefetch_factor = s.prefetch_factor * 2;
    add(s);
  }
  std::vector<WhatIfCandidate> rest = w.candidates;
  std::stable_sort(rest.begin(), rest.end(), [](const WhatIfCandidate& a, const WhatIfCandidate& b) {
    return a.samples_per_s > b.samples_per_s;
  });
  for (const WhatIfCandidate& c : rest) add(c.setting);
  std::stable_sort(out.begin(), out.end(), [](const WhatIfCandidate& a, const WhatIfCandidate& b) {
    return a.samples_per_s > b.samples_per_s;
  });
  return out;
}

std::vector<LoaderSetting> sweep_settings(int64_t max_workers) {
  std::vector<LoaderSetting> out;
  out.push_back(LoaderSetting{});
  for (int64_t n = 1; n <= max_workers; ++n) {
    for (int64_t pf : {int64_t{2}, int64_t{4}}) {
      for (bool persistent : {false, true}) {
        LoaderSetting s;
        s.num_workers = n;
        s.prefetch_factor = pf;
        s.persistent_workers = persistent;
        out.push_back(s);
      }
    }
  }
  return out;
}

SteadyFigures steady_figures(const DataLoaderModel& m, const Report& r, int64_t warmup, int64_t max_steps) {
  SteadyFigures f;
  const LoaderStats* l = r.loader();
  if (!l || r.steps <= 0) return f;
  f.samples_per_step = r.samples > 0 ? static_cast<double>(r.samples) / static_cast<double>(r.steps) : 0;
  std::vector<const NextCall*> handed;
  for (const NextCall& c : m.next_calls) {
    if (c.loader == l->id && c.handed()) handed.push_back(&c);
  }
  std::sort(handed.begin(), handed.end(), [](const NextCall* a, const NextCall* b) { return a->end_ns < b->end_ns; });
  if (handed.size() < 2) return f;
  // At least one step measured: a run shorter than the warm-up keeps its last step.
  f.warmup = std::clamp<int64_t>(warmup, 1, static_cast<int64_t>(handed.size()) - 1);
  const int64_t t0 = handed[static_cast<size_t>(f.warmup) - 1]->end_ns;
  f.steps = std::min<int64_t>(static_cast<int64_t>(handed.size()) - f.warmup, std::max<int64_t>(max_steps, 1));
  const int64_t t1 = handed[static_cast<size_t>(f.warmup + f.steps) - 1]->end_ns;
  f.window_s = static_cast<double>(t1 - t0) * 1e-9;
  if (f.window_s <= 0) return f;
  f.samples_per_s = rate(static_cast<double>(f.steps) * f.samples_per_step, f.window_s);
  double waited = 0;
  for (const NextCall& c : m.next_calls) {
    if (c.loader != l->id || !c.ended) continue;
    const int64_t a = std::max(c.start_ns, t0), b = std::min(c.end_ns, t1);
    if (b > a) waited += static_cast<double>(b - a) * 1e-9;
  }
  f.stall = std::min(1.0, waited / f.window_s);
  return f;
}

LiveRate live_rate(const std::vector<int64_t>& v, int64_t warmup) {
  LiveRate r;
  const int64_t first = std::max<int64_t>(warmup, 1);  // the warm-up's last batch starts the clock
  const int64_t n = static_cast<int64_t>(v.size());
  if (n <= first + 1) return r;
  r.steps = n - first;
  const int64_t t0 = v[static_cast<size_t>(first - 1)];
  const double span = static_cast<double>(v.back() - t0) * 1e-9;
  if (span <= 0) return r;
  r.steps_per_s = static_cast<double>(r.steps) / span;
  const int64_t blocks = std::min<int64_t>(8, r.steps / 2);
  if (blocks < 3) return r;
  const int64_t per = r.steps / blocks;  // the last few steps beyond blocks x per are left out
  double sum = 0, sum2 = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t from = v[static_cast<size_t>(first - 1 + b * per)];
    const int64_t to = v[static_cast<size_t>(first - 1 + (b + 1) * per)];
    const double s = static_cast<double>(to - from) * 1e-9;
    const double rate = s > 0 ? static_cast<double>(per) / s : 0;
    if (rate <= 0) return r;  // a block with no time: no confidence
    sum += rate;
    sum2 += rate * rate;
  }
  const double k = static_cast<double>(blocks);
  const double mean = sum / k;
  const double var = std::max(0.0, (sum2 - sum * sum / k) / (k - 1));
  r.rel_se = std::sqrt(var / k) / mean;
  return r;
}

bool cannot_win(const LiveRate& r, double best_steps_per_s, double margin) {
  if (r.steps_per_s <= 0 || best_steps_per_s <= 0 || r.rel_se >= 1) return false;
  return r.steps_per_s * (1 + 2 * r.rel_se) < best_steps_per_s * (1 - margin);
}

}  // namespace stallscope::analysis
