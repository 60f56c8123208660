// Process-level collector state, ring claiming, fork and thread-exit handling; see collector.h.
#include "collector/collector.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace stallscope {

__thread ThreadState t_state __attribute__((tls_model("initial-exec"))) = {nullptr, 0, 0};
std::atomic<uint32_t> g_generation{0};

namespace {

std::atomic<Arena*> g_arena{nullptr};
std::atomic<uint32_t> g_next_generation{1};
ProcessEntry* g_process = nullptr;  // this process's entry
pthread_key_t g_thread_key;
pthread_once_t g_once = PTHREAD_ONCE_INIT;

void retire_thread_ring(void* value) {
  auto* r = static_cast<Ring*>(value);
  if (r != nullptr) r->h.state.store(kRingRetired, std::memory_order_release);
}

void after_fork_child() {
  // The forking thread's ring belongs to the parent's thread; this thread claims its own.
  t_state = ThreadState{nullptr, 0, 0};
  if (g_arena.load(std::memory_order_acquire) != nullptr && g_generation.load() != 0) {
    Collector::register_this_process();
  }
}

void init_once() {
  pthread_key_create(&g_thread_key, retire_thread_ring);
  pthread_atfork(nullptr, nullptr, after_fork_child);
}

size_t read_cmdline(char* buf, size_t cap) {
  int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = ::read(fd, buf, cap);
  ::close(fd);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace

Ring* thread_ring_slow() {
  const uint32_t gen = g_generation.load(std::memory_order_acquire);
  Arena* arena = g_arena.load(std::memory_order_acquire);
  if (gen == 0 || arena == nullptr) return nullptr;
  if (t_state.failed_generation == gen) {
    arena->header()->dropped_no_ring.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  char name[17] = {};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  Ring* r = arena->claim_ring(static_cast<int>(::getpid()), static_cast<int>(::syscall(SYS_gettid)), name);
  if (r == nullptr) {
    t_state.failed_generation = gen;
    arena->header()->dropped_no_ring.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  t_state.ring = r;
  t_state.generation = gen;
  pthread_setspecific(g_thread_key, r);
  return r;
}

namespace {
struct InternCacheEntry {
  uint64_t hash;
  uint32_t id;
  uint32_t generation;
};
constexpr int kInternCacheSize = 256;
// The cache lives on the heap: libstallscope.so uses initial-exec TLS (for the hot path), which
// makes the loader place all of its thread-locals in the static TLS block; a 4 KiB array there
// would leave no room to dlopen the library into a process that has loaded torch already.
__thread InternCacheEntry* t_intern_cache = nullptr;
pthread_key_t g_cache_key;
pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;
void make_cache_key() { pthread_key_create(&g_cache_key, std::free); }

InternCacheEntry* thread_cache() {
  if (t_intern_cache == nullptr) {
    pthread_once(&g_cache_once, make_cache_key);
    t_intern_cache = static_cast<InternCacheEntry*>(std::calloc(kInternCacheSize, sizeof(InternCacheEntry)));
    if (t_intern_cache != nullptr) pthread_setspecific(g_cache_key, t_intern_cache);
  }
  return t_intern_cache;
}
}  // namespace

uint32_t intern_cached(const char* text) {
  if (text == nullptr) text = "";
  Arena* arena = g_arena.load(std::memory_order_acquire);
  const uint32_t gen = g_generation.load(std::memory_order_relaxed);
  if (arena == nullptr || gen == 0) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char* p = text; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  InternCacheEntry* cache = thread_cache();
  if (cache == nullptr) return arena->intern(text);
  InternCacheEntry& e = cache[h % kInternCacheSize];
  if (e.generation == gen && e.hash == h) {
    const char* s = arena->string(e.id);  // a reused buffer with new text must miss
    if (s != nullptr && std::strcmp(s, text) == 0) return e.id;
  }
  const uint32_t id = arena->intern(text);
  e = InternCacheEntry{h, id, gen};
  return id;
}

bool Collector::join(Arena* arena) {
  pthread_once(&g_once, init_once);
  g_arena.store(arena, std::memory_order_release);
  register_this_process();
  g_generation.store(g_next_generation.fetch_add(1), std::memory_order_release);
  return true;
}

void Collector::leave() { g_generation.store(0, std::memory_order_release); }

Arena* Collector::arena() { return g_arena.load(std::memory_order_acquire); }

void Collector::register_this_process() {
  Arena* arena = g_arena.load(std::memory_order_acquire);
  if (arena == nullptr) return;
  char cmd[512];
  const size_t n = read_cmdline(cmd, sizeof cmd);
  g_process = arena->register_process(static_cast<int>(::getpid()), static_cast<int>(::getppid()), cmd, n);
}

void Collector::mark_exit(int code) {
  ProcessEntry* p = g_process;
  if (p == nullptr || p->pid != static_cast<int>(::getpid()) || g_generation.load() == 0) return;
  p->exit_code = code;
  p->has_exit_code.store(1, std::memory_order_release);
  p->end_ticks.store(now_ticks(), std::memory_order_release);
}

}  // namespace stallscope
