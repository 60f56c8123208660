// A batch's life as text: where it was sent, fetched (by which worker, how many samples), put,
// pinned, received and handed to the loop, as offsets from when it was sent. The timeline's
// tooltip, the Batch life panel and the layout dump (what the tests read) show the same lines.
#pragma once

#include <string>
#include <vector>

#include "ui/views.h"

namespace stallscope::ui {

// The life of a batch, one stage per line: "sent 12.345 s", "fetch 12.350 s -> 12.390 s (40 ms)
// by worker 3 (pid 1234)", ... Empty when the analysis has not run.
std::vector<std::string> batch_life(const Frame& f, const analysis::BatchInfo& b);
std::string batch_title(const analysis::BatchInfo& b);
// The analysis's record of batch `k`; null before the analysis or for an unknown batch.
const analysis::BatchInfo* find_batch(const Frame& f, const BatchKey& k);

}  // namespace stallscope::ui
