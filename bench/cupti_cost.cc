// Where CUPTI's cost lies: microseconds per CUDA operation from C++ (no Python), with CUPTI turned
// on in each of the ways stallscope could use it, and under stallscope itself.
//
//   cupti_cost [--rounds N] [--ops N] [--modes a,b,...] [--stallscope PATH] [--collector PATH]
//              [--cupti PATH] [--json FILE] [--list]
//
// Each mode runs in a process of its own (CUPTI's state cannot be reset within one), the modes
// taking turns round after round so that a drift of the machine spreads over all of them; each
// figure is the median over the rounds. A child measures five operations in a loop:
//   launch        an empty kernel (cudaLaunchKernel, one block of 32 threads), asynchronous;
//   launch+sync   the same kernel, then cudaStreamSynchronize: one round trip to the GPU;
//   memcpy        cudaMemcpy of 4 KiB from pageable host memory to the device (synchronous);
//   memcpy_async  cudaMemcpyAsync of 4 KiB from pinned host memory (asynchronous);
//   memset_async  cudaMemsetAsync of 4 KiB.
// and, where CUPTI activity is on, the records of each kind it delivered per operation, CUPTI's
// own overhead records (CUPTI_ACTIVITY_KIND_OVERHEAD, in the "+ovh" modes) and dropped records.
//
// The kernel comes from PTX text through cudaLibraryLoadData, so no CUDA compiler is needed to
// build this; the CUDA runtime is linked statically, so running it needs only the driver.
// libcupti is opened at run time (--cupti, STALLSCOPE_CUPTI, the loader's path, the toolkit).
// Without a GPU it says so in one line and exits 0: there is nothing to measure.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cupti_cost_modes.h"

extern char** environ;

namespace {

using stallscope::bench::CuptiSpec;
using stallscope::bench::Mode;
using Json = nlohmann::json;

constexpr const char* kLinePrefix = "CUPTI_COST ";
constexpr int kExitNoGpu = 3;

const char* kPtx = R"(.version 8.0
.target sm_80
.address_size 64
.visible .entry stallscope_empty()
{
  ret;
}
)";

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------------------------------------
// The child: one CUPTI configuration, one set of measurements.

struct CuptiApi {
  CUptiResult (*activity_enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*activity_get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*activity_flush_all)(uint32_t) = nullptr;
  CUptiResult (*activity_get_num_dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*activity_set_attribute)(CUpti_ActivityAttribute, size_t*, void*) = nullptr;
  CUptiResult (*activity_flush_period)(uint32_t) = nullptr;
  CUptiResult (*activity_enable_latency_timestamps)(uint8_t) = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) = nullptr;
  CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*get_result_string)(CUptiResult, const char**) = nullptr;
};

CuptiApi g_api;
CuptiSpec g_spec;

// Completed buffers: counts per record kind, CUPTI's overhead by kind, buffers seen.
std::mutex g_count_mu;
std::array<uint64_t, 64> g_kind_count{};
std::map<uint32_t, std::pair<uint64_t, uint64_t>> g_overhead;  // overhead kind -> (records, ns)
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_buffers{0};
std::atomic<uint64_t> g_callbacks{0};

// Buffers: allocated per request (as stallscope's collector does today) or recycled from a pool.
std::mutex g_pool_mu;
std::vector<uint8_t*> g_pool;

uint8_t* take_buffer() {
  if (g_spec.pool) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (!g_pool.empty()) {
      uint8_t* b = g_pool.back();
      g_pool.pop_back();
      return b;
    }
  }
  return static_cast<uint8_t*>(std::aligned_alloc(8, g_spec.buffer_bytes));
}

void give_buffer(uint8_t* b) {
  if (g_spec.pool) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    g_pool.push_back(b);
    return;
  }
  std::free(b);
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = take_buffer();
  *size = *buffer != nullptr ? g_spec.buffer_bytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  g_buffers.fetch_add(1, std::memory_order_relaxed);
  if (g_spec.walk) {
    std::array<uint64_t, 64> counts{};
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> overhead;
    CUpti_Activity* record = nullptr;
    while (g_api.activity_get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      const auto k = static_cast<uint32_t>(record->kind);
      ++counts[std::min<uint32_t>(k, 63)];
      if (record->kind == CUPTI_ACTIVITY_KIND_OVERHEAD) {
        // The fields read here lie before overheadData, where every version of the record agrees.
        const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
        auto& slot = overhead[static_cast<uint32_t>(o->overheadKind)];
        ++slot.first;
        if (o->end > o->start) slot.second += o->end - o->start;
      }
    }
    std::lock_guard<std::mutex> lock(g_count_mu);
    for (size_t i = 0; i < counts.size(); ++i) g_kind_count[i] += counts[i];
    for (const auto& [k, v] : overhead) {
      g_overhead[k].first += v.first;
      g_overhead[k].second += v.second;
    }
  }
  size_t dropped = 0;
  if (g_api.activity_get_num_dropped_records(context, stream, &dropped) == CUPTI_SUCCESS) {
    g_dropped.fetch_add(dropped, std::memory_order_relaxed);
  }
  give_buffer(buffer);
}

void CUPTIAPI api_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  g_callbacks.fetch_add(1, std::memory_order_relaxed);
}

std::string cupti_error(const char* what, CUptiResult r) {
  const char* s = nullptr;
  if (g_api.get_result_string == nullptr || g_api.get_result_string(r, &s) != CUPTI_SUCCESS || s == nullptr) {
    s = "unknown CUPTI error";
  }
  return std::string(what) + ": " + s;
}

void* open_cupti(std::string* tried) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("STALLSCOPE_CUPTI"); env != nullptr && *env) candidates.emplace_back(env);
  for (const char* c : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                        "/usr/local/cuda/lib64/libcupti.so.13"}) {
    candidates.emplace_back(c);
  }
  for (const auto& c : candidates) {
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + c;
  }
  return nullptr;
}

template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

// Turns CUPTI on as the spec says, before CUDA initialises. Empty string: done; else why not.
std::string start_cupti() {
  if (!g_spec.uses_cupti()) return "";
  std::string tried;
  void* lib = open_cupti(&tried);
  if (lib == nullptr) return "libcupti not found (tried " + tried + "); set STALLSCOPE_CUPTI or --cupti";
  CuptiApi& a = g_api;
  if (!resolve(lib, "cuptiActivityEnable", &a.activity_enable) ||
      !resolve(lib, "cuptiActivityRegisterCallbacks", &a.activity_register_callbacks) ||
      !resolve(lib, "cuptiActivityGetNextRecord", &a.activity_get_next_record) ||
      !resolve(lib, "cuptiActivityFlushAll", &a.activity_flush_all) ||
      !resolve(lib, "cuptiActivityGetNumDroppedRecords", &a.activity_get_num_dropped_records) ||
      !resolve(lib, "cuptiActivitySetAttribute", &a.activity_set_attribute) ||
      !resolve(lib, "cuptiActivityFlushPeriod", &a.activity_flush_period) ||
      !resolve(lib, "cuptiActivityEnableLatencyTimestamps", &a.activity_enable_latency_timestamps) ||
      !resolve(lib, "cuptiSubscribe", &a.subscribe) || !resolve(lib, "cuptiEnableCallback", &a.enable_callback) ||
      !resolve(lib, "cuptiEnableDomain", &a.enable_domain) ||
      !resolve(lib, "cuptiGetResultString", &a.get_result_string)) {
    return "this libcupti lacks a function the benchmark needs";
  }
  CUptiResult r = CUPTI_SUCCESS;
  if (!g_spec.kinds.empty()) {
    if (g_spec.per_thread_buffers >= 0) {
      uint8_t v = static_cast<uint8_t>(g_spec.per_thread_buffers);
      size_t n = sizeof v;
      r = a.activity_set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &n, &v);
      if (r != CUPTI_SUCCESS) return cupti_error("per-thread activity buffers", r);
    }
    if (g_spec.prealloc >= 0) {
      size_t v = static_cast<size_t>(g_spec.prealloc);
      size_t n = sizeof v;
      r = a.activity_set_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &n, &v);
      if (r != CUPTI_SUCCESS) return cupti_error("pre-allocated device buffers", r);
    }
    if (g_spec.latency >= 0) {
      r = a.activity_enable_latency_timestamps(static_cast<uint8_t>(g_spec.latency));
      if (r != CUPTI_SUCCESS) return cupti_error("latency timestamps", r);
    }
    r = a.activity_register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityRegisterCallbacks", r);
    for (CUpti_ActivityKind k : g_spec.kinds) {
      r = a.activity_enable(k);
      if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityEnable", r);
    }
    if (g_spec.flush_period_ms > 0) {
      r = a.activity_flush_period(static_cast<uint32_t>(g_spec.flush_period_ms));
      if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityFlushPeriod", r);
    }
  }
  if (g_spec.callbacks != CuptiSpec::Callbacks::kNone) {
    CUpti_SubscriberHandle sub = nullptr;
    r = a.subscribe(&sub, api_callback, nullptr);
    if (r != CUPTI_SUCCESS) return cupti_error("cuptiSubscribe", r);
    if (g_spec.callbacks == CuptiSpec::Callbacks::kBlocking) {
      // The runtime calls that block the host, as stallscope's collector subscribes to them.
      for (CUpti_CallbackId id :
           {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
            CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
            CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000}) {
        r = a.enable_callback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
        if (r != CUPTI_SUCCESS) return cupti_error("cuptiEnableCallback", r);
      }
    } else if (g_spec.callbacks == CuptiSpec::Callbacks::kRuntime) {
      r = a.enable_domain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
      if (r != CUPTI_SUCCESS) return cupti_error("cuptiEnableDomain", r);
    }
  }
  return "";
}

std::atomic<bool> g_stop_flusher{false};

void flusher() {
  while (!g_stop_flusher.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(g_spec.flush_ms));
    g_api.activity_flush_all(0);
  }
}

// One line of JSON on stdout, after kLinePrefix, is the child's whole answer.
[[noreturn]] void child_answer(const Json& j, int code) {
  std::printf("%s%s\n", kLinePrefix, j.dump().c_str());
  std::fflush(stdout);
  std::_Exit(code);
}

[[noreturn]] void child_fail(const std::string& why, int code = 1) { child_answer(Json{{"error", why}}, code); }

#define CUDA_OR_FAIL(call)                                                                        \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) child_fail(std::string(#call) + " failed: " + cudaGetErrorString(e_)); \
  } while (0)

int run_child(const std::string& spec_text, int ops) {
  std::string bad;
  if (!stallscope::bench::parse_spec(spec_text, &g_spec, &bad)) child_fail("bad spec: " + bad, 2);
  if (std::string why = start_cupti(); !why.empty()) child_fail(why);

  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    child_fail(std::string("no CUDA device (cudaGetDeviceCount: ") +
                   (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")",
               kExitNoGpu);
  }
  const double t_init = now_us();
  CUDA_OR_FAIL(cudaSetDevice(0));
  CUDA_OR_FAIL(cudaFree(nullptr));
  const double init_us = now_us() - t_init;
  std::thread flush_thread;
  if (!g_spec.kinds.empty() && g_spec.flush_ms > 0) flush_thread = std::thread(flusher);

  cudaLibrary_t lib = nullptr;
  CUDA_OR_FAIL(cudaLibraryLoadData(&lib, kPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t kernel = nullptr;
  CUDA_OR_FAIL(cudaLibraryGetKernel(&kernel, lib, "stallscope_empty"));
  cudaStream_t stream = nullptr;
  CUDA_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  constexpr size_t kBytes = 4096;
  void* dev = nullptr;
  void* pinned = nullptr;
  CUDA_OR_FAIL(cudaMalloc(&dev, kBytes));
  CUDA_OR_FAIL(cudaMallocHost(&pinned, kBytes));
  std::vector<char> pageable(kBytes, 1);
  const dim3 grid(1), block(32);
  auto launch = [&] {
    return cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, nullptr, 0, stream);
  };

  struct Op {
    const char* name;
    int n;
    std::function<cudaError_t()> once;
  };
  const int few = std::max(1, ops / 10);
  std::vector<Op> list = {
      {"launch", ops, launch},
      {"launch_sync", few,
       [&] {
         cudaError_t e = launch();
         return e != cudaSuccess ? e : cudaStreamSynchronize(stream);
       }},
      {"memcpy", few, [&] { return cudaMemcpy(dev, pageable.data(), kBytes, cudaMemcpyHostToDevice); }},
      {"memcpy_async", ops, [&] { return cudaMemcpyAsync(dev, pinned, kBytes, cudaMemcpyHostToDevice, stream); }},
      {"memset_async", ops, [&] { return cudaMemsetAsync(dev, 0, kBytes, stream); }},
  };
  Json out;
  out["init_us"] = init_us;
  Json& per_op = out["us_per_op"];
  Json& count = out["ops"];
  int64_t total_ops = 0;
  for (const Op& op : list) {
    for (int i = 0; i < std::min(op.n, 1000); ++i) CUDA_OR_FAIL(op.once());  // warm-up
    CUDA_OR_FAIL(cudaStreamSynchronize(stream));
    const double t0 = now_us();
    for (int i = 0; i < op.n; ++i) {
      if (cudaError_t e = op.once(); e != cudaSuccess) child_fail(std::string(op.name) + ": " + cudaGetErrorString(e));
    }
    CUDA_OR_FAIL(cudaStreamSynchronize(stream));
    per_op[op.name] = (now_us() - t0) / op.n;
    count[op.name] = op.n;
    total_ops += op.n + std::min(op.n, 1000);
  }
  out["launches"] = ops + std::min(ops, 1000) + few + std::min(few, 1000);
  out["total_ops"] = total_ops;
  if (!g_spec.kinds.empty()) {
    g_stop_flusher.store(true);
    if (flush_thread.joinable()) flush_thread.join();
    g_api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> lock(g_count_mu);
    Json& kinds = out["records"];
    for (size_t k = 0; k < g_kind_count.size(); ++k) {
      if (g_kind_count[k] > 0) kinds[stallscope::bench::activity_kind_name(static_cast<int>(k))] = g_kind_count[k];
    }
    Json& over = out["overhead"];
    for (const auto& [k, v] : g_overhead) {
      over[stallscope::bench::overhead_kind_name(k)] = Json{{"records", v.first}, {"ns", v.second}};
    }
    out["dropped"] = g_dropped.load();
    out["buffers"] = g_buffers.load();
  }
  out["callbacks"] = g_callbacks.load();
  child_answer(out, 0);
}

// ------------------------------------------------------------------------------------------------
// The parent: runs the modes in turns and prints the table.

struct Result {
  bool ok = false;
  int exit_code = 0;
  Json answer;
  std::string error;
};

// Runs argv with extra environment variables; the child's stdout is searched for kLinePrefix.
// stderr passes through (CUPTI's and stallscope's own lines stay visible).
Result run_capture(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env) {
  Result res;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    res.error = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return res;
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cupti_cost: cannot run %s: %s\n", args[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const size_t at = text.rfind(kLinePrefix);
  if (at == std::string::npos) {
    res.error = WIFSIGNALED(status) ? std::string("killed by signal ") + std::to_string(WTERMSIG(status))
                                    : "no answer (exit " + std::to_string(res.exit_code) + ")";
    return res;
  }
  const size_t start = at + std::strlen(kLinePrefix);
  const size_t end = text.find('\n', start);
  res.answer = Json::parse(text.substr(start, end == std::string::npos ? std::string::npos : end - start), nullptr,
                           /*allow_exceptions=*/false);
  if (res.answer.is_discarded()) {
    res.error = "unreadable answer";
  } else if (res.answer.contains("error")) {
    res.error = res.answer["error"].get<std::string>();
  } else {
    res.ok = res.exit_code == 0;
    if (!res.ok) res.error = "exit " + std::to_string(res.exit_code);
  }
  return res;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

std::string dir_of(const std::string& p) {
  const size_t at = p.rfind('/');
  return at == std::string::npos ? "." : p.substr(0, at);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void usage(FILE* f) {
  std::fprintf(f,
               "usage: cupti_cost [--rounds N] [--ops N] [--modes a,b,...] [--stallscope PATH] [--collector PATH]\n"
               "                  [--cupti PATH] [--json FILE] [--list]\n"
               "Microseconds per CUDA operation (empty kernel launch, launch + sync, 4 KiB copies and memset)\n"
               "with CUPTI turned on in each mode, each mode in a process of its own, modes taking turns for\n"
               "--rounds rounds (default 3); --ops launches per round (default 20000). --list prints the modes.\n"
               "The stallscope-* modes run the child under `stallscope run` (--stallscope, default beside this\n"
               "program); `inject` loads --collector (default ../lib/libstallscope.so) as CUDA_INJECTION64_PATH\n"
               "outside a recording. Without a GPU it says so and exits 0.\n");
}

int run_parent(int argc, char** argv) {
  int rounds = 3;
  int ops = 20000;
  std::string modes_arg, json_path;
  const std::string self = self_path();
  std::string stallscope = dir_of(self) + "/stallscope";
  std::string collector = dir_of(dir_of(self)) + "/lib/libstallscope.so";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cupti_cost: %s needs a value; see --help\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const char* name) {
      const std::string v = value(name);
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1 || n > 10000000) {
        std::fprintf(stderr, "cupti_cost: %s wants a whole number from 1 to 10000000, not '%s'\n", name, v.c_str());
        std::exit(2);
      }
      return static_cast<int>(n);
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--list") {
      for (const Mode& m : stallscope::bench::modes()) {
        std::printf("%-18s %s\n", m.name.c_str(), m.what.c_str());
      }
      return 0;
    } else if (a == "--rounds") {
      rounds = number("--rounds");
    } else if (a == "--ops") {
      ops = number("--ops");
    } else if (a == "--modes") {
      modes_arg = value("--modes");
    } else if (a == "--stallscope") {
      stallscope = value("--stallscope");
    } else if (a == "--collector") {
      collector = value("--collector");
    } else if (a == "--cupti") {
      ::setenv("STALLSCOPE_CUPTI", value("--cupti").c_str(), 1);
    } else if (a == "--json") {
      json_path = value("--json");
    } else {
      std::fprintf(stderr, "cupti_cost: unknown argument '%s'; see --help\n", a.c_str());
      return 2;
    }
  }
  std::vector<Mode> chosen;
  std::string bad;
  if (!stallscope::bench::choose_modes(modes_arg, &chosen, &bad)) {
    std::fprintf(stderr, "cupti_cost: unknown mode '%s'; --list shows them\n", bad.c_str());
    return 2;
  }
  // The first child tells whether there is anything to measure.
  {
    Result probe = run_capture({self, "--child", "", "--ops", "1"}, {});
    if (probe.exit_code == kExitNoGpu) {
      std::printf("cupti_cost: %s: nothing to measure\n", probe.error.c_str());
      return 0;
    }
    if (!probe.ok) {
      std::fprintf(stderr, "cupti_cost: the plain child failed: %s\n", probe.error.c_str());
      return 1;
    }
  }
  char tmpl[] = "/tmp/cupti-cost-XXXXXX";
  const char* tmp = ::mkdtemp(tmpl);
  if (tmp == nullptr) {
    std::fprintf(stderr, "cupti_cost: cannot make a temporary directory: %s\n", std::strerror(errno));
    return 1;
  }
  std::map<std::string, std::vector<Json>> answers;
  std::map<std::string, std::string> failures;
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < chosen.size(); ++j) {
      const Mode& m = chosen[(j + static_cast<size_t>(r)) % chosen.size()];
      std::vector<std::string> args;
      std::vector<std::pair<std::string, std::string>> env;
      if (!m.stallscope_gpu.empty()) {
        const std::string db = std::string(tmp) + "/" + m.name + "-" + std::to_string(r) + ".db";
        args = {stallscope,         "run", "-q", "-o",      db,     "--gpu",
                m.stallscope_gpu,   "--",  self, "--child", m.spec, "--ops",
                std::to_string(ops)};
      } else {
        args = {self, "--child", m.spec, "--ops", std::to_string(ops)};
        if (m.inject) env.emplace_back("CUDA_INJECTION64_PATH", collector);
      }
      Result res = run_capture(args, env);
      std::fprintf(stderr, "cupti_cost: round %d/%d %-18s %s\n", r + 1, rounds, m.name.c_str(),
                   res.ok ? "" : ("failed: " + res.error).c_str());
      if (res.ok) {
        answers[m.name].push_back(res.answer);
      } else {
        failures[m.name] = res.error;
      }
    }
  }
  std::string rm = std::string("rm -rf '") + tmp + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "cupti_cost: could not remove %s\n", tmp);

  const std::vector<std::string> op_names = {"launch", "launch_sync", "memcpy", "memcpy_async", "memset_async"};
  Json summary = Json::object();
  for (const Mode& m : chosen) {
    const auto it = answers.find(m.name);
    if (it == answers.end()) continue;
    Json s;
    for (const auto& op : op_names) {
      std::vector<double> v;
      for (const Json& a : it->second) v.push_back(a["us_per_op"].value(op, 0.0));
      s["us_per_op"][op] = median(v);
    }
    const Json& last = it->second.back();
    const double launches = last.value("launches", 1.0);
    const double total = last.value("total_ops", 1.0);
    if (last.contains("records")) {
      for (const auto& [k, n] : last["records"].items()) s["records_per_op"][k] = n.get<double>() / total;
    }
    if (last.contains("overhead")) {
      for (const auto& [k, o] : last["overhead"].items()) {
        s["overhead_ns_per_launch"][k] = o.value("ns", 0.0) / launches;
      }
    }
    s["dropped"] = last.value("dropped", 0);
    s["rounds"] = it->second.size();
    s["what"] = m.what;
    summary[m.name] = s;
  }
  const double base = summary.contains("plain") ? summary["plain"]["us_per_op"].value("launch", 0.0) : 0.0;
  std::printf("\nCUPTI's cost per CUDA operation, microseconds (median of %d rounds, modes interleaved)\n\n", rounds);
  std::printf(
      "| mode | launch | vs plain | launch+sync | memcpy 4 KiB | memcpy_async | memset_async | CUPTI overhead "
      "ns/launch | what |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Mode& m : chosen) {
    if (!summary.contains(m.name)) {
      std::printf("| %s | failed: %s | | | | | | | %s |\n", m.name.c_str(), failures[m.name].c_str(), m.what.c_str());
      continue;
    }
    const Json& s = summary[m.name];
    const Json& u = s["us_per_op"];
    const double launch = u.value("launch", 0.0);
    char ratio[32] = "";
    if (base > 0 && m.name != "plain") std::snprintf(ratio, sizeof ratio, "%+.1f %%", 100.0 * (launch / base - 1));
    std::string over;
    if (s.contains("overhead_ns_per_launch")) {
      for (const auto& [k, v] : s["overhead_ns_per_launch"].items()) {
        char cell[96];
        std::snprintf(cell, sizeof cell, "%s%s %.0f", over.empty() ? "" : ", ", k.c_str(), v.get<double>());
        over += cell;
      }
    }
    std::printf("| %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", m.name.c_str(), launch, ratio,
                u.value("launch_sync", 0.0), u.value("memcpy", 0.0), u.value("memcpy_async", 0.0),
                u.value("memset_async", 0.0), over.c_str(), m.what.c_str());
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << Json{{"rounds", rounds}, {"ops", ops}, {"modes", summary}, {"failures", failures}}.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cupti_cost: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) {
    int ops = 20000;
    if (argc >= 5 && std::strcmp(argv[3], "--ops") == 0) ops = std::max(1, std::atoi(argv[4]));
    return run_child(argv[2], ops);
  }
  return run_parent(argc, argv);
}
