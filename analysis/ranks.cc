// Ranks of a multi-rank job; see ranks.h.
#include "analysis/ranks.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "analysis/report.h"
#include "common/json.h"

namespace stallscope::analysis {
namespace {

using vocab::Event;

struct RankProcess {
  RankStats stats;
  int64_t process_id = 0;
};

// The part of `s` recorded by `process_ids`: their threads' spans and instants, their counters,
// their GPU work.
Session part_of(const Session& s, const std::set<int64_t>& process_ids) {
  Session p;
  p.path = s.path;
  p.meta = s.meta;
  p.strings = s.strings;
  p.end_ns = s.end_ns;
  p.complete = s.complete;
  std::unordered_set<int64_t> threads, pids;
  for (const ProcessRow& r : s.processes) {
    if (process_ids.count(r.id) == 0) continue;
    p.processes.push_back(r);
    pids.insert(r.pid);
  }
  for (const ThreadRow& t : s.threads) {
    if (process_ids.count(t.process_id) == 0) continue;
    p.threads.push_back(t);
    threads.insert(t.id);
  }
  for (const SpanRow& r : s.spans) {
    if (threads.count(r.thread_id) != 0) p.spans.push_back(r);
  }
  for (const InstantRow& r : s.instants) {
    if (threads.count(r.thread_id) != 0) p.instants.push_back(r);
  }
  std::unordered_set<int64_t> tracks;
  for (const CounterTrackRow& t : s.counter_tracks) {
    if (pids.count(t.pid) == 0) continue;
    p.counter_tracks.push_back(t);
    tracks.insert(t.id);
  }
  for (const CounterRow& c : s.counters) {
    if (tracks.count(c.track_id) != 0) p.counters.push_back(c);
  }
  for (const GpuActivityRow& g : s.gpu) {
    if (process_ids.count(g.process_id) != 0) p.gpu.push_back(g);
  }
  p.index();
  return p;
}

// The process `process_id` and every process it started (by parent pid), or that its DataLoader
// named as a worker (dl.worker_start), by processes.id.
std::set<int64_t> process_tree(const Session& s, int64_t process_id) {
  std::set<int64_t> ids = {process_id};
  std::set<int64_t> pids;
  if (const ProcessRow* p = s.process(process_id)) pids.insert(p->pid);
  for (bool grew = true; grew;) {
    grew = false;
    for (const InstantRow& in : s.instants) {
      if (s.event(in.name_id) != Event::kDlWorkerStart || !in.arg2) continue;
      const ThreadRow* t = s.thread(in.thread_id);
      if (t != nullptr && ids.count(t->process_id) != 0 && pids.insert(*in.arg2).second) grew = true;
    }
    for (const ProcessRow& r : s.processes) {
      if (ids.count(r.id) != 0) continue;
      if (pids.count(r.pid) != 0 || (r.ppid && pids.count(*r.ppid) != 0)) {
        ids.insert(r.id);
        pids.insert(r.pid);
        grew = true;
      }
    }
  }
  return ids;
}

// One rank's call of one collective.
struct Call {
  int64_t arrive = 0;
  std::optional<int64_t> leave;
  std::string op;
};

}  // namespace

RankSummary analyze_ranks(const Session& s) {
  RankSummary out;
  // Ranks: the first dist.rank of each process.
  std::map<int64_t, RankProcess> by_process;  // processes.id ->
  for (const InstantRow& in : s.instants) {
    if (s.event(in.name_id) != Event::kDistRank || !in.arg0) continue;
    const ThreadRow* t = s.thread(in.thread_id);
    if (t == nullptr || by_process.count(t->process_id) != 0) continue;
    RankProcess rp;
    rp.process_id = t->process_id;
    rp.stats.rank = *in.arg0;
    rp.stats.world_size = in.arg2.value_or(0);
    rp.stats.pid = s.pid_of_thread(in.thread_id);
    if (in.arg1) {
      auto doc = json::parse(s.string(static_cast<uint32_t>(*in.arg1)));
      if (doc.ok()) {
        rp.stats.local_rank = json::get_int(*doc, "local_rank");
        rp.stats.node = json::get_string(*doc, "node").value_or("");
        rp.stats.job = json::get_string(*doc, "job").value_or("");
        if (auto w = json::get_int(*doc, "world_size")) rp.stats.world_size = *w;
      }
    }
    by_process.emplace(t->process_id, std::move(rp));
  }
  if (by_process.size() < 2) return out;

  // Each rank's own figures.
  for (auto& [pid, rp] : by_process) {
    const Report r = analyze(part_of(s, process_tree(s, pid)));
    RankStats& st = rp.stats;
    st.wall_s = r.wall_s;
    st.steps = r.steps;
    st.samples_per_s = r.samples_per_s;
    st.step_p50_ms = r.step_time.p50_ms;
    st.stall_fraction = r.stall.fraction;
    st.stall_by_cause_s = r.stall.by_cause_s;
  }

  // Collectives, per rank: seq -> call.
  std::map<int64_t, std::map<int64_t, Call>> calls;  // process id -> seq -> call
  auto rank_process = [&](int64_t thread_id) -> RankProcess* {
    const ThreadRow* t = s.thread(thread_id);
    if (t == nullptr) return nullptr;
    auto it = by_process.find(t->process_id);
    return it == by_process.end() ? nullptr : &it->second;
  };
  for (const SpanRow& sp : s.spans) {
    if (s.event(sp.name_id) != Event::kDistCollective || !sp.arg1) continue;
    RankProcess* rp = rank_process(sp.thread_id);
    if (rp == nullptr) continue;
    Call& c = calls[rp->process_id][*sp.arg1];
    c.arrive = sp.start_ns;
    if (sp.dur_ns) c.leave = sp.start_ns + *sp.dur_ns;
    c.op = sp.arg2 ? s.string(static_cast<uint32_t>(*sp.arg2)) : "";
  }
  for (const InstantRow& in : s.instants) {
    const Event e = s.event(in.name_id);
    if ((e != Event::kDistIssue && e != Event::kDistDone) || !in.arg1) continue;
    const ThreadRow* t = s.thread(in.thread_id);
    if (t == nullptr || by_process.count(t->process_id) == 0) continue;
    Call& c = calls[t->process_id][*in.arg1];
    if (e == Event::kDistIssue) {
      c.arrive = in.ts_ns;
      c.op = in.arg2 ? s.string(static_cast<uint32_t>(*in.arg2)) : "";
    } else {
      c.leave = in.ts_ns;
    }
  }
  for (auto& [pid, rp] : by_process) {
    for (const auto& [seq, c] : calls[pid]) {
      ++rp.stats.collectives;
      if (c.leave && *c.leave >= c.arrive) rp.stats.collective_s += static_cast<double>(*c.leave - c.arrive) / 1e9;
    }
  }

  // Matched collectives: every rank called seq, with one op.
  std::map<int64_t, double> lost;  // process id -> seconds lost to it
  const auto& first = calls[by_process.begin()->first];
  for (const auto& [seq, c0] : first) {
    std::vector<std::pair<int64_t, int64_t>> arrivals;  // (arrive, process id)
    bool all = true;
    for (const auto& [pid, rp] : by_process) {
      auto it = calls[pid].find(seq);
      if (it == calls[pid].end() || it->second.op != c0.op) {
        all = false;
        break;
      }
      arrivals.emplace_back(it->second.arrive, pid);
    }
    if (!all) continue;
    ++out.matched;
    std::sort(arrivals.begin(), arrivals.end());
    const auto [last_at, last_pid] = arrivals.back();
    for (const auto& [at, pid] : arrivals)
      by_process[pid].stats.collective_wait_s += static_cast<double>(last_at - at) / 1e9;
    ++by_process[last_pid].stats.last_at;
    lost[last_pid] += static_cast<double>(last_at - arrivals[arrivals.size() - 2].first) / 1e9;
  }

  for (auto& [pid, rp] : by_process) out.ranks.push_back(rp.stats);
  std::sort(out.ranks.begin(), out.ranks.end(), [](const RankStats& a, const RankStats& b) { return a.rank < b.rank; });
  if (out.matched > 0) {
    auto most = std::max_element(by_process.begin(), by_process.end(), [](const auto& a, const auto& b) {
      return a.second.stats.last_at < b.second.stats.last_at;
    });
    out.slowest = RankSummary::Slowest{most->second.stats.rank, most->second.stats.last_at, lost[most->first]};
  }
  return out;
}

std::optional<Session> rank_part(const Session& s, int64_t rank) {
  for (const InstantRow& in : s.instants) {
    if (s.event(in.name_id) != Event::kDistRank || in.arg0 != rank) continue;
    const ThreadRow* t = s.thread(in.thread_id);
    if (t != nullptr) return part_of(s, process_tree(s, t->process_id));
  }
  return std::nullopt;
}

}  // namespace stallscope::analysis
