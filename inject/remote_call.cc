// ptrace remote calls; see remote_call.h.
#include "inject/remote_call.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stallscope {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

uint64_t now_ms() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  ::nanosleep(&ts, nullptr);
}

// waitpid on one traced thread, giving up after `timeout_ms` (< 0: wait for ever). 0 on timeout,
// the pid when a state change was reported, -1 on error.
pid_t wait_thread(pid_t tid, int* status, int timeout_ms) {
  const uint64_t deadline = timeout_ms < 0 ? 0 : now_ms() + static_cast<uint64_t>(timeout_ms);
  int pause = 1;
  for (;;) {
    const pid_t r = ::waitpid(tid, status, __WALL | WNOHANG);
    if (r != 0) {
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
    if (timeout_ms >= 0 && now_ms() >= deadline) return 0;
    sleep_ms(pause);
    if (pause < 10) ++pause;
  }
}

struct MapLine {
  uint64_t start = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string path;
};

std::vector<MapLine> read_maps(pid_t pid) {
  std::vector<MapLine> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset dev inode   path
    MapLine m;
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    char perms[8] = {}, dev[16] = {};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &offset, dev, &inode,
                    &consumed) < 6) {
      continue;
    }
    m.start = start;
    m.offset = offset;
    m.inode = inode;
    if (consumed > 0 && static_cast<size_t>(consumed) < line.size())
      m.path = line.substr(static_cast<size_t>(consumed));
    out.push_back(std::move(m));
  }
  return out;
}

// Where `path` is mapped from offset 0 in `maps`, with its inode.
bool find_base(const std::vector<MapLine>& maps, const std::string& path, uint64_t* base, uint64_t* inode) {
  for (const MapLine& m : maps) {
    if (m.offset == 0 && m.path == path) {
      *base = m.start;
      *inode = m.inode;
      return true;
    }
  }
  return false;
}

}  // namespace

uint64_t remote_library_base(pid_t pid, const std::string& path) {
  uint64_t base = 0, inode = 0;
  return find_base(read_maps(pid), path, &base, &inode) ? base : 0;
}

uint64_t remote_address_of(pid_t pid, const void* local_fn, std::string* error) {
  Dl_info info;
  if (::dladdr(local_fn, &info) == 0 || info.dli_fname == nullptr) {
    *error = "cannot tell which library holds a needed function";
    return 0;
  }
  char real[PATH_MAX];
  const std::string path = ::realpath(info.dli_fname, real) ? std::string(real) : std::string(info.dli_fname);
  uint64_t local_base = 0, local_inode = 0, remote_base = 0, remote_inode = 0;
  if (!find_base(read_maps(::getpid()), path, &local_base, &local_inode)) {
    *error = "cannot find " + path + " in this process's memory map";
    return 0;
  }
  if (!find_base(read_maps(pid), path, &remote_base, &remote_inode) || remote_inode != local_inode) {
    *error = "process " + std::to_string(pid) + " does not use this machine's " + path +
             " (another container or chroot?); run stallscope attach from inside the same environment";
    return 0;
  }
  return remote_base + (reinterpret_cast<uint64_t>(local_fn) - local_base);
}

pid_t pick_thread(pid_t pid) {
#if defined(__x86_64__)
  auto waiting = [](pid_t tid) {
    std::ifstream in("/proc/" + std::to_string(tid) + "/syscall");
    long nr = -1;
    unsigned long long arg0 = 0;
    std::string a0;
    if (!(in >> nr >> a0)) return false;  // "running", or unreadable
    arg0 = std::strtoull(a0.c_str(), nullptr, 16);
    return waiting_syscall(tid, nr, arg0);
  };
  if (waiting(pid)) return pid;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str())) {
    pid_t found = 0;
    while (dirent* e = ::readdir(d)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      if (tid > 0 && tid != pid && waiting(tid)) {
        found = tid;
        break;
      }
    }
    ::closedir(d);
    if (found != 0) return found;
  }
#endif
  return pid;
}

#if defined(__x86_64__)

namespace {

// Whether the file descriptor is a pipe, socket, eventfd or the like: a read from it waits for
// another party, where a read from a file may be the dynamic loader reading a library.
bool waits_for_peer(pid_t tid, unsigned long long fd) {
  char path[64], target[128];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%llu", static_cast<int>(tid), fd);
  const ssize_t n = ::readlink(path, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return std::strncmp(target, "pipe:", 5) == 0 || std::strncmp(target, "socket:", 7) == 0 ||
         std::strncmp(target, "anon_inode:", 11) == 0;
}

// Executable mappings of the C library and the dynamic loader: a thread stopped in their code may
// hold a lock of theirs (malloc's, the loader's) that the calls we make would wait for.
std::vector<std::pair<uint64_t, uint64_t>> libc_text(pid_t pid) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &start, &end, perms) != 3 || perms[2] != 'x') continue;
    const size_t slash = line.rfind('/');
    if (slash == std::string::npos) continue;
    const std::string name = line.substr(slash + 1);
    if (name.rfind("libc.so", 0) == 0 || name.rfind("libc-", 0) == 0 || name.rfind("ld-linux", 0) == 0 ||
        name.rfind("ld-2.", 0) == 0 || name.rfind("libpthread", 0) == 0) {
      out.emplace_back(start, end);
    }
  }
  return out;
}

}  // namespace

bool waiting_syscall(pid_t tid, long nr, unsigned long long arg0) {
  switch (nr) {
    case SYS_futex:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_pause:
    case SYS_rt_sigsuspend:
    case SYS_rt_sigtimedwait:
    case SYS_accept:
    case SYS_accept4: return true;
    case SYS_read:
    case SYS_readv:
    case SYS_recvfrom:
    case SYS_recvmsg: return waits_for_peer(tid, arg0);
    default: return false;
  }
}

// A safe point: in a system call that waits (for a lock, a queue, a timer, a child), which a
// thread never makes while holding the C library's malloc or loader locks, or in code outside the
// C library altogether. Stopped there, the thread can run dlopen, malloc or pthread_create for us
// without waiting on itself. Else it runs on for about a millisecond and is stopped again, for at
// most `timeout_ms`; then it is stopped wherever it is. False if the process ended.
bool RemoteThread::run_to_safe_point(int timeout_ms, user_regs_struct* regs) {
  const auto text = libc_text(tgid_);
  auto safe = [&](const user_regs_struct& r) {
    if (static_cast<long long>(r.orig_rax) >= 0) return waiting_syscall(tid_, static_cast<long>(r.orig_rax), r.rdi);
    for (const auto& [b, e] : text) {
      if (r.rip >= b && r.rip < e) return false;
    }
    return true;
  };
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout_ms);
  for (int tries = 1;; ++tries) {
    if (safe(*regs)) {
      char where[96];
      if (static_cast<long long>(regs->orig_rax) >= 0) {
        std::snprintf(where, sizeof where, "waiting in system call %lld", static_cast<long long>(regs->orig_rax));
      } else {
        std::snprintf(where, sizeof where, "outside the C library at 0x%llx", regs->rip);
      }
      stop_point_ = where;
      if (tries > 1) stop_point_ += ", after " + std::to_string(tries) + " stops";
      return true;
    }
    if (now_ms() >= deadline) {
      char where[128];
      std::snprintf(where, sizeof where, "in the C library at 0x%llx: no safe point within %d ms", regs->rip,
                    timeout_ms);
      stop_point_ = where;
      return true;
    }
    // Run on a little, then stop again; signals that arrive are held as in seize().
    if (::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return false;
    sleep_ms(1);
    ::ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr);
    for (;;) {
      int st = 0;
      const pid_t w = wait_thread(tid_, &st, 5000);
      if (w <= 0 || WIFEXITED(st) || WIFSIGNALED(st)) return false;
      if (!WIFSTOPPED(st)) continue;
      if ((st >> 16) == PTRACE_EVENT_STOP) break;
      held_signals_.push_back(WSTOPSIG(st));
      ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
    }
    if (::ptrace(PTRACE_GETREGS, tid_, nullptr, regs) != 0) return false;
  }
}

std::unique_ptr<RemoteThread> RemoteThread::seize(pid_t tid, std::string* error, int safe_point_timeout_ms) {
  std::unique_ptr<RemoteThread> t(new RemoteThread());
  t->tid_ = tid;
  t->tgid_ = tid;
  {
    std::ifstream in("/proc/" + std::to_string(tid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Tgid:", 0) == 0) {
        t->tgid_ = static_cast<pid_t>(std::atoi(line.c_str() + 5));
        break;
      }
    }
  }
  if (::ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
    const int e = errno;
    if (e == ESRCH) {
      *error = "no process " + std::to_string(tid);
    } else if (e == EPERM) {
      *error = "not permitted to trace process " + std::to_string(tid) +
               " (run as its owner or as root; with kernel.yama.ptrace_scope >= 1 only root can attach)";
    } else {
      *error = "cannot trace process " + std::to_string(tid) + ": " + errno_text(e);
    }
    return nullptr;
  }
  t->attached_ = true;
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    *error = "cannot stop process " + std::to_string(tid) + ": " + errno_text(errno);
    ::ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
    t->attached_ = false;
    return nullptr;
  }
  // Wait for the interrupt stop; signals that arrive first are held for later.
  for (;;) {
    int st = 0;
    const pid_t r = wait_thread(tid, &st, 10000);
    if (r == 0) {
      // Uninterruptible sleep (e.g. a hung file system). Leaving: the kernel detaches on exit and
      // cancels the pending stop.
      *error = "process " + std::to_string(tid) + " did not stop within 10 s (stuck in the kernel?); try again";
      t->attached_ = false;
      return nullptr;
    }
    if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
      *error = "process " + std::to_string(tid) + " ended while stallscope was attaching";
      t->attached_ = false;
      return nullptr;
    }
    if (WIFSTOPPED(st)) {
      if ((st >> 16) == PTRACE_EVENT_STOP) break;
      t->held_signals_.push_back(WSTOPSIG(st));
      ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
    }
  }
  user_regs_struct regs;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) {
    *error = "cannot read the registers of process " + std::to_string(tid) + ": " + errno_text(errno);
    t->detach(nullptr);
    return nullptr;
  }
  if (safe_point_timeout_ms > 0 && !t->run_to_safe_point(safe_point_timeout_ms, &regs)) {
    *error = "process " + std::to_string(tid) + " ended while stallscope was attaching";
    t->attached_ = false;
    return nullptr;
  }
  if (t->stop_point_.empty()) {
    char where[96];
    if (static_cast<long long>(regs.orig_rax) >= 0) {
      std::snprintf(where, sizeof where, "in system call %lld", static_cast<long long>(regs.orig_rax));
    } else {
      std::snprintf(where, sizeof where, "in user code at 0x%llx", regs.rip);
    }
    t->stop_point_ = where;
  }
  t->regs_.assign(reinterpret_cast<unsigned char*>(&regs), reinterpret_cast<unsigned char*>(&regs) + sizeof regs);
  std::vector<unsigned char> xs(1 << 16);
  iovec iov{xs.data(), xs.size()};
  if (::ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0) {
    xs.resize(iov.iov_len);
    t->fpu_ = std::move(xs);
    t->fpu_is_xstate_ = true;
  } else {
    user_fpregs_struct fp;
    if (::ptrace(PTRACE_GETFPREGS, tid, nullptr, &fp) != 0) {
      *error = "cannot read the FPU state of process " + std::to_string(tid) + ": " + errno_text(errno);
      t->detach(nullptr);
      return nullptr;
    }
    t->fpu_.assign(reinterpret_cast<unsigned char*>(&fp), reinterpret_cast<unsigned char*>(&fp) + sizeof fp);
  }
  // Below the red zone (128 bytes) with room to spare, 16-byte aligned.
  t->stack_top_ = (regs.rsp - 1024) & ~uint64_t{15};
  return t;
}

RemoteThread::~RemoteThread() {
  if (attached_) detach(nullptr);
}

bool RemoteThread::write(uint64_t addr, const void* data, size_t n) {
  const auto* src = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < n) {
    const uint64_t word_addr = (addr + done) & ~uint64_t{7};
    const size_t skip = static_cast<size_t>((addr + done) - word_addr);
    errno = 0;
    long word = ::ptrace(PTRACE_PEEKDATA, tid_, reinterpret_cast<void*>(word_addr), nullptr);
    if (errno != 0) return false;
    unsigned char bytes[8];
    std::memcpy(bytes, &word, 8);
    const size_t take = std::min(n - done, 8 - skip);
    std::memcpy(bytes + skip, src + done, take);
    std::memcpy(&word, bytes, 8);
    if (::ptrace(PTRACE_POKEDATA, tid_, reinterpret_cast<void*>(word_addr), reinterpret_cast<void*>(word)) != 0) {
      return false;
    }
    done += take;
  }
  return true;
}

bool RemoteThread::read(uint64_t addr, void* out, size_t n) const {
  auto* dst = static_cast<unsigned char*>(out);
  size_t done = 0;
  while (done < n) {
    const uint64_t word_addr = (addr + done) & ~uint64_t{7};
    const size_t skip = static_cast<size_t>((addr + done) - word_addr);
    errno = 0;
    const long word = ::ptrace(PTRACE_PEEKDATA, tid_, reinterpret_cast<void*>(word_addr), nullptr);
    if (errno != 0) return false;
    unsigned char bytes[8];
    std::memcpy(bytes, &word, 8);
    const size_t take = std::min(n - done, 8 - skip);
    std::memcpy(dst + done, bytes + skip, take);
    done += take;
  }
  return true;
}

std::string RemoteThread::read_string(uint64_t addr, size_t max) const {
  std::string out;
  char buf[64];
  while (out.size() < max && addr != 0) {
    if (!read(addr + out.size(), buf, sizeof buf)) break;
    const void* nul = std::memchr(buf, '\0', sizeof buf);
    if (nul != nullptr) {
      out.append(buf, static_cast<const char*>(nul) - buf);
      break;
    }
    out.append(buf, sizeof buf);
  }
  if (out.size() > max) out.resize(max);
  return out;
}

uint64_t RemoteThread::push(const void* data, size_t n) {
  if (!attached_) return 0;
  const uint64_t at = (stack_top_ - n) & ~uint64_t{15};
  if (!write(at, data, n)) return 0;
  stack_top_ = at;
  return at;
}

bool RemoteThread::call(uint64_t fn, const std::vector<uint64_t>& args, uint64_t* result, std::string* error,
                        int timeout_ms) {
  if (!attached_) {
    *error = "not attached";
    return false;
  }
  if (args.size() > 6) {
    *error = "more than six arguments";
    return false;
  }
  user_regs_struct r;
  std::memcpy(&r, regs_.data(), sizeof r);
  unsigned long long* const slots[6] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
  for (size_t i = 0; i < args.size(); ++i) *slots[i] = args[i];
  // A call frame below everything pushed: the return address 0 sits where `call` would have put it,
  // so that at entry rsp + 8 is 16-byte aligned as the ABI requires.
  const uint64_t sp = ((stack_top_ - 256) & ~uint64_t{15}) - 8;
  const uint64_t zero = 0;
  if (!write(sp, &zero, sizeof zero)) {
    *error = "cannot write to the stack of process " + std::to_string(tid_) + ": " + errno_text(errno);
    return false;
  }
  r.rsp = sp;
  r.rip = fn;
  r.rax = 0;
  r.orig_rax = static_cast<unsigned long long>(-1);  // not in a system call: no restart on resume
  r.eflags &= ~0x400ull;                             // direction flag clear, as at any call
  if (::ptrace(PTRACE_SETREGS, tid_, nullptr, &r) != 0 || ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) {
    *error = "cannot start a call in process " + std::to_string(tid_) + ": " + errno_text(errno);
    return false;
  }
  const uint64_t deadline = now_ms() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    const uint64_t now = now_ms();
    int st = 0;
    const pid_t w = now >= deadline ? 0 : wait_thread(tid_, &st, static_cast<int>(deadline - now));
    if (w == 0) {
      // Stuck (a lock this thread itself holds?): put the thread back as it was.
      ::ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr);
      for (;;) {
        const pid_t w2 = wait_thread(tid_, &st, 5000);
        if (w2 <= 0 || !WIFSTOPPED(st)) break;
        if ((st >> 16) == PTRACE_EVENT_STOP || WSTOPSIG(st) == SIGSEGV) break;
        held_signals_.push_back(WSTOPSIG(st));
        ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
      }
      detach(nullptr);
      *error = "the call into process " + std::to_string(tid_) + " (stopped " + stop_point_ +
               ") did not return within " + std::to_string(timeout_ms / 1000) +
               " s; gave up and left the process as it was";
      return false;
    }
    if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
      attached_ = false;
      *error = "process " + std::to_string(tid_) + " ended during the call";
      return false;
    }
    if (!WIFSTOPPED(st)) continue;
    const int sig = WSTOPSIG(st);
    if ((st >> 16) != 0) {  // an event stop (job control): keep going
      ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
      continue;
    }
    if (sig == SIGSEGV) {
      user_regs_struct after;
      if (::ptrace(PTRACE_GETREGS, tid_, nullptr, &after) != 0) {
        *error = "cannot read the result of a call in process " + std::to_string(tid_);
        return false;
      }
      if (after.rip == 0) {
        *result = after.rax;
        return true;
      }
      char where[64];
      std::snprintf(where, sizeof where, "0x%llx", after.rip);
      detach(nullptr);
      *error = "a call into process " + std::to_string(tid_) + " faulted at " + where;
      return false;
    }
    held_signals_.push_back(sig);  // delivered after the detach
    ::ptrace(PTRACE_CONT, tid_, nullptr, nullptr);
  }
}

bool RemoteThread::restore(std::string* error) {
  bool ok = ::ptrace(PTRACE_SETREGS, tid_, nullptr, regs_.data()) == 0;
  if (fpu_is_xstate_) {
    iovec iov{fpu_.data(), fpu_.size()};
    ok = ::ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) == 0 && ok;
  } else if (!fpu_.empty()) {
    ok = ::ptrace(PTRACE_SETFPREGS, tid_, nullptr, fpu_.data()) == 0 && ok;
  }
  if (!ok && error != nullptr) {
    *error = "cannot restore the registers of process " + std::to_string(tid_) + ": " + errno_text(errno);
  }
  return ok;
}

bool RemoteThread::detach(std::string* error) {
  if (!attached_) return true;
  bool ok = regs_.empty() || restore(error);
  if (::ptrace(PTRACE_DETACH, tid_, nullptr, nullptr) != 0) {
    if (ok && error != nullptr)
      *error = "cannot detach from process " + std::to_string(tid_) + ": " + errno_text(errno);
    ok = false;
  }
  attached_ = false;
  for (int sig : held_signals_) ::syscall(SYS_tgkill, tgid_, tid_, sig);
  held_signals_.clear();
  return ok;
}

#else  // not x86-64

std::unique_ptr<RemoteThread> RemoteThread::seize(pid_t, std::string* error, int) {
  *error = "stallscope attach supports x86-64 only; start the program with `stallscope run` instead";
  return nullptr;
}
RemoteThread::~RemoteThread() = default;
bool RemoteThread::write(uint64_t, const void*, size_t) { return false; }
bool RemoteThread::read(uint64_t, void*, size_t) const { return false; }
std::string RemoteThread::read_string(uint64_t, size_t) const { return {}; }
uint64_t RemoteThread::push(const void*, size_t) { return 0; }
bool RemoteThread::call(uint64_t, const std::vector<uint64_t>&, uint64_t*, std::string* error, int) {
  *error = "not supported on this architecture";
  return false;
}
bool RemoteThread::restore(std::string*) { return false; }
bool RemoteThread::detach(std::string*) { return true; }

#endif

}  // namespace stallscope
