// GPU mode; see gpu.h.
#include "analysis/gpu.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include "analysis/report.h"

namespace stallscope::analysis {
namespace {

constexpr double kNsPerS = 1e9;

double seconds(int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

void add_copy(CopyStats* c, const GpuActivityRow& g) {
  ++c->count;
  c->bytes += g.bytes;
  c->seconds += seconds(g.dur_ns);
}

void finish_copy(CopyStats* c) {
  if (c->seconds > 0) c->gbps = static_cast<double>(c->bytes) / c->seconds / 1e9;
}

// Complement of merged `busy` inside `window`.
std::vector<Interval> idle_in(const std::vector<Interval>& busy, Interval window) {
  std::vector<Interval> out;
  int64_t t = window.begin;
  for (const Interval& b : busy) {
    if (b.end <= t) continue;
    if (b.begin >= window.end) break;
    if (b.begin > t) out.push_back(Interval{t, std::min(b.begin, window.end)});
    t = std::max(t, b.end);
  }
  if (t < window.end) out.push_back(Interval{t, window.end});
  return out;
}

// Cause rank: lower wins where host activities overlap.
enum Cause : int { kStart = 0, kData = 1, kH2d = 2, kSync = 3, kOther = 4 };
const char* cause_name(int c) {
  switch (c) {
    case kData: return kCauseDataWait;
    case kStart: return kCauseLoaderStart;
    case kH2d: return kCauseH2d;
    case kSync: return kCauseSync;
    default: return kCauseHostOther;
  }
}

struct HostSpan {
  int64_t begin, end;
  int cause;
  const NextCall* next;  // for data_wait: the next() call
};

}  // namespace

GpuStats gpu_stats(const Session& s, const DataLoaderModel& m, Interval window) {
  GpuStats g;
  std::map<int64_t, std::vector<Interval>> busy_by_device;
  std::map<int64_t, GpuDeviceStats> dev;
  for (const GpuActivityRow& a : s.gpu) {
    if (m.train_process_id != 0 && a.process_id != m.train_process_id) continue;
    if (a.kind == "sync" || a.kind == "mark") continue;  // host-side waits and light mode's marks: not GPU work
    g.present = true;
    GpuDeviceStats& d = dev[a.device];
    d.device = a.device;
    const Interval iv{a.start_ns, a.start_ns + a.dur_ns};
    busy_by_device[a.device].push_back(iv);
    if (a.kind == "kernel") {
      ++d.kernels;
      d.kernel_s += seconds(a.dur_ns);
    } else if (a.kind == "memcpy") {
      ++d.copies;
      d.copy_s += seconds(a.dur_ns);
      if (a.copy_kind == "HtoD") {
        add_copy(a.src_kind == "pinned" ? &g.h2d_pinned : a.src_kind == "pageable" ? &g.h2d_pageable : &g.h2d_other, a);
      } else if (a.copy_kind == "DtoH") {
        add_copy(&g.d2h, a);
      }
    }
  }
  if (!g.present) return g;
  finish_copy(&g.h2d_pinned);
  finish_copy(&g.h2d_pageable);
  finish_copy(&g.h2d_other);
  finish_copy(&g.d2h);
  double best = -1;
  for (auto& [id, d] : dev) {
    std::vector<Interval> merged = intersect(merge_intervals(busy_by_device[id]), {window});
    d.busy_s = seconds(total_length(merged));
    d.busy_fraction =
        window.length() > 0 ? static_cast<double>(total_length(merged)) / static_cast<double>(window.length()) : 0;
    if (d.busy_s > best) {
      best = d.busy_s;
      g.device = id;
      g.busy_fraction = d.busy_fraction;
      g.busy = std::move(merged);
    }
    g.devices.push_back(d);
  }
  return g;
}

GpuLightStats attribute_light_stalls(const Session& s, const DataLoaderModel& m, StallStats* stall) {
  GpuLightStats out;
  // next_begin marks of the training process: (recorded, reached), in the order recorded.
  std::vector<std::pair<int64_t, int64_t>> marks;
  for (const GpuActivityRow& a : s.gpu) {
    if (a.kind != "mark" || (m.train_process_id != 0 && a.process_id != m.train_process_id)) continue;
    ++out.marks;
    if (s.string(a.name_id) == "next_begin") marks.emplace_back(a.start_ns, a.start_ns + a.dur_ns);
  }
  std::sort(marks.begin(), marks.end());
  if (out.marks == 0) return out;
  out.present = true;
  // The training thread's next() calls, by start: the one a data_wait interval lies in gives the mark.
  std::vector<const NextCall*> calls;
  for (const NextCall& c : m.next_calls) calls.push_back(&c);
  std::sort(calls.begin(), calls.end(), [](const NextCall* a, const NextCall* b) { return a->start_ns < b->start_ns; });
  std::vector<double> queued_ms;
  std::vector<StallInterval> kept;
  int64_t wait_ns = 0, idle_ns = 0, start_ns = 0;
  for (const StallInterval& iv : stall->intervals) {
    if (iv.cause != std::string_view(kCauseDataWait)) {
      if (iv.cause == std::string_view(kCauseLoaderStart)) start_ns += iv.end_ns - iv.start_ns;
      kept.push_back(iv);
      continue;
    }
    ++out.calls;
    wait_ns += iv.end_ns - iv.start_ns;
    // The call holding the interval: the last that starts at or before it.
    auto c = std::upper_bound(calls.begin(), calls.end(), iv.start_ns,
                              [](int64_t t, const NextCall* x) { return t < x->start_ns; });
    std::optional<int64_t> reached;
    if (c != calls.begin()) {
      const NextCall* call = *(c - 1);
      auto mk = std::lower_bound(marks.begin(), marks.end(), std::make_pair(call->start_ns, INT64_MIN));
      if (mk != marks.end() && mk->first <= call->end_ns) {
        reached = mk->second;
        queued_ms.push_back(static_cast<double>(mk->second - mk->first) / 1e6);
      }
    }
    StallInterval idle = iv;
    if (reached) {
      ++out.calls_marked;
      idle.start_ns = std::max(iv.start_ns, std::min(*reached, iv.end_ns));
    }
    if (idle.end_ns > idle.start_ns) {
      idle_ns += idle.end_ns - idle.start_ns;
      kept.push_back(idle);
    }
  }
  out.host_wait_s = seconds(wait_ns);
  out.gpu_idle_s = seconds(idle_ns);
  if (!queued_ms.empty()) {
    std::sort(queued_ms.begin(), queued_ms.end());
    out.queued_p50_ms = queued_ms[queued_ms.size() / 2];
  }
  stall->intervals = std::move(kept);
  stall->by_cause_s[kCauseDataWait] = seconds(idle_ns);
  stall->by_cause_s[kCauseLoaderStart] = seconds(start_ns);
  stall->seconds = seconds(idle_ns + start_ns);
  return out;
}

void attribute_gpu_stalls(const Session& s, const DataLoaderModel& m, const GpuStats& g, Interval window,
                          StallStats* stall) {
  // What the training thread was doing: its next() waits, and its blocking CUDA calls.
  std::unordered_map<int64_t, std::string_view> copy_kind_by_correlation;
  for (const GpuActivityRow& a : s.gpu) {
    if (a.kind == "memcpy") copy_kind_by_correlation[a.correlation_id] = a.copy_kind;
  }
  std::vector<HostSpan> host;
  for (const NextCall& c : m.next_calls)
    host.push_back(HostSpan{c.start_ns, c.end_ns, kData, &c});  // training thread's
  for (const LoaderInfo& l : m.loaders) {                       // DataLoader.__iter__: starting workers
    for (const auto& [e, info] : l.epochs) {
      if (info.begin_ns && info.first_next_ns && *info.first_next_ns > *info.begin_ns)
        host.push_back(HostSpan{*info.begin_ns, *info.first_next_ns, kStart, nullptr});
    }
  }
  for (const SpanRow& sp : s.spans) {
    if (sp.thread_id != m.train_thread_id) continue;
    const vocab::Event call = s.event(sp.name_id);
    if (!vocab::is_cuda_call(call)) continue;
    int cause = kSync;
    if (call == vocab::Event::kCudaMemcpy || call == vocab::Event::kCudaMemcpyAsync) {
      // A copy to the GPU holds the host while it stages pageable memory: a transfer stall. A
      // copy back to the host waits for the GPU's work first: a synchronisation.
      auto it = sp.arg0 ? copy_kind_by_correlation.find(*sp.arg0) : copy_kind_by_correlation.end();
      cause = (it == copy_kind_by_correlation.end() || it->second == "HtoD") ? kH2d : kSync;
    }
    host.push_back(HostSpan{sp.start_ns, s.span_end(sp), cause, nullptr});
  }
  std::sort(host.begin(), host.end(), [](const HostSpan& a, const HostSpan& b) { return a.begin < b.begin; });

  StallStats out;
  for (const Interval& idle : idle_in(g.busy, window)) {
    // Cut the idle interval at every host span boundary inside it; each piece takes the cause of
    // the highest-ranked host span covering it.
    std::vector<int64_t> cuts = {idle.begin, idle.end};
    for (const HostSpan& h : host) {
      if (h.begin >= idle.end) break;
      if (h.end <= idle.begin) continue;
      if (h.begin > idle.begin) cuts.push_back(h.begin);
      if (h.end < idle.end) cuts.push_back(h.end);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      const int64_t a = cuts[i], b = cuts[i + 1];
      int cause = kOther;
      const NextCall* next = nullptr;
      for (const HostSpan& h : host) {
        if (h.begin > a) break;
        if (h.end >= b && h.cause < cause) {
          cause = h.cause;
          next = h.next;
        }
      }
      StallInterval si{a, b, cause_name(cause), 0, 0, -1};
      if (next != nullptr) {
        si.loader = next->loader;
        si.epoch = next->epoch;
        si.batch = next->batch;
      }
      if (!out.intervals.empty() && out.intervals.back().end_ns == a && out.intervals.back().cause == si.cause &&
          out.intervals.back().batch == si.batch) {
        out.intervals.back().end_ns = b;
      } else {
        out.intervals.push_back(si);
      }
      out.by_cause_s[si.cause] += seconds(b - a);
      out.seconds += seconds(b - a);
    }
  }
  for (const char* c : vocab::kCauses) out.by_cause_s.emplace(c, 0.0);
  out.fraction = window.length() > 0 ? out.seconds * kNsPerS / static_cast<double>(window.length()) : 0;
  *stall = std::move(out);
}

}  // namespace stallscope::analysis
