// Frames of `stallscope serve`; see wire.h.
#include "remote/wire.h"

#include <errno.h>
#include <unistd.h>
#include <zlib.h>

namespace stallscope::remote {
namespace {

constexpr uint8_t kMagic[4] = {'S', 'S', 'R', 'P'};

void put32(std::string& s, uint32_t v) {
  for (int k = 0; k < 4; ++k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}
uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// Reads exactly n bytes; *eof when the peer closed before the first one.
Status read_exact(int fd, char* out, size_t n, bool* eof) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, out + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && got == 0 && eof) {
      *eof = true;
      return Status::Error("the connection closed");
    }
    return Status::Error(r == 0 ? "the connection closed in the middle of a frame"
                                : std::string("read failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Result<FrameHeader> parse_header(const uint8_t* p) {
  if (std::memcmp(p, kMagic, 4) != 0)
    return Status::Error(
        "not a stallscope frame (the other end is not `stallscope serve`, or printed text first: "
        "check that the login shell on the node prints nothing for a non-interactive ssh command)");
  FrameHeader h;
  h.version = p[4];
  if (h.version != kProtocolVersion)
    return Status::Error("the other end speaks protocol version " + std::to_string(h.version) + ", this one " +
                         std::to_string(kProtocolVersion) + ": install the same stallscope version on both machines");
  const uint8_t type = p[5];
  if (type < static_cast<uint8_t>(FrameType::kHello) || type > static_cast<uint8_t>(FrameType::kDone))
    return Status::Error("malformed frame: unknown type " + std::to_string(type));
  h.type = static_cast<FrameType>(type);
  if (p[6] & ~1u || p[7] != 0) return Status::Error("malformed frame: unknown flags");
  h.deflated = p[6] & 1;
  h.id = get32(p + 8);
  h.size = get32(p + 12);
  h.raw_size = get32(p + 16);
  if (h.size > kMaxFrameBytes || h.raw_size > kMaxFrameBytes)
    return Status::Error("malformed frame: " + std::to_string(std::max(h.size, h.raw_size)) +
                         " bytes, above the limit of " + std::to_string(kMaxFrameBytes));
  if (!h.deflated && h.size != h.raw_size) return Status::Error("malformed frame: sizes disagree");
  return h;
}

Result<std::string> open_payload(const FrameHeader& h, std::string_view body) {
  if (body.size() != h.size) return Status::Error("malformed frame: short payload");
  if (!h.deflated) return std::string(body);
  std::string out(h.raw_size, '\0');
  uLongf n = h.raw_size;
  const int rc = ::uncompress(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(body.data()),
                              static_cast<uLong>(body.size()));
  if (rc != Z_OK || n != h.raw_size) return Status::Error("malformed frame: its payload does not inflate");
  return out;
}

std::string encode_frame(const Frame& f) {
  std::string body;
  bool deflated = false;
  if (f.payload.size() >= kCompressFrom) {
    uLongf n = ::compressBound(static_cast<uLong>(f.payload.size()));
    body.resize(n);
    if (::compress2(reinterpret_cast<Bytef*>(body.data()), &n, reinterpret_cast<const Bytef*>(f.payload.data()),
                    static_cast<uLong>(f.payload.size()), 1) == Z_OK &&
        n < f.payload.size()) {
      body.resize(n);
      deflated = true;
    }
  }
  const std::string& sent = deflated ? body : f.payload;
  std::string out;
  out.reserve(kHeaderBytes + sent.size());
  out.append(reinterpret_cast<const char*>(kMagic), 4);
  out.push_back(static_cast<char>(kProtocolVersion));
  out.push_back(static_cast<char>(f.type));
  out.push_back(static_cast<char>(deflated ? 1 : 0));
  out.push_back(0);
  put32(out, f.id);
  put32(out, static_cast<uint32_t>(sent.size()));
  put32(out, static_cast<uint32_t>(f.payload.size()));
  out += sent;
  return out;
}

Result<Frame> read_frame(int fd, bool* eof) {
  if (eof) *eof = false;
  uint8_t head[kHeaderBytes];
  if (Status s = read_exact(fd, reinterpret_cast<char*>(head), kHeaderBytes, eof); !s.ok()) return s;
  auto h = parse_header(head);
  if (!h.ok()) return h.status();
  std::string body(h->size, '\0');
  if (Status s = read_exact(fd, body.data(), body.size(), nullptr); !s.ok()) return s;
  auto payload = open_payload(*h, body);
  if (!payload.ok()) return payload.status();
  return Frame{h->type, h->id, std::move(*payload), h->size};
}

Status write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return Status::Error(std::string("write failed: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace stallscope::remote
