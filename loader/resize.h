// Resizing a box of an RGB image to the output size: a bilinear filter of the loader's own
// (resize.cc, no library). Pixel centres map as in Pillow and torchvision
// (src = box_x + (x + 0.5) * box_w / out_w - 0.5), edges are replicated, and a box with fractional
// corners (a DCT-scaled crop, a crop of a resized image) is sampled where it lies, not rounded to
// whole pixels. A bilinear filter reads 2x2 pixels, so it aliases when it shrinks by much more
// than 1: the decoder's DCT scaling keeps the factor left to the resize below 2 for crops up to 8x
// the output, and beyond that an integer k x k box-average shrinks first. Weights are 8-bit fixed
// point (1/256 of a pixel); only the result is rounded. docs/decisions.md has the measurements
// behind it and the libraries it was compared with.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stallscope::loader {

struct RgbView {
  const uint8_t* data = nullptr;  // first pixel
  int width = 0, height = 0;
  size_t stride = 0;  // bytes between rows
};

// Writes out_w x out_h RGB pixels (rows `out_stride` bytes apart) from the box (x, y, w, h), in
// `src` pixel coordinates, of `src`. Sampling past the view's edges repeats its edge pixels: pass
// exactly the crop to keep the resize inside it, a larger view to let it see the neighbours.
void resize_rgb(const RgbView& src, double x, double y, double w, double h, uint8_t* out, int out_w, int out_h,
                size_t out_stride);

}  // namespace stallscope::loader
