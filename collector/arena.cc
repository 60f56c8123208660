// Shared-memory session arena; see arena.h.
#include "collector/arena.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "collector/clock.h"

namespace stallscope {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t hash_text(std::string_view s) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }

// The descriptors through which this process holds its arenas' liveness locks, by name.
std::mutex g_lock_mu;
std::map<std::string, int>& lock_fds() {
  static auto* m = new std::map<std::string, int>;  // never destroyed: used until exit
  return *m;
}

// Where each part of an arena of `cfg` starts, and its size; total 0 (and *error) when the
// configuration is not valid.
struct Layout {
  uint64_t off_offsets = 0, off_hash = 0, off_pool = 0, off_procs = 0, off_rings = 0, stride = 0, total = 0;
};

Layout layout_of(const ArenaConfig& cfg, std::string* error) {
  Layout l;
  if (cfg.ring_capacity == 0 || (cfg.ring_capacity & (cfg.ring_capacity - 1)) != 0) {
    *error = "ring capacity must be a power of two";
    return l;
  }
  if (cfg.ring_count == 0 || cfg.string_capacity == 0 || cfg.process_capacity == 0) {
    *error = "arena sizes must be positive";
    return l;
  }
  l.off_offsets = align_up(sizeof(ArenaHeader), 4096);
  l.off_hash = align_up(l.off_offsets + 4ull * cfg.string_capacity, 64);
  l.off_pool = align_up(l.off_hash + 8ull * cfg.string_capacity, 64);
  l.off_procs = align_up(l.off_pool + cfg.string_pool_bytes, 4096);
  l.off_rings = align_up(l.off_procs + sizeof(ProcessEntry) * cfg.process_capacity, 4096);
  l.stride = align_up(sizeof(RingHeader) + sizeof(Event) * cfg.ring_capacity, 4096);
  l.total = l.off_rings + l.stride * cfg.ring_count;
  return l;
}

// Writes a new arena's header into `base` (mapped, zero-filled, l.total bytes).
ArenaHeader* init_header(uint8_t* base, const Layout& l, const ArenaConfig& cfg) {
  auto* h = new (base) ArenaHeader();
  h->wire_version = kWireFormatVersion;
  h->total_size = l.total;
  h->config = cfg;
  h->uses_tsc = tsc_is_reliable() ? 1 : 0;
  g_clock_uses_tsc = h->uses_tsc != 0;
  h->owner_pid = ::getpid();
  const ClockAnchor a = take_anchor();
  h->start_ticks = a.ticks;
  h->start_mono_ns = a.ns;
  h->start_real_ns = realtime_ns();
  h->off_string_offsets = l.off_offsets;
  h->off_string_hash = l.off_hash;
  h->off_string_pool = l.off_pool;
  h->off_processes = l.off_procs;
  h->off_rings = l.off_rings;
  h->ring_stride = l.stride;
  h->next_thread_uid.store(1);
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  // Publish last: attachers check the magic.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kArenaMagic;
  return h;
}

// Maps an arena from `fd` (not closed here) and checks it; nullptr and *error when it is not one.
uint8_t* map_existing(int fd, const std::string& what, uint64_t* size, std::string* error) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) < sizeof(ArenaHeader)) {
    *error = what + " is not a stallscope arena (too small)";
    return nullptr;
  }
  void* mem = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    *error = "cannot map " + what + ": " + std::strerror(errno);
    return nullptr;
  }
  auto* h = static_cast<ArenaHeader*>(mem);
  if (h->magic != kArenaMagic || h->wire_version != kWireFormatVersion ||
      h->total_size != static_cast<uint64_t>(st.st_size)) {
    ::munmap(mem, static_cast<size_t>(st.st_size));
    *error = what + " is not a stallscope arena of wire format " + std::to_string(kWireFormatVersion);
    return nullptr;
  }
  g_clock_uses_tsc = h->uses_tsc != 0;
  *size = static_cast<uint64_t>(st.st_size);
  return static_cast<uint8_t*>(mem);
}

constexpr char kFdPrefix[] = "fd:";

// "fd:PID:FD" -> pid, fd.
bool parse_fd_name(const std::string& name, int* pid, int* fd) {
  if (name.rfind(kFdPrefix, 0) != 0) return false;
  char tail = 0;
  return std::sscanf(name.c_str() + 3, "%d:%d%c", pid, fd, &tail) == 2 && *pid > 0 && *fd >= 0;
}

std::string fd_name(int fd) { return std::string(kFdPrefix) + std::to_string(::getpid()) + ":" + std::to_string(fd); }

}  // namespace

bool Arena::is_anonymous_name(const std::string& name) { return name.rfind(kFdPrefix, 0) == 0; }

Arena* Arena::create(const std::string& shm_name, const ArenaConfig& cfg, std::string* error) {
  const Layout l = layout_of(cfg, error);
  if (l.total == 0) return nullptr;
  const uint64_t total = l.total;
  const std::string path = shm_path(shm_name);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot create " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    *error = "cannot size " + path + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  void* mem = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    *error = "cannot map " + path + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(path.c_str());
    return nullptr;
  }
  // The liveness lock (remove_stale): held through this descriptor until unlink() or exit. It is
  // close-on-exec, so a program the creator execs does not keep a dead session's arena alive.
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    std::lock_guard<std::mutex> g(g_lock_mu);
    lock_fds()[shm_name] = fd;
  } else {
    ::close(fd);  // no lock: remove_stale still keeps the arena while its creator lives
  }
  auto* base = static_cast<uint8_t*>(mem);
  ArenaHeader* h = init_header(base, l, cfg);
  return new Arena(base, h, shm_name);
}

Arena* Arena::create_anonymous(const ArenaConfig& cfg, std::string* error) {
  const Layout l = layout_of(cfg, error);
  if (l.total == 0) return nullptr;
  const uint64_t total = l.total;
  // Not close-on-exec: the program the launcher execs inherits it (see arena.h).
  const int fd = ::memfd_create("stallscope-arena", 0);
  if (fd < 0) {
    *error = std::string("cannot create a memfd arena: ") + std::strerror(errno);
    return nullptr;
  }
  (void)::fchmod(fd, 0600);  // a memfd is 0777; /proc/PID/fd already keeps other users out
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    *error = std::string("cannot size the memfd arena: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  void* mem = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) {
    *error = std::string("cannot map the memfd arena: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  auto* base = static_cast<uint8_t*>(mem);
  ArenaHeader* h = init_header(base, l, cfg);
  const std::string name = fd_name(fd);
  {
    std::lock_guard<std::mutex> g(g_lock_mu);  // unlink() closes it when the session ends
    lock_fds()[name] = fd;
  }
  return new Arena(base, h, name);
}

Arena* Arena::attach_anonymous(const std::string& name, std::string* error) {
  int pid = 0, fd = -1;
  if (!parse_fd_name(name, &pid, &fd)) {
    *error = "'" + name + "' is not an arena name (fd:PID:FD)";
    return nullptr;
  }
  // The descriptor inherited from the holder (the launcher, for the program it execs), when it is
  // the same file as the holder's; else the holder's, opened through /proc (spawned children:
  // multiprocessing closes inherited descriptors).
  struct stat mine, theirs;
  const std::string theirs_path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const bool holder_alive = ::kill(pid, 0) == 0 || errno == EPERM;
  const bool inherited =
      ::fstat(fd, &mine) == 0 && S_ISREG(mine.st_mode) &&
      (pid == ::getpid() || !holder_alive ||
       (::stat(theirs_path.c_str(), &theirs) == 0 && theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino));
  uint64_t size = 0;
  std::string why;
  if (inherited) {
    if (uint8_t* base = map_existing(fd, "descriptor " + std::to_string(fd), &size, &why)) {
      return new Arena(base, reinterpret_cast<ArenaHeader*>(base), fd_name(fd));
    }
  }
  if (pid == ::getpid()) {
    *error = why.empty() ? "descriptor " + std::to_string(fd) + " is not open" : why;
    return nullptr;
  }
  const int own = ::open(theirs_path.c_str(), O_RDWR);  // kept open: this process's children open it in turn
  if (own < 0) {
    *error = "cannot open " + theirs_path + ": " + std::strerror(errno);
    return nullptr;
  }
  uint8_t* base = map_existing(own, theirs_path, &size, error);
  if (base == nullptr) {
    ::close(own);
    return nullptr;
  }
  return new Arena(base, reinterpret_cast<ArenaHeader*>(base), fd_name(own));
}

Arena* Arena::attach(const std::string& shm_name, std::string* error) {
  if (is_anonymous_name(shm_name)) return attach_anonymous(shm_name, error);
  const std::string path = shm_path(shm_name);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  uint64_t size = 0;
  uint8_t* base = map_existing(fd, path, &size, error);
  ::close(fd);
  if (base == nullptr) return nullptr;
  return new Arena(base, reinterpret_cast<ArenaHeader*>(base), shm_name);
}

void Arena::unlink(const std::string& shm_name) {
  if (shm_name.empty()) return;
  if (!is_anonymous_name(shm_name)) ::unlink(shm_path(shm_name).c_str());  // an anonymous one has no name
  std::lock_guard<std::mutex> g(g_lock_mu);
  if (auto it = lock_fds().find(shm_name); it != lock_fds().end()) {
    ::close(it->second);
    lock_fds().erase(it);
  }
}

std::vector<std::pair<std::string, uint64_t>> Arena::remove_stale(const std::string& prefix, int min_age_s) {
  std::vector<std::pair<std::string, uint64_t>> removed;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return removed;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string path = shm_path(name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st;
    bool stale = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                 now.tv_sec - st.st_ctim.tv_sec >= min_age_s && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    // Belt and braces: an arena whose creator still runs is kept, locked or not.
    alignas(ArenaHeader) unsigned char buf[sizeof(ArenaHeader)];
    if (stale && ::pread(fd, buf, sizeof buf, 0) == static_cast<ssize_t>(sizeof buf)) {
      const auto* h = reinterpret_cast<const ArenaHeader*>(buf);
      if (h->magic == kArenaMagic && h->owner_pid > 0 && (::kill(h->owner_pid, 0) == 0 || errno == EPERM)) {
        stale = false;
      }
    }
    if (stale && ::unlink(path.c_str()) == 0) removed.emplace_back(name, static_cast<uint64_t>(st.st_blocks) * 512);
    ::close(fd);  // also lets go of the exclusive lock
  }
  ::closedir(dir);
  return removed;
}

void Arena::lock() {
  int rc = pthread_mutex_lock(&header_->lock);
  if (rc == EOWNERDEAD)
    pthread_mutex_consistent(&header_->lock);  // holder died: state is
                                               // consistent (publish is last)
}

void Arena::unlock() { pthread_mutex_unlock(&header_->lock); }

const char* Arena::string(uint32_t id) const {
  if (id == 0 || id > header_->string_count.load(std::memory_order_acquire)) return nullptr;
  const auto* offsets = reinterpret_cast<const uint32_t*>(base_ + header_->off_string_offsets);
  return reinterpret_cast<const char*>(base_ + header_->off_string_pool + offsets[id - 1]);
}

uint32_t Arena::intern(std::string_view text) {
  const uint32_t cap = header_->config.string_capacity;
  const uint32_t buckets = 2 * cap;
  auto* offsets = reinterpret_cast<uint32_t*>(base_ + header_->off_string_offsets);
  auto* table = reinterpret_cast<uint32_t*>(base_ + header_->off_string_hash);
  char* pool = reinterpret_cast<char*>(base_ + header_->off_string_pool);
  uint32_t slot = hash_text(text) % buckets;
  lock();
  for (;;) {
    const uint32_t id = table[slot];
    if (id == 0) break;
    const char* s = pool + offsets[id - 1];
    if (std::strlen(s) == text.size() && std::memcmp(s, text.data(), text.size()) == 0) {
      unlock();
      return id;
    }
    slot = (slot + 1) % buckets;
  }
  const uint32_t count = header_->string_count.load(std::memory_order_relaxed);
  const uint64_t need = text.size() + 1;
  if (count >= cap || header_->string_pool_used + need > header_->config.string_pool_bytes) {
    unlock();
    header_->dropped_strings.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  const uint32_t off = header_->string_pool_used;
  std::memcpy(pool + off, text.data(), text.size());
  pool[off + text.size()] = '\0';
  header_->string_pool_used += static_cast<uint32_t>(need);
  offsets[count] = off;
  table[slot] = count + 1;
  header_->string_count.store(count + 1, std::memory_order_release);
  unlock();
  return count + 1;
}

Ring* Arena::claim_ring(int pid, int tid, const char* thread_name) {
  for (uint32_t i = 0; i < header_->config.ring_count; ++i) {
    Ring* r = ring(i);
    uint32_t expected = kRingFree;
    if (!r->h.state.compare_exchange_strong(expected, kRingClaiming, std::memory_order_acq_rel)) {
      continue;
    }
    r->h.pid = pid;
    r->h.tid = tid;
    r->h.thread_uid = header_->next_thread_uid.fetch_add(1, std::memory_order_relaxed);
    std::memset(r->h.name, 0, sizeof r->h.name);
    if (thread_name) std::strncpy(r->h.name, thread_name, sizeof r->h.name - 1);
    r->h.head.store(0, std::memory_order_relaxed);
    r->h.tail.store(0, std::memory_order_relaxed);
    r->h.tail_cache = 0;
    r->h.mask = header_->config.ring_capacity - 1;
    r->h.dropped.store(0, std::memory_order_relaxed);
    r->h.state.store(kRingActive, std::memory_order_release);
    return r;
  }
  return nullptr;
}

ProcessEntry* Arena::register_process(int pid, int ppid, const char* cmdline, size_t len) {
  lock();
  ProcessEntry* p = find_process(pid);
  if (p != nullptr && p->state.load(std::memory_order_acquire) == kProcRunning &&
      p->end_ticks.load(std::memory_order_acquire) == 0) {
    // exec: the same process with a new image. Its old threads are gone.
    for (uint32_t i = 0; i < header_->config.ring_count; ++i) {
      Ring* r = ring(i);
      uint32_t expected = kRingActive;
      if (r->h.pid == pid) r->h.state.compare_exchange_strong(expected, kRingRetired, std::memory_order_acq_rel);
    }
    std::memset(p->cmdline, 0, sizeof p->cmdline);
    if (cmdline) std::memcpy(p->cmdline, cmdline, len < sizeof p->cmdline - 1 ? len : sizeof p->cmdline - 1);
    p->execs.fetch_add(1, std::memory_order_release);
    unlock();
    return p;
  }
  const uint32_t n = header_->process_count.load(std::memory_order_relaxed);
  if (n >= header_->config.process_capacity) {
    unlock();
    header_->dropped_processes.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  p = process(n);
  p->pid = pid;
  p->ppid = ppid;
  p->exit_code = 0;
  p->has_exit_code.store(0, std::memory_order_relaxed);
  p->execs.store(0, std::memory_order_relaxed);
  p->start_ticks = now_ticks();
  p->end_ticks.store(0, std::memory_order_relaxed);
  std::memset(p->cmdline, 0, sizeof p->cmdline);
  if (cmdline) std::memcpy(p->cmdline, cmdline, len < sizeof p->cmdline - 1 ? len : sizeof p->cmdline - 1);
  p->state.store(kProcRunning, std::memory_order_release);
  header_->process_count.store(n + 1, std::memory_order_release);
  unlock();
  return p;
}

ProcessEntry* Arena::find_process(int pid) const {
  const uint32_t n = header_->process_count.load(std::memory_order_acquire);
  for (uint32_t i = n; i-- > 0;) {  // newest first: pids can be reused
    ProcessEntry* p = process(i);
    if (p->pid == pid) return p;
  }
  return nullptr;
}

}  // namespace stallscope
