#include "bench/cupti_cost_modes.h"

#include <charconv>
#include <utility>

namespace stallscope::bench {

namespace {

struct KindName {
  const char* word;
  CUpti_ActivityKind kind;
};

constexpr KindName kKinds[] = {
    {"ck", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}, {"kernel", CUPTI_ACTIVITY_KIND_KERNEL},
    {"memcpy", CUPTI_ACTIVITY_KIND_MEMCPY},        {"memset", CUPTI_ACTIVITY_KIND_MEMSET},
    {"sync", CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}, {"runtime", CUPTI_ACTIVITY_KIND_RUNTIME},
    {"driver", CUPTI_ACTIVITY_KIND_DRIVER},        {"overhead", CUPTI_ACTIVITY_KIND_OVERHEAD},
};

bool parse_int(std::string_view v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t mult = 1;
  if (!v.empty() && (v.back() == 'K' || v.back() == 'k')) {
    mult = 1024;
    v.remove_suffix(1);
  } else if (!v.empty() && (v.back() == 'M' || v.back() == 'm')) {
    mult = 1024 * 1024;
    v.remove_suffix(1);
  }
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return false;
  if (n < lo / mult || n > hi / mult) return false;
  *out = n * mult;
  return n * mult >= lo;
}

}  // namespace

bool parse_spec(std::string_view text, CuptiSpec* out, std::string* bad) {
  *out = CuptiSpec{};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view word = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) {
      *bad = std::string(word);
      return false;
    }
    const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
    int64_t n = 0;
    auto fail = [&] {
      *bad = std::string(word);
      return false;
    };
    if (key == "act") {
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t plus = rest.find('+');
        const std::string_view k = rest.substr(0, plus);
        rest = plus == std::string_view::npos ? std::string_view() : rest.substr(plus + 1);
        bool found = false;
        for (const KindName& kn : kKinds) {
          if (k == kn.word) {
            out->kinds.push_back(kn.kind);
            found = true;
          }
        }
        if (!found) return fail();
      }
    } else if (key == "cb") {
      if (value == "none") {
        out->callbacks = CuptiSpec::Callbacks::kNone;
      } else if (value == "subscribe") {
        out->callbacks = CuptiSpec::Callbacks::kSubscribe;
      } else if (value == "blocking") {
        out->callbacks = CuptiSpec::Callbacks::kBlocking;
      } else if (value == "runtime") {
        out->callbacks = CuptiSpec::Callbacks::kRuntime;
      } else {
        return fail();
      }
    } else if (key == "buf") {
      if (!parse_int(value, 64 * 1024, int64_t{1} << 30, &n)) return fail();
      out->buffer_bytes = static_cast<size_t>(n);
    } else if (key == "pool" || key == "walk" || key == "ptb" || key == "lat") {
      if (value != "0" && value != "1") return fail();
      const int b = value == "1" ? 1 : 0;
      if (key == "pool") out->pool = b != 0;
      if (key == "walk") out->walk = b != 0;
      if (key == "ptb") out->per_thread_buffers = b;
      if (key == "lat") out->latency = b;
    } else if (key == "flush" || key == "period") {
      if (!parse_int(value, 0, 60000, &n)) return fail();
      (key == "flush" ? out->flush_ms : out->flush_period_ms) = static_cast<int>(n);
    } else if (key == "prealloc") {
      if (!parse_int(value, 0, 1024, &n)) return fail();
      out->prealloc = n;
    } else {
      return fail();
    }
  }
  return true;
}

const std::vector<Mode>& modes() {
  // What stallscope's collector asks CUPTI for under --gpu all (collector/cupti_source.cc).
  static const std::string kCollector = "act=ck+memcpy+memset+sync,cb=blocking";
  static const std::vector<Mode> all = {
      {"plain", "", false, "", "no CUPTI"},
      {"inject", "", true, "", "stallscope's library loaded as CUDA_INJECTION64_PATH, not recording: no CUPTI"},
      {"subscribe", "cb=subscribe", false, "", "cuptiSubscribe, no callback enabled"},
      {"cb-blocking", "cb=blocking", false, "", "callbacks on the blocking runtime calls only (stallscope's)"},
      {"cb-runtime", "cb=runtime", false, "", "callbacks on every runtime call"},
      {"ck", "act=ck", false, "", "CONCURRENT_KERNEL records"},
      {"kernel", "act=kernel", false, "", "KERNEL records (serial)"},
      {"memcpy", "act=memcpy", false, "", "MEMCPY records"},
      {"memset", "act=memset", false, "", "MEMSET records"},
      {"sync", "act=sync", false, "", "SYNCHRONIZATION records"},
      {"runtime", "act=runtime", false, "", "RUNTIME API records"},
      {"driver", "act=driver", false, "", "DRIVER API records"},
      {"ck-nowalk", "act=ck,walk=0", false, "", "CONCURRENT_KERNEL, completed buffers handed back unread"},
      {"ck-pool", "act=ck,pool=1", false, "", "CONCURRENT_KERNEL, buffers recycled"},
      {"ck-buf1M", "act=ck,buf=1M", false, "", "CONCURRENT_KERNEL, 1 MiB buffers"},
      {"ck-buf32M", "act=ck,buf=32M", false, "", "CONCURRENT_KERNEL, 32 MiB buffers"},
      {"ck-noflush", "act=ck,flush=0", false, "", "CONCURRENT_KERNEL, no flush thread (buffers handed over full)"},
      {"ck-period", "act=ck,flush=0,period=100", false, "", "CONCURRENT_KERNEL, CUPTI's own flush every 100 ms"},
      {"ck-ptb0", "act=ck,ptb=0", false, "", "CONCURRENT_KERNEL, one buffer for all threads"},
      {"ck-lat1", "act=ck,lat=1", false, "", "CONCURRENT_KERNEL, latency timestamps on"},
      {"ck-prealloc", "act=ck,prealloc=4,pool=1", false, "", "CONCURRENT_KERNEL, 4 device buffers pre-allocated"},
      {"ck+ovh", "act=ck+overhead", false, "", "CONCURRENT_KERNEL and CUPTI's overhead records"},
      {"collector-set", kCollector, false, "", "what --gpu all enables, done by this program"},
      {"collector-set+ovh", kCollector + ",act=overhead", false, "", "the same and CUPTI's overhead records"},
      {"stallscope-off", "", false, "off", "under `stallscope run --gpu off`"},
      {"stallscope-kernel", "", false, "kernel", "under `stallscope run --gpu kernel`"},
      {"stallscope-all", "", false, "all", "under `stallscope run` (--gpu all)"},
  };
  return all;
}

bool choose_modes(std::string_view list, std::vector<Mode>* out, std::string* bad) {
  out->clear();
  const auto& all = modes();
  out->push_back(all.front());
  if (list.empty()) {
    out->assign(all.begin(), all.end());
    return true;
  }
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name == "plain") continue;
    bool found = false;
    for (const Mode& m : all) {
      if (m.name == name) {
        out->push_back(m);
        found = true;
      }
    }
    if (!found) {
      *bad = std::string(name);
      return false;
    }
  }
  return true;
}

std::string activity_kind_name(int kind) {
  for (const KindName& kn : kKinds) {
    if (static_cast<int>(kn.kind) == kind) return kn.word;
  }
  return "kind_" + std::to_string(kind);
}

std::string overhead_kind_name(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "buffer_flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module_loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy_loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command_buffer_full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "buffer_request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "uvm_init";
    default: return "overhead_" + std::to_string(kind);
  }
}

}  // namespace stallscope::bench
