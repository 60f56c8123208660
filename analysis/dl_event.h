// One dl.* event read back into named fields, by the argument layouts of the vocabulary
// (common/vocabulary.h, the tables of docs/events.md). The DataLoader reconstruction
// (dataloader.cc) and the dashboard (ui/snapshot_builder.cc) read every dl.* row through
// decode_dl(), so an argument's meaning is written once: in the vocabulary's table.
#pragma once

#include <cstdint>
#include <optional>

#include "common/vocabulary.h"

namespace stallscope::analysis {

// The fields of one event; a field the event does not carry (or whose argument is NULL) is
// absent. L, E, B, W and G as docs/events.md names them.
struct DlEvent {
  vocab::Event kind = vocab::Event::kNone;
  std::optional<int64_t> loader;      // L
  std::optional<int64_t> epoch;       // E
  std::optional<int64_t> batch;       // B (dl.next: the batch handed, -1 at StopIteration)
  std::optional<int64_t> worker;      // W (-1: the main process fetches)
  std::optional<int64_t> generation;  // G (worker events)
  std::optional<int64_t> pid;         // dl.worker_start / dl.worker_stop
  std::optional<int64_t> samples;     // dl.collate
  std::optional<int64_t> count;       // dl.epoch_begin: num_workers; dl.epoch_end: batches yielded
  std::optional<int64_t> text;        // string id: dl.config's document, stallscope.hooks' message
  std::optional<int64_t> micros[3];   // durations in the order the event carries them (dl.stages:
                                      // read, decode, augment)
  std::optional<int64_t> bytes;       // dl.copy
};

// Decodes the arguments of a `kind` event (a span's or an instant's arg0..arg2). `in_worker`
// chooses the worker-process layout of dl.fetch and dl.collate; other events have one layout.
// Arguments the layout calls kNone stay absent.
DlEvent decode_dl(vocab::Event kind, bool in_worker, std::optional<int64_t> a0, std::optional<int64_t> a1,
                  std::optional<int64_t> a2);

// Whether a dl.fetch span came from a worker process, from its arguments alone (the main process
// writes arg2 = -1, a worker its generation G >= 0): for readers that do not know the process.
inline bool dl_fetch_in_worker(std::optional<int64_t> a2) { return a2 && *a2 >= 0; }

}  // namespace stallscope::analysis
