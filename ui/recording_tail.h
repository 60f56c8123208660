// The dashboard reads recordings through storage's RecordingTail (storage/recording_tail.h).
#pragma once

#include "storage/recording_tail.h"

namespace stallscope::ui {
using stallscope::PollStats;
using stallscope::RecordingTail;
using stallscope::RowSink;
}  // namespace stallscope::ui
