// A comparison as text for people: the two recordings, the verdict and what qualifies it, then one
// table with A and B side by side (and B against A where a ratio or a difference says something),
// and each run's recommendations.
#include <set>

#include "analysis/compare.h"
#include "analysis/format.h"

namespace stallscope::analysis {
namespace {

constexpr size_t kLabel = 22, kValue = 17, kDelta = 11;
constexpr size_t kWidth = 100;  // wrapped lines

using OptD = std::optional<double>;

std::string row(const std::string& label, const std::string& a, const std::string& b, const std::string& delta = "") {
  std::string s = "  " + pad(label, kLabel) + pad(a, kValue, true) + pad(b, kValue, true);
  if (!delta.empty()) s += pad(delta, kDelta, true);
  return s + "\n";
}

std::string ms(const OptD& v) { return or_dash(v, duration_ms); }
std::string pct(const OptD& v) {
  return or_dash(v, [](double x) { return percent(x); });
}
std::string num(const OptD& v, int digits) {
  return or_dash(v, [digits](double x) { return fixed(x, digits); });
}
std::string count(const std::optional<int64_t>& v) {
  return or_dash(v, [](int64_t x) { return grouped(x); });
}
std::string yes_no(const std::optional<bool>& v) {
  return or_dash(v, [](bool x) { return std::string(x ? "true" : "false"); });
}

// B/A as "0.70x", when both are known and A is not 0.
std::string times(const OptD& a, const OptD& b) {
  if (!a || !b || *a == 0) return "";
  return fixed(*b / *a, 2) + "x";
}
// B - A in percentage points of a fraction: "-30.0 pt".
std::string points(const OptD& a, const OptD& b) {
  if (!a || !b) return "";
  const double d = (*b - *a) * 100.0;
  return (d > 0 ? "+" : "") + fixed(d, 1) + " pt";
}

std::string mean_step(const CompareSide& s) {
  if (!s.step_noise) return ms(s.step_time.mean_ms);
  return fixed(s.step_noise->mean, 1) + " ±" + fixed(s.step_noise->se, s.step_noise->se < 1 ? 2 : 1) + " ms";
}

std::string headline(const char* which, const CompareSide& s) {
  std::string l = std::string("  ") + which + "  " + s.source + (s.complete ? "" : "  (not finished)");
  if (!s.command.empty()) l += "\n     command: " + s.command;
  return l + "\n";
}

std::string recommendations(const char* which, const CompareSide& s) {
  if (s.recommendations.empty()) return std::string("  ") + which + "  none\n";
  std::string o;
  for (const CompareSide::Rec& r : s.recommendations) {
    o +=
        std::string("  ") + which + "  [" + r.severity + "] " + r.id + (r.action.empty() ? "" : ": " + r.action) + "\n";
  }
  return o;
}

}  // namespace

std::string render_text(const Comparison& c) {
  const CompareSide& a = c.a;
  const CompareSide& b = c.b;
  std::string o = "stallscope compare\n";
  o += headline("A", a);
  o += headline("B", b);
  o += "\n" + wrap(c.verdict_text, kWidth, "  ") + "\n";
  for (const CompareProblem& p : c.problems) {
    o += wrap(std::string("  - ") + (p.blocking ? "cannot compare: " : "caution: ") + p.message, kWidth, "    ") + "\n";
  }

  o += "\n" + row("", "A", "B", "B vs A");
  o += row("Training window", fixed(a.wall_s, 3) + " s", fixed(b.wall_s, 3) + " s");
  o += row("Steps", grouped(a.steps), grouped(b.steps));
  o += row("Samples", grouped(a.samples), grouped(b.samples));
  o += row("Samples per step", num(a.samples_per_step, 1), num(b.samples_per_step, 1));
  std::string ratio;
  if (c.ratio) {
    const int d = c.ratio->half_width && *c.ratio->half_width < 0.005 ? 3 : 2;
    ratio = fixed(c.ratio->value, d) + "x";
  }
  o += row("Samples/s", num(a.samples_per_s, 1), num(b.samples_per_s, 1), ratio);
  o += row("Mean step (±se)", mean_step(a), mean_step(b), times(a.step_time.mean_ms, b.step_time.mean_ms));
  const bool gpu = a.mode == vocab::kModeGpu || b.mode == vocab::kModeGpu;
  o += row(gpu ? "Stall (mode " + a.mode + " / " + b.mode + ")" : "Data stall", pct(a.stall_fraction),
           pct(b.stall_fraction), points(a.stall_fraction, b.stall_fraction));
  if (gpu) {
    std::set<std::string> causes;
    for (const auto& [cause, f] : a.stall_by_cause) causes.insert(cause);
    for (const auto& [cause, f] : b.stall_by_cause) causes.insert(cause);
    for (const std::string& cause : causes) {
      auto of = [&](const CompareSide& s) -> OptD {
        auto it = s.stall_by_cause.find(cause);
        return it == s.stall_by_cause.end() ? OptD() : OptD(it->second);
      };
      o += row("  " + cause, pct(of(a)), pct(of(b)), points(of(a), of(b)));
    }
  }
  o += row("Step time p50", ms(a.step_time.p50_ms), ms(b.step_time.p50_ms),
           times(a.step_time.p50_ms, b.step_time.p50_ms));
  o += row("Step time p90", ms(a.step_time.p90_ms), ms(b.step_time.p90_ms),
           times(a.step_time.p90_ms, b.step_time.p90_ms));
  o += row("Step time p99", ms(a.step_time.p99_ms), ms(b.step_time.p99_ms),
           times(a.step_time.p99_ms, b.step_time.p99_ms));
  o += row("Compute per step", ms(a.compute_per_step_ms), ms(b.compute_per_step_ms),
           times(a.compute_per_step_ms, b.compute_per_step_ms));

  o += "\nLoader (main)\n";
  auto kind = [](const CompareSide& s) { return s.loader.present ? s.loader.kind : std::string("-"); };
  o += row("Kind", kind(a), kind(b));
  o += row("Batch size", count(a.loader.batch_size), count(b.loader.batch_size));
  o += row("Workers / threads", count(a.loader.num_workers), count(b.loader.num_workers));
  o += row("Prefetch factor", count(a.loader.prefetch_factor), count(b.loader.prefetch_factor));
  o += row("Pin memory", yes_no(a.loader.pin_memory), yes_no(b.loader.pin_memory));
  o += row("Persistent workers", yes_no(a.loader.persistent_workers), yes_no(b.loader.persistent_workers));

  o += "\nQueue (main loader)\n";
  o += row("Ready, mean", num(a.queue.mean_ready, 2), num(b.queue.mean_ready, 2));
  o += row("Empty", pct(a.queue.empty_fraction), pct(b.queue.empty_fraction),
           points(a.queue.empty_fraction, b.queue.empty_fraction));

  o += "\nWorkers (main loader)\n";
  o += row("Busy", pct(a.workers.busy_fraction), pct(b.workers.busy_fraction),
           points(a.workers.busy_fraction, b.workers.busy_fraction));
  o += row("Fetch p50", ms(a.workers.fetch_p50_ms), ms(b.workers.fetch_p50_ms),
           times(a.workers.fetch_p50_ms, b.workers.fetch_p50_ms));
  o += row("Fetch p99", ms(a.workers.fetch_p99_ms), ms(b.workers.fetch_p99_ms),
           times(a.workers.fetch_p99_ms, b.workers.fetch_p99_ms));
  o += row("CPU per worker", num(a.workers.cpu_util, 2), num(b.workers.cpu_util, 2));

  o += "\nRecommendations\n";
  o += recommendations("A", a);
  o += recommendations("B", b);
  return o;
}

}  // namespace stallscope::analysis
