// The native image transform (see image_ops.h): torchvision's crop arithmetic, the choice of DCT
// scale, and the fused flip + layout + normalise pass.
#include "loader/image_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "loader/resize.h"

namespace stallscope::loader {
namespace {

// Python's round() on a float: half to even (the default rounding mode does the same).
int py_round(double v) { return static_cast<int>(std::nearbyint(v)); }

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// One axis of Resize + CenterCrop: the crop of `crop` pixels centred in a resized side of
// `resized` pixels, as source coordinates (the source side is `size` pixels) and output span.
// torchvision's center_crop: a crop larger than the image pads it by (crop - n) // 2 before;
// otherwise the crop starts at int(round((n - crop) / 2.0)).
void center_axis(int size, int resized, int crop, double* box_start, double* box_len, int* out_start, int* out_len) {
  double scale = static_cast<double>(size) / resized;
  if (crop > resized) {
    *out_start = (crop - resized) / 2;
    *out_len = resized;
    *box_start = 0;
    *box_len = size;
  } else {
    int left = py_round((resized - crop) / 2.0);
    *out_start = 0;
    *out_len = crop;
    *box_start = left * scale;
    *box_len = crop * scale;
  }
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

ImageTransform ImageTransform::random_resized_crop(int size, double flip_p) {
  ImageTransform t;
  t.crop = Crop::kRandomResized;
  t.out_h = t.out_w = size;
  t.flip_p = flip_p;
  return t;
}

ImageTransform ImageTransform::resize_center_crop(int resize, int crop) {
  ImageTransform t;
  t.crop = Crop::kResizeCenter;
  t.resize_short = resize;
  t.out_h = t.out_w = crop;
  return t;
}

Status ImageTransform::validate() const {
  if (out_h <= 0 || out_w <= 0 || out_h > 65536 || out_w > 65536) {
    return Status::Error("image transform: output size " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                         " is not positive");
  }
  if (crop == Crop::kRandomResized) {
    if (!(scale_min > 0 && scale_min <= scale_max && scale_max <= 1.0)) {
      // torchvision accepts any scale; above 1 the crop never fits and the fallback always runs.
      return Status::Error("image transform: RandomResizedCrop scale must satisfy 0 < min <= max <= 1, got (" +
                           fmt(scale_min) + ", " + fmt(scale_max) + ")");
    }
    if (!(ratio_min > 0 && ratio_min <= ratio_max)) {
      return Status::Error("image transform: RandomResizedCrop ratio must satisfy 0 < min <= max, got (" +
                           fmt(ratio_min) + ", " + fmt(ratio_max) + ")");
    }
  } else {
    if (resize_short < 0 || resize_h < 0 || resize_w < 0 || (resize_short == 0 && (resize_h > 0) != (resize_w > 0))) {
      return Status::Error("image transform: Resize needs one side (shorter edge) or both (h, w) positive");
    }
  }
  if (!(flip_p >= 0 && flip_p <= 1))
    return Status::Error("image transform: flip probability " + fmt(flip_p) + " is not in [0, 1]");
  for (int c = 0; c < 3; ++c) {
    if (!(norm_std[c] != 0 && std::isfinite(norm_std[c]) && std::isfinite(norm_mean[c]))) {
      return Status::Error("image transform: Normalize std must be finite and non-zero");
    }
  }
  return Status::Ok();
}

std::vector<int64_t> ImageTransform::shape() const {
  if (layout == Layout::kUInt8HWC) return {out_h, out_w, 3};
  return {3, out_h, out_w};
}

size_t ImageTransform::bytes() const {
  return static_cast<size_t>(out_h) * out_w * 3 * (layout == Layout::kFloat32CHW ? sizeof(float) : 1);
}

std::string ImageTransform::describe() const {
  std::string s;
  if (crop == Crop::kRandomResized) {
    s = "RandomResizedCrop((" + std::to_string(out_h) + ", " + std::to_string(out_w) + "), scale=(" + fmt(scale_min) +
        ", " + fmt(scale_max) + "), ratio=(" + fmt(ratio_min) + ", " + fmt(ratio_max) + "))";
  } else {
    if (resize_short > 0) s = "Resize(" + std::to_string(resize_short) + ") -> ";
    if (resize_short == 0 && resize_h > 0)
      s = "Resize((" + std::to_string(resize_h) + ", " + std::to_string(resize_w) + ")) -> ";
    s += "CenterCrop((" + std::to_string(out_h) + ", " + std::to_string(out_w) + "))";
  }
  if (flip_p > 0) s += " -> RandomHorizontalFlip(" + fmt(flip_p) + ")";
  switch (layout) {
    case Layout::kUInt8HWC: s += " -> uint8 HWC"; break;
    case Layout::kUInt8CHW: s += " -> uint8 CHW"; break;
    case Layout::kFloat32CHW:
      s += " -> ToTensor -> Normalize(mean=(" + fmt(norm_mean[0]) + ", " + fmt(norm_mean[1]) + ", " +
           fmt(norm_mean[2]) + "), std=(" + fmt(norm_std[0]) + ", " + fmt(norm_std[1]) + ", " + fmt(norm_std[2]) + "))";
      break;
  }
  return s;
}

CropPlan plan_crop(const ImageTransform& t, int width, int height, Rng& rng) {
  CropPlan p;
  p.out_w = t.out_w;
  p.out_h = t.out_h;
  if (t.crop == ImageTransform::Crop::kRandomResized) {
    // torchvision.transforms.RandomResizedCrop.get_params.
    p.clamp_to_box = true;
    double area = static_cast<double>(width) * height;
    double log_lo = std::log(t.ratio_min), log_hi = std::log(t.ratio_max);
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      double target = area * rng.uniform(t.scale_min, t.scale_max);
      double aspect = std::exp(rng.uniform(log_lo, log_hi));
      int w = py_round(std::sqrt(target * aspect));
      int h = py_round(std::sqrt(target / aspect));
      if (w > 0 && w <= width && h > 0 && h <= height) {
        p.y = static_cast<double>(rng.below(static_cast<uint64_t>(height - h + 1)));
        p.x = static_cast<double>(rng.below(static_cast<uint64_t>(width - w + 1)));
        p.w = w;
        p.h = h;
        found = true;
      }
    }
    if (!found) {  // the central crop
      double in_ratio = static_cast<double>(width) / height;
      int w = width, h = height;
      if (in_ratio < t.ratio_min) {
        h = py_round(w / t.ratio_min);
      } else if (in_ratio > t.ratio_max) {
        w = py_round(h * t.ratio_max);
      }
      p.y = (height - h) / 2;
      p.x = (width - w) / 2;
      p.w = w;
      p.h = h;
    }
  } else {
    p.clamp_to_box = false;
    int nw = width, nh = height;
    if (t.resize_short > 0) {
      // torchvision's _compute_resized_output_size: the long side is int(size * long / short).
      int s = std::min(width, height), l = std::max(width, height);
      int new_long = static_cast<int>(static_cast<double>(t.resize_short) * l / s);
      nw = width <= height ? t.resize_short : new_long;
      nh = width <= height ? new_long : t.resize_short;
    } else if (t.resize_h > 0) {
      nw = t.resize_w;
      nh = t.resize_h;
    }
    center_axis(width, nw, t.out_w, &p.x, &p.w, &p.out_x, &p.out_w);
    center_axis(height, nh, t.out_h, &p.y, &p.h, &p.out_y, &p.out_h);
  }
  p.flip = t.flip_p > 0 && rng.uniform() < t.flip_p;
  return p;
}

int choose_dct_scale(const CropPlan& plan) {
  auto axis = [](double box, int out) {
    if (box <= 0) return 8;
    return static_cast<int>(std::ceil(8.0 * out / box - 1e-9));
  };
  int m = std::clamp(std::max(axis(plan.w, plan.out_w), axis(plan.h, plan.out_h)), 1, 8);
  // Only 1/8, 2/8, 4/8 and 8/8 have SIMD inverse DCTs in libjpeg-turbo; the others are C and
  // slower than a full-size decode (bench/jpeg_bench: 7/8 takes 2.3x the time of 8/8).
  return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
}

ImagePipeline::ImagePipeline(const ImageTransform& t) : t_(t) {
  // ToTensor then Normalize, in float32 as torch computes them: (v / 255 - mean) / std; a table per
  // channel makes the layout pass one look-up per value.
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) lut_[c][v] = (static_cast<float>(v) / 255.f - t_.norm_mean[c]) / t_.norm_std[c];
  }
}

Status ImagePipeline::run(std::span<const uint8_t> jpeg, Rng& rng, std::byte* dst, StageTimes* times,
                          CropPlan* plan_out) {
  const uint64_t t0 = now_ns();
  Result<JpegInfo> info = decoder_.open(jpeg);
  if (!info.ok()) return info.status();
  const uint64_t t1 = now_ns();
  CropPlan plan = plan_crop(t_, info->width, info->height, rng);
  // The box at the DCT scale, and the scanlines and columns to decode around it.
  const int m = choose_dct_scale(plan);
  plan.dct_scale = m;
  if (plan_out) *plan_out = plan;
  const double k = m / 8.0;
  const int sw = JpegDecoder::scaled_size(info->width, m), sh = JpegDecoder::scaled_size(info->height, m);
  const double bx = plan.x * k, by = plan.y * k, bw = plan.w * k, bh = plan.h * k;
  // A resize of the whole image reads past the box by the filter's reach (the INTER_AREA step's
  // block when it shrinks by 2 or more): decode that margin too, so that only the image's own edges
  // are replicated.
  int margin_x = 0, margin_y = 0;
  if (!plan.clamp_to_box) {
    margin_x = 2 + static_cast<int>(std::ceil(bw / plan.out_w));
    margin_y = 2 + static_cast<int>(std::ceil(bh / plan.out_h));
  }
  ScaledRegion region;
  region.scale = m;
  region.x = std::clamp(static_cast<int>(std::floor(bx)) - margin_x, 0, sw - 1);
  region.y = std::clamp(static_cast<int>(std::floor(by)) - margin_y, 0, sh - 1);
  region.width = std::clamp(static_cast<int>(std::ceil(bx + bw - 1e-9)) + margin_x, region.x + 1, sw) - region.x;
  region.height = std::clamp(static_cast<int>(std::ceil(by + bh - 1e-9)) + margin_y, region.y + 1, sh) - region.y;
  Status st = decoder_.decode(region, &decoded_);
  if (!st.ok()) return st;
  const uint64_t t2 = now_ns();

  // The view of exactly the region asked for (libjpeg may have decoded whole iMCU columns more).
  RgbView view;
  view.data = decoded_.row(region.y - decoded_.y) + static_cast<size_t>(region.x - decoded_.x) * 3;
  view.width = region.width;
  view.height = region.height;
  view.stride = static_cast<size_t>(decoded_.width) * 3;

  const int ow = t_.out_w, oh = t_.out_h;
  const bool padded = plan.out_x != 0 || plan.out_y != 0 || plan.out_w != ow || plan.out_h != oh;
  const bool direct = t_.layout == ImageTransform::Layout::kUInt8HWC && !plan.flip && !padded;
  uint8_t* rgb = direct ? reinterpret_cast<uint8_t*>(dst) : nullptr;
  if (!direct) {
    resized_.resize(static_cast<size_t>(ow) * oh * 3);
    rgb = resized_.data();
    if (padded) std::fill(resized_.begin(), resized_.end(), 0);
  }
  resize_rgb(view, bx - region.x, by - region.y, bw, bh, rgb + (static_cast<size_t>(plan.out_y) * ow + plan.out_x) * 3,
             plan.out_w, plan.out_h, static_cast<size_t>(ow) * 3);

  // One pass: flip, layout and normalisation.
  if (!direct) {
    const size_t plane = static_cast<size_t>(ow) * oh;
    switch (t_.layout) {
      case ImageTransform::Layout::kUInt8HWC: {
        auto* out = reinterpret_cast<uint8_t*>(dst);
        for (int y = 0; y < oh; ++y) {
          const uint8_t* row = rgb + static_cast<size_t>(y) * ow * 3;
          uint8_t* o = out + static_cast<size_t>(y) * ow * 3;
          if (!plan.flip) {
            std::memcpy(o, row, static_cast<size_t>(ow) * 3);
            continue;
          }
          for (int x = 0; x < ow; ++x) std::memcpy(o + x * 3, row + (ow - 1 - x) * 3, 3);
        }
        break;
      }
      case ImageTransform::Layout::kUInt8CHW: {
        auto* out = reinterpret_cast<uint8_t*>(dst);
        for (int y = 0; y < oh; ++y) {
          const uint8_t* row = rgb + static_cast<size_t>(y) * ow * 3;
          uint8_t* r = out + static_cast<size_t>(y) * ow;
          uint8_t* g = r + plane;
          uint8_t* b = g + plane;
          for (int x = 0; x < ow; ++x) {
            const uint8_t* p = row + (plan.flip ? ow - 1 - x : x) * 3;
            r[x] = p[0];
            g[x] = p[1];
            b[x] = p[2];
          }
        }
        break;
      }
      case ImageTransform::Layout::kFloat32CHW: {
        auto* out = reinterpret_cast<float*>(dst);
        for (int y = 0; y < oh; ++y) {
          const uint8_t* row = rgb + static_cast<size_t>(y) * ow * 3;
          float* r = out + static_cast<size_t>(y) * ow;
          float* g = r + plane;
          float* b = g + plane;
          for (int x = 0; x < ow; ++x) {
            const uint8_t* p = row + (plan.flip ? ow - 1 - x : x) * 3;
            r[x] = lut_[0][p[0]];
            g[x] = lut_[1][p[1]];
            b[x] = lut_[2][p[2]];
          }
        }
        break;
      }
    }
  }
  const uint64_t t3 = now_ns();
  if (times) {
    times->decode_ns += (t1 - t0) + (t2 - t1);
    times->augment_ns += t3 - t2;
  }
  return Status::Ok();
}

}  // namespace stallscope::loader
