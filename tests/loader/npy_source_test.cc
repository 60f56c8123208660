// .npy files: versions 1.0, 2.0 and 3.0, the dtypes and shapes read, several files as fields,
// and every malformed kind refused at open with a one-line message naming the file.
#include "loader/npy_source.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/test_util.h"

namespace stallscope::loader {
namespace {

using stallscope::testing::TempDir;
using stallscope::testing::write_file;

// A .npy file as numpy.lib.format writes it: magic, version, header length, the dict padded with
// spaces to a multiple of 64 and ended by '\n', then `data`.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t len = header.size();
  out += static_cast<char>(len & 0xFF);
  out += static_cast<char>((len >> 8) & 0xFF);
  if (major != 1) {
    out += static_cast<char>((len >> 16) & 0xFF);
    out += static_cast<char>((len >> 24) & 0xFF);
  }
  return out + header + data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<std::byte> read_row(const Source& s, int64_t i, size_t field) {
  std::vector<std::vector<std::byte>> bufs;
  std::vector<std::byte*> dst;
  for (const Field& f : s.fields()) bufs.emplace_back(f.bytes());
  for (auto& b : bufs) dst.push_back(b.data());
  Rng rng(0);
  EXPECT_TRUE(s.read(i, dst, rng, nullptr).ok());
  return bufs[field];
}

TEST(NpySourceTest, ReadsEveryVersionAndRow) {
  TempDir dir;
  std::vector<float> x(5 * 2 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f;
  for (int major : {1, 2, 3}) {
    const std::string path = dir.file("x" + std::to_string(major) + ".npy");
    write_file(path, npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5, 2, 3), }", bytes_of(x), major));
    Result<std::unique_ptr<NpySource>> s = NpySource::open({path});
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ((*s)->size(), 5);
    ASSERT_EQ((*s)->fields().size(), 1u);
    EXPECT_EQ((*s)->fields()[0].dtype, DType::kFloat32);
    EXPECT_EQ((*s)->fields()[0].shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ((*s)->kind(), "npy");
    for (int64_t i = 0; i < 5; ++i) {
      const std::vector<std::byte> row = read_row(**s, i, 0);
      EXPECT_EQ(std::memcmp(row.data(), x.data() + i * 6, 24), 0) << "row " << i;
    }
    EXPECT_NE((*s)->describe(3).find(path), std::string::npos);
    EXPECT_NE((*s)->describe(3).find("row 3"), std::string::npos);
  }
}

TEST(NpySourceTest, FilesAreFieldsOfOneSample) {
  TempDir dir;
  const std::vector<uint8_t> img = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> label = {10, 20, 30, 40};
  write_file(dir.file("img.npy"), npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }", bytes_of(img)));
  // Python 2's long suffix and double quotes: numpy reads them, so do we.
  write_file(dir.file("label.npy"),
             npy("{\"descr\": \"<i8\", \"fortran_order\": False, \"shape\": (4L,)}", bytes_of(label)));
  Result<std::unique_ptr<NpySource>> s = NpySource::open({dir.file("img.npy"), dir.file("label.npy")});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->fields()[1].shape, std::vector<int64_t>{});
  const std::vector<std::byte> r = read_row(**s, 2, 0);
  EXPECT_EQ(static_cast<int>(r[0]), 5);
  EXPECT_EQ(static_cast<int>(r[1]), 6);
  int64_t l = 0;
  std::memcpy(&l, read_row(**s, 3, 1).data(), 8);
  EXPECT_EQ(l, 40);
}

TEST(NpySourceTest, ParsesEveryDtypeItKnows) {
  struct Case {
    const char* descr;
    DType dtype;
  };
  for (const Case& c :
       {Case{"|b1", DType::kBool}, Case{"|i1", DType::kInt8}, Case{"|u1", DType::kUInt8}, Case{"<i2", DType::kInt16},
        Case{"<i4", DType::kInt32}, Case{"<i8", DType::kInt64}, Case{"<f2", DType::kFloat16},
        Case{"<f4", DType::kFloat32}, Case{"<f8", DType::kFloat64}, Case{">u1", DType::kUInt8}}) {
    const std::string text =
        npy(std::string("{'descr': '") + c.descr + "', 'fortran_order': False, 'shape': (0,), }", "");
    Result<NpyHeader> h = parse_npy_header(text);
    ASSERT_TRUE(h.ok()) << c.descr << ": " << h.status().message();
    EXPECT_EQ(h->dtype, c.dtype) << c.descr;
    EXPECT_EQ(h->data_offset % 64, 0u);
  }
}

TEST(NpySourceTest, RefusesEachMalformedKindNamingTheFile) {
  TempDir dir;
  const std::string data16(16, '\0');
  struct Case {
    const char* name;
    std::string content;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"magic.npy", "PK\x03\x04 this is a zip", "not a .npy file"},
      {"short.npy", "\x93NUMPY\x01", "not a .npy file"},
      {"version.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", data16, 1).replace(6, 1, "\x09"),
       "format version 9"},
      {"syntax.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,) ", data16), "malformed header"},
      {"notdict.npy", npy("['descr', '<f4']", data16), "malformed header"},
      {"missing.npy", npy("{'descr': '<f4', 'shape': (4,), }", data16), "missing"},
      {"badshape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, x), }", data16), "shape"},
      {"headerlen.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", "").substr(0, 40),
       "ends inside"},
      {"fortran.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data16), "Fortran"},
      {"bigendian.npy", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", data16), "big-endian"},
      {"unknown.npy", npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", data16), "dtype"},
      {"object.npy", npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", data16), "dtype"},
      {"uint32.npy", npy("{'descr': '<u4', 'fortran_order': False, 'shape': (4,), }", data16), "not supported"},
      {"structured.npy", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", data16),
       "structured"},
      {"scalar.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0')), "0-d"},
      {"truncated.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", data16), "truncated"},
      {"huge.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", data16),
       "truncated"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(c.name);
    write_file(path, c.content);
    Result<std::unique_ptr<NpySource>> s = NpySource::open({path});
    ASSERT_FALSE(s.ok()) << c.name;
    const std::string& m = s.status().message();
    EXPECT_EQ(m.rfind(path, 0), 0u) << m;
    EXPECT_NE(m.find(c.says), std::string::npos) << c.name << ": " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(NpySourceTest, RefusesFilesOfDifferentLengthsAndMissingFiles) {
  TempDir dir;
  write_file(dir.file("a.npy"), npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", "abcd"));
  write_file(dir.file("b.npy"), npy("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "abc"));
  Result<std::unique_ptr<NpySource>> s = NpySource::open({dir.file("a.npy"), dir.file("b.npy")});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("b.npy: has 3 samples"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("a.npy has 4"), std::string::npos) << s.status().message();
  s = NpySource::open({dir.file("nope.npy")});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("nope.npy"), std::string::npos);
  s = NpySource::open({dir.path()});
  ASSERT_FALSE(s.ok());
}

TEST(NpySourceTest, AnEmptyArrayHasNoSamples) {
  TempDir dir;
  write_file(dir.file("e.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", ""));
  Result<std::unique_ptr<NpySource>> s = NpySource::open({dir.file("e.npy")});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->size(), 0);
}

}  // namespace
}  // namespace stallscope::loader
