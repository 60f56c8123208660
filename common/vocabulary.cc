// The vocabulary's look-ups; see vocabulary.h.
#include "common/vocabulary.h"

#include <cstddef>

namespace stallscope::vocab {
namespace {

constexpr bool events_in_order() {
  for (size_t i = 0; i < std::size(kEvents); ++i) {
    if (static_cast<size_t>(kEvents[i].id) != i) return false;
  }
  return std::size(kEvents) == static_cast<size_t>(Event::kCount);
}
static_assert(events_in_order(), "kEvents must list every Event once, in enum order");

constexpr bool counters_in_order() {
  for (size_t i = 0; i < std::size(kCounters); ++i) {
    if (static_cast<size_t>(kCounters[i].id) != i) return false;
  }
  return std::size(kCounters) == static_cast<size_t>(Counter::kCount);
}
static_assert(counters_in_order(), "kCounters must list every Counter once, in enum order");

}  // namespace

Event event_of(std::string_view name) {
  if (name.empty()) return Event::kNone;
  for (const EventDef& e : kEvents) {
    if (e.name == name) return e.id;
  }
  return Event::kNone;
}

std::string_view name_of(Event e) {
  const size_t i = static_cast<size_t>(e);
  return i < std::size(kEvents) ? kEvents[i].name : std::string_view();
}

const Args& args_of(Event e, bool in_worker) {
  const size_t i = static_cast<size_t>(e);
  if (i >= std::size(kEvents)) return kNoArgs;
  const EventDef& d = kEvents[i];
  if (in_worker && d.worker_args != kNoArgs) return d.worker_args;
  return d.args != kNoArgs ? d.args : d.worker_args;  // events that only workers write
}

std::string_view arg_name(Arg a) {
  switch (a) {
    case Arg::kNone: return "";
    case Arg::kLoader: return "loader";
    case Arg::kEpoch: return "epoch";
    case Arg::kBatch: return "batch";
    case Arg::kWorker: return "worker";
    case Arg::kGeneration: return "generation";
    case Arg::kPid: return "pid";
    case Arg::kSamples: return "samples";
    case Arg::kCount: return "count";
    case Arg::kText: return "text";
    case Arg::kDomain: return "domain";
    case Arg::kCategory: return "category";
    case Arg::kRangeId: return "range_id";
    case Arg::kCorrelation: return "correlation";
    case Arg::kMicros: return "us";
    case Arg::kBytes: return "bytes";
    case Arg::kRank: return "rank";
    case Arg::kSeq: return "seq";
  }
  return "";
}

bool is_dataloader(Event e) { return e >= Event::kDlConfig && e <= Event::kHooks; }

bool is_cuda_call(Event e) { return e >= Event::kCudaStreamSynchronize && e <= Event::kCudaMemcpyAsync; }

Counter counter_of(std::string_view name) {
  if (name.empty()) return Counter::kNone;
  for (const CounterDef& c : kCounters) {
    if (c.name == name) return c.id;
  }
  return Counter::kNone;
}

std::string_view name_of(Counter c) {
  const size_t i = static_cast<size_t>(c);
  return i < std::size(kCounters) ? kCounters[i].name : std::string_view();
}

std::string_view unit_of(Counter c) {
  const size_t i = static_cast<size_t>(c);
  return i < std::size(kCounters) ? kCounters[i].unit : std::string_view();
}

void NameTable::add(uint32_t id, std::string_view text) {
  const Event e = event_of(text);
  if (id >= kDenseIds) {
    if (e == Event::kNone) {
      sparse_.erase(id);
    } else {
      sparse_[id] = e;
    }
    return;
  }
  if (e == Event::kNone && id >= events_.size()) return;  // nothing to remember
  if (id >= events_.size()) events_.resize(static_cast<size_t>(id) + 1, Event::kNone);
  events_[id] = e;
}

int severity_rank(std::string_view severity) {
  if (severity == kSeverityHigh) return 0;
  if (severity == kSeverityMedium) return 1;
  return 2;
}

}  // namespace stallscope::vocab
