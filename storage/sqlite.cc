// SQLite RAII wrappers; see sqlite.h.
#include "storage/sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstring>

namespace stallscope {

Result<std::unique_ptr<Db>> Db::open(const std::string& path, Mode mode) {
  int flags = SQLITE_OPEN_NOMUTEX;
  if (mode == Mode::kCreate) {
    // Create the file ourselves so that it is private from the first byte.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Error("cannot create " + path + ": " + std::strerror(errno));
    ::close(fd);
    flags |= SQLITE_OPEN_READWRITE;
  } else if (mode == Mode::kReadWrite) {
    flags |= SQLITE_OPEN_READWRITE;
  } else {
    flags |= SQLITE_OPEN_READONLY;
  }
  if (mode != Mode::kCreate && ::access(path.c_str(), F_OK) != 0) {
    return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::Error("cannot open " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 2000);
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Db>(new Db(db, path));
}

Db::~Db() { sqlite3_close_v2(db_); }

Status Db::exec(std::string_view sql) {
  char* err = nullptr;
  std::string s(sql);
  if (sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return Status::Error(msg);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Stmt>> Db::prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr) !=
      SQLITE_OK) {
    return Status::Error(sqlite3_errmsg(db_));
  }
  return std::unique_ptr<Stmt>(new Stmt(s, db_));
}

Result<int64_t> Db::query_int(std::string_view sql) {
  auto st = prepare(sql);
  if (!st.ok()) return st.status();
  if (!(*st)->step()) {
    if (!(*st)->status().ok()) return (*st)->status();
    return Status::Error("query returned no row");
  }
  return (*st)->int64(0);
}

std::string Db::last_error() const { return sqlite3_errmsg(db_); }

int64_t Db::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bind_blob(int i, std::string_view v) {
  sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) status_ = Status::Error(sqlite3_errmsg(db_));
  return false;
}

Status Stmt::run() {
  int rc = sqlite3_step(stmt_);
  Status s = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? Status::Ok() : Status::Error(sqlite3_errmsg(db_));
  sqlite3_reset(stmt_);
  return s;
}

void Stmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  status_ = Status::Ok();
}

int Stmt::columns() const { return sqlite3_column_count(stmt_); }
bool Stmt::is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
int64_t Stmt::int64(int c) const { return sqlite3_column_int64(stmt_, c); }
double Stmt::real(int c) const { return sqlite3_column_double(stmt_, c); }
std::string Stmt::text(int c) const {
  const unsigned char* t = sqlite3_column_text(stmt_, c);
  return t ? std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(stmt_, c)))
           : std::string();
}

std::string Stmt::blob(int c) const {
  const void* b = sqlite3_column_blob(stmt_, c);
  return b ? std::string(static_cast<const char*>(b), static_cast<size_t>(sqlite3_column_bytes(stmt_, c)))
           : std::string();
}

}  // namespace stallscope
