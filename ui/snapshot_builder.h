// SnapshotBuilder: turns database rows (as RecordingTail streams them) into the timeline model,
// incrementally: one track per thread and per GPU stream, rows by span depth, derived steps,
// headline bins, per-process counters. publish() groups tracks into lanes (main thread, pin
// memory, one lane per DataLoader worker, GPU streams, other threads) and returns an immutable
// Timeline that shares the item storage with the builder (see append_log.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/vocabulary.h"
#include "ui/recording_tail.h"
#include "ui/snapshot.h"

namespace stallscope::ui {

class SnapshotBuilder : public RowSink {
 public:
  static constexpr uint32_t kMaxStringId = 1u << 22;  // past it, a string row is dropped (on_string)
  // The bins (kBinNs each) cover at most 7 days: a time past it is a damaged row (a span to
  // 2^62 ns would allocate and walk 46 billion bins; fuzz_dashboard), and is left out of them.
  static constexpr int64_t kMaxBinNs = int64_t{7} * 24 * 3600 * 1'000'000'000;

  SnapshotBuilder();

  // RowSink.
  void on_meta(const std::map<std::string, std::string>& meta) override;
  void on_string(uint32_t id, std::string value) override;
  void on_processes(const std::vector<ProcessRow>& all) override;
  void on_threads(const std::vector<ThreadRow>& all) override;
  void on_counter_tracks(const std::vector<CounterTrackRow>& all) override;
  bool wants_counter_track(const CounterTrackRow& t) const override;
  void on_instant(const InstantRow& r) override;
  void on_span(const SpanRow& r) override;
  void on_counter(const CounterRow& r) override;
  void on_gpu(const GpuActivityRow& r) override;
  void on_flush(int64_t ts_ns) override;

  // A long recording read a window at a time: the overview and the detail range publish() puts
  // in the timeline (see Timeline::overview).
  void set_window(std::shared_ptr<const Overview> overview, int64_t detail_t0, int64_t detail_t1, int64_t detail_rows);
  // The meta read says complete = 1.
  bool complete() const {
    auto c = meta_.find("complete");
    return c != meta_.end() && c->second == "1";
  }
  // Rows received so far (every table).
  int64_t rows() const { return spans_ + instants_ + counter_samples_ + gpu_; }

  // True when something arrived since the last publish().
  bool dirty() const { return dirty_ || counters_dirty_; }
  std::shared_ptr<const Timeline> publish();

 private:
  struct TrackState {
    Track track;
    std::vector<std::vector<size_t>> depth_rows;  // depth -> indices into rows_
    std::vector<Row> rows;                        // creation order
    int64_t process_row = 0;
    bool is_gpu = false;
    int64_t device = -1, stream = -1, gpu_process = 0;
    bool has_next = false, has_pin = false;
    int32_t worker_hint = -1;    // W from dl.worker_ready / worker dl.fetch
    int32_t thread_worker = -1;  // W of a reference loader thread (main-process dl.fetch, arg2)
    int64_t thread_loader = -1;  // its L
    int32_t next_depth = -1;
    int64_t last_handed_end = -1;  // for derived steps
    int64_t items = 0;
  };

  TrackState& thread_track(int64_t thread_id);
  TrackState& gpu_track(int64_t process_id, int64_t device, int64_t stream);
  void append(TrackState& t, Item it, int32_t depth);
  void add_to_bins(int64_t Bin::*field, int64_t start, int64_t end);
  // publish(), by topic.
  Track published_track(const TrackState& t) const;
  std::vector<Lane> group_lanes(std::set<int64_t>* loaders_with_workers) const;
  void name_lanes(std::vector<Lane>& lanes, const std::set<int64_t>& loaders_with_workers) const;
  void lay_out_rows(Lane& lane) const;
  void map_overview(std::vector<Lane>& lanes) const;
  Bin& bin(int64_t t);
  Bin overflow_bin_;  // bin() of a time past kMaxBinNs
  void see(int64_t t);

  bool dirty_ = true;
  bool counters_dirty_ = false;  // written by on_counter (possibly on the tail's second thread)
  int64_t counter_end_ns_ = 0;   // likewise
  std::map<std::string, std::string> meta_;
  std::shared_ptr<std::vector<std::string>> strings_;  // copied on write once published
  bool strings_published_ = false;
  vocab::NameTable names_;                                            // string id -> vocabulary event
  std::unordered_map<int64_t, ProcessRow> processes_;                 // by row id
  std::unordered_map<int64_t, ThreadRow> threads_;                    // by row id
  std::unordered_map<int64_t, std::pair<int64_t, int32_t>> workers_;  // pid -> (loader, W)
  std::unordered_map<int64_t, int64_t> worker_owner_thread_;          // worker pid -> thread that started it
  std::unordered_map<int64_t, int64_t> rank_thread_;                  // thread that recorded dist.rank -> rank
  std::map<int64_t, std::vector<int64_t>> worker_pids_;               // order of appearance, for lane details
  std::map<int64_t, uint32_t> loader_configs_;  // L -> string id of its dl.config document (lane names)
  std::unordered_map<int64_t, std::unique_ptr<TrackState>> thread_tracks_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::unique_ptr<TrackState>> gpu_tracks_;
  std::unordered_map<int64_t, std::pair<int64_t, int>> counter_tracks_;  // track id -> (pid, metric); -1 ignored
  std::map<int64_t, ProcCounters> counters_;
  std::vector<CounterSeries*> series_by_track_;  // track id -> series in counters_ (null: not shown)
  std::vector<Bin> bins_;
  bool bins_changed_ = true;
  std::shared_ptr<const std::vector<Bin>> published_bins_;
  int64_t end_ns_ = 0, first_ns_ = INT64_MAX, last_flush_ns_ = 0;
  std::shared_ptr<const Overview> overview_;
  int64_t detail_t0_ = INT64_MIN, detail_t1_ = INT64_MAX, detail_rows_ = 0;
  int64_t spans_ = 0, instants_ = 0, counter_samples_ = 0, gpu_ = 0;
};

}  // namespace stallscope::ui
