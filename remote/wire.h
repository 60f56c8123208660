// The wire format of `stallscope serve` (docs/remote.md): frames, and the values inside them.
//
// A frame is a 20-byte header and a payload:
//   magic "SSRP" | version u8 | type u8 | flags u8 | 0 u8 | id u32 | size u32 | raw size u32
// (little-endian). `size` bytes follow; with flags bit 0 they are the payload deflated (zlib) and
// inflate to `raw size` bytes, otherwise raw size equals size. Both are bounded by kMaxFrameBytes:
// anything else is a malformed frame, refused in one line, never a crash (tests/fuzz/fuzz_wire.cc).
//
// Payloads are sequences of values: unsigned LEB128 varints, signed ones zigzagged, doubles as 8
// little-endian bytes, strings as a varint length and the bytes. In decodes them with bounds
// checks: a short or damaged payload sets ok() false and yields zeros.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace stallscope::remote {

constexpr uint8_t kProtocolVersion = 1;
constexpr size_t kHeaderBytes = 20;
constexpr uint32_t kMaxFrameBytes = 64u << 20;
// Payloads at least this long are deflated.
constexpr size_t kCompressFrom = 256;

enum class FrameType : uint8_t {
  kHello = 1,    // both ways, first: the versions, and the token for `serve --port`
  kRequest = 2,  // client -> node: a call (remote/protocol.h)
  kPart = 3,     // node -> client: a part of a call's answer (rows streamed as they are read)
  kDone = 4,     // node -> client: the call's end: ok and its result, or an error line
};

struct Frame {
  FrameType type = FrameType::kHello;
  uint32_t id = 0;          // the call it belongs to (0: the hello)
  std::string payload;      // inflated
  uint32_t wire_bytes = 0;  // as it crossed the link (deflated), set by read_frame
};

struct FrameHeader {
  uint8_t version = 0;
  FrameType type = FrameType::kHello;
  bool deflated = false;
  uint32_t id = 0, size = 0, raw_size = 0;
};

// Parses a header from kHeaderBytes bytes; the error names what is wrong ("not a stallscope
// frame", a version this build does not speak, a size beyond the limit).
Result<FrameHeader> parse_header(const uint8_t* bytes);
// The payload of a frame whose header is `h` from its `size` bytes.
Result<std::string> open_payload(const FrameHeader& h, std::string_view body);
// The bytes of a frame (header and payload, deflated when long enough and it pays).
std::string encode_frame(const Frame& f);

// Reading and writing whole frames on a file descriptor (a pipe or a socket). read_frame returns
// an error on a malformed frame or a read error; `eof` is set when the peer closed between frames.
Result<Frame> read_frame(int fd, bool* eof);
Status write_all(int fd, std::string_view bytes);

class Out {
 public:
  void u(uint64_t v) {
    while (v >= 0x80) {
      s_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    s_.push_back(static_cast<char>(v));
  }
  void i(int64_t v) { u((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void b(bool v) { s_.push_back(v ? 1 : 0); }
  void d(double v) {
    char bytes[8];
    std::memcpy(bytes, &v, 8);
    s_.append(bytes, 8);
  }
  void str(std::string_view v) {
    u(v.size());
    s_.append(v.data(), v.size());
  }
  void opt(const std::optional<int64_t>& v) {
    b(v.has_value());
    if (v) i(*v);
  }
  std::string& bytes() { return s_; }
  const std::string& bytes() const { return s_; }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class In {
 public:
  explicit In(std::string_view s) : p_(s.data()), e_(s.data() + s.size()) {}
  uint64_t u() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= e_) return fail();
      const auto byte = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    return fail();
  }
  int64_t i() {
    const uint64_t z = u();
    return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
  }
  bool b() {
    if (p_ >= e_) return fail() != 0;
    return *p_++ != 0;
  }
  double d() {
    if (e_ - p_ < 8) return static_cast<double>(fail());
    double v;
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return v;
  }
  std::string str() {
    const uint64_t n = u();
    if (n > static_cast<uint64_t>(e_ - p_)) return fail(), std::string();
    std::string v(p_, n);
    p_ += n;
    return v;
  }
  std::optional<int64_t> opt() {
    if (!b()) return std::nullopt;
    return i();
  }
  // A count of items that each take at least one byte: more than the bytes left is damage.
  size_t count() {
    const uint64_t n = u();
    if (n > static_cast<uint64_t>(e_ - p_)) return fail(), 0;
    return static_cast<size_t>(n);
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == e_; }

 private:
  uint64_t fail() {
    ok_ = false;
    p_ = e_;
    return 0;
  }
  const char* p_;
  const char* e_;
  bool ok_ = true;
};

}  // namespace stallscope::remote
