// The JSON helpers nlohmann lacks; see json.h.
#include "common/json.h"

#include <cmath>
#include <limits>

namespace stallscope::json {
namespace {

const Json* member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// -2^63 <= d < 2^63, the doubles that convert to int64_t without overflow.
bool fits_int64(double d) { return d >= -0x1p63 && d < 0x1p63; }

// Integral doubles below 9e15 (exact in a double) become integers, -0 included: the report's
// writer printed every number from a double this way before it used nlohmann, whose own form
// for them is "12.0" (docs/decisions.md).
void integral_doubles_as_integers(Json* v) {
  if (const double* d = v->get_ptr<const Json::number_float_t*>()) {
    if (std::isfinite(*d) && std::fabs(*d) < 9.0e15 && *d == std::floor(*d)) *v = static_cast<int64_t>(*d);
    return;
  }
  if (v->is_structured()) {
    for (Json& item : *v) integral_doubles_as_integers(&item);
  }
}

}  // namespace

std::optional<int64_t> get_int(const Json& obj, std::string_view key) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::nullopt;
  // Unsigned first: nlohmann counts an unsigned number as an integer too, and its
  // number_integer_t pointer would read the unsigned bits as signed.
  if (const auto* u = v->get_ptr<const Json::number_unsigned_t*>()) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
    return std::nullopt;
  }
  if (const auto* i = v->get_ptr<const Json::number_integer_t*>()) return *i;
  if (const auto* d = v->get_ptr<const Json::number_float_t*>()) {
    if (std::isfinite(*d) && *d == std::floor(*d) && fits_int64(*d)) return static_cast<int64_t>(*d);
  }
  return std::nullopt;
}

std::optional<double> get_double(const Json& obj, std::string_view key) {
  const Json* v = member(obj, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  // Unsigned first, as in get_int.
  if (const auto* u = v->get_ptr<const Json::number_unsigned_t*>()) return static_cast<double>(*u);
  if (const auto* i = v->get_ptr<const Json::number_integer_t*>()) return static_cast<double>(*i);
  return *v->get_ptr<const Json::number_float_t*>();
}

std::optional<bool> get_bool(const Json& obj, std::string_view key) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::nullopt;
  if (const auto* b = v->get_ptr<const Json::boolean_t*>()) return *b;
  return std::nullopt;
}

std::optional<std::string> get_string(const Json& obj, std::string_view key) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::nullopt;
  if (const auto* s = v->get_ptr<const Json::string_t*>()) return *s;
  return std::nullopt;
}

Result<Json> parse(std::string_view text) {
  // nlohmann has no depth limit, and a deep document would overflow the stack when written (the
  // writer recurses); the callback sees the depth of every value and only takes note. Numbers out
  // of double's range (1e999) nlohmann refuses itself.
  bool too_deep = false;
  auto check = [&too_deep](int depth, Json::parse_event_t, const Json&) {
    if (depth > kMaxDepth) too_deep = true;
    return true;
  };
  Json doc = Json::parse(text.begin(), text.end(), check, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Error("invalid JSON");
  if (too_deep) return Status::Error("invalid JSON: nesting deeper than 64");
  return doc;
}

std::string write(const Json& v) {
  Json copy = v;
  integral_doubles_as_integers(&copy);
  std::string out = copy.dump(2, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
  out.push_back('\n');
  return out;
}

}  // namespace stallscope::json
