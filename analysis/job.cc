// The job view from the ranks' summaries; see job.h.
#include "analysis/job.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "analysis/format.h"
#include "analysis/over_time.h"
#include "analysis/stats.h"
#include "storage/reader.h"
#include "storage/summaries.h"

namespace stallscope::analysis {
namespace {

constexpr int64_t kEdgeLevel = kSummaryLevelsNs.back();  // where a rank's first and last calls are looked for

std::optional<int64_t> to_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return percentile(v, 50).value_or(0);
}

// The split of `v` into a before and an after part (k in [1, n)) that leaves the least squared
// deviation from each part's mean: where a series that shifted once shifted. nullopt below 3 values.
std::optional<size_t> best_split(const std::vector<double>& v) {
  const size_t n = v.size();
  if (n < 3) return std::nullopt;
  std::vector<double> sum(n + 1, 0), sq(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    sum[i + 1] = sum[i] + v[i];
    sq[i + 1] = sq[i] + v[i] * v[i];
  }
  auto sse = [&](size_t a, size_t b) {  // [a, b)
    const double m = static_cast<double>(b - a);
    const double s = sum[b] - sum[a];
    return (sq[b] - sq[a]) - s * s / m;
  };
  size_t best = 1;
  double best_cost = INFINITY;
  for (size_t k = 1; k < n; ++k) {
    const double c = sse(0, k) + sse(k, n);
    if (c < best_cost - 1e-12) {
      best_cost = c;
      best = k;
    }
  }
  return best;
}

// One rank found in one recording.
struct RankIn {
  int64_t rank = 0, world_size = 0;
  std::string node, job;
  int64_t process_row = 0;
  std::unordered_set<int64_t> threads;  // its training process's threads
  std::unordered_set<int64_t> tree;     // those and its child processes' (its DataLoader workers)
  int64_t loader = -1;                  // its training loader: the most batches handed on those threads
};

struct FileIn {
  std::string path;
  std::unique_ptr<Reader> reader;
  std::map<std::string, std::string> meta;
  int64_t offset_ns = 0;  // added to the recording's times: job time
  std::vector<RankIn> ranks;
  std::optional<uint32_t> next_id, begin_id, coll_id, rank_id, fetch_id, issue_id;
};

Status find_ranks(FileIn& f) {
  Reader& r = *f.reader;
  auto ids = r.string_ids({"dist.rank", "dl.next", "dl.epoch_begin", "dist.collective", "dl.fetch", "dist.issue"});
  if (!ids.ok()) return ids.status();
  auto id = [&](const char* s) -> std::optional<uint32_t> {
    auto it = ids->find(s);
    return it == ids->end() ? std::nullopt : std::optional<uint32_t>(it->second);
  };
  f.rank_id = id("dist.rank");
  f.next_id = id("dl.next");
  f.begin_id = id("dl.epoch_begin");
  f.coll_id = id("dist.collective");
  f.fetch_id = id("dl.fetch");
  f.issue_id = id("dist.issue");
  auto threads = r.threads();
  if (!threads.ok()) return threads.status();
  std::unordered_map<int64_t, int64_t> process_of;
  for (const ThreadRow& t : *threads) process_of[t.id] = t.process_id;

  // Each process's training loader and the batches it handed there (a recording made before
  // handoff_summaries was kept: its next() calls).
  auto handoffs = r.handoff_summaries(kEdgeLevel);
  if (!handoffs.ok()) return handoffs.status();
  std::map<std::pair<int64_t, int64_t>, int64_t> handed;  // (process row, loader) -> batches
  if (*handoffs) {
    for (const HandoffSummaryRow& h : **handoffs) handed[{process_of[h.thread_id], h.loader}] += h.batches;
  } else if (f.next_id) {
    auto calls = r.span_summaries(kEdgeLevel, {*f.next_id});
    if (!calls.ok()) return calls.status();
    for (const SpanSummaryRow& c : *calls) handed[{process_of[c.thread_id], c.grp}] += c.count;
  }
  auto handed_by = [&](int64_t process_row) {
    int64_t n = 0;
    for (const auto& [key, batches] : handed) {
      if (key.first == process_row) n += batches;
    }
    return n;
  };
  auto loader_of = [&](int64_t process_row) {
    int64_t best = -1, most = 0;
    for (const auto& [key, n] : handed) {
      if (key.first == process_row && n > most) {
        most = n;
        best = key.second;
      }
    }
    return best;
  };

  auto meta_int = [&](const char* k) -> std::optional<int64_t> {
    auto it = f.meta.find(k);
    return it == f.meta.end() ? std::nullopt : to_int(it->second);
  };
  const std::string host = f.meta.count("host") ? f.meta.at("host") : "";

  if (f.rank_id) {
    auto buckets = r.instant_summaries(kEdgeLevel, {*f.rank_id});
    if (!buckets.ok()) return buckets.status();
    std::set<int64_t> seen;
    std::optional<std::map<uint32_t, std::string>> strings;
    for (const InstantSummaryRow& b : *buckets) {
      if (!seen.insert(b.bucket).second) continue;
      auto rows = r.instants_named_in({*f.rank_id}, b.bucket * kEdgeLevel, (b.bucket + 1) * kEdgeLevel);
      if (!rows.ok()) return rows.status();
      for (const InstantRow& in : *rows) {
        if (!in.arg0) continue;
        RankIn k;
        k.rank = *in.arg0;
        k.world_size = in.arg2.value_or(0);
        k.process_row = process_of[in.thread_id];
        k.node = host;
        if (in.arg1) {
          if (!strings) {
            auto s = r.strings();
            if (!s.ok()) return s.status();
            strings = std::move(*s);
          }
          auto it = strings->find(static_cast<uint32_t>(*in.arg1));
          if (it != strings->end()) {
            auto doc = json::parse(it->second);
            if (doc.ok()) {
              if (auto node = json::get_string(*doc, "node"); node && !node->empty()) k.node = *node;
              if (auto job = json::get_string(*doc, "job")) k.job = *job;
              if (auto ws = json::get_int(*doc, "world_size")) k.world_size = *ws;
            }
          }
        }
        // One rank said twice in a recording (a process that restarted): the process that handed more.
        auto same = std::find_if(f.ranks.begin(), f.ranks.end(), [&](const RankIn& o) { return o.rank == k.rank; });
        if (same == f.ranks.end()) {
          f.ranks.push_back(std::move(k));
        } else if (handed_by(k.process_row) > handed_by(same->process_row)) {
          *same = std::move(k);
        }
      }
    }
  }
  if (f.ranks.empty()) {
    if (auto rank = meta_int("rank")) {  // recorded as one rank, its hooks silent: the process that handed most
      RankIn k;
      k.rank = *rank;
      k.world_size = meta_int("world_size").value_or(0);
      k.node = host;
      if (f.meta.count("job")) k.job = f.meta.at("job");
      int64_t most = 0;
      for (const auto& [key, n] : handed) {
        if (n > most) {
          most = n;
          k.process_row = key.first;
        }
      }
      if (most > 0) f.ranks.push_back(std::move(k));
    }
  }
  auto processes = r.processes();
  if (!processes.ok()) return processes.status();
  for (RankIn& k : f.ranks) {
    std::optional<int64_t> pid;
    for (const ProcessRow& p : *processes) {
      if (p.id == k.process_row) pid = p.pid;
    }
    std::unordered_set<int64_t> family = {k.process_row};
    for (const ProcessRow& p : *processes) {
      if (pid && p.ppid == *pid) family.insert(p.id);
    }
    for (const ThreadRow& t : *threads) {
      if (t.process_id == k.process_row) k.threads.insert(t.id);
      if (family.count(t.process_id) != 0) k.tree.insert(t.id);
    }
    k.loader = loader_of(k.process_row);
  }
  return Status::Ok();
}

// The rank's training window in its recording's time: nullopt when it handed no batch.
Result<std::optional<std::pair<int64_t, int64_t>>> rank_window(FileIn& f, const RankIn& k,
                                                               const std::vector<SpanSummaryRow>& next_rows,
                                                               const std::vector<InstantSummaryRow>& begin_rows) {
  std::optional<int64_t> first_b, last_b, begin_b;
  for (const SpanSummaryRow& s : next_rows) {
    if (s.grp != k.loader || k.threads.count(s.thread_id) == 0) continue;
    if (!first_b || s.bucket < *first_b) first_b = s.bucket;
    if (!last_b || s.bucket > *last_b) last_b = s.bucket;
  }
  if (!first_b) return std::optional<std::pair<int64_t, int64_t>>();
  for (const InstantSummaryRow& s : begin_rows) {
    if (s.grp != k.loader || k.threads.count(s.thread_id) == 0) continue;
    if (!begin_b || s.bucket < *begin_b) begin_b = s.bucket;
  }
  Reader& r = *f.reader;
  auto mine = [&](const SpanRow& s) { return k.threads.count(s.thread_id) != 0 && s.arg0 == k.loader; };
  auto first = r.spans_named_in({*f.next_id}, *first_b * kEdgeLevel, (*first_b + 1) * kEdgeLevel);
  if (!first.ok()) return first.status();
  std::optional<int64_t> start;
  for (const SpanRow& s : *first) {
    if (mine(s) && (!start || s.start_ns < *start)) start = s.start_ns;
  }
  if (begin_b && f.begin_id) {
    auto b = r.instants_named_in({*f.begin_id}, *begin_b * kEdgeLevel, (*begin_b + 1) * kEdgeLevel);
    if (!b.ok()) return b.status();
    for (const InstantRow& in : *b) {
      if (k.threads.count(in.thread_id) != 0 && in.arg0 == k.loader && (!start || in.ts_ns < *start)) start = in.ts_ns;
    }
  }
  auto last = r.spans_named_in({*f.next_id}, *last_b * kEdgeLevel, (*last_b + 1) * kEdgeLevel);
  if (!last.ok()) return last.status();
  std::optional<int64_t> end;
  for (const SpanRow& s : *last) {
    if (mine(s) && s.dur_ns && (!end || s.start_ns + *s.dur_ns > *end)) end = s.start_ns + *s.dur_ns;
  }
  if (!start || !end || *end <= *start) return std::optional<std::pair<int64_t, int64_t>>();
  return std::optional<std::pair<int64_t, int64_t>>(std::make_pair(*start, *end));
}

// Job time: each recording's times moved so that all are on one clock. Recordings of one host share
// its monotonic clock (start_mono_ns, exact); hosts are put on one clock by their realtime starts.
void set_offsets(std::vector<FileIn>& files) {
  auto num = [](const FileIn& f, const char* k) -> std::optional<int64_t> {
    auto it = f.meta.find(k);
    return it == f.meta.end() ? std::nullopt : to_int(it->second);
  };
  // Per host, its earliest start (mono) and that recording's realtime start.
  std::map<std::string, std::pair<int64_t, int64_t>> host_base;  // host -> (mono, real)
  for (const FileIn& f : files) {
    const auto mono = num(f, "start_mono_ns"), real = num(f, "start_real_ns");
    if (!mono || !real) continue;
    const std::string host = f.meta.count("host") ? f.meta.at("host") : "";
    auto it = host_base.find(host);
    if (it == host_base.end() || *mono < it->second.first) host_base[host] = {*mono, *real};
  }
  std::optional<int64_t> earliest_real;
  for (const auto& [host, base] : host_base) {
    if (!earliest_real || base.second < *earliest_real) earliest_real = base.second;
  }
  for (FileIn& f : files) {
    const auto mono = num(f, "start_mono_ns"), real = num(f, "start_real_ns");
    const std::string host = f.meta.count("host") ? f.meta.at("host") : "";
    auto it = host_base.find(host);
    if (mono && real && it != host_base.end() && earliest_real) {
      f.offset_ns = (*mono - it->second.first) + (it->second.second - *earliest_real);
    } else if (real && earliest_real) {
      f.offset_ns = *real - *earliest_real;
    }
  }
}

}  // namespace

std::string rank_list(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<std::string>> job_folder(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> out;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".db" && it->is_regular_file(ec)) out.push_back(it->path().string());
  }
  if (ec) return Status::Error(dir + ": cannot list the folder: " + ec.message());
  if (out.empty()) {
    return Status::Error(dir +
                         ": no recordings (*.db) in the folder; record each rank with "
                         "'stallscope run -o " +
                         dir + "/part-{rank}.db' under torchrun");
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<JobView> job_view(const std::vector<std::string>& paths, int max_periods) {
  JobView v;
  std::vector<FileIn> files;
  for (const std::string& p : paths) {
    auto r = Reader::open(p);
    if (!r.ok()) return r.status();
    FileIn f;
    f.path = p;
    f.reader = std::move(*r);
    auto meta = f.reader->meta();
    if (!meta.ok()) return Status::Error(p + ": " + meta.status().message());
    f.meta = std::move(*meta);
    auto has = f.reader->has_summaries();
    if (!has.ok()) return Status::Error(p + ": " + has.status().message());
    if (!*has) {
      auto built = f.reader->build_temporary_summaries();
      if (!built.ok()) return Status::Error(p + ": " + built.message());
    }
    if (Status s = find_ranks(f); !s.ok()) return Status::Error(p + ": " + s.message());
    if (f.ranks.empty()) {
      v.notes.push_back(p + ": left out: no rank recorded in it (no dist.rank event, no meta rank)");
      continue;
    }
    files.push_back(std::move(f));
  }
  set_offsets(files);

  // Each rank's window (job time), from the summaries' coarsest level and the rows at its edges.
  struct Rk {
    FileIn* file;
    const RankIn* in;
    JobRank out;
  };
  std::vector<Rk> ranks;
  std::map<int64_t, std::string> seen;  // rank -> where
  for (FileIn& f : files) {
    if (!f.next_id) {
      v.notes.push_back(f.path + ": left out: its ranks called no DataLoader");
      continue;
    }
    auto next_rows = f.reader->span_summaries(kEdgeLevel, {*f.next_id});
    if (!next_rows.ok()) return Status::Error(f.path + ": " + next_rows.status().message());
    std::vector<InstantSummaryRow> begins;
    if (f.begin_id) {
      auto b = f.reader->instant_summaries(kEdgeLevel, {*f.begin_id});
      if (!b.ok()) return Status::Error(f.path + ": " + b.status().message());
      begins = std::move(*b);
    }
    for (const RankIn& k : f.ranks) {
      if (auto it = seen.find(k.rank); it != seen.end()) {
        return Status::Error("rank " + std::to_string(k.rank) + " is in both " + it->second + " and " + f.path +
                             "; give each rank's recording once");
      }
      seen[k.rank] = f.path;
      auto w = rank_window(f, k, *next_rows, begins);
      if (!w.ok()) return Status::Error(f.path + ": " + w.status().message());
      if (!*w) {
        v.notes.push_back(f.path + ": rank " + std::to_string(k.rank) + " left out: it handed no batch");
        continue;
      }
      Rk rk{&f, &k, {}};
      rk.out.rank = k.rank;
      rk.out.node = k.node.empty() ? "?" : k.node;
      rk.out.source = f.path;
      rk.out.start_ns = (*w)->first + f.offset_ns;
      rk.out.end_ns = (*w)->second + f.offset_ns;
      if (v.job.empty()) v.job = k.job;
      v.world_size = std::max(v.world_size, k.world_size);
      ranks.push_back(std::move(rk));
    }
  }
  if (ranks.empty()) {
    return Status::Error("no rank with a training loop in " + std::to_string(paths.size()) +
                         " recording(s); the job view needs recordings of ranks (stallscope run under torchrun)");
  }
  v.start_ns = INT64_MAX;
  v.end_ns = INT64_MIN;
  for (const Rk& k : ranks) {
    v.start_ns = std::min(v.start_ns, k.out.start_ns);
    v.end_ns = std::max(v.end_ns, k.out.end_ns);
  }
  const PeriodChoice pc = choose_period(v.end_ns - v.start_ns, max_periods);
  v.period_ns = pc.period_ns;
  v.level_ns = pc.level_ns;
  v.periods = static_cast<int>((v.end_ns - v.start_ns + v.period_ns - 1) / v.period_ns);
  const size_t n = static_cast<size_t>(std::max(1, v.periods));
  v.periods = static_cast<int>(n);

  // Per rank and period: data stall, collectives, samples, steps; and each rank's time in it.
  struct Acc {
    std::vector<double> data, coll, time, fetch;
    std::vector<int64_t> samples, fetches;
  };
  std::vector<Acc> acc(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    Acc& a = acc[i];
    a.data.assign(n, 0);
    a.coll.assign(n, 0);
    a.time.assign(n, 0);
    a.samples.assign(n, 0);
    a.fetch.assign(n, 0);
    a.fetches.assign(n, 0);
    const JobRank& k = ranks[i].out;
    for (size_t p = 0; p < n; ++p) {
      const int64_t p0 = v.start_ns + static_cast<int64_t>(p) * v.period_ns, p1 = p0 + v.period_ns;
      const int64_t lo = std::max(p0, k.start_ns), hi = std::min(p1, k.end_ns);
      if (hi > lo) a.time[p] = static_cast<double>(hi - lo) / 1e9;
    }
  }
  auto period_of = [&](int64_t bucket, int64_t offset) -> std::optional<size_t> {
    const int64_t mid = bucket * v.level_ns + v.level_ns / 2 + offset;
    if (mid < v.start_ns || mid >= v.start_ns + static_cast<int64_t>(n) * v.period_ns) {
      if (mid < v.start_ns && mid + v.level_ns / 2 >= v.start_ns) return 0;  // the first bucket, straddling
      if (mid >= v.start_ns) return n - 1;
      return std::nullopt;
    }
    return static_cast<size_t>((mid - v.start_ns) / v.period_ns);
  };
  for (FileIn& f : files) {
    std::vector<size_t> mine;  // indexes into ranks of this file's
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].file == &f) mine.push_back(i);
    }
    if (mine.empty()) continue;
    std::unordered_map<int64_t, size_t> rank_of_thread, rank_of_tree;
    for (size_t i : mine) {
      for (int64_t t : ranks[i].in->threads) rank_of_thread[t] = i;
      for (int64_t t : ranks[i].in->tree) rank_of_tree[t] = i;
    }
    std::vector<uint32_t> names = {*f.next_id};
    if (f.coll_id) names.push_back(*f.coll_id);
    if (f.fetch_id) names.push_back(*f.fetch_id);
    auto spans = f.reader->span_summaries(v.level_ns, names);
    if (!spans.ok()) return Status::Error(f.path + ": " + spans.status().message());
    for (const SpanSummaryRow& s : *spans) {
      const auto p = period_of(s.bucket, f.offset_ns);
      if (!p) continue;
      if (s.name_id == f.fetch_id) {
        auto it = rank_of_tree.find(s.thread_id);
        if (it == rank_of_tree.end()) continue;
        acc[it->second].fetch[*p] += static_cast<double>(s.total_ns) / 1e9;
        acc[it->second].fetches[*p] += s.count;
        continue;
      }
      auto it = rank_of_thread.find(s.thread_id);
      if (it == rank_of_thread.end()) continue;
      Rk& k = ranks[it->second];
      if (s.name_id == *f.next_id) {
        if (s.grp == k.in->loader) acc[it->second].data[*p] += static_cast<double>(s.total_ns) / 1e9;
      } else {
        acc[it->second].coll[*p] += static_cast<double>(s.total_ns) / 1e9;
        k.out.collectives += s.count;
      }
    }
    if (f.issue_id) {  // asynchronous collectives (DDP's buckets): counted, not timed
      auto issues = f.reader->instant_summaries(kEdgeLevel, {*f.issue_id});
      if (!issues.ok()) return Status::Error(f.path + ": " + issues.status().message());
      for (const InstantSummaryRow& in : *issues) {
        auto it = rank_of_tree.find(in.thread_id);
        if (it != rank_of_tree.end()) ranks[it->second].out.async_collectives += in.count;
      }
    }
    auto handoffs = f.reader->handoff_summaries(v.level_ns);
    if (!handoffs.ok()) return Status::Error(f.path + ": " + handoffs.status().message());
    if (*handoffs) {
      for (const HandoffSummaryRow& h : **handoffs) {
        auto it = rank_of_thread.find(h.thread_id);
        if (it == rank_of_thread.end() || h.loader != ranks[it->second].in->loader) continue;
        Rk& k = ranks[it->second];
        const auto p = period_of(h.bucket, f.offset_ns);
        if (!p) continue;
        acc[it->second].data[*p] += static_cast<double>(h.start_total_ns) / 1e9;
        acc[it->second].samples[*p] += h.samples;
        k.out.samples += h.samples;
        k.out.batches += h.batches;
        k.out.steps += h.steps;
      }
    }
  }

  // Each period's shares, the most any rank waited for its data (seconds), and what the others waited
  // for it: in lockstep, that rank's wait less their own. In seconds as summed, not shares of each
  // rank's time in the period: a summary bucket's wait goes whole to the period holding its middle, so
  // a share of a period a rank spent little of can exceed 1, and capping it lost the slow rank's wait.
  std::vector<double> most(n, 0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    JobRank& k = ranks[i].out;
    k.stall.assign(n, -1);
    k.fetch_ms.assign(n, -1);
    for (size_t p = 0; p < n; ++p) {
      k.fetch_s += acc[i].fetch[p];
      k.fetches += acc[i].fetches[p];
      if (acc[i].fetches[p] > 0) k.fetch_ms[p] = acc[i].fetch[p] * 1e3 / static_cast<double>(acc[i].fetches[p]);
      if (acc[i].time[p] <= 0) continue;
      k.stall[p] = std::clamp(acc[i].data[p] / acc[i].time[p], 0.0, 1.0);
      most[p] = std::max(most[p], acc[i].data[p]);
      k.data_s += acc[i].data[p];
      k.collective_s += acc[i].coll[p];
    }
  }
  std::vector<double> median_fetch(n, -1);  // the median rank's mean fetch time, per period
  for (size_t p = 0; p < n; ++p) {
    std::vector<double> xs;
    for (const Rk& k : ranks) {
      if (k.out.fetch_ms[p] >= 0) xs.push_back(k.out.fetch_ms[p]);
    }
    if (!xs.empty()) median_fetch[p] = median(std::move(xs));
  }
  v.median_fetch_ms = median_fetch;
  // The series of a rank's periods that it spent most of (a sliver at an edge says little).
  auto full = [&](size_t i, size_t p) { return acc[i].time[p] >= 0.5 * v.period_s(); };
  for (size_t i = 0; i < ranks.size(); ++i) {
    JobRank& k = ranks[i].out;
    double worst = -1;
    for (size_t p = 0; p < n; ++p) {
      k.behind_s += std::max(0.0, most[p] - acc[i].data[p]);
      if (k.stall[p] < 0) continue;
      if (full(i, p) && k.stall[p] > worst) {
        worst = k.stall[p];
        k.worst_period = static_cast<int>(p);
      }
    }
    // Where its data stall, or its fetch time against the median rank's, rose.
    std::vector<double> stall, ratio;
    std::vector<size_t> stall_at, ratio_at;
    for (size_t p = 0; p < n; ++p) {
      if (!full(i, p)) continue;
      stall.push_back(k.stall[p]);
      stall_at.push_back(p);
      if (k.fetch_ms[p] >= 0 && median_fetch[p] > 0) {
        ratio.push_back(k.fetch_ms[p] / median_fetch[p]);
        ratio_at.push_back(p);
      }
    }
    auto mean = [](const std::vector<double>& x, size_t a, size_t b) {
      return std::accumulate(x.begin() + static_cast<long>(a), x.begin() + static_cast<long>(b), 0.0) /
             static_cast<double>(b - a);
    };
    if (auto split = best_split(stall)) {
      if (mean(stall, *split, stall.size()) - mean(stall, 0, *split) >= kRise) {
        k.rose_at = static_cast<int>(stall_at[*split]);
      }
    }
    if (auto split = best_split(ratio)) {
      const double before = mean(ratio, 0, *split), after = mean(ratio, *split, ratio.size());
      if (before > 0 && after >= kFetchRise * before) {
        const int at = static_cast<int>(ratio_at[*split]);
        k.rose_at = k.rose_at ? std::min(*k.rose_at, at) : at;
      }
    }
  }

  // The job's samples/s per period, and where it fell.
  v.samples_per_s.assign(n, 0);
  std::vector<double> job_time(n, 0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    for (size_t p = 0; p < n; ++p) v.samples_per_s[p] += static_cast<double>(acc[i].samples[p]);
  }
  for (size_t p = 0; p < n; ++p) {
    const int64_t p0 = v.start_ns + static_cast<int64_t>(p) * v.period_ns;
    const int64_t len = std::min(p0 + v.period_ns, v.end_ns) - p0;
    job_time[p] = static_cast<double>(len) / 1e9;
    v.samples_per_s[p] = len > 0 ? v.samples_per_s[p] / job_time[p] : 0;
  }
  {
    std::vector<double> series;
    std::vector<size_t> at;
    for (size_t p = 0; p < n; ++p) {
      if (job_time[p] >= 0.9 * v.period_s()) {
        series.push_back(v.samples_per_s[p]);
        at.push_back(p);
      }
    }
    if (auto split = best_split(series)) {
      const double before = median({series.begin(), series.begin() + static_cast<long>(*split)});
      const double after = median({series.begin() + static_cast<long>(*split), series.end()});
      if (before > 0 && after <= (1 - kJobDrop) * before) {
        JobSlowdown sd;
        sd.period = static_cast<int>(at[*split]);
        sd.before = before;
        sd.after = after;
        v.slowdown = sd;
      }
    }
  }

  // Slow ranks: their data stall, or their fetch time, stands out from the median rank's, over the
  // whole run or over the part after the job slowed.
  auto from = [&](size_t i, size_t p0) {
    double d = 0, t = 0, f = 0;
    int64_t c = 0;
    for (size_t p = p0; p < n; ++p) {
      d += acc[i].data[p];
      t += acc[i].time[p];
      f += acc[i].fetch[p];
      c += acc[i].fetches[p];
    }
    return std::make_pair(t > 0 ? d / t : 0.0, c > 0 ? f / static_cast<double>(c) : -1.0);
  };
  const size_t late0 = v.slowdown ? static_cast<size_t>(v.slowdown->period) : 0;
  std::vector<double> whole_share, late_share, whole_fetch, late_fetch;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto w = from(i, 0), l = from(i, late0);
    whole_share.push_back(w.first);
    late_share.push_back(l.first);
    whole_fetch.push_back(w.second);
    late_fetch.push_back(l.second);
  }
  auto median_of_known = [](const std::vector<double>& xs) {
    std::vector<double> k;
    for (double x : xs) {
      if (x >= 0) k.push_back(x);
    }
    return k.empty() ? -1.0 : median(std::move(k));
  };
  const double ws_median = median(whole_share), ls_median = median(late_share);
  const double wf_median = median_of_known(whole_fetch), lf_median = median_of_known(late_fetch);
  std::set<int64_t> slow;
  for (size_t i = 0; i < ranks.size(); ++i) {
    JobRank& k = ranks[i].out;
    if (late_fetch[i] >= 0 && lf_median > 0) k.fetch_x = late_fetch[i] / lf_median;
    const bool by_data = whole_share[i] - ws_median >= kSlowBy || late_share[i] - ls_median >= kSlowBy;
    const bool by_fetch = (whole_fetch[i] >= 0 && wf_median > 0 && whole_fetch[i] >= kSlowFetchX * wf_median) ||
                          (k.fetch_x && *k.fetch_x >= kSlowFetchX);
    k.slow = by_data || by_fetch;
    if (k.slow) slow.insert(k.rank);
  }
  v.slow.assign(slow.begin(), slow.end());

  for (Rk& k : ranks) v.ranks.push_back(std::move(k.out));
  std::sort(v.ranks.begin(), v.ranks.end(), [](const JobRank& a, const JobRank& b) {
    if (a.slow != b.slow) return a.slow;
    if (a.data_share() != b.data_share()) return a.data_share() > b.data_share();
    if (a.fetch_x.value_or(0) != b.fetch_x.value_or(0)) return a.fetch_x.value_or(0) > b.fetch_x.value_or(0);
    return a.rank < b.rank;
  });

  std::map<std::string, JobNode> nodes;
  std::map<std::string, std::vector<double>> node_fetch_x;
  for (const JobRank& k : v.ranks) {
    JobNode& nd = nodes[k.node];
    nd.name = k.node;
    nd.ranks.push_back(k.rank);
    nd.data_share += k.data_share();
    if (k.fetch_x) node_fetch_x[k.node].push_back(*k.fetch_x);
    if (k.slow) ++nd.slow_ranks;
  }
  for (auto& [name, nd] : nodes) {
    nd.data_share /= static_cast<double>(nd.ranks.size());
    if (!node_fetch_x[name].empty()) nd.fetch_x = median(node_fetch_x[name]);
    std::sort(nd.ranks.begin(), nd.ranks.end());
    if (nd.ranks.size() >= 2 && nd.slow_ranks == static_cast<int>(nd.ranks.size()) && nodes.size() > 1) {
      v.slow_nodes.push_back(name);
    }
    v.nodes.push_back(nd);
  }
  std::sort(v.nodes.begin(), v.nodes.end(), [](const JobNode& a, const JobNode& b) {
    const double sa = static_cast<double>(a.slow_ranks) / static_cast<double>(a.ranks.size());
    const double sb = static_cast<double>(b.slow_ranks) / static_cast<double>(b.ranks.size());
    if (sa != sb) return sa > sb;
    if (a.data_share != b.data_share) return a.data_share > b.data_share;
    if (a.fetch_x.value_or(0) != b.fetch_x.value_or(0)) return a.fetch_x.value_or(0) > b.fetch_x.value_or(0);
    return a.name < b.name;
  });

  if (v.slowdown) {
    std::optional<int> first;
    for (const JobRank& k : v.ranks) {
      if (k.slow && k.rose_at && *k.rose_at <= v.slowdown->period + 1) {
        first = first ? std::min(*first, *k.rose_at) : *k.rose_at;
      }
    }
    if (first) {
      for (const JobRank& k : v.ranks) {
        if (k.slow && k.rose_at && *k.rose_at <= *first + 1) v.slowdown->first_ranks.push_back(k.rank);
      }
      std::sort(v.slowdown->first_ranks.begin(), v.slowdown->first_ranks.end());
      const std::set<int64_t> firsts(v.slowdown->first_ranks.begin(), v.slowdown->first_ranks.end());
      for (const JobNode& nd : v.nodes) {
        if (nd.ranks.size() < 2 || nodes.size() < 2) continue;
        if (std::all_of(nd.ranks.begin(), nd.ranks.end(), [&](int64_t r) { return firsts.count(r) != 0; })) {
          v.slowdown->first_nodes.push_back(nd.name);
        }
      }
    }
  }
  return v;
}

std::string render_job_text(const JobView& v, size_t max_ranks) {
  std::string o;
  const auto at = [&](int p) { return clock_time(v.start_ns + static_cast<int64_t>(p) * v.period_ns, 0); };
  const auto period_span = [&](int p) {
    return at(p) + "-" + clock_time(std::min(v.end_ns, v.start_ns + static_cast<int64_t>(p + 1) * v.period_ns), 0);
  };
  std::set<std::string> nodes;
  for (const JobRank& k : v.ranks) nodes.insert(k.node);
  o += "Job: " + std::to_string(v.ranks.size()) + " rank" + (v.ranks.size() == 1 ? "" : "s");
  if (v.world_size > static_cast<int64_t>(v.ranks.size())) o += " of " + std::to_string(v.world_size);
  o += " on " + std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s");
  if (!v.job.empty()) o += ", job " + v.job;
  o += "; training " + clock_time(v.start_ns, 0) + " to " + clock_time(v.end_ns, 0) + " (job time), periods of " +
       clock_time(v.period_ns, 0) + "\n";

  if (v.slowdown) {
    const JobSlowdown& s = *v.slowdown;
    o += "The job slowed at " + at(s.period) + ": " + fixed(s.before, 1) + " -> " + fixed(s.after, 1) + " samples/s (" +
         percent(s.after / s.before - 1, 0) + ").";
    if (!s.first_nodes.empty()) {
      o += " First on node" + std::string(s.first_nodes.size() > 1 ? "s " : " ");
      for (size_t i = 0; i < s.first_nodes.size(); ++i) o += (i ? ", " : "") + s.first_nodes[i];
      o += " (ranks " + rank_list(s.first_ranks) + "), whose input got slower then.";
    } else if (!s.first_ranks.empty()) {
      o += " First on rank" + std::string(s.first_ranks.size() > 1 ? "s " : " ") + rank_list(s.first_ranks) +
           ", whose input got slower then.";
    } else {
      o += " No rank's input got slower with it (data stall, fetch time): the ranks slowed in their steps.";
    }
    o += "\n";
  } else {
    o += "The job's samples/s held through the run (no fall of " + percent(kJobDrop, 0) + " or more).\n";
  }
  const std::string since = v.slowdown ? " from " + at(v.slowdown->period) : "";
  for (const JobNode& nd : v.nodes) {
    if (std::find(v.slow_nodes.begin(), v.slow_nodes.end(), nd.name) == v.slow_nodes.end()) continue;
    o += "Slow node " + nd.name + ": all " + std::to_string(nd.ranks.size()) + " of its ranks (" + rank_list(nd.ranks) +
         ") are slow";
    if (nd.fetch_x) o += ", their batches fetched in " + fixed(*nd.fetch_x, 1) + "x the median rank's time" + since;
    o += "; data stall " + percent(nd.data_share) + " of their time over the run.\n";
  }
  if (v.slow.empty()) {
    o += "No rank stands out: none stalls " + percent(kSlowBy, 0) + " more than the median rank, none fetches " +
         fixed(kSlowFetchX, 1) + "x slower.\n";
  } else {
    o += "Slow rank" + std::string(v.slow.size() > 1 ? "s" : "") + " (data stall " + percent(kSlowBy, 0) +
         " over the median rank's, or fetches " + fixed(kSlowFetchX, 1) + "x its time): " + rank_list(v.slow) + "\n";
  }

  const size_t shown = std::min(max_ranks, v.ranks.size());
  o += "\nRanks, slowest first";
  if (shown < v.ranks.size())
    o += " (" + std::to_string(shown) + " of " + std::to_string(v.ranks.size()) + "; --json for all)";
  o += ":\n";
  size_t node_w = 4;
  for (size_t i = 0; i < shown; ++i) node_w = std::max(node_w, v.ranks[i].node.size());
  o += "  " + pad("rank", 5, true) + "  " + pad("node", node_w) + "  " + pad("data stall", 10, true) + "  " +
       pad("waits for ranks", 15, true) + "  " + pad("fetch", 6, true) + "  " + pad("samples/s", 9, true) +
       "  worst period\n";
  for (size_t i = 0; i < shown; ++i) {
    const JobRank& k = v.ranks[i];
    const std::string waits =
        k.async_collectives == 0 && k.collectives > 0 ? percent(k.collective_share()) : "~" + percent(k.behind_share());
    std::string worst = "-";
    if (k.worst_period)
      worst = period_span(*k.worst_period) + " (" + percent(k.stall[static_cast<size_t>(*k.worst_period)]) + ")";
    o += "  " + pad(std::to_string(k.rank), 5, true) + "  " + pad(k.node, node_w) + "  " +
         pad(percent(k.data_share()), 10, true) + "  " + pad(waits, 15, true) + "  " +
         pad(or_dash(k.fetch_x, [](double x) { return fixed(x, 1) + "x"; }), 6, true) + "  " +
         pad(or_dash(k.samples_per_s(), [](double x) { return fixed(x, 1); }), 9, true) + "  " + worst + "\n";
  }
  o += "  data stall: waiting in next() and starting the loader; waits for ranks: in synchronous collectives,\n"
       "  or (~) the estimate from the ranks' data stalls where some are asynchronous (DDP) or none recorded;\n"
       "  fetch: its mean time to fetch a batch over the median rank's" +
       (since.empty() ? "" : "," + since) + "\n";

  if (v.nodes.size() > 1) {
    const size_t nshown = std::min<size_t>(5, v.nodes.size());
    o += "\nNodes, slowest first (" + std::to_string(nshown) + " of " + std::to_string(v.nodes.size()) + "):\n";
    for (size_t i = 0; i < nshown; ++i) {
      const JobNode& nd = v.nodes[i];
      o += "  " + pad(nd.name, node_w) + "  ranks " + rank_list(nd.ranks) + ": data stall " + percent(nd.data_share) +
           (nd.fetch_x ? ", fetch " + fixed(*nd.fetch_x, 1) + "x" : "") +
           (nd.slow_ranks ? ", " + std::to_string(nd.slow_ranks) + " slow" : "") + "\n";
    }
  }
  if (!v.ranks.empty()) o += "\nOne rank's whole report: stallscope report " + v.ranks.front().source + "\n";
  for (const std::string& n : v.notes) o += "note: " + n + "\n";
  return o;
}

Json job_to_json(const JobView& v) {
  Json o = Json::object();
  o["schema"] = "stallscope.job/1";
  o["job"] = v.job.empty() ? Json(nullptr) : Json(v.job);
  o["world_size"] = v.world_size > 0 ? Json(v.world_size) : Json(nullptr);
  o["ranks_read"] = v.ranks.size();
  o["start_s"] = static_cast<double>(v.start_ns) / 1e9;
  o["end_s"] = static_cast<double>(v.end_ns) / 1e9;
  o["period_s"] = v.period_s();
  o["samples_per_s_by_period"] = v.samples_per_s;
  if (v.slowdown) {
    Json s = Json::object();
    s["period"] = v.slowdown->period;
    s["at_s"] = static_cast<double>(v.start_ns + v.slowdown->period * v.period_ns) / 1e9;
    s["samples_per_s_before"] = v.slowdown->before;
    s["samples_per_s_after"] = v.slowdown->after;
    s["first_ranks"] = v.slowdown->first_ranks;
    s["first_nodes"] = v.slowdown->first_nodes;
    o["slowdown"] = std::move(s);
  } else {
    o["slowdown"] = nullptr;
  }
  o["slow_ranks"] = v.slow;
  o["slow_nodes"] = v.slow_nodes;
  Json nodes = Json::array();
  for (const JobNode& nd : v.nodes) {
    Json n = Json::object();
    n["node"] = nd.name;
    n["ranks"] = nd.ranks;
    n["data_stall_share"] = nd.data_share;
    n["fetch_x"] = nd.fetch_x ? Json(*nd.fetch_x) : Json(nullptr);
    n["slow_ranks"] = nd.slow_ranks;
    nodes.push_back(std::move(n));
  }
  o["nodes"] = std::move(nodes);
  Json ranks = Json::array();
  for (const JobRank& k : v.ranks) {
    Json r = Json::object();
    r["rank"] = k.rank;
    r["node"] = k.node;
    r["source"] = k.source;
    r["start_s"] = static_cast<double>(k.start_ns) / 1e9;
    r["window_s"] = k.window_s();
    r["steps"] = k.steps;
    r["batches"] = k.batches;
    r["samples"] = k.samples;
    r["samples_per_s"] = k.samples_per_s() ? Json(*k.samples_per_s()) : Json(nullptr);
    r["data_stall_s"] = k.data_s;
    r["data_stall_share"] = k.data_share();
    r["collectives"] = k.collectives;
    r["collective_s"] = k.collective_s;
    r["async_collectives"] = k.async_collectives;
    r["behind_s"] = k.behind_s;
    r["behind_share"] = k.behind_share();
    r["fetches"] = k.fetches;
    r["fetch_ms_mean"] = k.fetches > 0 ? Json(k.fetch_s * 1e3 / static_cast<double>(k.fetches)) : Json(nullptr);
    r["fetch_x"] = k.fetch_x ? Json(*k.fetch_x) : Json(nullptr);
    r["slow"] = k.slow;
    if (k.worst_period) {
      Json w = Json::object();
      w["period"] = *k.worst_period;
      w["data_stall_share"] = k.stall[static_cast<size_t>(*k.worst_period)];
      r["worst_period"] = std::move(w);
    } else {
      r["worst_period"] = nullptr;
    }
    r["stall_rose_at_period"] = k.rose_at ? Json(*k.rose_at) : Json(nullptr);
    Json st = Json::array();
    for (double s : k.stall) st.push_back(s < 0 ? Json(nullptr) : Json(s));
    r["data_stall_by_period"] = std::move(st);
    Json fm = Json::array();
    for (double f : k.fetch_ms) fm.push_back(f < 0 ? Json(nullptr) : Json(f));
    r["fetch_ms_by_period"] = std::move(fm);
    ranks.push_back(std::move(r));
  }
  o["ranks"] = std::move(ranks);
  o["notes"] = v.notes;
  return o;
}

}  // namespace stallscope::analysis
