// JSON for every room: nlohmann::ordered_json under a short name, plus the few helpers its callers
// share and nlohmann lacks. Objects keep their members in insertion order, so written documents
// read in a stable, deliberate order. Everything else (building, iterating, contains(), is_*())
// is nlohmann's own API (https://json.nlohmann.me); nothing here re-wraps it. Nothing here
// throws: the look-ups check types, parse() returns a Result, write() replaces invalid UTF-8.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stallscope {

using Json = nlohmann::ordered_json;

namespace json {

// Typed look-ups on an object: nullopt when `obj` is not an object, the key is absent, or its
// value is of another type (null included).
// get_int: an integer that fits int64_t, or a float with an integral value in that range.
std::optional<int64_t> get_int(const Json& obj, std::string_view key);
// get_double: any number.
std::optional<double> get_double(const Json& obj, std::string_view key);
std::optional<bool> get_bool(const Json& obj, std::string_view key);
std::optional<std::string> get_string(const Json& obj, std::string_view key);

// Parses one JSON document (RFC 8259). Trailing text, invalid UTF-8, nesting deeper than kMaxDepth
// and numbers out of double's range are errors too; the message is one line starting "invalid JSON"
// (nlohmann, asked not to throw, says no more than that).
inline constexpr int kMaxDepth = 64;
Result<Json> parse(std::string_view text);

// The document as stallscope writes it (`report --json`, the dashboard's layout dump): two spaces
// per level, a final newline, NaN and infinities as null, doubles with an integral value as
// integers (as the report always wrote them; docs/decisions.md).
std::string write(const Json& v);

}  // namespace json
}  // namespace stallscope

// A std::optional is written as its value, or null when empty: unknown figures are null, never
// omitted. This is nlohmann's documented hook for a type it does not know (adl_serializer);
// reading one back goes through the typed look-ups above, so there is no from_json.
namespace nlohmann {
template <typename T>
struct adl_serializer<std::optional<T>> {
  template <typename BasicJson>
  static void to_json(BasicJson& j, const std::optional<T>& v) {
    if (v) {
      j = *v;
    } else {
      j = nullptr;
    }
  }
};
}  // namespace nlohmann
