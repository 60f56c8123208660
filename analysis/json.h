// A minimal JSON value, parser and writer: enough for the `dl.config` documents the Python hooks
// record and for the report's `--json` output. Objects keep their members in insertion order so
// that written documents read in a stable, deliberate order. No exceptions: parse() returns a
// Result with a one-line message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace stallscope::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, Value>;

  Value() = default;  // null
  Value(std::nullptr_t) {}  // NOLINT: implicit by design, like the literals below
  Value(bool b) : type_(Type::kBool), bool_(b) {}  // NOLINT
  Value(double d) : type_(Type::kNumber), number_(d) {}  // NOLINT
  Value(int v) : Value(static_cast<double>(v)) {}  // NOLINT
  Value(int64_t v) : Value(static_cast<double>(v)) {}  // NOLINT
  Value(uint64_t v) : Value(static_cast<double>(v)) {}  // NOLINT
  Value(std::string s) : type_(Type::kString), string_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  template <typename T>
  Value(const std::optional<T>& v) {  // NOLINT: nullopt becomes null
    if (v) *this = Value(*v);
  }

  static Value array() { Value v; v.type_ = Type::kArray; return v; }
  static Value object() { Value v; v.type_ = Type::kObject; return v; }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }

  // Typed look-ups on an object: nullopt when the key is absent or of another type.
  const Value* find(std::string_view key) const;
  std::optional<double> number(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;

  // Builders. set() replaces an existing member of the same key.
  Value& set(std::string key, Value v);
  Value& push(Value v);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<Member> members_;
};

// Parses one JSON document (RFC 8259; nesting depth limited to 64). Trailing text is an error.
Result<Value> parse(std::string_view text);

// Writes `v`; indent > 0 pretty-prints with that many spaces per level. Numbers print in the
// shortest form that reads back exactly; NaN and infinities print as null.
std::string write(const Value& v, int indent = 0);

// Escapes a string as a JSON string literal, quotes included.
std::string quote(std::string_view s);

}  // namespace stallscope::json
