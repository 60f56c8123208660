// The loader's resize beside the libraries it was measured against: speed and agreement with
// Pillow's bilinear filter (what torchvision's RandomResizedCrop runs on a PIL image) for RGB crops
// resized to 224x224. Each candidate resizes the same crops; the reference is Pillow's resampling
// algorithm (Resample.c: a triangle filter whose support widens with the downscale factor, 22-bit
// fixed-point coefficients, horizontal pass first through a uint8 image), written out here so the
// figures need no Python. Two cases: crops of 500x375 images as RandomResizedCrop draws them (what
// remains after DCT scaling looks the same: a factor of 0.5 to 2), and crops of 2000x1500 images
// (factors of 2 to 9, where a filter without antialiasing aliases). Prints a table;
// docs/decisions.md has the figures of this machine. The last rows are the loader's resize_rgb
// (an integer box-average when the crop is 2x the output or more, then bilinear; in the loader the
// DCT scaling has already shrunk such crops, here it has not) and, with OpenCV, the same steps as
// OpenCV ran them in the loader before (INTER_AREA, then warpAffine or resize INTER_LINEAR).
// OpenCV, libyuv, stb_image_resize and libswscale are compiled in when found; their rows are left
// out otherwise.
//   resize_bench [crops per case]
#ifdef RESIZE_BENCH_YUV
#include <libyuv/scale_argb.h>
#include <libyuv/scale_rgb.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#ifdef RESIZE_BENCH_STB
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_STATIC
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb/stb_image_resize.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

#ifdef RESIZE_BENCH_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif
#include "loader/resize.h"

#ifdef RESIZE_BENCH_SWSCALE
extern "C" {
#include <libswscale/swscale.h>
}
#endif

namespace {

constexpr int kOut = 224;

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

// A photograph-like RGB image: smooth gradients, sinusoids falling off with frequency, hard-edged
// shapes and a little noise, so that both smooth areas and edges weigh in the errors.
std::vector<uint8_t> make_image(int w, int h, uint64_t seed) {
  Rng rng{seed};
  std::vector<float> img(static_cast<size_t>(w) * h * 3);
  for (int c = 0; c < 3; ++c) {
    double fx[6], fy[6], ph[6], amp[6];
    for (int k = 0; k < 6; ++k) {
      double f = 0.002 * std::pow(2.0, k) * (0.5 + rng.uniform());
      fx[k] = f * std::cos(6.28 * rng.uniform());
      fy[k] = f * std::sin(6.28 * rng.uniform());
      ph[k] = 6.28 * rng.uniform();
      amp[k] = 60.0 / (1 + k);
    }
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        double v = 128;
        for (int k = 0; k < 6; ++k) v += amp[k] * std::sin(6.28 * (fx[k] * x + fy[k] * y) + ph[k]);
        img[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<float>(v);
      }
    }
  }
  for (int s = 0; s < 40; ++s) {
    int cx = static_cast<int>(rng.uniform() * w), cy = static_cast<int>(rng.uniform() * h);
    int r = 5 + static_cast<int>(rng.uniform() * w / 8);
    float col[3] = {static_cast<float>(rng.uniform() * 255), static_cast<float>(rng.uniform() * 255),
                    static_cast<float>(rng.uniform() * 255)};
    bool disc = rng.uniform() < 0.5;
    for (int y = std::max(0, cy - r); y < std::min(h, cy + r); ++y) {
      for (int x = std::max(0, cx - r); x < std::min(w, cx + r); ++x) {
        if (disc && (x - cx) * (x - cx) + (y - cy) * (y - cy) > r * r) continue;
        for (int c = 0; c < 3; ++c) img[(static_cast<size_t>(y) * w + x) * 3 + c] = col[c];
      }
    }
  }
  std::vector<uint8_t> out(img.size());
  for (size_t i = 0; i < img.size(); ++i) {
    double v = img[i] + (rng.uniform() - 0.5) * 12;
    out[i] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
  }
  return out;
}

// torchvision's RandomResizedCrop.get_params (scale 0.08-1, ratio 3/4-4/3), fallback included.
struct Box {
  int x, y, w, h;
};
Box random_crop(int width, int height, Rng& rng) {
  double area = static_cast<double>(width) * height;
  for (int i = 0; i < 10; ++i) {
    double target = area * (0.08 + 0.92 * rng.uniform());
    double ar = std::exp(std::log(3.0 / 4) + (std::log(4.0 / 3) - std::log(3.0 / 4)) * rng.uniform());
    int w = static_cast<int>(std::nearbyint(std::sqrt(target * ar)));
    int h = static_cast<int>(std::nearbyint(std::sqrt(target / ar)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      int y = static_cast<int>(rng.uniform() * (height - h + 1));
      int x = static_cast<int>(rng.uniform() * (width - w + 1));
      return {x, y, w, h};
    }
  }
  return {0, 0, width, height};
}

// Pillow's bilinear resampling (libImaging/Resample.c), uint8 RGB, no box.
constexpr int kPrecision = 32 - 8 - 2;
struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;  // xmin, count per output pixel
  std::vector<int32_t> k;
};
Coeffs pillow_coeffs(int in_size, int out_size) {
  double scale = static_cast<double>(in_size) / out_size;
  double filterscale = std::max(scale, 1.0);
  double support = 1.0 * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(out_size * 2);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    double center = (xx + 0.5) * scale, ss = 1.0 / filterscale, ww = 0;
    int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    for (int x = 0; x < xmax; ++x) {
      double t = std::fabs((x + xmin - center + 0.5) * ss);
      w[x] = t < 1.0 ? 1.0 - t : 0.0;
      ww += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = ww != 0 ? w[x] / ww : w[x];
      c.k[static_cast<size_t>(xx) * c.ksize + x] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecision) : 0.5 + v * (1 << kPrecision));
    }
    c.bounds[xx * 2] = xmin;
    c.bounds[xx * 2 + 1] = xmax;
  }
  return c;
}
uint8_t clip8(int64_t v) { return static_cast<uint8_t>(std::clamp<int64_t>(v >> kPrecision, 0, 255)); }
void pillow_resize(const uint8_t* src, int sw, int sh, int stride, uint8_t* dst, int ow, int oh) {
  Coeffs cx = pillow_coeffs(sw, ow), cy = pillow_coeffs(sh, oh);
  // Pillow runs the horizontal pass only over the rows the vertical pass reads.
  int y0 = cy.bounds[0], y1 = cy.bounds[(oh - 1) * 2] + cy.bounds[(oh - 1) * 2 + 1];
  std::vector<uint8_t> tmp(static_cast<size_t>(y1 - y0) * ow * 3);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * stride;
    uint8_t* out = &tmp[static_cast<size_t>(y - y0) * ow * 3];
    for (int x = 0; x < ow; ++x) {
      const int32_t* k = &cx.k[static_cast<size_t>(x) * cx.ksize];
      int xmin = cx.bounds[x * 2], n = cx.bounds[x * 2 + 1];
      for (int c = 0; c < 3; ++c) {
        int64_t ss = 1 << (kPrecision - 1);
        for (int i = 0; i < n; ++i) ss += int64_t{row[(xmin + i) * 3 + c]} * k[i];
        out[x * 3 + c] = clip8(ss);
      }
    }
  }
  for (int y = 0; y < oh; ++y) {
    const int32_t* k = &cy.k[static_cast<size_t>(y) * cy.ksize];
    int ymin = cy.bounds[y * 2], n = cy.bounds[y * 2 + 1];
    for (int x = 0; x < ow * 3; ++x) {
      int64_t ss = 1 << (kPrecision - 1);
      for (int i = 0; i < n; ++i) ss += int64_t{tmp[static_cast<size_t>(ymin - y0 + i) * ow * 3 + x]} * k[i];
      dst[static_cast<size_t>(y) * ow * 3 + x] = clip8(ss);
    }
  }
}

#ifdef RESIZE_BENCH_OPENCV
// The loader's resize_rgb as it was with OpenCV (single-threaded: cv::setNumThreads(0) below).
void opencv_warp(const cv::Mat& src, double x, double y, double fx, double fy, cv::Mat& dst) {
  cv::Matx23d m(fx, 0, x + 0.5 * fx - 0.5, 0, fy, y + 0.5 * fy - 0.5);
  cv::warpAffine(src, dst, m, dst.size(), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REPLICATE);
}
void opencv_resize_rgb(const uint8_t* data, int width, int height, int stride, double x, double y, double w, double h,
                       uint8_t* out, int out_w, int out_h, int out_stride) {
  cv::Mat in(height, width, CV_8UC3, const_cast<uint8_t*>(data), stride);
  cv::Mat dst(out_h, out_w, CV_8UC3, out, out_stride);
  double fx = w / out_w, fy = h / out_h;
  int kx = std::max(1, static_cast<int>(std::floor(fx))), ky = std::max(1, static_cast<int>(std::floor(fy)));
  if (kx > 1 || ky > 1) {
    int x0 = std::clamp(static_cast<int>(std::floor(x)), 0, width - 1);
    int y0 = std::clamp(static_cast<int>(std::floor(y)), 0, height - 1);
    int nx = std::max(1, std::max(1, std::min(static_cast<int>(std::ceil(x + w)), width) - x0) / kx);
    int ny = std::max(1, std::max(1, std::min(static_cast<int>(std::ceil(y + h)), height) - y0) / ky);
    cv::Mat region = in(cv::Rect(x0, y0, std::min(nx * kx, width - x0), std::min(ny * ky, height - y0)));
    thread_local cv::Mat reduced;
    cv::resize(region, reduced, cv::Size(nx, ny), 0, 0, cv::INTER_AREA);
    opencv_warp(reduced, (x - x0) / kx, (y - y0) / ky, fx / kx, fy / ky, dst);
    return;
  }
  if (x == 0 && y == 0 && w == width && h == height) {
    cv::resize(in, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
    return;
  }
  opencv_warp(in, x, y, fx, fy, dst);
}
#endif

struct Crop {
  const uint8_t* rgb;   // first pixel of the crop
  const uint8_t* rgba;  // the same crop in a 4-byte copy of the image
  int w, h, stride3, stride4;
};
using Resize = std::function<void(const Crop&, uint8_t* out_rgb)>;

struct Candidate {
  std::string name;
  Resize run;
};

std::vector<Candidate> candidates() {
  std::vector<Candidate> out;
  out.push_back({"Pillow's algorithm, hand-written",
                 [](const Crop& c, uint8_t* o) { pillow_resize(c.rgb, c.w, c.h, c.stride3, o, kOut, kOut); }});
#ifdef RESIZE_BENCH_STB
  out.push_back({"stb_image_resize 1 triangle", [](const Crop& c, uint8_t* o) {
                   stbir_resize(c.rgb, c.w, c.h, c.stride3, o, kOut, kOut, kOut * 3, STBIR_TYPE_UINT8, 3,
                                STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP, STBIR_EDGE_CLAMP, STBIR_FILTER_TRIANGLE,
                                STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR, nullptr);
                 }});
#endif
#ifdef RESIZE_BENCH_YUV
  for (auto [mode, label] : {std::pair{libyuv::kFilterBilinear, "bilinear"}, std::pair{libyuv::kFilterBox, "box"}}) {
    out.push_back({std::string("libyuv RGBScale ") + label, [mode](const Crop& c, uint8_t* o) {
                     libyuv::RGBScale(c.rgb, c.stride3, c.w, c.h, o, kOut * 3, kOut, kOut, mode);
                   }});
    out.push_back({std::string("libyuv ARGBScale ") + label + " (4-byte pixels)", [mode](const Crop& c, uint8_t* o) {
                     thread_local std::vector<uint8_t> tmp(kOut * kOut * 4);
                     libyuv::ARGBScale(c.rgba, c.stride4, c.w, c.h, tmp.data(), kOut * 4, kOut, kOut, mode);
                     // Only to compare: the loader would keep 4-byte pixels into its layout pass.
                     for (int i = 0; i < kOut * kOut; ++i) std::memcpy(o + i * 3, &tmp[i * 4], 3);
                   }});
  }
#endif
#ifdef RESIZE_BENCH_OPENCV
  cv::setNumThreads(0);  // the loader's threads are the parallelism; no pool inside a resize
  for (auto [mode, label] : {std::pair{cv::INTER_LINEAR, "linear"}, std::pair{cv::INTER_AREA, "area"}}) {
    out.push_back({std::string("OpenCV resize INTER_") + (mode == cv::INTER_AREA ? "AREA" : "LINEAR"),
                   [mode](const Crop& c, uint8_t* o) {
                     cv::Mat src(c.h, c.w, CV_8UC3, const_cast<uint8_t*>(c.rgb), c.stride3);
                     cv::Mat dst(kOut, kOut, CV_8UC3, o);
                     cv::resize(src, dst, dst.size(), 0, 0, mode);
                   }});
    (void)label;
  }
  out.push_back({"OpenCV: loader resize_rgb before (AREA k x k + linear)", [](const Crop& c, uint8_t* o) {
                   opencv_resize_rgb(c.rgb, c.w, c.h, c.stride3, 0, 0, c.w, c.h, o, kOut, kOut, kOut * 3);
                 }});
#endif
  out.push_back({"loader resize_rgb (box k x k + bilinear)", [](const Crop& c, uint8_t* o) {
                   stallscope::loader::RgbView v{c.rgb, c.w, c.h, static_cast<size_t>(c.stride3)};
                   stallscope::loader::resize_rgb(v, 0, 0, c.w, c.h, o, kOut, kOut, kOut * 3);
                 }});
#ifdef RESIZE_BENCH_SWSCALE
  out.push_back({"libswscale bilinear (context per crop size)", [](const Crop& c, uint8_t* o) {
                   thread_local SwsContext* ctx = nullptr;
                   ctx = sws_getCachedContext(ctx, c.w, c.h, AV_PIX_FMT_RGB24, kOut, kOut, AV_PIX_FMT_RGB24,
                                              SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP,
                                              nullptr, nullptr, nullptr);
                   const uint8_t* src[1] = {c.rgb};
                   int src_stride[1] = {c.stride3};
                   uint8_t* dst[1] = {o};
                   int dst_stride[1] = {kOut * 3};
                   sws_scale(ctx, src, src_stride, 0, c.h, dst, dst_stride);
                 }});
#endif
  return out;
}

struct Case {
  const char* name;
  int width, height;
};

}  // namespace

int main(int argc, char** argv) {
  int crops = argc > 1 ? std::atoi(argv[1]) : 200;
  const Case cases[] = {{"500x375 crops", 500, 375}, {"2000x1500 crops", 2000, 1500}};
  std::vector<Candidate> cands = candidates();
  std::printf("%d random-resized crops per case, each resized to %dx%d RGB; error against Pillow's algorithm\n", crops,
              kOut, kOut);
  std::printf("%-16s %-54s %10s %8s %8s %10s\n", "case", "resize", "us/crop", "MAE", "max", ">2 levels");
  for (const Case& cs : cases) {
    // Four images per case, crops drawn as RandomResizedCrop does.
    std::vector<std::vector<uint8_t>> images, images4;
    for (int i = 0; i < 4; ++i) {
      images.push_back(make_image(cs.width, cs.height, 17 + i));
      std::vector<uint8_t> four(static_cast<size_t>(cs.width) * cs.height * 4, 255);
      for (size_t p = 0; p < static_cast<size_t>(cs.width) * cs.height; ++p)
        std::memcpy(&four[p * 4], &images.back()[p * 3], 3);
      images4.push_back(std::move(four));
    }
    std::vector<Crop> list;
    Rng rng{99};
    for (int i = 0; i < crops; ++i) {
      int which = i % 4;
      Box b = random_crop(cs.width, cs.height, rng);
      list.push_back({&images[which][(static_cast<size_t>(b.y) * cs.width + b.x) * 3],
                      &images4[which][(static_cast<size_t>(b.y) * cs.width + b.x) * 4], b.w, b.h, cs.width * 3,
                      cs.width * 4});
    }
    std::vector<std::vector<uint8_t>> want(list.size(), std::vector<uint8_t>(kOut * kOut * 3));
    for (size_t i = 0; i < list.size(); ++i)
      pillow_resize(list[i].rgb, list[i].w, list[i].h, list[i].stride3, want[i].data(), kOut, kOut);
    for (const Candidate& cand : cands) {
      std::vector<uint8_t> got(kOut * kOut * 3);
      double sum = 0;
      int worst = 0;
      size_t over2 = 0, n = 0;
      for (size_t i = 0; i < list.size(); ++i) {
        cand.run(list[i], got.data());
        for (size_t p = 0; p < got.size(); ++p) {
          int d = std::abs(int{got[p]} - int{want[i][p]});
          sum += d;
          worst = std::max(worst, d);
          over2 += d > 2;
          ++n;
        }
      }
      // Best of three timed passes, in this thread's CPU time: the machine is shared, and waiting
      // for a core is not the resize's cost.
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        double t0 = thread_cpu_us();
        for (const Crop& c : list) cand.run(c, got.data());
        best = std::min(best, (thread_cpu_us() - t0) / static_cast<double>(list.size()));
      }
      std::printf("%-16s %-54s %10.1f %8.3f %8d %9.3f%%\n", cs.name, cand.name.c_str(), best, sum / n, worst,
                  100.0 * static_cast<double>(over2) / static_cast<double>(n));
    }
  }
  return 0;
}
