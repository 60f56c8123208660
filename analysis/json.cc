// JSON value, parser and writer; see json.h.
#include "analysis/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace stallscope::json {

const Value* Value::find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const Member& m : members_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::optional<double> Value::number(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->as_number();
}

std::optional<int64_t> Value::integer(std::string_view key) const {
  auto n = number(key);
  if (!n || !std::isfinite(*n) || std::fabs(*n) > 9.0e15) return std::nullopt;
  return static_cast<int64_t>(std::llround(*n));
}

std::optional<bool> Value::boolean(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || !v->is_bool()) return std::nullopt;
  return v->as_bool();
}

std::optional<std::string> Value::string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->as_string();
}

Value& Value::set(std::string key, Value v) {
  if (type_ != Type::kObject) *this = object();
  for (Member& m : members_) {
    if (m.first == key) {
      m.second = std::move(v);
      return m.second;
    }
  }
  members_.emplace_back(std::move(key), std::move(v));
  return members_.back().second;
}

Value& Value::push(Value v) {
  if (type_ != Type::kArray) *this = array();
  items_.push_back(std::move(v));
  return items_.back();
}

// [SECTION] parser

namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Result<Value> document() {
    Value v;
    if (!value(&v, 0)) return Status::Error(error_);
    skip_ws();
    if (pos_ != t_.size()) return fail_status("unexpected text after the document");
    return v;
  }

 private:
  Status fail_status(const std::string& what) {
    fail(what);
    return Status::Error(error_);
  }
  bool fail(const std::string& what) {
    if (error_.empty()) error_ = "invalid JSON at offset " + std::to_string(pos_) + ": " + what;
    return false;
  }
  void skip_ws() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) ++pos_;
  }
  bool literal(std::string_view word) {
    if (t_.substr(pos_, word.size()) != word) return fail("expected '" + std::string(word) + "'");
    pos_ += word.size();
    return true;
  }

  bool value(Value* out, int depth) {
    if (depth > 64) return fail("nesting deeper than 64");
    skip_ws();
    if (pos_ >= t_.size()) return fail("unexpected end");
    const char c = t_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string s;
      if (!string(&s)) return false;
      *out = Value(std::move(s));
      return true;
    }
    if (c == 't') {
      *out = Value(true);
      return literal("true");
    }
    if (c == 'f') {
      *out = Value(false);
      return literal("false");
    }
    if (c == 'n') {
      *out = Value();
      return literal("null");
    }
    return number(out);
  }

  bool object(Value* out, int depth) {
    ++pos_;  // '{'
    *out = Value::object();
    skip_ws();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= t_.size() || t_[pos_] != '"') return fail("expected a member name");
      std::string key;
      if (!string(&key)) return false;
      skip_ws();
      if (pos_ >= t_.size() || t_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->set(std::move(key), std::move(v));
      skip_ws();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool array(Value* out, int depth) {
    ++pos_;  // '['
    *out = Value::array();
    skip_ws();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      Value v;
      if (!value(&v, depth + 1)) return false;
      out->push(std::move(v));
      skip_ws();
      if (pos_ < t_.size() && t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < t_.size() && t_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  bool hex4(uint32_t* out) {
    if (pos_ + 4 > t_.size()) return fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else return fail("bad hex digit in \\u escape");
    }
    *out = v;
    return true;
  }

  static void utf8(uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool string(std::string* out) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= t_.size()) return fail("unterminated string");
      const char c = t_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= t_.size()) return fail("unterminated escape");
      const char e = t_[pos_++];
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00) {  // high surrogate: a low one must follow
            uint32_t lo = 0;
            if (t_.substr(pos_, 2) != "\\u") return fail("lone surrogate");
            pos_ += 2;
            if (!hex4(&lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail("lone surrogate");
          }
          utf8(cp, out);
          break;
        }
        default: return fail("bad escape");
      }
    }
  }

  bool number(Value* out) {
    const size_t start = pos_;
    if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (digits() == 0) return fail("expected a value");
    if (pos_ < t_.size() && t_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return fail("expected digits after '.'");
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      if (digits() == 0) return fail("expected exponent digits");
    }
    double d = 0;
    const auto r = std::from_chars(t_.data() + start, t_.data() + pos_, d);
    if (r.ec == std::errc::result_out_of_range) return fail("number out of range");
    if (r.ec != std::errc()) return fail("bad number");
    *out = Value(d);
    return true;
  }

  std::string_view t_;
  size_t pos_ = 0;
  std::string error_;
};

// [SECTION] writer

void write_number(double d, std::string* out) {
  if (!std::isfinite(d)) {
    out->append("null");
    return;
  }
  if (d == 0) {
    out->push_back('0');  // also for -0
    return;
  }
  char buf[64];
  if (std::fabs(d) < 9.0e15 && d == std::floor(d)) {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(d));
    out->append(buf);
    return;
  }
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out->append(buf, r.ptr);
}

void write_value(const Value& v, int indent, int level, std::string* out) {
  auto newline = [&](int lvl) {
    if (indent <= 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.type()) {
    case Value::Type::kNull: out->append("null"); break;
    case Value::Type::kBool: out->append(v.as_bool() ? "true" : "false"); break;
    case Value::Type::kNumber: write_number(v.as_number(), out); break;
    case Value::Type::kString: out->append(quote(v.as_string())); break;
    case Value::Type::kArray: {
      if (v.items().empty()) {
        out->append("[]");
        break;
      }
      out->push_back('[');
      bool first = true;
      for (const Value& item : v.items()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        write_value(item, indent, level + 1, out);
      }
      newline(level);
      out->push_back(']');
      break;
    }
    case Value::Type::kObject: {
      if (v.members().empty()) {
        out->append("{}");
        break;
      }
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.members()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        out->append(quote(key));
        out->append(indent > 0 ? ": " : ":");
        write_value(item, indent, level + 1, out);
      }
      newline(level);
      out->push_back('}');
      break;
    }
  }
}

}  // namespace

Result<Value> parse(std::string_view text) { return Parser(text).document(); }

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out.append(buf);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string write(const Value& v, int indent) {
  std::string out;
  write_value(v, indent, 0, &out);
  if (indent > 0) out.push_back('\n');
  return out;
}

}  // namespace stallscope::json
