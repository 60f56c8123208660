// libjpeg-turbo behind the loader's JpegDecoder (see jpeg_decoder.h). The error manager longjmps
// out of libjpeg on an error and on a truncated file; the decoder then aborts the image
// (jpeg_abort_decompress frees its memory) and stays usable for the next one. Other warnings
// about corrupt data are noted and the image decodes on, as in Pillow.
#include "loader/jpeg_decoder.h"

// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace stallscope::loader {
namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg hands back a jpeg_error_mgr*
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  char warning[JMSG_LENGTH_MAX];  // the image's first warning; empty when none
  bool truncated = false;         // the error is libjpeg's "Premature end of JPEG file"
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// libjpeg's warnings (level -1; higher levels are trace messages). Pillow ignores every one of
// them and decodes on, and so does the loader: torchvision would train on those images, and some
// large datasets hold a few ("Corrupt JPEG data: 240 extraneous bytes before marker 0xd9", bytes
// between the last scan and the EOI that cost nothing). All but one: "Premature end of JPEG file"
// is a truncated file, which Pillow refuses too ("image file is truncated"); it fails the sample.
// The first warning's text is kept for the caller (JpegDecoder::warning).
void on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
    (*cinfo->err->format_message)(cinfo, err->message);
    err->truncated = true;
    std::longjmp(err->jump, 1);
  }
  if (err->warning[0] == '\0') (*cinfo->err->format_message)(cinfo, err->warning);
}

// Pillow's CMYK -> RGB (Convert.c, cmyk2rgb) on Adobe's inverted CMYK, which Pillow assumes for
// every CMYK JPEG ("CMYK;I"): with the stored values inverted back to ink amounts c, m, y, k,
// R = (255 - k) - (255 - k) * c / 255, with MULDIV255's rounding.
inline uint8_t muldiv255(int a, int b) {
  int t = a * b + 128;
  return static_cast<uint8_t>(((t >> 8) + t) >> 8);
}
void cmyk_to_rgb(const uint8_t* in, uint8_t* out, int width) {
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    int c = 255 - in[0], m = 255 - in[1], y = 255 - in[2], nk = in[3];  // nk = 255 - k
    out[0] = static_cast<uint8_t>(nk - muldiv255(c, nk));
    out[1] = static_cast<uint8_t>(nk - muldiv255(m, nk));
    out[2] = static_cast<uint8_t>(nk - muldiv255(y, nk));
  }
}

constexpr uint64_t kMaxPixels = 2 * 89478485ull;

// What jpeg_finish_decompress reads after a sequential image's scan, without decoding it: the
// entropy-coded data ends at the first marker other than RSTn (an FF in it is followed by 00);
// then libjpeg's read_markers: RSTn and TEM are skipped, tables and APPn/COM segments skipped by
// their length, bytes between markers are only a warning ("extraneous bytes"), EOI ends the
// image, another SOS starts a scan libjpeg would read too; a second SOI or SOF, or a marker it
// does not know, is an error (with libjpeg's message). No marker before the data ends: truncated.
Status check_after_scan(std::span<const uint8_t> d, size_t at) {
  const Status truncated = Status::Error("truncated JPEG: no end-of-image marker");
  // The next marker code at or after `at` (FF fill bytes and FF 00 skipped), -1 at the end.
  auto next_marker = [&](size_t* i) -> int {
    for (;;) {
      const void* ff = *i < d.size() ? std::memchr(d.data() + *i, 0xFF, d.size() - *i) : nullptr;
      if (!ff) return -1;
      size_t j = static_cast<size_t>(static_cast<const uint8_t*>(ff) - d.data()) + 1;
      while (j < d.size() && d[j] == 0xFF) ++j;
      if (j >= d.size()) return -1;
      *i = j + 1;
      if (d[j] != 0) return d[j];
    }
  };
  size_t i = at;
  for (;;) {
    int m = next_marker(&i);
    if (m < 0) return truncated;
    if ((m >= 0xD0 && m <= 0xD7) || m == 0x01) continue;  // RSTn, TEM: no parameters
    if (m == 0xD9 || m == 0xDA) return Status::Ok();      // EOI; SOS of a further scan
    const bool segment = m == 0xC4 || m == 0xCC || m == 0xDB || m == 0xDC || m == 0xDD || (m >= 0xE0 && m <= 0xEF) ||
                         m == 0xFE;  // DHT, DAC, DQT, DNL, DRI, APPn, COM
    if (!segment) {
      char buf[96];
      if (m == 0xD8) {
        std::snprintf(buf, sizeof buf, "corrupt JPEG: Invalid JPEG file structure: two SOI markers");
      } else if (m >= 0xC0 && m <= 0xCF) {
        std::snprintf(buf, sizeof buf, "corrupt JPEG: Invalid JPEG file structure: two SOF markers");
      } else {
        std::snprintf(buf, sizeof buf, "corrupt JPEG: Unsupported marker type 0x%02x", m);
      }
      return Status::Error(buf);
    }
    if (i + 2 > d.size()) return truncated;
    const size_t length = (static_cast<size_t>(d[i]) << 8) | d[i + 1];
    if (length < 2) return Status::Error("corrupt JPEG: Bogus marker length");
    if (i + length > d.size()) return truncated;
    i += length;
  }
}

}  // namespace

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  std::span<const uint8_t> data;
  bool opened = false;
  bool four_channel = false;  // CMYK or YCCK: converted by hand
  size_t scan_start = 0;      // offset of the first scan's entropy-coded data
  std::vector<uint8_t> cmyk_row;

  State() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    jpeg_create_decompress(&cinfo);
  }
  ~State() { jpeg_destroy_decompress(&cinfo); }

  Status fail() {
    jpeg_abort_decompress(&cinfo);
    opened = false;
    return Status::Error(std::string(err.truncated ? "truncated JPEG: " : "corrupt JPEG: ") + err.message);
  }
};

JpegDecoder::JpegDecoder() : s_(std::make_unique<State>()) {}
JpegDecoder::~JpegDecoder() = default;

bool looks_like_jpeg(std::span<const uint8_t> data) {
  return data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

std::string describe_non_jpeg(std::span<const uint8_t> data) {
  auto starts = [&](std::initializer_list<int> sig) {
    if (data.size() < sig.size()) return false;
    size_t i = 0;
    for (int b : sig) {
      if (data[i++] != b) return false;
    }
    return true;
  };
  if (data.empty()) return "empty file, not a JPEG";
  if (starts({0x89, 'P', 'N', 'G'})) return "PNG image, only JPEG is decoded natively";
  if (starts({'G', 'I', 'F', '8'})) return "GIF image, only JPEG is decoded natively";
  if (starts({'B', 'M'})) return "BMP image, only JPEG is decoded natively";
  if (starts({'R', 'I', 'F', 'F'})) return "RIFF (WebP?) image, only JPEG is decoded natively";
  if (starts({'I', 'I', 42, 0}) || starts({'M', 'M', 0, 42})) return "TIFF image, only JPEG is decoded natively";
  char buf[64];
  size_t n = std::min<size_t>(4, data.size());
  int len = std::snprintf(buf, sizeof buf, "not a JPEG (starts with");
  for (size_t i = 0; i < n; ++i) len += std::snprintf(buf + len, sizeof buf - len, " %02x", data[i]);
  std::snprintf(buf + len, sizeof buf - len, ")");
  return buf;
}

Result<JpegInfo> JpegDecoder::open(std::span<const uint8_t> data) {
  State& s = *s_;
  if (!looks_like_jpeg(data)) return Status::Error(describe_non_jpeg(data));
  if (s.opened) jpeg_abort_decompress(&s.cinfo);
  s.opened = false;
  s.data = data;
  s.err.warning[0] = '\0';
  s.err.truncated = false;
  jpeg_decompress_struct& c = s.cinfo;
  if (setjmp(s.err.jump)) return s.fail();
  jpeg_mem_src(&c, data.data(), static_cast<unsigned long>(data.size()));
  if (jpeg_read_header(&c, TRUE) != JPEG_HEADER_OK) {
    jpeg_abort_decompress(&c);
    return Status::Error("corrupt JPEG: no image in the file");
  }
  s.opened = true;
  s.scan_start = data.size() - c.src->bytes_in_buffer;
  JpegInfo info;
  info.width = static_cast<int>(c.image_width);
  info.height = static_cast<int>(c.image_height);
  info.components = c.num_components;
  info.progressive = c.progressive_mode != 0;
  // Pillow's DecompressionBombError threshold (2 * Image.MAX_IMAGE_PIXELS): a progressive image
  // that large needs gigabytes of coefficients before its first row.
  if (static_cast<uint64_t>(info.width) * static_cast<uint64_t>(info.height) > kMaxPixels) {
    jpeg_abort_decompress(&c);
    s.opened = false;
    return Status::Error("image of " + std::to_string(info.width) + "x" + std::to_string(info.height) +
                         " pixels exceeds the limit of " + std::to_string(kMaxPixels) +
                         " (a decompression bomb, as Pillow calls it)");
  }
  s.four_channel = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
  if (!s.four_channel && c.num_components != 1 && c.num_components != 3) {
    jpeg_abort_decompress(&c);
    s.opened = false;
    return Status::Error("unsupported JPEG: " + std::to_string(c.num_components) + " components");
  }
  return info;
}

Status JpegDecoder::decode(const ScaledRegion& want, DecodedImage* out) {
  State& s = *s_;
  if (!s.opened) return Status::Error("no JPEG opened");
  jpeg_decompress_struct& c = s.cinfo;
  if (setjmp(s.err.jump)) return s.fail();

  c.scale_num = static_cast<unsigned>(std::clamp(want.scale, 1, 8));
  c.scale_denom = 8;
  // ISLOW and fancy upsampling: what Pillow uses, so that a full-size decode matches it exactly.
  c.dct_method = JDCT_ISLOW;
  c.do_fancy_upsampling = TRUE;
  c.out_color_space = s.four_channel ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&c);

  const int sw = static_cast<int>(c.output_width), sh = static_cast<int>(c.output_height);
  int x0 = std::clamp(want.x, 0, sw - 1), y0 = std::clamp(want.y, 0, sh - 1);
  int x1 = std::clamp(want.x + want.width, x0 + 1, sw), y1 = std::clamp(want.y + want.height, y0 + 1, sh);

  // Columns: libjpeg widens the crop to whole iMCU columns and says what it chose.
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), cw = static_cast<JDIMENSION>(x1 - x0);
  if (x0 > 0 || x1 < sw) jpeg_crop_scanline(&c, &xoff, &cw);
  // Rows above the region are skipped (entropy-decoded only), rows below it never read.
  if (y0 > 0) {
    JDIMENSION skipped = jpeg_skip_scanlines(&c, static_cast<JDIMENSION>(y0));
    if (skipped != static_cast<JDIMENSION>(y0)) {
      jpeg_abort_decompress(&c);
      s.opened = false;
      return Status::Error("corrupt JPEG: could not skip to row " + std::to_string(y0));
    }
  }
  out->scale = static_cast<int>(c.scale_num);
  out->scaled_width = sw;
  out->scaled_height = sh;
  out->x = static_cast<int>(xoff);
  out->y = y0;
  out->width = static_cast<int>(c.output_width);  // the cropped width after jpeg_crop_scanline
  out->height = y1 - y0;
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  if (s.four_channel) s.cmyk_row.resize(static_cast<size_t>(out->width) * 4);
  for (int r = 0; r < out->height;) {
    uint8_t* dst = out->rgb.data() + static_cast<size_t>(r) * out->width * 3;
    JSAMPROW row = s.four_channel ? s.cmyk_row.data() : dst;
    JDIMENSION got = jpeg_read_scanlines(&c, &row, 1);
    if (got != 1) {
      jpeg_abort_decompress(&c);
      s.opened = false;
      return Status::Error("corrupt JPEG: no data for row " + std::to_string(y0 + r));
    }
    if (s.four_channel) cmyk_to_rgb(s.cmyk_row.data(), dst, out->width);
    ++r;
  }
  const bool to_the_end = y1 == sh;
  if (to_the_end) {
    jpeg_finish_decompress(&c);  // reads up to EOI: a truncated tail is an error (JWRN_JPEG_EOF)
  } else {
    jpeg_abort_decompress(&c);
    // The rows below the region were not read, so libjpeg did not see the end of the file: check
    // it as jpeg_finish_decompress would have, so that a sample fails (or not) whatever its crop.
    Status tail = check_after_scan(s.data, s.scan_start);
    if (!tail.ok()) {
      s.opened = false;
      return tail;
    }
  }
  s.opened = false;
  return Status::Ok();
}

const char* JpegDecoder::warning() const { return s_->err.warning; }

Status JpegDecoder::decode_full(DecodedImage* out) {
  ScaledRegion all;
  all.scale = 8;
  all.width = static_cast<int>(s_->cinfo.image_width);
  all.height = static_cast<int>(s_->cinfo.image_height);
  return decode(all, out);
}

}  // namespace stallscope::loader
