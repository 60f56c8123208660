// In-memory arrays: rows gathered by index, fields of different shapes and dtypes, and the
// arrays refused (no leading dimension, different lengths).
#include "loader/array_source.h"

#include <gtest/gtest.h>

#include <cstring>

namespace stallscope::loader {
namespace {

TEST(ArraySourceTest, GathersRowsByIndex) {
  std::vector<uint8_t> images(6 * 2 * 2);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i);
  std::vector<int64_t> labels = {5, 4, 3, 2, 1, 0};
  Result<std::unique_ptr<ArraySource>> s =
      ArraySource::create({ArrayField{"0", DType::kUInt8, {6, 2, 2}, reinterpret_cast<const std::byte*>(images.data())},
                           ArrayField{"1", DType::kInt64, {6}, reinterpret_cast<const std::byte*>(labels.data())}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->size(), 6);
  EXPECT_EQ((*s)->fields()[0].bytes(), 4u);
  EXPECT_EQ((*s)->fields()[1].shape, std::vector<int64_t>{});
  EXPECT_EQ((*s)->kind(), "arrays");
  std::byte img[4], label[8];
  std::byte* dst[] = {img, label};
  Rng rng(0);
  ASSERT_TRUE((*s)->read(4, dst, rng, nullptr).ok());
  EXPECT_EQ(std::memcmp(img, images.data() + 16, 4), 0);
  int64_t l = 0;
  std::memcpy(&l, label, 8);
  EXPECT_EQ(l, 1);
  EXPECT_FALSE((*s)->read(6, dst, rng, nullptr).ok());
}

TEST(ArraySourceTest, RefusesArraysThatCannotBeFields) {
  const std::byte data[16] = {};
  EXPECT_FALSE(ArraySource::create({}).ok());
  EXPECT_NE(ArraySource::create({ArrayField{"x", DType::kFloat32, {}, data}}).status().message().find("0-d"),
            std::string::npos);
  const Status s =
      ArraySource::create({ArrayField{"x", DType::kUInt8, {4}, data}, ArrayField{"y", DType::kUInt8, {3}, data}})
          .status();
  EXPECT_NE(s.message().find("different lengths"), std::string::npos) << s.message();
  EXPECT_FALSE(ArraySource::create({ArrayField{"x", DType::kUInt8, {4}, nullptr}}).ok());
}

}  // namespace
}  // namespace stallscope::loader
