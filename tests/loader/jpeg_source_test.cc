// The JPEG sources: ImageFolder order and labels as torchvision lists them, tar shard indexing and
// random access, and every error as a one-line Status naming the file or the shard and member.
#include "loader/jpeg_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "loader/tar_index.h"
#include "tests/loader/jpeg_fixtures.h"
#include "tests/unit/test_util.h"

namespace stallscope::loader {
namespace {

using stallscope::testing::TempDir;
using stallscope::testing::write_file;

std::string small_jpeg(uint64_t seed, int w = 96, int h = 72) {
  return stallscope::testing::encode_jpeg(stallscope::testing::make_photo(w, h, seed), w, h);
}

ImageTransform small_transform() {
  ImageTransform t = ImageTransform::random_resized_crop(32);
  t.layout = ImageTransform::Layout::kUInt8HWC;
  return t;
}

struct Sample {
  Status status;
  std::vector<std::byte> image;
  int64_t label = -1;
};
Sample read(const Source& s, int64_t i, uint64_t seed = 7) {
  Sample out;
  out.image.resize(static_cast<size_t>(32 * 32 * 3));
  std::byte* dst[2] = {out.image.data(), reinterpret_cast<std::byte*>(&out.label)};
  Rng rng(seed);
  StageTimes times;
  out.status = s.read(i, dst, rng, &times);
  if (out.status.ok()) {
    EXPECT_GT(times.read_ns, 0u);
  }
  return out;
}

void expect_one_line_naming(const Status& st, const std::string& what) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(what), std::string::npos) << "'" << st.message() << "' does not name " << what;
}

// The order torchvision's make_dataset gives: classes sorted; per class the folders of os.walk
// sorted by their full path ("b/x" < "b/x-y" < "b/x/link" since '-' < '/'), files sorted in each;
// extensions case-insensitive; other files ignored; linked folders followed.
TEST(ImageFolderSource, OrderAndLabelsAsTorchvision) {
  TempDir dir;
  const std::string r = dir.path() + "/train";
  for (const char* d : {"/b/x/z", "/b/x-y", "/a", "/B", "/elsewhere"}) stallscope::testing::make_dirs(r + d);
  const std::string jpeg = small_jpeg(1);
  for (const char* f : {"/a/2.jpg", "/a/10.JPG", "/a/notes.txt", "/B/only.jpeg", "/b/top.jpg", "/b/x/z/deep.jpg",
                        "/b/x/a.jpg", "/b/x-y/m.jpg", "/elsewhere/linked.jpg"}) {
    write_file(r + f, jpeg);
  }
  ASSERT_EQ(::symlink((r + "/elsewhere").c_str(), (r + "/b/x/link").c_str()), 0);
  ::unlink((r + "/elsewhere/linked.jpg").c_str());
  write_file(r + "/elsewhere/linked.jpg", jpeg);
  // "elsewhere" is a class of its own too (it is a folder of root).

  auto src = ImageFolderSource::open(r, small_transform());
  ASSERT_TRUE(src.ok()) << src.status().message();
  const ImageFolderSource& s = **src;
  EXPECT_EQ(s.classes(), (std::vector<std::string>{"B", "a", "b", "elsewhere"}));
  std::vector<std::string> want = {"B/only.jpeg",         "a/10.JPG",       "a/2.jpg",
                                   "b/top.jpg",           "b/x/a.jpg",      "b/x-y/m.jpg",
                                   "b/x/link/linked.jpg", "b/x/z/deep.jpg", "elsewhere/linked.jpg"};
  std::vector<int64_t> labels = {0, 1, 1, 2, 2, 2, 2, 2, 3};
  ASSERT_EQ(s.size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s.describe(static_cast<int64_t>(i)), want[i]) << i;
    EXPECT_EQ(s.label(static_cast<int64_t>(i)), labels[i]) << i;
  }
  ASSERT_EQ(s.fields().size(), 2u);
  EXPECT_EQ(s.fields()[0].name, "image");
  EXPECT_EQ(s.fields()[0].shape, (std::vector<int64_t>{32, 32, 3}));
  EXPECT_EQ(s.fields()[1].name, "label");
  EXPECT_EQ(s.fields()[1].dtype, DType::kInt64);
  EXPECT_TRUE(s.fields()[1].shape.empty());
  EXPECT_EQ(s.kind(), "image_folder");

  Sample x = read(s, 4);
  ASSERT_TRUE(x.status.ok()) << x.status.message();
  EXPECT_EQ(x.label, 2);
  EXPECT_EQ(s.first_non_jpeg_name(), -1);
}

TEST(ImageFolderSource, TreeErrors) {
  TempDir dir;
  auto none = ImageFolderSource::open(dir.path() + "/missing", small_transform());
  expect_one_line_naming(none.status(), dir.path() + "/missing");

  stallscope::testing::make_dirs(dir.path() + "/flat");
  write_file(dir.path() + "/flat/a.jpg", small_jpeg(1));
  expect_one_line_naming(ImageFolderSource::open(dir.path() + "/flat", small_transform()).status(), "no class folder");

  stallscope::testing::make_dirs(dir.path() + "/t/cat");
  stallscope::testing::make_dirs(dir.path() + "/t/dog");
  write_file(dir.path() + "/t/cat/a.jpg", small_jpeg(1));
  write_file(dir.path() + "/t/dog/readme.txt", "x");
  expect_one_line_naming(ImageFolderSource::open(dir.path() + "/t", small_transform()).status(), "dog");

  ImageTransform bad = small_transform();
  bad.out_w = 0;
  EXPECT_FALSE(ImageFolderSource::open(dir.path() + "/t", bad).ok());
}

// A file that is not a JPEG, a corrupt or truncated one, one deleted after listing: each read
// fails with one line naming the file and the sample index; the other samples still read.
TEST(ImageFolderSource, ReadErrorsNameTheFile) {
  TempDir dir;
  const std::string r = dir.path() + "/d";
  stallscope::testing::make_dirs(r + "/c");
  std::string good = small_jpeg(2);
  write_file(r + "/c/0_good.jpg", good);
  write_file(r + "/c/1_png.png", std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, 'x'));
  write_file(r + "/c/2_truncated.jpg", good.substr(0, good.size() / 2));
  std::string corrupt = good;
  for (size_t i = good.size() / 2; i < good.size() / 2 + 40; ++i) corrupt[i] = static_cast<char>(0x5A ^ i);
  write_file(r + "/c/3_corrupt.jpg", corrupt);
  write_file(r + "/c/4_gone.jpg", good);
  write_file(r + "/c/5_empty.jpg", "");
  auto src = ImageFolderSource::open(r, small_transform());
  ASSERT_TRUE(src.ok()) << src.status().message();
  ASSERT_EQ((*src)->size(), 6);
  EXPECT_EQ((*src)->first_non_jpeg_name(), 1);
  ::unlink((r + "/c/4_gone.jpg").c_str());

  EXPECT_TRUE(read(**src, 0).status.ok());
  Sample png = read(**src, 1);
  expect_one_line_naming(png.status, r + "/c/1_png.png (sample 1)");
  expect_one_line_naming(png.status, "PNG");
  expect_one_line_naming(read(**src, 2).status, "2_truncated.jpg (sample 2)");
  expect_one_line_naming(read(**src, 3).status, "3_corrupt.jpg (sample 3)");
  Sample gone = read(**src, 4);
  expect_one_line_naming(gone.status, "4_gone.jpg (sample 4)");
  expect_one_line_naming(gone.status, "No such file");
  expect_one_line_naming(read(**src, 5).status, "5_empty.jpg (sample 5)");
  expect_one_line_naming(read(**src, 6).status, "out of range");
  EXPECT_TRUE(read(**src, 0).status.ok());
}

std::string make_shard(const TempDir& dir, const std::string& name,
                       const std::vector<stallscope::testing::TarEntry>& e) {
  std::string path = dir.file(name);
  stallscope::testing::write_tar(path, e);
  return path;
}

// The index gives every member's data offset: a pread there is the member's bytes, for short
// names, pax long names and after directories.
TEST(TarIndex, OffsetsAndSizes) {
  TempDir dir;
  std::string long_name = std::string(150, 'n') + "/deep.jpg";
  std::vector<stallscope::testing::TarEntry> entries = {{"d", "", true},
                                                        {"a.txt", "hello"},
                                                        {long_name, std::string(1000, 'q') + "end"},
                                                        {"z.bin", std::string(512, 'z')}};
  std::string path = make_shard(dir, "x.tar", entries);
  auto idx = index_tar(path, [](std::string_view n) { return n == "a.txt"; });
  ASSERT_TRUE(idx.ok()) << idx.status().message();
  ASSERT_EQ(idx->size(), 3u);
  std::string all = stallscope::testing::read_file(path);
  for (size_t i = 0; i < 3; ++i) {
    const TarMember& m = (*idx)[i];
    EXPECT_EQ(m.name, entries[i + 1].name);
    EXPECT_EQ(m.size, static_cast<int64_t>(entries[i + 1].data.size()));
    EXPECT_EQ(all.substr(static_cast<size_t>(m.offset), static_cast<size_t>(m.size)), entries[i + 1].data) << m.name;
  }
  EXPECT_EQ((*idx)[0].contents, "hello");
  EXPECT_TRUE((*idx)[1].contents.empty());
}

// Shards in order, samples in archive order, read in any order: the same image and label as the
// same file read from an ImageFolder with the same seed.
TEST(TarShardSource, IndexAndRandomAccess) {
  TempDir dir;
  std::vector<std::string> jpegs;
  for (int i = 0; i < 7; ++i) jpegs.push_back(small_jpeg(100 + i, 64 + 8 * i, 48 + 4 * i));
  std::vector<stallscope::testing::TarEntry> s0 = {{"k0.jpg", jpegs[0]}, {"k0.cls", "3"},   {"k1.cls", " 1\n"},
                                                   {"k1.jpg", jpegs[1]}, {"k1.json", "{}"}, {"x.y/k2.JPEG", jpegs[2]},
                                                   {"x.y/k2.cls", "+2"}, {"noext", "x"}};
  std::vector<stallscope::testing::TarEntry> s1 = {{std::string(120, 'L') + ".jpg", jpegs[3]},
                                                   {std::string(120, 'L') + ".cls", "0"},
                                                   {"k4.jpg", jpegs[4]},
                                                   {"k4.cls", "-1"}};
  std::string a = make_shard(dir, "shard-000.tar", s0), b = make_shard(dir, "shard-001.tar", s1);
  auto src = TarShardSource::open({a, b}, small_transform());
  ASSERT_TRUE(src.ok()) << src.status().message();
  const TarShardSource& s = **src;
  ASSERT_EQ(s.size(), 5);
  EXPECT_EQ(s.kind(), "tar_shards");
  std::vector<int64_t> labels = {3, 1, 2, 0, -1};
  std::vector<std::string> members = {"k0.jpg", "k1.jpg", "x.y/k2.JPEG", std::string(120, 'L') + ".jpg", "k4.jpg"};
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(s.label(i), labels[static_cast<size_t>(i)]);
    EXPECT_EQ(s.member(i), members[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(s.describe(4), b + ":k4.jpg");

  // The same images as files.
  stallscope::testing::make_dirs(dir.path() + "/f/c");
  for (int i : {0, 1, 2, 3, 4})
    write_file(dir.path() + "/f/c/" + std::to_string(i) + ".jpg", jpegs[static_cast<size_t>(i)]);
  auto folder = ImageFolderSource::open(dir.path() + "/f", small_transform());
  ASSERT_TRUE(folder.ok());
  for (int64_t i : {4, 0, 3, 1, 2, 2, 0}) {
    Sample t = read(s, i, 1000 + static_cast<uint64_t>(i)), f = read(**folder, i, 1000 + static_cast<uint64_t>(i));
    ASSERT_TRUE(t.status.ok()) << t.status.message();
    ASSERT_TRUE(f.status.ok()) << f.status.message();
    EXPECT_EQ(t.image, f.image) << i;
    EXPECT_EQ(t.label, labels[static_cast<size_t>(i)]);
  }
}

TEST(TarShardSource, ShardErrorsNameShardAndMember) {
  TempDir dir;
  std::string jpeg = small_jpeg(3);
  auto open1 = [&](const std::string& path) { return TarShardSource::open({path}, small_transform()).status(); };

  std::string garbage = dir.file("garbage.tar");
  write_file(garbage, std::string(4096, 'g'));
  expect_one_line_naming(open1(garbage), garbage);
  expect_one_line_naming(open1(garbage), "not a tar");

  std::string gz = dir.file("c.tar.gz");
  write_file(gz, std::string("\x1f\x8b\x08", 3) + std::string(100, 0));
  expect_one_line_naming(open1(gz), "compressed");

  expect_one_line_naming(open1(dir.file("none.tar")), dir.file("none.tar"));

  // Cut in the middle of the second image's data.
  std::string whole = make_shard(dir, "whole.tar", {{"a.jpg", jpeg}, {"a.cls", "1"}, {"b.jpg", jpeg}, {"b.cls", "2"}});
  std::string bytes = stallscope::testing::read_file(whole);
  auto idx = index_tar(whole);
  ASSERT_TRUE(idx.ok());
  std::string cut = dir.file("cut.tar");
  write_file(cut, bytes.substr(0, static_cast<size_t>((*idx)[2].offset + 100)));
  Status st = open1(cut);
  expect_one_line_naming(st, cut);
  expect_one_line_naming(st, "b.jpg");

  expect_one_line_naming(open1(make_shard(dir, "nocls.tar", {{"a.jpg", jpeg}, {"a.cls", "1"}, {"b.jpg", jpeg}})),
                         "'b.jpg'");
  expect_one_line_naming(open1(make_shard(dir, "nojpg.tar", {{"a.cls", "1"}, {"b.jpg", jpeg}, {"b.cls", "1"}})),
                         "'a.cls'");
  st = open1(make_shard(dir, "badlabel.tar", {{"a.jpg", jpeg}, {"a.cls", "cat"}}));
  expect_one_line_naming(st, dir.file("badlabel.tar"));
  expect_one_line_naming(st, "'a.cls'");
  expect_one_line_naming(st, "'cat'");
  expect_one_line_naming(open1(make_shard(dir, "empty.tar", {{"a.cls", ""}, {"a.jpg", jpeg}})), "a.cls");
  expect_one_line_naming(open1(make_shard(dir, "dup.tar", {{"a.jpg", jpeg}, {"a.jpeg", jpeg}, {"a.cls", "1"}})),
                         "twice");

  // A member whose bytes are not a JPEG fails its read, naming shard, member and index.
  std::string png =
      make_shard(dir, "png.tar", {{"a.jpg", jpeg}, {"a.cls", "0"}, {"p.jpg", "\x89PNG...."}, {"p.cls", "1"}});
  auto src = TarShardSource::open({png}, small_transform());
  ASSERT_TRUE(src.ok()) << src.status().message();
  EXPECT_TRUE(read(**src, 0).status.ok());
  expect_one_line_naming(read(**src, 1).status, png + ": member 'p.jpg' (sample 1)");
}

// read() is called from many threads at once: each keeps its own decoder, and the results are
// those of reading one by one.
TEST(TarShardSource, ConcurrentReadsMatchSerialReads) {
  TempDir dir;
  std::vector<stallscope::testing::TarEntry> entries;
  for (int i = 0; i < 24; ++i) {
    entries.push_back({"s" + std::to_string(100 + i) + ".jpg", small_jpeg(500 + i, 80 + i, 60 + i)});
    entries.push_back({"s" + std::to_string(100 + i) + ".cls", std::to_string(i % 5)});
  }
  auto src = TarShardSource::open({make_shard(dir, "t.tar", entries)}, small_transform());
  ASSERT_TRUE(src.ok()) << src.status().message();
  std::vector<Sample> serial;
  for (int64_t i = 0; i < 24; ++i) serial.push_back(read(**src, i, static_cast<uint64_t>(i)));
  std::vector<Sample> parallel(24 * 4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 24; ++k) {
        int64_t i = (k * 5 + t * 7) % 24;
        parallel[static_cast<size_t>(t * 24 + k)] = read(**src, i, static_cast<uint64_t>(i));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    for (int k = 0; k < 24; ++k) {
      const Sample& p = parallel[static_cast<size_t>(t * 24 + k)];
      const Sample& s = serial[static_cast<size_t>((k * 5 + t * 7) % 24)];
      ASSERT_TRUE(p.status.ok()) << p.status.message();
      EXPECT_EQ(p.image, s.image);
      EXPECT_EQ(p.label, s.label);
    }
  }
}

TEST(TarShardSource, SplitKeyAsWebDataset) {
  std::string k, e;
  ASSERT_TRUE(split_key("a/b.c.JPG", &k, &e));
  EXPECT_EQ(k, "a/b");
  EXPECT_EQ(e, "c.jpg");
  ASSERT_TRUE(split_key("x.y/img.cls", &k, &e));
  EXPECT_EQ(k, "x.y/img");
  EXPECT_EQ(e, "cls");
  EXPECT_FALSE(split_key("dir/noext", &k, &e));
  EXPECT_FALSE(split_key(".hidden", &k, &e));
}

}  // namespace
}  // namespace stallscope::loader
