// Status and Result<T>: the error type for everything that can fail at run time (files, SQLite,
// processes). Invariants use assert; nothing here throws. Both are [[nodiscard]]: an error that is
// dropped must be dropped on purpose, with a cast to void and a comment saying why.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace stallscope {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  // An error that may pass: a network link to another machine that dropped. The caller keeps what it
  // has, says so, and tries again (the dashboard's remote recordings).
  static Status Transient(std::string message) {
    Status s(std::move(message));
    s.transient_ = true;
    return s;
  }
  bool ok() const { return !message_.has_value(); }
  bool transient() const { return transient_; }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string m) : message_(std::move(m)) {}
  std::optional<std::string> message_;
  bool transient_ = false;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// `s` as one line that starts with `path` (messages from libraries may hold newlines and lack the
// file's name). OK stays OK.
inline Status in_file(const std::string& path, const Status& s) {
  if (s.ok()) return s;
  std::string m = s.message();
  for (char& c : m) {
    if (c == '\n') c = ' ';
  }
  if (m.rfind(path, 0) != 0) m = path + ": " + m;
  return s.transient() ? Status::Transient(std::move(m)) : Status::Error(std::move(m));
}

}  // namespace stallscope
