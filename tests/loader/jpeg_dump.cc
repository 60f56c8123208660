// Runs the native image transform on JPEG files and writes what tests/python/test_jpeg_ops.py needs
// to compare it with Pillow: each output as OUT/<n>.npy and, on stdout, one line per file with the
// crop box (source pixels), the flip and the DCT scale used:
//   <n> <x> <y> <w> <h> <flip 0|1> <dct scale 1..8>      or      <n> error <message>
// Sample n's random draws come from Rng(seed + n).
//   loader_jpeg_dump OUT_DIR rrc:SIZE[:FLIP_P] | center:RESIZE:CROP  hwc|chw|float  SEED FILE...
// float is ToTensor + Normalize with ImageNet's mean and std.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "loader/image_ops.h"

namespace {

using stallscope::loader::CropPlan;
using stallscope::loader::ImagePipeline;
using stallscope::loader::ImageTransform;
using stallscope::loader::Rng;

bool write_npy(const std::string& path, const std::vector<std::byte>& data, const char* descr,
               const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.erase(dims.size() - 2);
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.put(static_cast<char>(len & 0xff));
  f.put(static_cast<char>(len >> 8));
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(f);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s OUT_DIR rrc:SIZE[:FLIP_P]|center:RESIZE:CROP hwc|chw|float SEED FILE...\n",
                 argv[0]);
    return 2;
  }
  const std::string out_dir = argv[1];
  std::vector<std::string> spec = split(argv[2], ':');
  ImageTransform t;
  if (spec[0] == "rrc" && spec.size() >= 2) {
    t = ImageTransform::random_resized_crop(std::atoi(spec[1].c_str()),
                                            spec.size() > 2 ? std::atof(spec[2].c_str()) : 0.5);
  } else if (spec[0] == "center" && spec.size() == 3) {
    t = ImageTransform::resize_center_crop(std::atoi(spec[1].c_str()), std::atoi(spec[2].c_str()));
  } else {
    std::fprintf(stderr, "bad transform %s\n", argv[2]);
    return 2;
  }
  const std::string layout = argv[3];
  if (layout == "hwc") {
    t.layout = ImageTransform::Layout::kUInt8HWC;
  } else if (layout == "chw") {
    t.layout = ImageTransform::Layout::kUInt8CHW;
  } else {
    t.layout = ImageTransform::Layout::kFloat32CHW;
    t.norm_mean = {0.485f, 0.456f, 0.406f};
    t.norm_std = {0.229f, 0.224f, 0.225f};
  }
  if (stallscope::Status st = t.validate(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  ImagePipeline pipeline(t);
  std::vector<std::byte> out(t.bytes());
  for (int i = 5; i < argc; ++i) {
    const int n = i - 5;
    std::ifstream f(argv[i], std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
    Rng rng(seed + static_cast<uint64_t>(n));
    CropPlan plan;
    stallscope::Status st = pipeline.run(bytes, rng, out.data(), nullptr, &plan);
    if (!st.ok()) {
      std::printf("%d error %s\n", n, st.message().c_str());
      continue;
    }
    if (!write_npy(out_dir + "/" + std::to_string(n) + ".npy", out,
                   t.dtype() == stallscope::loader::DType::kFloat32 ? "<f4" : "|u1", t.shape())) {
      std::fprintf(stderr, "cannot write %s/%d.npy\n", out_dir.c_str(), n);
      return 1;
    }
    std::printf("%d %.17g %.17g %.17g %.17g %d %d\n", n, plan.x, plan.y, plan.w, plan.h, plan.flip ? 1 : 0,
                plan.dct_scale);
  }
  return 0;
}
