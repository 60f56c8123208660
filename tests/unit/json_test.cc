// Tests of common/json's helpers over nlohmann::ordered_json: the typed look-ups (wrong types,
// large integers), parse() (errors as one line, escapes and unicode, depth and range limits) and
// write() (the report's form: indentation, integral doubles, NaN and infinities, invalid UTF-8).
#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

namespace stallscope::json {
namespace {

TEST(JsonTest, ParsesAFlatConfigDocument) {
  auto v = parse(R"({"loader": 0, "batch_size": 32, "num_workers": 4, "pin_memory": true,
                     "persistent_workers": false, "prefetch_factor": null, "start_method": "fork",
                     "dataset_len": 1.5e3, "created_at": "train.py:42"})");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_TRUE(v->is_object());
  EXPECT_EQ(get_int(*v, "batch_size"), 32);
  EXPECT_EQ(get_int(*v, "num_workers"), 4);
  EXPECT_EQ(get_bool(*v, "pin_memory"), true);
  EXPECT_EQ(get_bool(*v, "persistent_workers"), false);
  EXPECT_FALSE(get_int(*v, "prefetch_factor").has_value());
  ASSERT_TRUE(v->contains("prefetch_factor"));
  EXPECT_TRUE(v->at("prefetch_factor").is_null());
  EXPECT_EQ(get_string(*v, "start_method"), "fork");
  EXPECT_EQ(get_double(*v, "dataset_len"), 1500.0);
  EXPECT_EQ(get_int(*v, "dataset_len"), 1500);  // a float with an integral value
  EXPECT_FALSE(get_string(*v, "missing").has_value());
}

TEST(JsonTest, TypedLookUpsRefuseOtherTypes) {
  auto v = parse(R"({"n": 7, "x": 2.5, "s": "7", "b": true, "z": null, "a": [1], "o": {"n": 1}})");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_FALSE(get_int(*v, "s").has_value());
  EXPECT_FALSE(get_int(*v, "b").has_value());
  EXPECT_FALSE(get_int(*v, "z").has_value());
  EXPECT_FALSE(get_int(*v, "a").has_value());
  EXPECT_FALSE(get_int(*v, "o").has_value());
  EXPECT_FALSE(get_int(*v, "x").has_value());  // not integral: not rounded
  EXPECT_FALSE(get_double(*v, "s").has_value());
  EXPECT_FALSE(get_double(*v, "b").has_value());
  EXPECT_FALSE(get_bool(*v, "n").has_value());
  EXPECT_FALSE(get_bool(*v, "z").has_value());
  EXPECT_FALSE(get_string(*v, "n").has_value());
  EXPECT_FALSE(get_string(*v, "o").has_value());
  EXPECT_EQ(get_double(*v, "n"), 7.0);  // an integer is a number too
  EXPECT_EQ(get_double(*v, "x"), 2.5);
  // Not an object: nothing to look up, and no exception.
  for (const Json& other : {Json(), Json(3), Json("text"), Json::array({1, 2})}) {
    EXPECT_FALSE(get_int(other, "n").has_value());
    EXPECT_FALSE(get_double(other, "n").has_value());
    EXPECT_FALSE(get_bool(other, "n").has_value());
    EXPECT_FALSE(get_string(other, "n").has_value());
  }
}

TEST(JsonTest, LargeIntegersAreExact) {
  auto v = parse(R"({"big": 9007199254740993, "max": 9223372036854775807, "min": -9223372036854775808,
                     "over": 9223372036854775808, "huge": 18446744073709551616, "f": 1e18, "f_over": 1e19})");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(get_int(*v, "big"), int64_t{9007199254740993});  // 2^53 + 1: no detour through a double
  EXPECT_EQ(get_int(*v, "max"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(get_int(*v, "min"), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(get_int(*v, "over").has_value());  // 2^63 does not fit
  EXPECT_FALSE(get_int(*v, "huge").has_value());  // 2^64: read as a double, still does not fit
  EXPECT_EQ(get_int(*v, "f"), int64_t{1000000000000000000});
  EXPECT_FALSE(get_int(*v, "f_over").has_value());
  EXPECT_EQ(get_double(*v, "over"), 9223372036854775808.0);
  EXPECT_EQ(write(*v),
            "{\n  \"big\": 9007199254740993,\n  \"max\": 9223372036854775807,\n"
            "  \"min\": -9223372036854775808,\n  \"over\": 9223372036854775808,\n"
            "  \"huge\": 1.8446744073709552e+19,\n  \"f\": 1e+18,\n  \"f_over\": 1e+19\n}\n");
}

TEST(JsonTest, ParsesNestingEscapesAndUnicode) {
  auto v = parse(R"( {"a": [1, -2.5, {"b": []}, "x\"y\\z\n\u00e9\ud83d\ude00\/"], "c": {}} )");
  ASSERT_TRUE(v.ok()) << v.status().message();
  ASSERT_TRUE(v->contains("a"));
  const Json& a = v->at("a");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[1].get<double>(), -2.5);
  EXPECT_EQ(a[3].get<std::string>(), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_TRUE(v->at("c").is_object());
  // UTF-8 is written as it is, not escaped.
  EXPECT_EQ(write(a[3]), "\"x\\\"y\\\\z\\n\xc3\xa9\xf0\x9f\x98\x80/\"\n");
}

TEST(JsonTest, RejectsMalformedDocumentsWithOneLine) {
  for (const char* bad : {"", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "tru", "\"abc", "{\"a\": 01x}", "1 2", "-",
                          "\"\\x\"", "\"\\ud800\"", "{\"a\": 1e}", "\"a\nb\"", "NaN", "[Infinity]", "\"\xff\""}) {
    auto v = parse(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_EQ(v.status().message().rfind("invalid JSON", 0), 0u) << v.status().message();
      EXPECT_EQ(v.status().message().find('\n'), std::string::npos) << v.status().message();
    }
  }
  std::string deep(100, '[');
  EXPECT_FALSE(parse(deep).ok());
}

TEST(JsonTest, LimitsDepthAndRange) {
  auto nested = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  EXPECT_TRUE(parse(nested(size_t{kMaxDepth})).ok());
  auto deep = parse(nested(size_t{kMaxDepth} + 2));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "invalid JSON: nesting deeper than 64");
  // Infinity cannot be read back from what the writer makes of it (null): refused.
  EXPECT_FALSE(parse(R"({"x": 1e999})").ok());
  EXPECT_FALSE(parse("[-1e999]").ok());
  EXPECT_TRUE(parse("[1e308, 5e-324, 1e-999]").ok());  // underflow reads as 0, as strtod does
}

TEST(JsonTest, WriterKeepsOrderAndTheReportsForm) {
  Json d = Json::object();
  d["schema"] = "stallscope.report/1";
  d["pi"] = 3.141592653589793;
  d["third"] = 0.30000000000000004;
  d["big"] = int64_t{1} << 40;
  d["neg"] = -7;
  d["none"] = nullptr;
  d["nan"] = std::nan("");
  d["inf"] = -std::numeric_limits<double>::infinity();
  d["flag"] = true;
  d["text"] = "tab\tquote\"ctl\x01";
  d["list"] = Json::array({1, Json::object(), Json::array()});
  d["neg"] = -8;  // replaces, keeps its position
  d["whole"] = 12.0;
  d["minus_zero"] = -0.0;
  d["half"] = 0.5;
  d["unknown"] = std::optional<double>();
  d["known"] = std::optional<std::string>("fork");
  const std::string text = write(d);
  EXPECT_EQ(text,
            "{\n"
            "  \"schema\": \"stallscope.report/1\",\n"
            "  \"pi\": 3.141592653589793,\n"
            "  \"third\": 0.30000000000000004,\n"
            "  \"big\": 1099511627776,\n"
            "  \"neg\": -8,\n"
            "  \"none\": null,\n"
            "  \"nan\": null,\n"
            "  \"inf\": null,\n"
            "  \"flag\": true,\n"
            "  \"text\": \"tab\\tquote\\\"ctl\\u0001\",\n"
            "  \"list\": [\n"
            "    1,\n"
            "    {},\n"
            "    []\n"
            "  ],\n"
            "  \"whole\": 12,\n"
            "  \"minus_zero\": 0,\n"
            "  \"half\": 0.5,\n"
            "  \"unknown\": null,\n"
            "  \"known\": \"fork\"\n"
            "}\n");
  auto back = parse(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->begin().key(), "schema");
  EXPECT_EQ(get_int(*back, "neg"), -8);
  EXPECT_EQ(get_double(*back, "pi"), 3.141592653589793);
  EXPECT_EQ(get_double(*back, "third"), 0.30000000000000004);
  EXPECT_EQ(get_string(*back, "text"), "tab\tquote\"ctl\x01");
  // The document given to write() is not changed by it.
  EXPECT_TRUE(d["whole"].is_number_float());
}

TEST(JsonTest, WriterReplacesInvalidUtf8InsteadOfThrowing) {
  Json d = Json::object();
  d["path"] = std::string("run\xff.db");
  EXPECT_EQ(write(d), "{\n  \"path\": \"run\xef\xbf\xbd.db\"\n}\n");  // U+FFFD
}

}  // namespace
}  // namespace stallscope::json
