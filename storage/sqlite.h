// The one wrapper around the SQLite C API: RAII handles for a connection and a prepared
// statement. No other file includes sqlite3.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace stallscope {

class Stmt;

class Db {
 public:
  enum class Mode { kCreate, kReadWrite, kReadOnly };
  // Opens `path`. kCreate makes a new file with mode 0600 (fails if it exists).
  static Result<std::unique_ptr<Db>> open(const std::string& path, Mode mode);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status exec(std::string_view sql);
  Result<std::unique_ptr<Stmt>> prepare(std::string_view sql);
  // Runs a query returning one integer (e.g. a PRAGMA). Errors as Status.
  Result<int64_t> query_int(std::string_view sql);
  std::string last_error() const;
  int64_t last_insert_rowid() const;
  const std::string& path() const { return path_; }

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

// One read transaction around a group of queries: on a recording still being written, every
// query sees the same committed flushes.
class ReadTransaction {
 public:
  explicit ReadTransaction(Db& db) : db_(db), open_(db.exec("BEGIN").ok()) {}
  ~ReadTransaction() {
    if (open_) (void)db_.exec("COMMIT");  // a read transaction has nothing to keep
  }
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  Db& db_;
  bool open_;
};

class Stmt {
 public:
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int index, int64_t value);
  Stmt& bind(int index, double value);
  Stmt& bind(int index, std::string_view value);
  Stmt& bind_null(int index);
  Stmt& bind_blob(int index, std::string_view bytes);
  // Advances; true when a row is available. Errors end iteration and are kept in status().
  bool step();
  // Runs to completion (for INSERT/UPDATE) and resets; returns the outcome.
  Status run();
  void reset();

  int columns() const;
  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;
  const Status& status() const { return status_; }

 private:
  friend class Db;
  Stmt(sqlite3_stmt* s, sqlite3* db) : stmt_(s), db_(db) {}
  sqlite3_stmt* stmt_;
  sqlite3* db_;
  Status status_;
};

}  // namespace stallscope
