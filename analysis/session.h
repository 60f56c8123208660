// The in-memory model of one recording: what the analysis reads. Loaded through a Reader with one
// query per table inside one read transaction, so a recording still being written is seen as a
// consistent snapshot (every committed flush up to the moment of loading).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "common/vocabulary.h"
#include "storage/reader.h"
#include "storage/rows.h"

namespace stallscope::analysis {

struct LoadOptions {
  // Spans and instants: those named in the vocabulary (common/vocabulary.h), or every one.
  bool all_names = false;
  // Counter tracks whose samples are loaded (empty: all tracks): those analyze() reads (worker and
  // training-process CPU, run-queue delay, kernel CPU and page faults, workers' private dirty memory). A recording's
  // every track at 10-20 Hz is a large part of its rows: on a long run the tracks left out here are memory the report
  // does not need.
  std::vector<vocab::Counter> counters = {vocab::Counter::kCpu, vocab::Counter::kRunqWait,
                                          vocab::Counter::kPrivateDirty, vocab::Counter::kSysCpu,
                                          vocab::Counter::kMinorFaults};
  // Only the detail from this session time on (a long recording's latest part, in bounded memory):
  // spans that overlap it, instants, counter samples and GPU activities from it, and, from before
  // it, the instants that describe loaders and processes (Writer::kKeptInstants), found through the
  // summaries. Unset: all of it.
  std::optional<int64_t> detail_from_ns;
  // With detail_from_ns, only up to this session time (a window of the past: the dashboard's view of
  // a long recording): spans that start by it, the other rows at or before it.
  std::optional<int64_t> detail_to_ns;
};

struct Session {
  std::string path;
  std::map<std::string, std::string> meta;
  std::vector<ProcessRow> processes;  // by id
  std::vector<ThreadRow> threads;     // by id
  std::unordered_map<uint32_t, std::string> strings;
  std::vector<SpanRow> spans;        // ordered by (start_ns, depth)
  std::vector<InstantRow> instants;  // ordered by ts_ns
  std::vector<CounterTrackRow> counter_tracks;
  std::vector<CounterRow> counters;  // ordered by (track_id, ts_ns)
  std::vector<GpuActivityRow> gpu;   // ordered by start_ns
  int64_t end_ns = 0;                // the latest time anything in the recording reaches
  bool complete = false;             // meta.complete == "1": the recorder finished
  // LoadOptions::detail_from_ns when the detail before it was left out: the rows start there.
  std::optional<int64_t> loaded_from_ns;
  std::optional<int64_t> loaded_to_ns;  // LoadOptions::detail_to_ns: the detail stops there
  // Read with detail_from_ns: each loader's next() calls and optimizer steps over the whole run,
  // from the summaries, by (thread id, loader): which loader trained is a whole-run question.
  std::map<std::pair<int64_t, int64_t>, int64_t> run_next_calls, run_steps;
  // Where every event is there from: the later of loaded_from_ns and a --keep-detail recording's
  // meta detail_from_ns (INT64_MIN: from the start). Figures over a life or a window begin there.
  int64_t detail_from_ns() const;
  // Rows load_session() left out because their times cannot be (negative durations, times or
  // arguments past +-2^60, counters that are not numbers): only a damaged or edited file has them.
  int64_t impossible_rows = 0;

  // Look-ups (built by index()).
  const ProcessRow* process(int64_t process_id) const;
  const ThreadRow* thread(int64_t thread_id) const;
  int64_t pid_of_thread(int64_t thread_id) const;  // 0 when unknown
  const std::string& string(uint32_t id) const;    // "" when unknown
  // The vocabulary event string `id` names (kNone for other names and unknown ids).
  vocab::Event event(uint32_t id) const { return names_.event(id); }
  // End of a span; spans that never ended reach the end of the recording.
  int64_t span_end(const SpanRow& s) const { return s.dur_ns ? s.start_ns + *s.dur_ns : std::max(s.start_ns, end_ns); }
  // Samples of one track, in time order.
  std::pair<const CounterRow*, const CounterRow*> samples(int64_t track_id) const;

  // Rebuilds the look-up tables; load_session() calls it, tests that assemble a Session by hand too.
  void index();
  // Puts spans in (start, depth, id) order and instants in (time, id) order, as load_session()
  // leaves them: for a Session assembled from rows read some other way (the export's windows).
  void sort_rows();
  // Leaves out the rows whose times or values cannot be (see impossible_rows); load_session()
  // calls it, and so must code that assembles a Session from rows it read itself.
  void drop_impossible_rows();

 private:
  std::unordered_map<int64_t, size_t> process_index_, thread_index_;
  vocab::NameTable names_;
  std::unordered_map<int64_t, std::pair<size_t, size_t>> counter_ranges_;
};

Result<Session> load_session(Reader& reader, const LoadOptions& options = {});

// How much of a recording's detail a report reads: the latest `last_ns` of it, else the latest
// `max_rows` events (the default keeps the report of a day-long run in a few hundred MB), or all.
struct DetailBudget {
  static constexpr int64_t kDefaultRows = 2'000'000;
  bool all = false;
  std::optional<int64_t> last_ns;
  int64_t max_rows = kDefaultRows;
  // A window of session time instead (`report --detail T0:T1`, the dashboard's view of the past):
  // LoadOptions::detail_from_ns and detail_to_ns are its ends, whatever it holds.
  std::optional<std::pair<int64_t, int64_t>> window;
  // The load options for this budget: the cut of choose_detail_from, or the window.
  void apply(std::optional<int64_t> cut, LoadOptions* load) const {
    load->detail_from_ns = window ? std::optional<int64_t>(window->first) : cut;
    load->detail_to_ns = window ? std::optional<int64_t>(window->second) : std::nullopt;
  }
};
// LoadOptions::detail_from_ns for `budget`: nullopt when all the detail fits. A cut in the budget
// moves on to the next dl.epoch_begin when one comes in the first half of what is left, so the
// analysis starts at an epoch's start.
Result<std::optional<int64_t>> choose_detail_from(Reader& reader, const DetailBudget& budget);
// Opens `path` with Reader::open (its one-line errors) and loads it.
Result<Session> load_session(const std::string& path, const LoadOptions& options = {});

}  // namespace stallscope::analysis
