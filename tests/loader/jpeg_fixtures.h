// Test data for the JPEG sources, made on the spot: photograph-like RGB images, encoded with
// libturbojpeg (any subsampling, grayscale, CMYK, progressive), ImageFolder trees and WebDataset
// tar shards written with libarchive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stallscope::testing {

// Smooth gradients, sinusoids, hard-edged shapes and a little noise, seeded.
std::vector<uint8_t> make_photo(int width, int height, uint64_t seed);

enum class Sampling { k444, k422, k420, kGray };
struct JpegOptions {
  int quality = 90;
  Sampling sampling = Sampling::k420;
  bool progressive = false;
};
// Encodes RGB pixels (width x height x 3).
std::string encode_jpeg(const std::vector<uint8_t>& rgb, int width, int height, const JpegOptions& o = {});
// Encodes CMYK pixels (width x height x 4, as libjpeg stores them: no inversion).
std::string encode_cmyk_jpeg(const std::vector<uint8_t>& cmyk, int width, int height);
// Decodes a whole JPEG with libturbojpeg (accurate DCT, fancy upsampling): RGB, width x height x 3.
std::vector<uint8_t> decode_jpeg(const std::string& jpeg, int* width, int* height);

struct TarEntry {
  std::string name;
  std::string data;
  bool directory = false;
};
// Writes an uncompressed tar (pax format, so long names get pax headers).
void write_tar(const std::string& path, const std::vector<TarEntry>& entries);

void make_dirs(const std::string& path);

}  // namespace stallscope::testing
