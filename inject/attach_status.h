// The status file: how the Python side inside a target process reports back to the command. The
// command makes an empty file in /dev/shm that only this user can write and passes its path in
// the Python source (attach_python.h); stallscope._attach writes one line into it: "ok <what was
// done>" ("ok worker ..." from a joined DataLoader worker), "error <Type>: <why>", or, from a
// process that is not a worker, why it is only sampled. Nothing written yet: the Python side has
// not run (its thread waits for the GIL, or a spawned worker is still starting up).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace stallscope::attach {

class StatusFile {
 public:
  // Makes an empty file for the Python side of process `pid`. Its path() is "" when none could be
  // made (/dev/shm full or not writable): that process's reports are then never read, and the
  // command goes on without them.
  static StatusFile create(pid_t pid);

  StatusFile() = default;
  StatusFile(StatusFile&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  StatusFile& operator=(StatusFile&& other) noexcept;
  StatusFile(const StatusFile&) = delete;
  StatusFile& operator=(const StatusFile&) = delete;
  ~StatusFile() { remove(); }

  const std::string& path() const { return path_; }
  // What the Python side has written so far; "" when nothing.
  std::string read() const;
  // Waits up to `timeout_ms` for the Python side to write; "" if nothing came, or process `pid`
  // ended first.
  std::string wait(int timeout_ms, pid_t pid) const;
  // Empties the file before asking the same process for another report.
  void clear();
  // Deletes the file. Idempotent.
  void remove();

 private:
  std::string path_;
};

}  // namespace stallscope::attach
