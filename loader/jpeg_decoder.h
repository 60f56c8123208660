// The loader's JPEG decoder: libjpeg-turbo through the libjpeg API, and the only file that includes
// jpeglib.h. It decodes a part of an image at a DCT scale: libjpeg scales by M/8 (M = 1..8) inside
// the inverse DCT, so an image much larger than the output costs a fraction of a full decode; only
// the scanlines a region needs are decoded (jpeg_skip_scanlines above it, nothing below it) and
// only its columns (jpeg_crop_scanline). Every output is RGB: grayscale is widened by libjpeg,
// CMYK and YCCK are converted as Pillow converts them (Adobe's inverted CMYK, then
// R = (255-C)(255-K)/255). An image over Pillow's decompression-bomb limit (179 M pixels) is
// refused. Errors never leave through exit() or an exception: libjpeg's error_exit and its
// warning of a truncated file longjmp back here and become a Status. Its other warnings about
// corrupt data ("N extraneous bytes before marker", a bad Huffman code) do not fail the image:
// Pillow, which torchvision reads with, ignores them too (docs/decisions.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope::loader {

struct JpegInfo {
  int width = 0, height = 0;
  int components = 0;  // 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
};

// A region of the image at a DCT scale, in that scale's pixels (the scaled image is
// ceil(width * M / 8) x ceil(height * M / 8)).
struct ScaledRegion {
  int scale = 8;  // M, the scale is M/8
  int x = 0, y = 0, width = 0, height = 0;
};

// What decode() wrote: RGB rows of `width` pixels, the first at (x, y) of the scaled image. libjpeg
// decodes whole iMCU columns, so x/width may cover more than was asked for (never less).
struct DecodedImage {
  int scale = 8;
  int scaled_width = 0, scaled_height = 0;  // of the whole image at this scale
  int x = 0, y = 0, width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
  const uint8_t* row(int r) const { return rgb.data() + static_cast<size_t>(r) * width * 3; }
};

// One decoder per thread: it keeps libjpeg's state and buffers between images.
class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header of `data` (which must outlive the following decode()). Errors say what is
  // wrong with the data, without the file's name (the caller adds it).
  Result<JpegInfo> open(std::span<const uint8_t> data);
  // Decodes `region` of the image opened last; out->rgb is reused between calls.
  Status decode(const ScaledRegion& region, DecodedImage* out);
  // Decodes the whole image at full size (for benchmarks and tests).
  Status decode_full(DecodedImage* out);

  // The first warning libjpeg gave about the image opened last ("Corrupt JPEG data: 3 extraneous
  // bytes before marker 0xd9"); empty when none.
  const char* warning() const;

  // The size of the image at scale M/8, as libjpeg computes it.
  static int scaled_size(int size, int scale) { return (size * scale + 7) / 8; }

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// True when `data` starts with a JPEG's SOI marker.
bool looks_like_jpeg(std::span<const uint8_t> data);
// "PNG image", "GIF image", ... or "not a JPEG (starts with 3c 21 44 4f)": for the error of a file
// that is not a JPEG.
std::string describe_non_jpeg(std::span<const uint8_t> data);

}  // namespace stallscope::loader
