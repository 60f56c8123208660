// The session arena: one shared-memory file (a memfd, or a /dev/shm name for attach) that every process of a recording
// session maps. It holds the per-thread ring buffers that the hot path writes into, the session's string table and its
// process table. Exactly one drainer (the `stallscope run` launcher, or the owning process when recording in-process)
// reads the rings and writes the database; no process of the training job ever touches SQLite. Forked children inherit
// the mapping; spawned or exec'd children find it through the STALLSCOPE_SHM environment variable. See
// docs/decisions.md.
//
// Ring protocol (single producer = the owning thread, single consumer = the drainer):
//   producer: h = head; if h - tail >= capacity -> drop; write events[h % cap]; head = h + 1 (release)
//   consumer: h = head (acquire); read events[tail..h); tail = h (release)
// Ring life: kFree -> (producer claims) kClaiming -> kActive -> (thread exit, or the drainer finds
// the process gone) kRetired -> (drainer drained it) kFree.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collector/event.h"

namespace stallscope {

inline constexpr uint64_t kArenaMagic = 0x3141524150435353ull;  // "SSCPARA1"

enum RingState : uint32_t { kRingFree = 0, kRingClaiming = 1, kRingActive = 2, kRingRetired = 3 };

struct alignas(64) RingHeader {
  std::atomic<uint32_t> state;
  int32_t pid;
  int32_t tid;
  uint32_t thread_uid;                     // session-unique id of the thread that owns this ring now
  char name[32];                           // thread name at claim time (comm)
  alignas(64) std::atomic<uint64_t> head;  // written by the producer
  uint64_t tail_cache;                     // producer-private copy of tail
  uint64_t mask;                           // capacity - 1, beside head: one cache line for emit()
  std::atomic<uint64_t> dropped;           // events dropped because the ring was full
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer
};
static_assert(sizeof(RingHeader) == 192);

struct Ring {
  RingHeader h;
  Event events[1];  // really ArenaHeader::ring_capacity events
};

enum ProcessState : uint32_t { kProcEmpty = 0, kProcRunning = 1, kProcExited = 2 };

struct ProcessEntry {
  std::atomic<uint32_t> state;
  int32_t pid;
  int32_t ppid;
  int32_t exit_code;  // valid when has_exit_code
  uint64_t start_ticks;
  std::atomic<uint64_t> end_ticks;  // 0 while running
  std::atomic<uint32_t> has_exit_code;
  std::atomic<uint32_t> execs;  // times the process exec'd a new image (cmdline changed)
  char cmdline[472];            // NUL-separated argv, truncated
};
static_assert(sizeof(ProcessEntry) == 512);

struct ArenaConfig {
  uint32_t ring_count = 64;          // threads that can record at once
  uint32_t ring_capacity = 16384;    // events per ring (power of two)
  uint32_t string_capacity = 16384;  // distinct strings
  uint32_t string_pool_bytes = 1u << 20;
  uint32_t process_capacity = 512;
};

struct ArenaHeader {
  uint64_t magic;
  uint32_t wire_version;
  uint32_t reserved0;
  uint64_t total_size;
  ArenaConfig config;
  uint32_t uses_tsc;
  int32_t owner_pid;
  uint64_t start_ticks;
  uint64_t start_mono_ns;
  uint64_t start_real_ns;
  // section offsets from the arena base
  uint64_t off_string_offsets;  // uint32_t[string_capacity]: pool offset of string id-1
  uint64_t off_string_hash;     // uint32_t[2*string_capacity]: open addressing, 0 = empty
  uint64_t off_string_pool;     // char[string_pool_bytes]
  uint64_t off_processes;       // ProcessEntry[process_capacity]
  uint64_t off_rings;           // Ring stride * ring_count
  uint64_t ring_stride;
  std::atomic<uint32_t> next_thread_uid;
  std::atomic<uint32_t> string_count;   // published ids are 1..string_count
  std::atomic<uint32_t> process_count;  // entries in use
  uint32_t string_pool_used;            // under lock
  std::atomic<uint64_t> dropped_no_ring;
  std::atomic<uint64_t> dropped_strings;
  std::atomic<uint64_t> dropped_processes;
  std::atomic<uint32_t> stop_requested;  // set by the drainer's owner when the session ends
  uint32_t reserved1;
  pthread_mutex_t lock;  // robust, process-shared; guards strings and processes
};

// A mapped arena. Creating or attaching maps the file; the object never unmaps it while the
// process lives, because rings may still be referenced by thread-local pointers.
class Arena {
 public:
  // Creates a new arena file /dev/shm/<name> (mode 0600). Returns nullptr and sets *error on failure.
  static Arena* create(const std::string& shm_name, const ArenaConfig& config, std::string* error);
  // Creates an anonymous arena (memfd_create): nothing in /dev/shm, and its memory is freed when
  // the last process that maps it exits, whatever killed them. Its name() is "fd:PID:FD": the
  // descriptor FD of process PID, which is not close-on-exec (the program the launcher execs
  // inherits it) and which processes that did not inherit it open as /proc/PID/fd/FD (same user
  // only). `stallscope run` and in-process recording use it; attach keeps a named arena (the
  // target may run as another user than the attacher).
  static Arena* create_anonymous(const ArenaConfig& config, std::string* error);
  // Maps an existing arena created by another process of the session: a /dev/shm name, or an
  // anonymous arena's "fd:PID:FD". Joining an anonymous arena keeps a descriptor open, and this
  // process's name() names it, for its own children.
  static Arena* attach(const std::string& shm_name, std::string* error);
  static bool is_anonymous_name(const std::string& name);
  // Removes the /dev/shm name (mapped processes keep their mapping) and, in the process that
  // created it, lets go of its liveness lock. For an anonymous arena, its creator closes the
  // descriptor that others joined through (the session is over; mappings stay).
  static void unlink(const std::string& shm_name);
  // Removes the arenas of dead sessions: /dev/shm/<prefix>* files of this user, at least
  // `min_age_s` old, whose liveness lock nobody holds. The creator of an arena holds a shared
  // flock(2) on it until it unlinks it or dies (its forked children share the lock; exec'd ones do
  // not), so an arena whose launcher, attacher or recording process was killed is found however it
  // died. Returns the names removed and their sizes in bytes.
  static std::vector<std::pair<std::string, uint64_t>> remove_stale(const std::string& prefix, int min_age_s);

  ArenaHeader* header() const { return header_; }
  const std::string& name() const { return name_; }

  Ring* ring(uint32_t index) const {
    return reinterpret_cast<Ring*>(base_ + header_->off_rings + index * header_->ring_stride);
  }
  ProcessEntry* process(uint32_t index) const {
    return reinterpret_cast<ProcessEntry*>(base_ + header_->off_processes) + index;
  }
  // Text of string id (1-based); nullptr if not published.
  const char* string(uint32_t id) const;

  // Producer slow paths (any process of the session).
  Ring* claim_ring(int pid, int tid, const char* thread_name);
  uint32_t intern(std::string_view text);  // 0 when the table is full (counted)
  // Registers a process, or, when `pid` is registered and still running, records that it exec'd
  // a new image: its cmdline is replaced and the rings of the old image's threads are retired.
  ProcessEntry* register_process(int pid, int ppid, const char* cmdline, size_t cmdline_len);
  ProcessEntry* find_process(int pid) const;

 private:
  static Arena* attach_anonymous(const std::string& name, std::string* error);
  Arena(uint8_t* base, ArenaHeader* header, std::string name) : base_(base), header_(header), name_(std::move(name)) {}
  void lock();
  void unlock();

  uint8_t* base_;
  ArenaHeader* header_;
  std::string name_;
};

}  // namespace stallscope
