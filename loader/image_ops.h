// The image transform the loader runs natively: torchvision's classic chain
//   RandomResizedCrop(size, scale, ratio)  or  Resize(s) + CenterCrop(c)
//   -> RandomHorizontalFlip(p) -> uint8 HWC | uint8 CHW | ToTensor + Normalize(mean, std) (float CHW)
// with the same semantics as torchvision on a PIL image (crop boxes, rounding, padding of a
// CenterCrop larger than the image), fused: the crop box is drawn from the JPEG's header alone,
// the image is decoded at the smallest DCT scale that still covers the box at the output size and
// only where the box is, resized once (loader/resize.h), and the flip, the layout and the
// normalisation are one pass that writes the batch buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "loader/jpeg_decoder.h"
#include "loader/source.h"

namespace stallscope::loader {

struct ImageTransform {
  enum class Crop : uint8_t {
    kRandomResized,  // RandomResizedCrop(out_h x out_w, scale, ratio)
    kResizeCenter,   // Resize(resize...) then CenterCrop(out_h x out_w); either may be absent
  };
  enum class Layout : uint8_t {
    kUInt8HWC,    // what a PIL image holds, as an array
    kUInt8CHW,    // PILToTensor
    kFloat32CHW,  // ToTensor (values / 255) then Normalize(mean, std)
  };

  Crop crop = Crop::kRandomResized;
  int out_h = 224, out_w = 224;
  // RandomResizedCrop: the area fraction and aspect ratio ranges.
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  // Resize: resize_short > 0 is Resize(int): the shorter side becomes resize_short, the longer one
  // keeps the aspect ratio (truncated, as torchvision does); else resize_h x resize_w > 0 is
  // Resize((h, w)); all 0 is no Resize. Without a CenterCrop, set out_h x out_w to resize_h x
  // resize_w (a Resize(int) alone has no fixed output size and cannot be batched).
  int resize_short = 0;
  int resize_h = 0, resize_w = 0;
  double flip_p = 0.0;  // RandomHorizontalFlip(p); 0: none
  Layout layout = Layout::kFloat32CHW;
  std::array<float, 3> norm_mean{0.f, 0.f, 0.f}, norm_std{1.f, 1.f, 1.f};  // Normalize; float layout only

  // The usual training and evaluation chains of torchvision's ImageNet recipe.
  static ImageTransform random_resized_crop(int size, double flip_p = 0.5);
  static ImageTransform resize_center_crop(int resize, int crop);

  Status validate() const;
  DType dtype() const { return layout == Layout::kFloat32CHW ? DType::kFloat32 : DType::kUInt8; }
  std::vector<int64_t> shape() const;  // of one image: [3, H, W] or [H, W, 3]
  size_t bytes() const;
  // One line for the loader's dl.config: "RandomResizedCrop(224, scale=(0.08, 1), ...) -> ...".
  std::string describe() const;
};

// Where an image's output comes from: a box of the source image (source pixels; fractional for
// Resize + CenterCrop, whose crop is taken after the resize) resized to a rectangle of the output.
// Output pixels outside that rectangle are padding (value 0 before normalisation, as torchvision's
// CenterCrop pads a too-small image).
struct CropPlan {
  double x = 0, y = 0, w = 0, h = 0;               // source box
  int out_x = 0, out_y = 0, out_w = 0, out_h = 0;  // where it lands in the output
  bool clamp_to_box = true;                        // RandomResizedCrop crops first: the resize sees nothing outside the
                             // box. Resize + CenterCrop resizes the whole image: it sees its edges.
  bool flip = false;
  int dct_scale = 8;  // filled by ImagePipeline::run: the image was decoded at dct_scale / 8
};

// The crop and flip of an image of width x height, drawn from `rng` for a RandomResizedCrop (in
// torchvision's order: RandomResizedCrop.get_params, then the flip).
CropPlan plan_crop(const ImageTransform& t, int width, int height, Rng& rng);

// The DCT scale M (the image is decoded at M/8) for a plan: the smallest that keeps the box at
// least as large as its output rectangle on both axes; 8 when the box is smaller than the output.
int choose_dct_scale(const CropPlan& plan);

// Decodes and transforms one JPEG into `dst` (t.bytes() bytes). One per thread: it keeps the
// decoder and scratch buffers between images.
class ImagePipeline {
 public:
  explicit ImagePipeline(const ImageTransform& t);
  // Errors say what is wrong with the image; the caller adds the file and the sample index.
  // `plan_out`, when given, receives the crop and flip that were used.
  Status run(std::span<const uint8_t> jpeg, Rng& rng, std::byte* dst, StageTimes* times, CropPlan* plan_out = nullptr);
  const ImageTransform& transform() const { return t_; }

 private:
  ImageTransform t_;
  JpegDecoder decoder_;
  DecodedImage decoded_;
  std::vector<uint8_t> resized_;  // out_h x out_w RGB before the layout pass
  float lut_[3][256];             // ToTensor + Normalize of each value, per channel
};

}  // namespace stallscope::loader
