// Names and small queries of the snapshot model; see snapshot.h.
#include "ui/snapshot.h"

#include <algorithm>

#include "common/vocabulary.h"

namespace stallscope::ui {

const char* style_name(Style s) {
  // The events' own names (string literals: data() ends in '\0').
  auto event = [](vocab::Event e) { return vocab::name_of(e).data(); };
  switch (s) {
    case Style::kOther: return "other";
    case Style::kNext: return event(vocab::Event::kDlNext);
    case Style::kStep: return "step";
    case Style::kFetch: return event(vocab::Event::kDlFetch);
    case Style::kCollate: return event(vocab::Event::kDlCollate);
    case Style::kPin: return event(vocab::Event::kDlPin);
    case Style::kCudaSync: return "cuda sync";
    case Style::kNvtx: return "range";
    case Style::kKernel: return "kernel";
    case Style::kCopyPinned: return "memcpy";
    case Style::kCopyPageable: return "memcpy (pageable)";
    case Style::kMemset: return "memset";
    case Style::kGpuSync: return "GPU sync";
    case Style::kStallData: return "data stall";
    case Style::kStallTransfer: return "transfer stall";
    case Style::kStallSync: return "sync stall";
    case Style::kStallHost: return "host stall";
    case Style::kQueueEmpty: return "queue empty";
    case Style::kCount: break;
  }
  return "?";
}

int counter_metric(vocab::Counter c) {
  switch (c) {
    case vocab::Counter::kCpu: return kCpu;
    case vocab::Counter::kRunqWait: return kRunq;
    case vocab::Counter::kRss: return kRss;
    default: return -1;
  }
}

const char* role_name(LaneRole r) {
  switch (r) {
    case LaneRole::kGpu: return "gpu";
    case LaneRole::kMain: return "main";
    case LaneRole::kPin: return "pin";
    case LaneRole::kWorker: return "worker";
    case LaneRole::kOther: return "other";
  }
  return "?";
}

const char* state_name(SourceState s) {
  switch (s) {
    case SourceState::kLoading: return "loading";
    case SourceState::kLive: return "live";
    case SourceState::kFinished: return "finished";
    case SourceState::kCutOff: return "cut off";
    case SourceState::kError: return "error";
  }
  return "?";
}

std::optional<double> growth_per_hour(const Snapshot& s) {
  // While a large file is still being read, the time read so far is a part of what the size covers.
  if (!s.timeline || s.file_bytes < 0 || s.state == SourceState::kLoading) return std::nullopt;
  const double covered_s = static_cast<double>(s.timeline->end_ns - s.timeline->first_ns) / 1e9;
  if (covered_s < 10) return std::nullopt;
  return static_cast<double>(s.file_bytes) * 3600.0 / covered_s;
}

const char* copy_kind_name(uint8_t i) {
  static const char* const k[] = {"", "HtoD", "DtoH", "DtoD", "HtoH", "PtoP"};
  return i < 6 ? k[i] : "";
}

const char* mem_kind_name(uint8_t i) {
  static const char* const k[] = {"", "pageable", "pinned", "device", "array", "managed"};
  return i < 6 ? k[i] : "";
}

const std::string& Timeline::str(uint32_t id) const {
  static const std::string kEmpty;
  if (!strings || id >= strings->size()) return kEmpty;
  return (*strings)[id];
}

bool CounterSeries::mean(int64_t t0, int64_t t1, double* out, int64_t* covered, size_t* hint) const {
  const size_t n = samples.size();
  if (n < 2) return false;
  t0 = std::max(t0, samples[0].ts_ns);
  t1 = std::min(t1, samples[n - 1].ts_ns);
  if (t1 <= t0) return false;
  // F(t): the integral from the first sample to t; the value of sample i holds over
  // (ts[i-1], ts[i]].
  size_t lo = std::max<size_t>(1, hint ? *hint : 1);
  auto F = [&](int64_t t) {
    const size_t i = samples.lower_bound(t, lo);
    lo = std::max<size_t>(1, i);
    if (i >= n) return samples[n - 1].integral;
    const CounterSample& prev = samples[i - 1];
    return prev.integral + samples[i].value * static_cast<double>(t - prev.ts_ns);
  };
  const double f0 = F(t0);
  if (hint) *hint = lo;
  const double f1 = F(t1);
  *out = (f1 - f0) / static_cast<double>(t1 - t0);
  if (covered) *covered = t1 - t0;
  return true;
}

}  // namespace stallscope::ui
