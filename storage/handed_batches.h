// The batches a recording's training loop has been handed so far, read while the recording is
// written (`stallscope tune` counts steps with it): the `dl.next` spans that handed a batch, by
// loader, read incrementally (each poll reads only the rows added since the last).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stallscope {

class Db;
class Stmt;

class HandedBatches {
 public:
  explicit HandedBatches(std::string path);
  ~HandedBatches();
  HandedBatches(const HandedBatches&) = delete;
  HandedBatches& operator=(const HandedBatches&) = delete;

  // Reads the spans added since the last poll. A file that does not exist yet, or whose schema is
  // not written yet, reads as nothing so far.
  void poll();
  // Closes the connection (the recorder, the last to close, then removes the -wal and -shm files).
  void close();
  // End times (ns) of the handed next() calls, per loader id, in the order read.
  const std::map<int64_t, std::vector<int64_t>>& ends() const { return ends_; }

  // A recording this process read while it was written keeps its -wal file when the writer closed
  // first; opening it writable and closing it checkpoints and removes it, as the writer would have.
  static void tidy(const std::string& path);

 private:
  std::string path_;
  std::unique_ptr<Db> db_;
  std::unique_ptr<Stmt> q_;
  int64_t name_id_ = -1, last_id_ = 0;
  std::map<int64_t, std::vector<int64_t>> ends_;
};

}  // namespace stallscope
