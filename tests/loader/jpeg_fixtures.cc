// Test data for the JPEG sources (see jpeg_fixtures.h).
#include "tests/loader/jpeg_fixtures.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace stallscope::testing {
namespace {

struct Rng {
  uint64_t s;
  double uniform() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }
};

std::string compress(const unsigned char* pixels, int width, int height, int format, int sampling, int quality,
                     int flags) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  int r = tjCompress2(tj, pixels, width, 0, height, format, &buf, &size, sampling, quality, flags);
  std::string out;
  if (r == 0) out.assign(reinterpret_cast<char*>(buf), size);
  std::string err = r == 0 ? "" : tjGetErrorStr2(tj);
  tjFree(buf);
  tjDestroy(tj);
  if (r != 0) throw std::runtime_error("tjCompress2: " + err);
  return out;
}

}  // namespace

std::vector<uint8_t> make_photo(int width, int height, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> img(static_cast<size_t>(width) * height * 3);
  for (int c = 0; c < 3; ++c) {
    double fx[5], fy[5], ph[5];
    for (int k = 0; k < 5; ++k) {
      double f = 0.003 * std::pow(2.0, k) * (0.5 + rng.uniform());
      double a = 6.283 * rng.uniform();
      fx[k] = f * std::cos(a);
      fy[k] = f * std::sin(a);
      ph[k] = 6.283 * rng.uniform();
    }
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        double v = 128;
        for (int k = 0; k < 5; ++k) v += 50.0 / (1 + k) * std::sin(6.283 * (fx[k] * x + fy[k] * y) + ph[k]);
        img[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<float>(v);
      }
    }
  }
  for (int s = 0; s < 12; ++s) {
    int cx = static_cast<int>(rng.uniform() * width), cy = static_cast<int>(rng.uniform() * height);
    int r = 3 + static_cast<int>(rng.uniform() * std::min(width, height) / 6);
    float col[3] = {static_cast<float>(rng.uniform() * 255), static_cast<float>(rng.uniform() * 255),
                    static_cast<float>(rng.uniform() * 255)};
    for (int y = std::max(0, cy - r); y < std::min(height, cy + r); ++y) {
      for (int x = std::max(0, cx - r); x < std::min(width, cx + r); ++x) {
        if ((x - cx) * (x - cx) + (y - cy) * (y - cy) > r * r) continue;
        for (int c = 0; c < 3; ++c) img[(static_cast<size_t>(y) * width + x) * 3 + c] = col[c];
      }
    }
  }
  std::vector<uint8_t> out(img.size());
  for (size_t i = 0; i < img.size(); ++i) {
    out[i] = static_cast<uint8_t>(std::clamp(std::lround(img[i] + (rng.uniform() - 0.5) * 8), 0L, 255L));
  }
  return out;
}

std::string encode_jpeg(const std::vector<uint8_t>& rgb, int width, int height, const JpegOptions& o) {
  int sampling = o.sampling == Sampling::k444   ? TJSAMP_444
                 : o.sampling == Sampling::k422 ? TJSAMP_422
                 : o.sampling == Sampling::k420 ? TJSAMP_420
                                                : TJSAMP_GRAY;
  return compress(rgb.data(), width, height, TJPF_RGB, sampling, o.quality,
                  TJFLAG_ACCURATEDCT | (o.progressive ? TJFLAG_PROGRESSIVE : 0));
}

std::string encode_cmyk_jpeg(const std::vector<uint8_t>& cmyk, int width, int height) {
  return compress(cmyk.data(), width, height, TJPF_CMYK, TJSAMP_444, 95, TJFLAG_ACCURATEDCT);
}

std::vector<uint8_t> decode_jpeg(const std::string& jpeg, int* width, int* height) {
  tjhandle tj = tjInitDecompress();
  int w = 0, h = 0, sub = 0, cs = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  if (tjDecompressHeader3(tj, data, jpeg.size(), &w, &h, &sub, &cs) != 0) {
    tjDestroy(tj);
    throw std::runtime_error("tjDecompressHeader3 failed");
  }
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  int r = tjDecompress2(tj, data, jpeg.size(), rgb.data(), w, 0, h, TJPF_RGB, TJFLAG_ACCURATEDCT);
  tjDestroy(tj);
  if (r != 0) throw std::runtime_error("tjDecompress2 failed");
  *width = w;
  *height = h;
  return rgb;
}

void write_tar(const std::string& path, const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (archive_write_open_filename(a, path.c_str()) != ARCHIVE_OK) {
    std::string err = archive_error_string(a);
    archive_write_free(a);
    throw std::runtime_error("write_tar: " + err);
  }
  for (const TarEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_filetype(entry, e.directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(entry, e.directory ? 0755 : 0644);
    archive_entry_set_size(entry, e.directory ? 0 : static_cast<la_int64_t>(e.data.size()));
    archive_write_header(a, entry);
    if (!e.directory) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  }
}

}  // namespace stallscope::testing
