// dl.* arguments by event; see dl_event.h and docs/events.md.
#include "analysis/dl_event.h"

namespace stallscope::analysis {

DlEvent decode_dl(vocab::Event kind, bool in_worker, std::optional<int64_t> a0, std::optional<int64_t> a1,
                  std::optional<int64_t> a2) {
  using vocab::Event;
  DlEvent d;
  d.kind = kind;
  switch (kind) {
    case Event::kDlConfig:  // L, document
      d.loader = a0;
      d.text = a1;
      break;
    case Event::kDlEpochBegin:  // L, E, num_workers
    case Event::kDlEpochEnd:    // L, E, batches yielded
      d.loader = a0;
      d.epoch = a1;
      d.count = a2;
      break;
    case Event::kDlNext:  // L, B, E
      d.loader = a0;
      d.batch = a1;
      d.epoch = a2;
      break;
    case Event::kDlSent:  // L, B, W
    case Event::kDlRecv:
      d.loader = a0;
      d.batch = a1;
      d.worker = a2;
      break;
    case Event::kDlWorkerStart:  // L, W, pid
    case Event::kDlWorkerStop:
      d.loader = a0;
      d.worker = a1;
      d.pid = a2;
      break;
    case Event::kDlFetch:
      if (in_worker) {  // B, W, G
        d.batch = a0;
        d.worker = a1;
        d.generation = a2;
      } else {  // L, B, -1
        d.loader = a0;
        d.batch = a1;
        d.worker = -1;
      }
      break;
    case Event::kDlCollate:
      if (in_worker) {  // B, samples, G
        d.batch = a0;
        d.samples = a1;
        d.generation = a2;
      } else {  // L, B, samples
        d.loader = a0;
        d.batch = a1;
        d.samples = a2;
      }
      break;
    case Event::kDlPin:  // L, B
      d.loader = a0;
      d.batch = a1;
      break;
    case Event::kDlWorkerReady:  // W, G
      d.worker = a0;
      d.generation = a1;
      break;
    case Event::kDlPut:  // B, W, G
      d.batch = a0;
      d.worker = a1;
      d.generation = a2;
      break;
    case Event::kHooks:  // message
      d.text = a0;
      break;
    default:
      break;
  }
  return d;
}

}  // namespace stallscope::analysis
