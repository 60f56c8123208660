// Calling functions inside another, running process: the mechanism behind `stallscope attach`.
//
// RemoteThread seizes one thread of the target with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT: no
// SIGSTOP is sent, so the target's parent sees nothing), saves its registers and its FPU/SSE/AVX
// state, and runs calls on it: the arguments go in registers, strings onto its stack below the red
// zone, and the return address is 0, so the call ends in a SIGSEGV at address 0 that the tracer
// catches and swallows. Detaching restores the saved state exactly; a thread that was stopped in a
// system call restarts it as after any signal. Signals that arrive for the thread meanwhile are
// held and delivered after the detach. x86-64 only.
//
// What this cannot make safe: a call that needs a lock the seized thread itself holds at the
// moment it is stopped (e.g. dlopen while the thread is inside the dynamic loader) would wait
// forever; call() gives up after its timeout, puts the thread back as it was and reports it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct user_regs_struct;  // <sys/user.h>

namespace stallscope {

class RemoteThread {
 public:
  // Seizes thread `tid` and stops it at a safe point, where it holds none of the C library's
  // locks that dlopen, malloc or pthread_create take: inside a system call that waits (futex,
  // poll, a read from a pipe, a sleep...), or running code outside the C library and the dynamic
  // loader. Elsewhere it runs on for a millisecond and is stopped again, for at most
  // `safe_point_timeout_ms` (0: it is used wherever it stopped). Returns nullptr with a one-line
  // reason in *error.
  static std::unique_ptr<RemoteThread> seize(pid_t tid, std::string* error, int safe_point_timeout_ms = 2000);
  ~RemoteThread();  // detach() if still attached
  RemoteThread(const RemoteThread&) = delete;
  RemoteThread& operator=(const RemoteThread&) = delete;

  // Copies `n` bytes onto the thread's stack (below everything pushed before) and returns their
  // address in the target; 0 on failure. Valid until detach().
  uint64_t push(const void* data, size_t n);
  uint64_t push_string(const std::string& s) { return push(s.c_str(), s.size() + 1); }

  // Calls the function at `fn` with up to six integer or pointer arguments and stores its return
  // value (rax) in *result. False with *error when the call could not be made or did not return
  // within `timeout_ms` (then the thread is already put back as it was, and detached).
  bool call(uint64_t fn, const std::vector<uint64_t>& args, uint64_t* result, std::string* error,
            int timeout_ms = 30000);

  // Reads target memory (a NUL-terminated string of at most `max` bytes for read_string).
  bool read(uint64_t addr, void* out, size_t n) const;
  std::string read_string(uint64_t addr, size_t max = 4096) const;

  // Restores the thread's registers and lets it run; re-delivers held signals. Idempotent.
  bool detach(std::string* error);

  pid_t tid() const { return tid_; }
  const std::string& stop_point() const { return stop_point_; }  // where it was stopped, in words
  bool attached() const { return attached_; }

 private:
  RemoteThread() = default;
  bool write(uint64_t addr, const void* data, size_t n);
  bool run_to_safe_point(int timeout_ms, ::user_regs_struct* regs);
  bool restore(std::string* error);

  pid_t tid_ = 0;
  pid_t tgid_ = 0;
  bool attached_ = false;
  std::vector<unsigned char> regs_;  // struct user_regs_struct as saved
  std::vector<unsigned char> fpu_;   // XSAVE area (or FXSAVE area when XSAVE is not offered)
  bool fpu_is_xstate_ = false;
  uint64_t stack_top_ = 0;  // next push goes below this
  std::vector<int> held_signals_;
  std::string stop_point_;  // where the thread was stopped, for messages
};

// Whether system call `nr` (first argument `arg0`) made by thread `tid` waits for something else:
// a lock, a queue, a timer, a child, a pipe or a socket (a thread makes these without holding the C
// library's malloc or loader locks).
bool waiting_syscall(pid_t tid, long nr, unsigned long long arg0);

// The thread of process `pid` to make calls on: the main thread if it is waiting in such a system
// call now, else another thread that is, else the main thread (seize() then waits for a safe point).
pid_t pick_thread(pid_t pid);

// The address, in process `pid`, of the function `local_fn` of this process: found by the shared
// library that holds it here and where the same file is mapped there. 0 with *error if the target
// has not mapped that file (another C library, another container).
uint64_t remote_address_of(pid_t pid, const void* local_fn, std::string* error);

// The address where `path` (a shared library) is mapped in process `pid`, or 0.
uint64_t remote_library_base(pid_t pid, const std::string& path);

}  // namespace stallscope
