// OpenCV behind resize_rgb (see resize.h).
#include "loader/resize.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace stallscope::loader {
namespace {

// The loader's threads are the parallelism: OpenCV must not start a pool of its own inside each
// resize (it would oversubscribe the cores the loader was given). This is the library copy the
// loader links; an OpenCV in the user's Python process is another copy and keeps its settings.
void single_threaded_opencv() {
  static std::once_flag once;
  std::call_once(once, [] { cv::setNumThreads(0); });
}

cv::Mat view_of(const RgbView& v) {
  return cv::Mat(v.height, v.width, CV_8UC3, const_cast<uint8_t*>(v.data), v.stride);
}

// Bilinear sampling of the box at pixel centres, the box's corners anywhere.
void warp(const cv::Mat& src, double x, double y, double fx, double fy, cv::Mat& dst) {
  // Inverse map: source = (fx * (u + 0.5) + x - 0.5, fy * (v + 0.5) + y - 0.5).
  cv::Matx23d m(fx, 0, x + 0.5 * fx - 0.5, 0, fy, y + 0.5 * fy - 0.5);
  cv::warpAffine(src, dst, m, dst.size(), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REPLICATE);
}

}  // namespace

void resize_rgb(const RgbView& src, double x, double y, double w, double h, uint8_t* out, int out_w, int out_h,
                size_t out_stride) {
  single_threaded_opencv();
  cv::Mat in = view_of(src);
  cv::Mat dst(out_h, out_w, CV_8UC3, out, out_stride);
  double fx = w / out_w, fy = h / out_h;

  // Shrinking by 2 or more: average whole k x k blocks of the pixels around the box first (exact
  // box filter, INTER_AREA's integer path), then the bilinear step shrinks by less than 2.
  int kx = std::max(1, static_cast<int>(std::floor(fx))), ky = std::max(1, static_cast<int>(std::floor(fy)));
  if (kx > 1 || ky > 1) {
    int x0 = std::clamp(static_cast<int>(std::floor(x)), 0, src.width - 1);
    int y0 = std::clamp(static_cast<int>(std::floor(y)), 0, src.height - 1);
    int nx = std::max(1, std::min(static_cast<int>(std::ceil(x + w)), src.width) - x0) / kx;
    int ny = std::max(1, std::min(static_cast<int>(std::ceil(y + h)), src.height) - y0) / ky;
    nx = std::max(nx, 1);
    ny = std::max(ny, 1);
    cv::Mat region = in(cv::Rect(x0, y0, std::min(nx * kx, src.width - x0), std::min(ny * ky, src.height - y0)));
    thread_local cv::Mat reduced;
    cv::resize(region, reduced, cv::Size(nx, ny), 0, 0, cv::INTER_AREA);
    // Reduced pixel u covers source [x0 + u*kx, x0 + (u+1)*kx): in its coordinates the box starts
    // at (x - x0) / kx.
    warp(reduced, (x - x0) / kx, (y - y0) / ky, fx / kx, fy / ky, dst);
    return;
  }
  if (x == 0 && y == 0 && w == src.width && h == src.height) {
    // The box is the whole view: OpenCV's plain resize, its fastest path (the same sampling).
    cv::resize(in, dst, dst.size(), 0, 0, cv::INTER_LINEAR);
    return;
  }
  warp(in, x, y, fx, fy, dst);
}

}  // namespace stallscope::loader
