// The modes of bench/cupti_cost: how CUPTI is turned on in one measurement, written as a spec of
// comma-separated key=value words (parse_spec), and the named modes the benchmark runs.
//
//   act=ck+memcpy+...   activity kinds: ck (CONCURRENT_KERNEL), kernel (serial KERNEL), memcpy,
//                       memset, sync, runtime, driver, overhead (CUPTI's own overhead records)
//   cb=none|subscribe|blocking|runtime
//                       the callback API: subscribed with nothing enabled, the blocking runtime
//                       calls stallscope's collector asks for, or every runtime call
//   buf=4M              host activity buffer size (K or M suffix)
//   pool=0|1            buffers recycled from a pool instead of allocated per request
//   walk=0|1            the completion callback walks the records (1) or hands the buffer back (0)
//   flush=100           a thread calls cuptiActivityFlushAll(0) every N ms (0: none)
//   period=N            cuptiActivityFlushPeriod(N) (CUPTI's own worker thread flushes)
//   ptb=0|1             CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER (unset: CUPTI's default)
//   lat=0|1             cuptiActivityEnableLatencyTimestamps (unset: CUPTI's default, off)
//   prealloc=N          CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE
#pragma once

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::bench {

struct CuptiSpec {
  enum class Callbacks { kNone, kSubscribe, kBlocking, kRuntime };
  std::vector<CUpti_ActivityKind> kinds;
  Callbacks callbacks = Callbacks::kNone;
  size_t buffer_bytes = 4u << 20;
  bool pool = false;
  bool walk = true;
  int flush_ms = 100;
  int flush_period_ms = 0;
  int per_thread_buffers = -1;  // -1: left as CUPTI sets it
  int latency = -1;
  int64_t prealloc = -1;
  bool uses_cupti() const { return !kinds.empty() || callbacks != Callbacks::kNone; }
};

// False, with the offending word in *bad, for an unknown key or value; "" is the plain mode.
bool parse_spec(std::string_view text, CuptiSpec* out, std::string* bad);

struct Mode {
  std::string name;
  std::string spec;            // the child's CUPTI spec
  bool inject = false;         // the collector as CUDA_INJECTION64_PATH, outside a recording
  std::string stallscope_gpu;  // non-empty: run under `stallscope run --gpu THIS`
  std::string what;
};

// Every mode, in the order the table shows them; "plain" first.
const std::vector<Mode>& modes();

// The modes named in a comma list (empty: all); "plain" is always measured, first. False with the
// unknown name in *bad.
bool choose_modes(std::string_view list, std::vector<Mode>* out, std::string* bad);

// Short names of activity and overhead kinds for the table ("kind_42" for one not listed).
std::string activity_kind_name(int kind);
std::string overhead_kind_name(uint32_t kind);

}  // namespace stallscope::bench
