// dl.* arguments read through the vocabulary's table of argument layouts; see dl_event.h.
#include "analysis/dl_event.h"

namespace stallscope::analysis {

DlEvent decode_dl(vocab::Event kind, bool in_worker, std::optional<int64_t> a0, std::optional<int64_t> a1,
                  std::optional<int64_t> a2) {
  DlEvent d;
  d.kind = kind;
  const vocab::Args& layout = vocab::args_of(kind, in_worker);
  const std::optional<int64_t> values[3] = {a0, a1, a2};
  size_t durations = 0;
  for (size_t i = 0; i < 3; ++i) {
    switch (layout[i]) {
      case vocab::Arg::kLoader: d.loader = values[i]; break;
      case vocab::Arg::kEpoch: d.epoch = values[i]; break;
      case vocab::Arg::kBatch: d.batch = values[i]; break;
      case vocab::Arg::kWorker: d.worker = values[i]; break;
      case vocab::Arg::kGeneration: d.generation = values[i]; break;
      case vocab::Arg::kPid: d.pid = values[i]; break;
      case vocab::Arg::kSamples: d.samples = values[i]; break;
      case vocab::Arg::kCount: d.count = values[i]; break;
      case vocab::Arg::kText: d.text = values[i]; break;
      case vocab::Arg::kMicros: d.micros[durations++] = values[i]; break;
      case vocab::Arg::kBytes: d.bytes = values[i]; break;
      default: break;  // NVTX and CUDA arguments: not DataLoader fields
    }
  }
  return d;
}

}  // namespace stallscope::analysis
