// Handed batches of a recording being written; see handed_batches.h.
#include "storage/handed_batches.h"

#include <sys/stat.h>

#include "storage/sqlite.h"

namespace stallscope {

HandedBatches::HandedBatches(std::string path) : path_(std::move(path)) {}
HandedBatches::~HandedBatches() = default;

void HandedBatches::poll() {
  if (!db_) {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return;
    auto db = Db::open(path_, Db::Mode::kReadOnly);
    if (!db.ok()) return;
    db_ = std::move(*db);
  }
  if (name_id_ < 0) {
    auto id = db_->query_int("SELECT id FROM strings WHERE value = 'dl.next'");
    if (!id.ok()) return;
    name_id_ = *id;
  }
  if (!q_) {
    // arg0: the loader; arg1: the batch handed, -1 for StopIteration (docs/events.md).
    auto q = db_->prepare(
        "SELECT id, arg0, start_ns + dur_ns FROM spans WHERE name_id = ?1 AND id > ?2 AND arg1 >= 0 AND "
        "dur_ns IS NOT NULL ORDER BY id");
    if (!q.ok()) return;
    q_ = std::move(*q);
  }
  q_->reset();
  q_->bind(1, name_id_).bind(2, last_id_);
  while (q_->step()) {
    last_id_ = q_->int64(0);
    ends_[q_->int64(1)].push_back(q_->int64(2));
  }
  q_->reset();
}

void HandedBatches::close() {
  q_.reset();
  db_.reset();
}

void HandedBatches::tidy(const std::string& path) {
  struct stat st {};
  if (::stat((path + "-wal").c_str(), &st) != 0) return;
  if (auto db = Db::open(path, Db::Mode::kReadWrite); db.ok()) std::unique_ptr<Db> closed = std::move(*db);
}

}  // namespace stallscope
