// The export formats against their rules and against the recording they came from: a simulated
// DataLoader run (workers, pin memory, /proc counters, GPU activities; tests/ui/sim_recording.h)
// exported as a Perfetto/Chrome JSON trace is checked the way a trace viewer reads it (required
// fields, slices nested per thread, every flow point inside a slice of its thread, counters
// numeric, every track named) and event by event against the database's tables; the CSV files row
// by row; and the `stallscope export` command line's outcomes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/json.h"
#include "export/csv.h"
#include "export/perfetto_json.h"
#include "storage/reader.h"
#include "storage/writer.h"
#include "tests/ui/sim_recording.h"
#include "tests/unit/test_util.h"

namespace stallscope::testing {
namespace {

int64_t ns_of(const Json& us) { return std::llround(us.get<double>() * 1000.0); }

exporting::ExportCounts export_to(const std::string& db, const std::string& out, bool csv,
                                  const exporting::ExportOptions& options = {}) {
  auto reader = Reader::open(db);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (csv) {
    auto sink = exporting::csv_sink(out);
    auto n = exporting::export_recording(**reader, *sink, options);
    EXPECT_TRUE(n.ok()) << n.status().message();
    return n.ok() ? *n : exporting::ExportCounts{};
  }
  std::FILE* f = std::fopen(out.c_str(), "w");
  EXPECT_NE(f, nullptr);
  auto sink = exporting::perfetto_json_sink(f);
  auto n = exporting::export_recording(**reader, *sink, options);
  std::fclose(f);
  EXPECT_TRUE(n.ok()) << n.status().message();
  return n.ok() ? *n : exporting::ExportCounts{};
}

int64_t table_count(const std::string& db, const char* table) {
  auto reader = Reader::open(db);
  auto n = (*reader)->count(table);
  EXPECT_TRUE(n.ok());
  return n.ok() ? *n : -1;
}

// What a trace viewer needs of a Trace Event Format document, checked; and what it holds, counted.
struct TraceCheck {
  std::vector<std::string> problems;
  std::map<std::string, int64_t> by_phase;
  int64_t gpu_slices = 0;
  std::map<int64_t, std::string> process_names;                             // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;          // (pid, tid) -> name
  std::map<std::string, std::vector<std::pair<int64_t, double>>> counters;  // "pid name" -> (ts, value)
  struct Point {
    std::string ph;
    int64_t pid, tid, ts;
  };
  std::map<int64_t, std::vector<Point>> flows;  // id -> its points in file order
};

TraceCheck check_trace(const Json& doc) {
  TraceCheck c;
  auto bad = [&](const std::string& what, const Json& e) { c.problems.push_back(what + ": " + e.dump()); };
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    c.problems.push_back("no traceEvents array");
    return c;
  }
  // (pid, tid) -> slices (start, end)
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> slices;
  std::set<std::pair<int64_t, int64_t>> used_threads;
  for (const Json& e : doc["traceEvents"]) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      bad("event without ph", e);
      continue;
    }
    const std::string ph = e["ph"];
    ++c.by_phase[ph];
    if (!e.contains("pid") || !e["pid"].is_number_integer()) bad("no integer pid", e);
    if (ph == "M") {
      static const std::set<std::string> kMeta = {"process_name", "process_sort_index", "process_labels", "thread_name",
                                                  "thread_sort_index"};
      if (!e.contains("name") || kMeta.count(e["name"].get<std::string>()) == 0) bad("unknown metadata", e);
      if (!e.contains("args") || !e["args"].is_object()) bad("metadata without args", e);
      if (e["name"] == "process_name") c.process_names[e["pid"]] = e["args"]["name"];
      if (e["name"] == "thread_name") {
        if (!e.contains("tid")) bad("thread_name without tid", e);
        c.thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
      }
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) {
      bad("no numeric ts", e);
      continue;
    }
    if (!e.contains("tid") || !e["tid"].is_number_integer()) {
      bad("no integer tid", e);
      continue;
    }
    const int64_t pid = e["pid"], tid = e["tid"], ts = ns_of(e["ts"]);
    if (ph == "X") {
      if (!e.contains("name") || !e["name"].is_string()) bad("slice without name", e);
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) bad("slice without dur >= 0", e);
      slices[{pid, tid}].emplace_back(ts, ts + ns_of(e["dur"]));
      used_threads.insert({pid, tid});
      if (e.value("cat", "").rfind("gpu.", 0) == 0) ++c.gpu_slices;
    } else if (ph == "i") {
      if (e.value("s", "") != "t") bad("instant not thread-scoped", e);
      used_threads.insert({pid, tid});
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) bad("counter without args", e);
      for (const auto& [k, v] : e["args"].items()) {
        if (!v.is_number()) bad("counter value not numeric", e);
      }
      c.counters[std::to_string(pid) + " " + e["name"].get<std::string>()].emplace_back(
          ts, e["args"]["value"].get<double>());
    } else if (ph == "s" || ph == "t" || ph == "f") {
      if (!e.contains("id") || !e["id"].is_number_integer()) bad("flow without id", e);
      if (ph == "f" && e.value("bp", "") != "e") bad("flow end not bound to its enclosing slice", e);
      c.flows[e["id"]].push_back({ph, pid, tid, ts});
    } else {
      bad("unexpected phase", e);
    }
  }
  // Slices nest per thread: one that starts inside another ends inside it.
  for (auto& [key, v] : slices) {
    std::sort(v.begin(), v.end(),
              [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
    std::vector<int64_t> open;
    for (const auto& [s, e] : v) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      if (!open.empty() && e > open.back()) {
        c.problems.push_back("slices overlap without nesting on pid " + std::to_string(key.first) + " tid " +
                             std::to_string(key.second) + " at " + std::to_string(s));
        break;
      }
      open.push_back(e);
    }
  }
  // Every flow: one start, one end, start first; each point strictly inside a slice of its thread.
  for (const auto& [id, pts] : c.flows) {
    if (pts.size() < 2 || pts.front().ph != "s" || pts.back().ph != "f") {
      c.problems.push_back("flow " + std::to_string(id) + " is not s [t] f");
      continue;
    }
    for (const auto& p : pts) {
      const auto& v = slices[{p.pid, p.tid}];
      const bool inside =
          std::any_of(v.begin(), v.end(), [&](auto& sl) { return sl.first < p.ts && p.ts < sl.second; });
      if (!inside) c.problems.push_back("flow " + std::to_string(id) + " point " + p.ph + " binds to no slice");
    }
  }
  for (const auto& t : used_threads) {
    if (c.thread_names.count(t) == 0)
      c.problems.push_back("unnamed thread pid " + std::to_string(t.first) + " tid " + std::to_string(t.second));
    if (c.process_names.count(t.first) == 0) c.problems.push_back("unnamed process " + std::to_string(t.first));
  }
  return c;
}

SimOptions busy_run() {
  SimOptions o;
  o.workers = 3;
  o.epochs = 2;
  o.batches = 30;
  o.gpu = true;
  o.pin = true;
  o.fetch_ns = [](int, int b) { return (20 + b % 7) * kMsNs; };
  return o;
}

TEST(PerfettoExportTest, ATraceFollowsTheFormatsRulesAndHoldsEveryRow) {
  TempDir dir;
  const std::string db = dir.file("run.db"), out = dir.file("run.json");
  const RecordingTruth truth = write_sim_recording(db, busy_run());
  const exporting::ExportCounts n = export_to(db, out, false);

  auto doc = json::parse(read_file(out));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const TraceCheck c = check_trace(*doc);
  for (const std::string& p : c.problems) ADD_FAILURE() << p;
  ASSERT_TRUE(c.problems.empty());

  // Every row of the recording, once.
  EXPECT_EQ(c.by_phase.at("X") - c.gpu_slices, table_count(db, "spans"));
  EXPECT_EQ(c.gpu_slices, table_count(db, "gpu_activities"));
  EXPECT_GT(c.gpu_slices, 0);
  EXPECT_EQ(c.by_phase.at("i"), table_count(db, "instants"));
  EXPECT_EQ(c.by_phase.at("C"), table_count(db, "counters") + n.derived);
  EXPECT_EQ(n.spans, truth.spans);

  // Named like the dashboard's lanes.
  const int64_t main_pid = 1000;
  EXPECT_EQ(c.process_names.at(main_pid), "training (pid 1000)");
  EXPECT_EQ(c.thread_names.at({main_pid, main_pid}), "main thread");
  std::set<std::string> names;
  for (const auto& [k, v] : c.thread_names) names.insert(v);
  for (const char* want : {"pin memory", "worker 0", "worker 1", "worker 2", "stream 7"}) {
    EXPECT_EQ(names.count(want), 1u) << want;
  }
  for (int64_t pid : truth.worker_pids) {
    EXPECT_NE(c.process_names.at(pid).find("worker "), std::string::npos) << c.process_names.at(pid);
  }

  // The stall series adds up to the time the loop waited.
  const auto& stalled = c.counters.at("1000 stalled (waiting for data)");
  int64_t stalled_ns = 0;
  for (size_t i = 0; i + 1 < stalled.size(); ++i) {
    if (stalled[i].second == 1) stalled_ns += stalled[i + 1].first - stalled[i].first;
  }
  EXPECT_EQ(stalled_ns, truth.stall_ns);
  // Queue depth: never more ready than the prefetch allows, and batches were ready at times.
  double most_ready = 0;
  for (const auto& [ts, v] : c.counters.at("1000 loader 0 batches ready")) most_ready = std::max(most_ready, v);
  EXPECT_GE(most_ready, 1);
  EXPECT_LE(most_ready, 2 * 3);
  // Worker CPU as a counter in each worker's process.
  EXPECT_EQ(c.counters.count(std::to_string(truth.worker_pids[0]) + " proc.cpu (cores)"), 1u);

  // A flow per batch, from the worker (or where it was sent) to the main thread.
  EXPECT_EQ(static_cast<int64_t>(c.flows.size()), static_cast<int64_t>(truth.batches.size()));
  EXPECT_EQ(n.flows, static_cast<int64_t>(truth.batches.size()));
  int with_sent = 0;
  for (const auto& [id, pts] : c.flows) {
    EXPECT_EQ(pts.back().pid, main_pid);
    EXPECT_EQ(pts.back().tid, main_pid);
    with_sent += pts.size() == 3;
    const auto& fetch = pts[pts.size() - 2];
    EXPECT_NE(std::find(truth.worker_pids.begin(), truth.worker_pids.end(), fetch.pid), truth.worker_pids.end());
  }
  // Batches sent at a hand-off (inside next()) start there; the first prefetch, sent in __iter__,
  // starts at its fetch.
  EXPECT_GT(with_sent, 0);
  EXPECT_LT(with_sent, static_cast<int>(c.flows.size()));
}

// The value of a step series (sorted points) at each time in `times`.
std::vector<double> values_at(const std::vector<std::pair<int64_t, double>>& points, const std::set<int64_t>& times) {
  std::vector<double> out;
  for (int64_t t : times) {
    double v = 0;
    for (const auto& [ts, value] : points) {
      if (ts > t) break;
      v = value;
    }
    out.push_back(v);
  }
  return out;
}

// A long recording's per-batch model is built window by window (bounded memory); a batch whose
// life crosses a window's edge must come out as it does from the whole recording at once.
TEST(PerfettoExportTest, WindowByWindowGivesWhatTheWholeRecordingGives) {
  TempDir dir;
  const std::string db = dir.file("run.db");
  SimOptions o = busy_run();
  o.epochs = 3;
  o.persistent = true;
  write_sim_recording(db, o);
  exporting::ExportOptions windows;
  windows.whole_below_instants = 0;
  windows.window_ns = 100 * kMsNs;  // about ten batches each; a dozen edges
  windows.margin_ns = 300 * kMsNs;  // longer than any batch's life here (< 250 ms)
  const exporting::ExportCounts whole_n = export_to(db, dir.file("whole.json"), false);
  const exporting::ExportCounts part_n = export_to(db, dir.file("parts.json"), false, windows);
  EXPECT_EQ(part_n.flows, whole_n.flows);
  const TraceCheck whole = check_trace(*json::parse(read_file(dir.file("whole.json"))));
  const TraceCheck parts = check_trace(*json::parse(read_file(dir.file("parts.json"))));
  for (const std::string& p : parts.problems) ADD_FAILURE() << p;

  // The same flows, point for point (ids follow the windows' order).
  std::multiset<std::vector<int64_t>> a, b;
  for (const auto& [id, pts] : whole.flows) {
    std::vector<int64_t> key;
    for (const auto& p : pts) key.insert(key.end(), {p.pid, p.tid, p.ts});
    a.insert(key);
  }
  for (const auto& [id, pts] : parts.flows) {
    std::vector<int64_t> key;
    for (const auto& p : pts) key.insert(key.end(), {p.pid, p.tid, p.ts});
    b.insert(key);
  }
  EXPECT_EQ(a, b);
  // The same series, as functions of time (windows may repeat a value at their edge).
  ASSERT_EQ(whole.counters.size(), parts.counters.size());
  for (const auto& [name, points] : whole.counters) {
    ASSERT_EQ(parts.counters.count(name), 1u) << name;
    std::set<int64_t> times;
    for (const auto& [ts, v] : points) times.insert(ts);
    for (const auto& [ts, v] : parts.counters.at(name)) times.insert(ts);
    EXPECT_EQ(values_at(points, times), values_at(parts.counters.at(name), times)) << name;
  }
}

int64_t count_in(const std::string& db, const std::string& sql, int64_t a, int64_t b) {
  auto reader = Reader::open(db);
  auto st = (*reader)->db().prepare(sql);
  EXPECT_TRUE(st.ok());
  if (!st.ok()) return -1;
  (*st)->bind(1, a).bind(2, b);
  EXPECT_TRUE((*st)->step());
  return (*st)->int64(0);
}

// --range: the rows of the range and nothing else; the tracks named as in the whole export; the
// flows of the batches handed in the range, point for point those of the whole export.
TEST(PerfettoExportTest, ARangeHoldsTheRowsOfTheRangeAndTheWholeExportsFlowsThere) {
  TempDir dir;
  const std::string db = dir.file("run.db");
  SimOptions o = busy_run();
  o.epochs = 4;
  o.commit_rows = 300;  // drains of a few tens of ms: the flush index finds the range's spans
  const RecordingTruth truth = write_sim_recording(db, o);
  const int64_t a = truth.end_ns * 2 / 5, b = truth.end_ns * 3 / 5;
  exporting::ExportOptions range;
  range.range = std::make_pair(a, b);
  const exporting::ExportCounts n = export_to(db, dir.file("range.json"), false, range);
  EXPECT_EQ(n.spans, count_in(db, "SELECT count(*) FROM spans WHERE start_ns <= ?2 AND start_ns + dur_ns >= ?1", a, b));
  EXPECT_EQ(n.instants, count_in(db, "SELECT count(*) FROM instants WHERE ts_ns BETWEEN ?1 AND ?2", a, b));
  EXPECT_EQ(n.counters, count_in(db, "SELECT count(*) FROM counters WHERE ts_ns BETWEEN ?1 AND ?2", a, b));
  EXPECT_EQ(n.gpu_activities,
            count_in(db, "SELECT count(*) FROM gpu_activities WHERE start_ns <= ?2 AND start_ns + dur_ns >= ?1", a, b));
  EXPECT_GT(n.spans, 50);
  EXPECT_GT(n.gpu_activities, 10);
  const TraceCheck part = check_trace(*json::parse(read_file(dir.file("range.json"))));
  for (const std::string& p : part.problems) ADD_FAILURE() << p;

  export_to(db, dir.file("whole.json"), false);
  const TraceCheck whole = check_trace(*json::parse(read_file(dir.file("whole.json"))));
  // The processes and threads that are in the range are named as the whole export names them.
  for (const auto& [pid, name] : part.process_names) {
    ASSERT_TRUE(whole.process_names.count(pid)) << pid;
    EXPECT_EQ(name, whole.process_names.at(pid)) << pid;
  }
  for (const auto& [key, name] : part.thread_names) {
    ASSERT_TRUE(whole.thread_names.count(key)) << key.first;
    EXPECT_EQ(name, whole.thread_names.at(key)) << key.first;
  }
  // The flows: those of the whole export whose batch was fetched and handed in the range (the last
  // point is just inside the next() that handed it, the one before it the fetch's middle), without
  // a sent point before the range.
  std::multiset<std::vector<int64_t>> in_range, got;
  for (const auto& [id, pts] : whole.flows) {
    if (pts.size() < 2 || pts.back().ts + 1 < a || pts.back().ts + 1 > b || pts[pts.size() - 2].ts < a) continue;
    std::vector<int64_t> key;
    for (const auto& p : pts) {
      if (pts.size() == 3 && &p == &pts.front() && p.ts < a) continue;
      key.insert(key.end(), {p.pid, p.tid, p.ts});
    }
    in_range.insert(key);
  }
  for (const auto& [id, pts] : part.flows) {
    std::vector<int64_t> key;
    for (const auto& p : pts) key.insert(key.end(), {p.pid, p.tid, p.ts});
    got.insert(key);
  }
  EXPECT_GT(in_range.size(), 10u);
  EXPECT_EQ(got, in_range);
}

// A recording written row by row: names that JSON and CSV must escape, an unended span, a span in
// a process nobody named.
std::string odd_recording(const TempDir& dir) {
  const std::string db = dir.file("odd.db");
  auto w = Writer::create(db);
  EXPECT_TRUE(w.ok());
  Writer& wr = **w;
  EXPECT_TRUE(wr.set_meta("format", "stallscope.session").ok());
  EXPECT_TRUE(wr.set_meta("schema_version", "1").ok());
  EXPECT_TRUE(wr.set_meta("start_real_ns", "1").ok());
  EXPECT_TRUE(wr.begin().ok());
  wr.add_string(1, "step \"a\", b\nc");
  wr.add_string(2, std::string("bad utf8 \xff\xfe end"));
  wr.add_string(3, "nvtx.start");
  const int64_t p = wr.add_process(ProcessRow{0, 42, 1, "python odd.py, with \"quotes\"", 0, std::nullopt, {}, {}});
  const int64_t t = wr.add_thread(ThreadRow{0, p, 42, "MainThread"});
  wr.add_span(SpanRow{0, t, 1000, 5000, 1, 0, 7, std::nullopt, -1});
  wr.add_span(SpanRow{0, t, 2000, 1000, 2, 1, {}, {}, {}});
  wr.add_span(SpanRow{0, t, 9000, std::nullopt, 1, 0, {}, {}, {}});  // never ended
  wr.add_instant(InstantRow{0, t, 1500, 3, 5, 2, 0});
  wr.add_instant(InstantRow{0, t, 12000, 2, {}, {}, {}});
  EXPECT_TRUE(wr.commit().ok());
  EXPECT_TRUE(wr.finish().ok());
  return db;
}

TEST(PerfettoExportTest, EscapesNamesAndEndsUnendedSpansAtTheRecordingsEnd) {
  TempDir dir;
  const std::string db = odd_recording(dir), out = dir.file("odd.json");
  export_to(db, out, false);
  auto doc = json::parse(read_file(out));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  const TraceCheck c = check_trace(*doc);
  for (const std::string& p : c.problems) ADD_FAILURE() << p;
  int unended = 0;
  for (const Json& e : (*doc)["traceEvents"]) {
    if (e["ph"] == "X" && e.contains("args") && e["args"].contains("unended")) {
      ++unended;
      EXPECT_EQ(ns_of(e["ts"]), 9000);
      EXPECT_EQ(ns_of(e["dur"]), 12000 - 9000);  // to the last instant
      EXPECT_EQ(e["name"], "step \"a\", b\nc");
    }
    if (e["ph"] == "i" && e["name"] == "nvtx.start") {
      EXPECT_EQ(e["args"]["range_id"], 5);  // named by the vocabulary
      EXPECT_FALSE(e["args"].contains("domain") && e["args"]["domain"] != 0);
    }
  }
  EXPECT_EQ(unended, 1);
  EXPECT_EQ(c.process_names.at(42), "pid 42: python odd.py, with \"quotes\"");
}

// RFC 4180 records of a CSV file (quoted fields may hold commas, quotes and line breaks).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        cell += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      rows.back().push_back(cell);
      cell.clear();
    } else if (ch == '\n') {
      rows.back().push_back(cell);
      cell.clear();
      rows.emplace_back();
    } else {
      cell += ch;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

TEST(CsvExportTest, EveryTableRowByRowWithAHeader) {
  TempDir dir;
  const std::string db = dir.file("run.db");
  write_sim_recording(db, busy_run());
  export_to(db, dir.path(), true);
  const std::map<std::string, std::pair<const char*, size_t>> files = {{"spans.csv", {"spans", 11}},
                                                                       {"instants.csv", {"instants", 9}},
                                                                       {"counters.csv", {"counters", 5}},
                                                                       {"gpu_activities.csv", {"gpu_activities", 13}},
                                                                       {"processes.csv", {"processes", 8}}};
  for (const auto& [file, want] : files) {
    const auto rows = parse_csv(read_file(dir.file(file)));
    ASSERT_FALSE(rows.empty()) << file;
    EXPECT_EQ(rows[0].size(), want.second) << file;
    EXPECT_EQ(static_cast<int64_t>(rows.size()) - 1, table_count(db, want.first)) << file;
    for (const auto& r : rows) EXPECT_EQ(r.size(), want.second) << file;
  }
  const auto procs = parse_csv(read_file(dir.file("processes.csv")));
  EXPECT_EQ(procs[1][2], "training");
  EXPECT_EQ(procs[2][2].rfind("worker ", 0), 0u) << procs[2][2];
  const auto spans = parse_csv(read_file(dir.file("spans.csv")));
  std::set<std::string> threads;
  for (size_t i = 1; i < spans.size(); ++i) threads.insert(spans[i][3]);
  EXPECT_EQ(threads.count("main thread"), 1u);
  EXPECT_EQ(threads.count("pin memory"), 1u);
}

TEST(CsvExportTest, QuotesWhatNeedsQuotingAndLeavesUnendedSpansWithoutADuration) {
  TempDir dir;
  const std::string db = odd_recording(dir);
  export_to(db, dir.path(), true);
  const auto spans = parse_csv(read_file(dir.file("spans.csv")));
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[1][4], "step \"a\", b\nc");
  EXPECT_EQ(spans[1][8], "7");
  EXPECT_EQ(spans[1][9], "");
  EXPECT_EQ(spans[1][10], "-1");
  EXPECT_EQ(spans[3][6], "");  // never ended
  const auto procs = parse_csv(read_file(dir.file("processes.csv")));
  EXPECT_EQ(procs[1][3], "python odd.py, with \"quotes\"");
}

// The command line: what it writes, and its one-line refusals.
TEST(ExportCliTest, WritesRefusesAndExplainsInOneLine) {
  TempDir dir;
  const std::string db = dir.file("run.db"), out = dir.file("run.json");
  write_sim_recording(db, busy_run());

  ProcResult r = run_process({STALLSCOPE_BIN, "export", db});  // default: run.json beside it
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("batch flows"), std::string::npos) << r.err;
  EXPECT_TRUE(json::parse(read_file(out)).ok());

  r = run_process({STALLSCOPE_BIN, "export", db, "-o", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  r = run_process({STALLSCOPE_BIN, "export", db, "-o", out, "--force", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  r = run_process({STALLSCOPE_BIN, "export", db, "-o", "-"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out).ok());
  EXPECT_EQ(r.out, read_file(out));

  r = run_process({STALLSCOPE_BIN, "export", "--format", "xml", db});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("use perfetto or csv"), std::string::npos) << r.err;
  r = run_process({STALLSCOPE_BIN, "export", "--format", "csv", db, "-o", "-"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  for (const char* bad : {"2:1", "soon", "1", "1:x"}) {
    r = run_process({STALLSCOPE_BIN, "export", "--range", bad, db, "-o", "-"});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("T0:T1"), std::string::npos) << r.err;
  }
  // A range as CSV: the spans that overlap it, from 0.5 s to 1 s.
  r = run_process({STALLSCOPE_BIN, "export", "--range", "0.5:1", "-f", "csv", db, "-o", dir.file("part-csv")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(static_cast<int64_t>(parse_csv(read_file(dir.file("part-csv/spans.csv"))).size()) - 1,
            count_in(db, "SELECT count(*) FROM spans WHERE start_ns <= ?2 AND start_ns + dur_ns >= ?1", 500 * kMsNs,
                     1000 * kMsNs));

  write_file(dir.file("notes.db"), "not a recording at all, just text\n");
  r = run_process({STALLSCOPE_BIN, "export", dir.file("notes.db"), "-o", dir.file("notes.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(::access(dir.file("notes.json").c_str(), F_OK), -1);

  r = run_process({STALLSCOPE_BIN, "export", db, "-o", dir.file("no/such/dir/t.json")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;

  // CSV into a folder it makes; again only with --force.
  r = run_process({STALLSCOPE_BIN, "export", "-f", "csv", db, "-o", dir.file("csv")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_csv(read_file(dir.file("csv/spans.csv"))).size() - 1, static_cast<size_t>(table_count(db, "spans")));
  r = run_process({STALLSCOPE_BIN, "export", "-f", "csv", db, "-o", dir.file("csv")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stallscope::testing
