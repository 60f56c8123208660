// libFuzzer target: the reference loader's JPEG reader (libjpeg-turbo behind loader/jpeg_decoder.h)
// on any bytes: open the header, then decode a region and, for images up to 4 Mpixel, the whole.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "loader/jpeg_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stallscope::loader;
  static JpegDecoder decoder;  // one per thread, reused as the loader does
  const std::span<const uint8_t> bytes(data, size);
  (void)looks_like_jpeg(bytes);
  (void)describe_non_jpeg(bytes);
  auto info = decoder.open(bytes);
  if (!info.ok()) return 0;
  DecodedImage out;
  ScaledRegion r;
  r.scale = 4;
  r.width = JpegDecoder::scaled_size(info->width, 4) / 2 + 1;
  r.height = JpegDecoder::scaled_size(info->height, 4) / 2 + 1;
  if (static_cast<int64_t>(r.width) * r.height <= (int64_t{1} << 22) && decoder.decode(r, &out).ok()) {
    if (out.rgb.size() != static_cast<size_t>(out.width) * out.height * 3) std::abort();
  }
  if (static_cast<int64_t>(info->width) * info->height <= (int64_t{1} << 22)) {
    if (!decoder.open(bytes).ok()) std::abort();  // it opened once: it opens again
    if (decoder.decode_full(&out).ok() && out.rgb.size() != static_cast<size_t>(out.width) * out.height * 3) {
      std::abort();
    }
  }
  return 0;
}
