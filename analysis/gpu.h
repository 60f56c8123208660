// GPU mode: the GPU's busy/idle timeline from the recorded kernels and copies, the attribution of
// every idle interval inside the training window to what the training thread was doing, and
// host-to-device copy figures split by pinned/pageable source. Formulas: docs/report.md, "GPU mode".
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/dataloader.h"
#include "analysis/session.h"
#include "analysis/stats.h"

namespace stallscope::analysis {

struct StallStats;

struct CopyStats {
  int64_t count = 0;
  int64_t bytes = 0;
  double seconds = 0;          // summed copy durations on the GPU
  std::optional<double> gbps;  // bytes / seconds / 1e9
};

struct GpuDeviceStats {
  int64_t device = 0;
  double busy_s = 0;         // union of kernel, memcpy and memset time inside the window
  double busy_fraction = 0;  // busy_s / window
  int64_t kernels = 0;
  double kernel_s = 0;
  int64_t copies = 0;
  double copy_s = 0;
};

struct GpuStats {
  bool present = false;      // any kernel, copy or memset of the training process
  int64_t device = 0;        // the training device: the one busiest for the training process
  double busy_fraction = 0;  // of that device, over the window
  std::vector<GpuDeviceStats> devices;
  CopyStats h2d_pinned, h2d_pageable, h2d_other, d2h;
  std::vector<Interval> busy;  // merged busy intervals of the training device, inside the window
};

GpuStats gpu_stats(const Session& s, const DataLoaderModel& m, Interval window);

// Light GPU mode (`stallscope run --gpu light`, collector/gpu_light.h): no kernels or copies, but
// at the start of each next() call of the training thread a mark whose end is the instant the GPU
// reached it, that is finished the work queued before the call.
struct GpuLightStats {
  bool present = false;  // marks of the training process, and no kernel or copy (that is full mode)
  int64_t marks = 0;
  int64_t calls = 0;         // data_wait intervals of the training loader in the window
  int64_t calls_marked = 0;  // of them, with a next_begin mark
  double host_wait_s = 0;    // the loop's wait in next() (CPU mode's data_wait)
  double gpu_idle_s = 0;     // the part of it the GPU had no work: light mode's data_wait
  // At the start of next(), how long the GPU still worked on what was queued before (median of
  // the marked calls): the slack a slow batch can use before the GPU idles.
  std::optional<double> queued_p50_ms;
};

// Replaces every data_wait interval of `stall` (the training loader's next() waits, as CPU mode
// finds them) with its part from the instant the GPU reached that call's next_begin mark (its
// start, if the GPU was idle already) to its end; loader_start intervals stay. A call without a
// mark keeps its host wait. Recomputes seconds and by_cause_s; the caller sets the fraction.
GpuLightStats attribute_light_stalls(const Session& s, const DataLoaderModel& m, StallStats* stall);

// Replaces `stall` with GPU-mode stalls: the training device's idle time inside the window, cut
// into intervals each with one cause (data_wait > h2d_transfer > sync > host_other, by what the
// training thread was doing then).
void attribute_gpu_stalls(const Session& s, const DataLoaderModel& m, const GpuStats& g, Interval window,
                          StallStats* stall);

}  // namespace stallscope::analysis
