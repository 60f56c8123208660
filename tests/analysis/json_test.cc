// Tests of the minimal JSON parser and writer.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/json.h"

namespace stallscope::json {
namespace {

TEST(JsonTest, ParsesAFlatConfigDocument) {
  auto v = parse(R"({"loader": 0, "batch_size": 32, "num_workers": 4, "pin_memory": true,
                     "persistent_workers": false, "prefetch_factor": null, "start_method": "fork",
                     "dataset_len": 1.5e3, "created_at": "train.py:42"})");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_TRUE(v->is_object());
  EXPECT_EQ(v->integer("batch_size"), 32);
  EXPECT_EQ(v->integer("num_workers"), 4);
  EXPECT_EQ(v->boolean("pin_memory"), true);
  EXPECT_EQ(v->boolean("persistent_workers"), false);
  EXPECT_FALSE(v->integer("prefetch_factor").has_value());
  ASSERT_NE(v->find("prefetch_factor"), nullptr);
  EXPECT_TRUE(v->find("prefetch_factor")->is_null());
  EXPECT_EQ(v->string("start_method"), "fork");
  EXPECT_EQ(v->number("dataset_len"), 1500.0);
  EXPECT_FALSE(v->string("missing").has_value());
  EXPECT_FALSE(v->integer("start_method").has_value());  // wrong type
}

TEST(JsonTest, ParsesNestingEscapesAndUnicode) {
  auto v = parse(R"( {"a": [1, -2.5, {"b": []}, "x\"y\\z\n\u00e9\ud83d\ude00"], "c": {}} )");
  ASSERT_TRUE(v.ok()) << v.status().message();
  const Value* a = v->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items().size(), 4u);
  EXPECT_EQ(a->items()[1].as_number(), -2.5);
  EXPECT_EQ(a->items()[3].as_string(), "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(v->find("c")->is_object());
}

TEST(JsonTest, RejectsMalformedDocuments) {
  for (const char* bad : {"", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "tru", "\"abc", "{\"a\": 01x}", "1 2", "-",
                          "\"\\x\"", "\"\\ud800\"", "{\"a\": 1e}", "\"a\nb\""}) {
    auto v = parse(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("invalid JSON"), std::string::npos);
    }
  }
  std::string deep(100, '[');
  EXPECT_FALSE(parse(deep).ok());
}

TEST(JsonTest, WriterRoundTripsAndKeepsOrder) {
  Value d = Value::object();
  d.set("schema", "stallscope.report/1");
  d.set("pi", 3.141592653589793);
  d.set("third", 0.30000000000000004);
  d.set("big", int64_t{1} << 40);
  d.set("neg", -7);
  d.set("none", nullptr);
  d.set("nan", std::nan(""));
  d.set("flag", true);
  d.set("text", "tab\tquote\"ctl\x01");
  Value arr = Value::array();
  arr.push(1);
  arr.push(Value::object());
  d.set("list", std::move(arr));
  d.set("neg", -8);  // replaces, keeps position
  for (int indent : {0, 2}) {
    const std::string text = write(d, indent);
    auto back = parse(text);
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
    EXPECT_EQ(back->members().size(), d.members().size());
    EXPECT_EQ(back->members()[4].first, "neg");
    EXPECT_EQ(back->integer("neg"), -8);
    EXPECT_EQ(back->number("pi"), 3.141592653589793);
    EXPECT_EQ(back->number("third"), 0.30000000000000004);
    EXPECT_EQ(back->integer("big"), int64_t{1} << 40);
    EXPECT_TRUE(back->find("nan")->is_null());
    EXPECT_EQ(back->string("text"), "tab\tquote\"ctl\x01");
    EXPECT_EQ(back->find("list")->items().size(), 2u);
  }
  EXPECT_EQ(write(Value(int64_t{1234567890123})), "1234567890123");
  EXPECT_EQ(write(Value(0.5)), "0.5");
}

}  // namespace
}  // namespace stallscope::json
