// .npy files, memory-mapped; see npy_source.h. The header is a Python dict literal written by
// numpy.lib.format: {'descr': '<f4', 'fortran_order': False, 'shape': (100, 3, 32, 32), }
#include "loader/npy_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

namespace stallscope::loader {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// numpy refuses to parse headers over 10 000 bytes (max_header_size); 64 kB bounds what is read.
constexpr size_t kHeadRead = size_t{1} << 16;
constexpr size_t kMaxHeader = kHeadRead - 12;

// A cursor over the dict literal.
class Literal {
 public:
  explicit Literal(std::string_view s) : s_(s) {}
  void blanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    blanks();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    blanks();
    return i_ < s_.size() && s_[i_] == c;
  }
  std::optional<std::string> string() {
    blanks();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return std::nullopt;
    const char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\') return std::nullopt;  // numpy's descriptors never need escapes
      out += s_[i_++];
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    return out;
  }
  std::optional<bool> boolean() {
    blanks();
    for (auto [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return value;
      }
    }
    return std::nullopt;
  }
  std::optional<int64_t> integer() {
    blanks();
    int64_t v = 0;
    size_t digits = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + (s_[i_++] - '0');
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // files written by Python 2
    return v;
  }
  // "(3, 4)", "(3,)", "()"
  std::optional<std::vector<int64_t>> tuple() {
    if (!eat('(')) return std::nullopt;
    std::vector<int64_t> out;
    if (eat(')')) return out;
    for (;;) {
      const std::optional<int64_t> v = integer();
      if (!v) return std::nullopt;
      out.push_back(*v);
      if (eat(')')) return out;
      if (!eat(',')) return std::nullopt;
      if (eat(')')) return out;
    }
  }
  bool at_end() {
    blanks();
    return i_ == s_.size();
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

Result<DType> dtype_of(const std::string& descr) {
  if (descr.size() < 3) return Status::Error("unknown dtype '" + descr + "'");
  const char order = descr[0];
  const std::string type = descr.substr(1);
  struct Known {
    const char* code;
    DType dtype;
  };
  static const Known kKnown[] = {{"b1", DType::kBool},    {"i1", DType::kInt8},    {"u1", DType::kUInt8},
                                 {"i2", DType::kInt16},   {"i4", DType::kInt32},   {"i8", DType::kInt64},
                                 {"f2", DType::kFloat16}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64}};
  for (const Known& k : kKnown) {
    if (type != k.code) continue;
    if (order != '<' && order != '|' && order != '=' && order != '>') break;
    if (order == '>' && dtype_size(k.dtype) > 1) {
      return Status::Error("big-endian dtype '" + descr + "' is not supported (save it little-endian: a.astype('<" +
                           type + "'))");
    }
    return k.dtype;
  }
  for (const char* u : {"u2", "u4", "u8"}) {
    if (type == u) return Status::Error("dtype '" + descr + "' (unsigned, wider than a byte) is not supported");
  }
  return Status::Error("unknown or unsupported dtype '" + descr + "'");
}

std::string basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<NpyHeader> parse_npy_header(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) return Status::Error("not a .npy file (no \\x93NUMPY magic)");
  NpyHeader h;
  h.major = static_cast<unsigned char>(bytes[6]);
  h.minor = static_cast<unsigned char>(bytes[7]);
  size_t len = 0, start = 0;
  if (h.major == 1) {
    len = static_cast<unsigned char>(bytes[8]) | (size_t{static_cast<unsigned char>(bytes[9])} << 8);
    start = 10;
  } else if (h.major == 2 || h.major == 3) {
    if (bytes.size() < 12) return Status::Error("malformed header: too short");
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(bytes[8 + static_cast<size_t>(i)]);
    start = 12;
  } else {
    return Status::Error("unsupported format version " + std::to_string(h.major) + "." + std::to_string(h.minor));
  }
  if (len > kMaxHeader) return Status::Error("malformed header: " + std::to_string(len) + " bytes long");
  if (bytes.size() < start + len) return Status::Error("malformed header: the file ends inside it");
  h.data_offset = start + len;
  Literal lit(bytes.substr(start, len));
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  if (!lit.eat('{')) return Status::Error("malformed header: not a dict");
  while (!lit.eat('}')) {
    const std::optional<std::string> key = lit.string();
    if (!key || !lit.eat(':')) return Status::Error("malformed header: expected 'key': value");
    if (*key == "descr") {
      if (lit.peek('[')) return Status::Error("structured dtypes are not supported");
      descr = lit.string();
      if (!descr) return Status::Error("malformed header: 'descr' is not a string");
    } else if (*key == "fortran_order") {
      fortran = lit.boolean();
      if (!fortran) return Status::Error("malformed header: 'fortran_order' is not True or False");
    } else if (*key == "shape") {
      shape = lit.tuple();
      if (!shape) return Status::Error("malformed header: 'shape' is not a tuple of integers");
    } else {
      return Status::Error("malformed header: unexpected key '" + *key + "'");
    }
    if (!lit.eat(',') && !lit.peek('}')) return Status::Error("malformed header: expected ',' or '}'");
  }
  if (!lit.at_end()) return Status::Error("malformed header: text after the dict");
  if (!descr || !fortran || !shape)
    return Status::Error("malformed header: 'descr', 'fortran_order' or 'shape' missing");
  if (*fortran)
    return Status::Error("Fortran-order arrays are not supported (save it in C order: np.ascontiguousarray)");
  Result<DType> dtype = dtype_of(*descr);
  if (!dtype.ok()) return dtype.status();
  h.dtype = *dtype;
  h.shape = std::move(*shape);
  if (h.shape.empty()) return Status::Error("a 0-d array has no samples to index");
  return h;
}

Result<std::unique_ptr<NpySource>> NpySource::open(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::Error("no .npy files");
  std::unique_ptr<NpySource> src(new NpySource());
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    auto fail = [&path](const std::string& m) { return Status::Error(path + ": " + m); };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return fail("not a regular file");
    }
    const size_t length = static_cast<size_t>(st.st_size);
    // The header: read, not mapped, so a short or odd file is checked before anything is mapped.
    std::string head(std::min(length, kHeadRead), '\0');
    size_t got = 0;
    while (got < head.size()) {
      const ssize_t n = ::pread(fd, head.data() + got, head.size() - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    head.resize(got);
    Result<NpyHeader> h = parse_npy_header(head);
    if (!h.ok()) {
      ::close(fd);
      return fail(h.status().message());
    }
    Field f;
    f.name = basename(path);
    f.dtype = h->dtype;
    f.shape.assign(h->shape.begin() + 1, h->shape.end());
    const size_t row = f.bytes();
    // The data the shape needs, with overflow checked: a header may claim anything.
    unsigned __int128 need = row;
    need *= static_cast<unsigned __int128>(h->shape[0]);
    const size_t have = length - h->data_offset;
    if (need > have) {
      ::close(fd);
      return fail("truncated: " + std::to_string(have) + " bytes of data, the shape needs " +
                  std::to_string(static_cast<unsigned long long>(need)));
    }
    if (i == 0) {
      src->size_ = h->shape[0];
    } else if (h->shape[0] != src->size_) {
      ::close(fd);
      return fail("has " + std::to_string(h->shape[0]) + " samples, " + paths[0] + " has " +
                  std::to_string(src->size_));
    }
    Mapped m;
    m.path = path;
    m.row_bytes = row;
    if (need > 0) {
      void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
      if (base == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        return fail(std::string("cannot map: ") + std::strerror(e));
      }
      m.base = base;
      m.length = length;
      m.data = static_cast<const std::byte*>(base) + h->data_offset;
    }
    ::close(fd);  // the mapping keeps the file
    src->files_.push_back(std::move(m));
    src->fields_.push_back(std::move(f));
  }
  return src;
}

NpySource::~NpySource() {
  for (const Mapped& m : files_) {
    if (m.base != nullptr) ::munmap(m.base, m.length);
  }
}

Status NpySource::read(int64_t index, std::span<std::byte* const> dst, Rng&, StageTimes*) const {
  if (index < 0 || index >= size_) {
    return Status::Error(describe(index) + ": index out of range (" + std::to_string(size_) + " rows)");
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    const Mapped& m = files_[f];
    if (m.row_bytes == 0) continue;
    std::memcpy(dst[f], m.data + static_cast<size_t>(index) * m.row_bytes, m.row_bytes);
  }
  return Status::Ok();
}

std::string NpySource::describe(int64_t index) const {
  std::string files;
  for (const Mapped& m : files_) files += (files.empty() ? "" : ", ") + m.path;
  return files + " row " + std::to_string(index);
}

}  // namespace stallscope::loader
