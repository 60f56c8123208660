// Light GPU mode; see gpu_light.h.
#include "collector/gpu_light.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "collector/clock.h"
#include "collector/collector.h"
#include "collector/gpu_choice.h"

namespace stallscope {

const char* gpu_mark_name(GpuMarkKind k) {
  switch (k) {
    case GpuMarkKind::kNextBegin: return "next_begin";
    case GpuMarkKind::kNextEnd: return "next_end";
  }
  return "mark";
}

bool CudaDriver::from_loaded_library(CudaDriver* out, std::string* why) {
  // Only a libcuda the process has loaded already: light mode never brings CUDA in.
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (lib == nullptr) {
    why->clear();
    return false;
  }
  struct Sym {
    const char* name;
    void** slot;
  };
  CudaDriver d;
  const Sym syms[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void**>(&d.ctx_get_current)},
      {"cuCtxSetCurrent", reinterpret_cast<void**>(&d.ctx_set_current)},
      {"cuEventCreate", reinterpret_cast<void**>(&d.event_create)},
      {"cuEventRecord", reinterpret_cast<void**>(&d.event_record)},
      {"cuEventQuery", reinterpret_cast<void**>(&d.event_query)},
      {"cuEventSynchronize", reinterpret_cast<void**>(&d.event_synchronize)},
      {"cuEventElapsedTime_v2", reinterpret_cast<void**>(&d.event_elapsed_ms)},
      {"cuStreamCreate", reinterpret_cast<void**>(&d.stream_create)},
  };
  for (const Sym& s : syms) {
    *s.slot = ::dlsym(lib, s.name);
    if (*s.slot == nullptr && std::strcmp(s.name, "cuEventElapsedTime_v2") == 0) {
      *s.slot = ::dlsym(lib, "cuEventElapsedTime");  // drivers before CUDA 12.8
    }
    if (*s.slot == nullptr) {
      *why = std::string("libcuda.so.1 has no ") + s.name;
      return false;
    }
  }
  *out = d;
  return true;
}

GpuMarks::GpuMarks(const CudaDriver& driver, std::function<uint64_t()> clock, int pool_size)
    : d_(driver), clock_(std::move(clock)), pool_size_(pool_size) {}

void GpuMarks::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  why_ = why;  // written before the flag: whoever sees failed() reads a whole why_failed()
  failed_.store(true, std::memory_order_release);
}

bool GpuMarks::mark(GpuMarkKind kind) {
  if (failed_.load(std::memory_order_relaxed)) return false;
  void* ctx = nullptr;
  if (d_.ctx_get_current(&ctx) != kCudaSuccess || ctx == nullptr) return false;  // CUDA not in use here yet
  if (!bound_.load(std::memory_order_acquire)) {
    // The first context seen: the training thread's. Events are created here, once.
    std::vector<void*> events;
    for (int i = 0; i < pool_size_; ++i) {
      void* e = nullptr;
      if (d_.event_create(&e, 0) != kCudaSuccess) {
        fail("cuEventCreate failed");
        return false;
      }
      events.push_back(e);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_ = std::move(events);
      pending_.reserve(static_cast<size_t>(pool_size_));
      ctx_ = ctx;
    }
    bound_.store(true, std::memory_order_release);
  } else if (ctx != ctx_) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  void* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    e = free_.back();
    free_.pop_back();
  }
  const uint64_t host = clock_();
  // Stream 0 through the non-per-thread entry point: the legacy default stream.
  if (d_.event_record(e, nullptr) != kCudaSuccess) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(e);
    }
    fail("cuEventRecord on the default stream failed");
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(Pending{e, kind, host});
  recorded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool GpuMarks::anchor() {
  if (!bound_.load(std::memory_order_acquire) || failed_.load(std::memory_order_relaxed)) return false;
  if (!reader_bound_) {
    if (d_.ctx_set_current(ctx_) != kCudaSuccess) {
      fail("cuCtxSetCurrent failed on the reader thread");
      return false;
    }
    constexpr unsigned kNonBlocking = 1;  // CU_STREAM_NON_BLOCKING: no wait on the default stream
    if (d_.stream_create(&stream_, kNonBlocking) != kCudaSuccess) {
      fail("cuStreamCreate failed");
      return false;
    }
    for (Anchor& a : anchors_) {
      if (d_.event_create(&a.event, 0) != kCudaSuccess) {
        fail("cuEventCreate failed");
        return false;
      }
    }
    if (d_.event_create(&spare_, 0) != kCudaSuccess) {
      fail("cuEventCreate failed");
      return false;
    }
    reader_bound_ = true;
  }
  // The anchor's error is half its round trip, which is a few microseconds unless this thread is
  // descheduled between the record and the return of the wait (on a busy machine, milliseconds,
  // and every mark until the next anchor would carry it). So it is taken up to kAnchorTries times
  // and the tightest kept: each try goes to the spare event, which trades places with the slot's
  // when it beats the best so far.
  Anchor& a = anchors_[anchor_next_];
  uint64_t best_rtt = UINT64_MAX, best_before = 0, best_after = 0;
  for (int i = 0; i < kAnchorTries && best_rtt > kAnchorTightNs; ++i) {
    const uint64_t before = clock_();
    if (d_.event_record(spare_, stream_) != kCudaSuccess || d_.event_synchronize(spare_) != kCudaSuccess) {
      fail("an anchor event failed");
      return false;
    }
    const uint64_t after = clock_();
    if (after - before < best_rtt) {
      best_rtt = after - before;
      best_before = before;
      best_after = after;
      std::swap(a.event, spare_);
    }
  }
  // A slot is reused only for a newer anchor; poll() takes the latest one recorded before a mark.
  a.host_ns = best_before + (best_after - best_before) / 2;
  a.after_ns = best_after;
  anchor_next_ = (anchor_next_ + 1) % kAnchors;
  return true;
}

int GpuMarks::poll(const std::function<void(const GpuActivity&)>& out) {
  if (!reader_bound_) return 0;
  int n = 0;
  for (;;) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) break;
      p = pending_.front();
    }
    const int q = d_.event_query(p.event);
    if (q == kCudaNotReady) break;
    if (q != kCudaSuccess) {
      fail("cuEventQuery failed");
      break;
    }
    // The latest anchor reached before the mark was recorded: the mark was reached after it. A mark
    // older than every anchor (those before the reader's first) is measured back from the oldest.
    const Anchor* before = nullptr;
    const Anchor* oldest = nullptr;
    for (const Anchor& a : anchors_) {
      if (a.after_ns == 0) continue;
      if (a.after_ns <= p.host_ns && (before == nullptr || a.after_ns > before->after_ns)) before = &a;
      if (oldest == nullptr || a.after_ns < oldest->after_ns) oldest = &a;
    }
    float ms = 0;
    int64_t reached = -1;
    if (before != nullptr && d_.event_elapsed_ms(&ms, before->event, p.event) == kCudaSuccess && ms >= 0) {
      reached = static_cast<int64_t>(before->host_ns) + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
    } else if (before == nullptr && oldest != nullptr &&
               d_.event_elapsed_ms(&ms, p.event, oldest->event) == kCudaSuccess && ms >= 0) {
      reached = static_cast<int64_t>(oldest->host_ns) - static_cast<int64_t>(static_cast<double>(ms) * 1e6);
    }
    if (reached >= 0) {
      GpuActivity a;
      a.kind = GpuActivityKind::kMark;
      a.start_ns = p.host_ns;
      // Reached no earlier than recorded (the anchor's error is half its round trip).
      a.end_ns = static_cast<uint64_t>(reached) > p.host_ns ? static_cast<uint64_t>(reached) : p.host_ns;
      a.name = gpu_mark_name(p.kind);
      a.sync_type = static_cast<uint8_t>(p.kind);
      out(a);
    } else {
      unresolved_.fetch_add(1, std::memory_order_relaxed);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.erase(pending_.begin());
      free_.push_back(p.event);
    }
    ++n;
  }
  return n;
}

size_t GpuMarks::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

// ------------------------------------------------------------------------------------------------
// The process's marks and the reader thread.

namespace {

std::mutex g_mu;
std::condition_variable g_cv;
GpuMarks* g_marks = nullptr;  // created at the first mark that finds libcuda loaded
bool g_stop = false;
bool g_reader_started = false;
// Set in a child forked after the marks began: CUDA is not usable there, and g_mu may have been
// held by the reader thread at the fork, so the child never takes it.
std::atomic<bool> g_forked_child{false};
std::thread* g_reader = nullptr;
uint64_t g_next_try_ns = 0;  // libcuda not loaded yet: look again after this instant

void reader_loop(GpuMarks* m) {
  auto emit_mark = [](const GpuActivity& a) { record_gpu_activity(a); };
  uint64_t last_anchor = 0;
  std::unique_lock<std::mutex> lock(g_mu);
  for (;;) {
    const bool stopping = g_stop;
    lock.unlock();
    const uint64_t now = monotonic_ns();
    if (last_anchor == 0 || now - last_anchor >= 1'000'000'000ull) {
      if (!m->anchor()) break;
      last_anchor = now;
    }
    m->poll(emit_mark);
    if (m->failed()) break;
    lock.lock();
    if (stopping) break;
    // A mark's instant comes from its event, not from when it is read: reading late costs nothing
    // but events held. Every 20 ms, or every 2 ms while a quarter of the pool waits (fast loops).
    const auto wait = m->pending() > 64 ? std::chrono::milliseconds(2) : std::chrono::milliseconds(20);
    g_cv.wait_for(lock, wait, [] { return g_stop; });
  }
  if (m->failed()) std::fprintf(stderr, "stallscope: light GPU marks stopped (%s)\n", m->why_failed().c_str());
}

}  // namespace

bool gpu_marks_wanted() { return gpu_choice_from_env().light; }

void gpu_mark(GpuMarkKind kind) {
  if (!gpu_marks_wanted() || g_generation.load(std::memory_order_relaxed) == 0 ||
      g_forked_child.load(std::memory_order_relaxed)) {
    return;
  }
  GpuMarks* m = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_stop) return;
    if (g_marks == nullptr) {
      const uint64_t now = monotonic_ns();
      if (now < g_next_try_ns) return;
      g_next_try_ns = now + 1'000'000'000ull;  // at most one look a second until CUDA is loaded
      CudaDriver d;
      std::string why;
      if (!CudaDriver::from_loaded_library(&d, &why)) {
        if (!why.empty()) {  // a driver that will not change: said once, then no more looks
          g_stop = true;
          std::fprintf(stderr, "stallscope: light GPU marks off (%s); use --gpu all or --gpu kernel\n", why.c_str());
        }
        return;
      }
      g_marks = new GpuMarks(d, [] { return monotonic_ns(); });
      ::pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
    }
    m = g_marks;
  }
  if (!m->mark(kind)) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_reader_started) {
    g_reader_started = true;
    g_reader = new std::thread(reader_loop, m);
    // Registered now, after CUDA initialised: exit handlers run newest first, so the reader stops
    // before the driver's own handlers tear CUDA down.
    std::atexit(gpu_marks_stop);
  }
}

void gpu_marks_stop() {
  if (g_forked_child.load(std::memory_order_relaxed)) return;
  std::thread* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_stop || g_reader == nullptr) {
      g_stop = true;
      return;
    }
    g_stop = true;
    t = g_reader;
    g_reader = nullptr;
  }
  g_cv.notify_all();
  if (t->joinable()) t->join();
}

}  // namespace stallscope
