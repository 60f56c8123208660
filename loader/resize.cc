// resize_rgb (see resize.h): an integer box-average when the box is 2x the output or more, then a
// separable bilinear filter in fixed point, one output row at a time: the vertical pass filters the
// two source rows over the columns the row's taps read, the horizontal pass reads that one row.
// Plain C++ with one exception: on x86-64 the horizontal pass uses SSE2 (part of every x86-64 CPU,
// so no -march flag), with the same arithmetic as the plain loop other machines run. The loops
// over a row's bytes run in blocks of a fixed count so that the compiler vectorises them at -O2
// (GCC's cheapest cost model included).
#include "loader/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace stallscope::loader {
namespace {

// Weights of the bilinear taps: 8 bits, 1/256 of a pixel (OpenCV's warpAffine placed its taps to
// 1/32 of a pixel, its resize to 1/2048). The vertical pass is exact in 16 bits
// (255 * 256 = 65280), the horizontal one in 32 bits, and only the result is rounded.
constexpr int kBits = 8;
constexpr int kOne = 1 << kBits;
// Loop blocks: a multiple of every vector width of 16-bit lanes the compiler may pick.
constexpr int kBlock = 32;
// The vertical pass stores its 16-bit sums less 32768, as int16 (SSE2 multiplies signed 16-bit
// lanes); the horizontal pass adds back 32768 * kOne, and half a level to round.
constexpr int kShift = 2 * kBits;
constexpr int32_t kBias = (32768 << kBits) + (1 << (kShift - 1));

// One output coordinate's two taps: source index `i` and weight `w` (0..kOne-1) of `i + 1`. At an
// edge the sample repeats the edge pixel: i is clamped and w is 0.
struct Tap {
  int i;
  int w;
};

// Pixel centres as in Pillow: output u samples box_start + (u + 0.5) * scale - 0.5.
void taps_for(double start, double scale, int out_n, int src_n, std::vector<Tap>& taps) {
  taps.resize(static_cast<size_t>(out_n));
  for (int u = 0; u < out_n; ++u) {
    double s = start + (u + 0.5) * scale - 0.5;
    double f = std::floor(s);
    int i = static_cast<int>(f);
    int w = static_cast<int>(std::lround((s - f) * kOne));
    if (w == kOne) ++i, w = 0;
    if (i < 0) {
      i = 0;
      w = 0;
    } else if (i >= src_n - 1) {
      i = src_n - 1;
      w = 0;
    }
    taps[static_cast<size_t>(u)] = {i, w};
  }
}

// A horizontal tap as the pass reads it: the offset of the first tap's value in the filtered row,
// and the two weights as 16-bit halves (kOne - w low, w high).
struct HTap {
  int32_t off;
  int32_t weights;
};

// out[j] = a[j] * (kOne - w) + b[j] * w - 32768 for j < n: exact, as int16.
void vertical(const uint8_t* __restrict a, const uint8_t* __restrict b, int w, int16_t* __restrict out, size_t n) {
  const auto w0 = static_cast<uint16_t>(kOne - w), w1 = static_cast<uint16_t>(w);
  size_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    for (int k = 0; k < kBlock; ++k) {
      out[j + k] = static_cast<int16_t>(static_cast<uint16_t>(a[j + k] * w0 + b[j + k] * w1) ^ 0x8000u);
    }
  }
  for (; j < n; ++j) out[j] = static_cast<int16_t>(static_cast<uint16_t>(a[j] * w0 + b[j] * w1) ^ 0x8000u);
}

inline uint8_t horizontal_value(const int16_t* p, int32_t weights) {
  const int w0 = weights & 0xffff, w1 = weights >> 16;
  return static_cast<uint8_t>((p[0] * w0 + p[3] * w1 + kBias) >> kShift);
}

// One output row of out_w pixels from one vertically filtered row, which holds one pixel and one
// value more than the taps read (a tap i + 1 of weight 0 and SSE2's 4-value loads stay inside it).
void horizontal(const int16_t* __restrict row, const HTap* __restrict taps, int out_w, uint8_t* __restrict out) {
  int u = 0;
#if defined(__SSE2__)
  // Two pixels per step: each loads its two taps' RGB, interleaves them (R0 R1 G0 G1 B0 B1 ..) and
  // multiplies by (w0, w1) pairs (pmaddwd). Each pixel is stored as 4 bytes, the 4th overwritten
  // by the next pixel, so the last pixel of the row is left to the plain loop.
  const __m128i bias = _mm_set1_epi32(kBias);
  for (; u + 2 < out_w; u += 2) {
    const int16_t* p0 = row + taps[u].off;
    const int16_t* p1 = row + taps[u + 1].off;
    __m128i m0 = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0)),
                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + 3)));
    __m128i m1 = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1)),
                                    _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + 3)));
    __m128i s0 = _mm_madd_epi16(m0, _mm_set1_epi32(taps[u].weights));
    __m128i s1 = _mm_madd_epi16(m1, _mm_set1_epi32(taps[u + 1].weights));
    s0 = _mm_srai_epi32(_mm_add_epi32(s0, bias), kShift);
    s1 = _mm_srai_epi32(_mm_add_epi32(s1, bias), kShift);
    __m128i px = _mm_packs_epi32(s0, s1);
    px = _mm_packus_epi16(px, px);
    const int32_t lo = _mm_cvtsi128_si32(px), hi = _mm_cvtsi128_si32(_mm_srli_si128(px, 4));
    std::memcpy(out + u * 3, &lo, 4);
    std::memcpy(out + u * 3 + 3, &hi, 4);
  }
#endif
  for (; u < out_w; ++u) {
    const int16_t* p = row + taps[u].off;
    for (int c = 0; c < 3; ++c) out[u * 3 + c] = horizontal_value(p + c, taps[u].weights);
  }
}

// Bilinear sampling of the box (x, y, x + fx * out_w, y + fy * out_h) of src, at pixel centres.
void bilinear(const RgbView& src, double x, double y, double fx, double fy, uint8_t* out, int out_w, int out_h,
              size_t out_stride) {
  thread_local std::vector<Tap> xt, yt;
  thread_local std::vector<HTap> ht;
  thread_local std::vector<int16_t> row;
  taps_for(x, fx, out_w, src.width, xt);
  taps_for(y, fy, out_h, src.height, yt);
  // The columns the taps read: the vertical pass filters only those.
  int c0 = src.width, c1 = 0;
  for (const Tap& t : xt) {
    c0 = std::min(c0, t.i);
    c1 = std::max(c1, t.w ? t.i + 1 : t.i);
  }
  ht.resize(xt.size());
  for (size_t u = 0; u < xt.size(); ++u) ht[u] = {(xt[u].i - c0) * 3, (kOne - xt[u].w) | (xt[u].w << 16)};
  const size_t n = static_cast<size_t>(c1 - c0 + 1) * 3;
  row.assign(n + 4, 0);
  for (int v = 0; v < out_h; ++v) {
    const Tap t = yt[static_cast<size_t>(v)];
    const uint8_t* a = src.data + static_cast<size_t>(t.i) * src.stride + static_cast<size_t>(c0) * 3;
    vertical(a, t.w ? a + src.stride : a, t.w, row.data(), n);
    horizontal(row.data(), ht.data(), out_w, out + static_cast<size_t>(v) * out_stride);
  }
}

// sum[j] += p[j] for j < n.
template <typename Acc>
void accumulate(const uint8_t* __restrict p, Acc* __restrict sum, size_t n) {
  size_t j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    for (int k = 0; k < kBlock; ++k) sum[j + k] = static_cast<Acc>(sum[j + k] + p[j + k]);
  }
  for (; j < n; ++j) sum[j] = static_cast<Acc>(sum[j] + p[j]);
}

// Averages whole kx x ky blocks of the nx*kx x ny*ky pixels at src.data into nx x ny pixels,
// rounded to the nearest level. Acc holds a column's sum over ky rows.
template <typename Acc>
void box_average(const RgbView& src, int kx, int ky, int nx, int ny, uint8_t* out) {
  thread_local std::vector<Acc> acc;
  const size_t n = static_cast<size_t>(nx) * kx * 3;
  acc.resize(n);
  // Division by the block's area as a 32-bit fixed-point reciprocal: within 0.002 of a level for
  // blocks up to 256 x 256, so the rounding is the exact quotient's but for ties.
  const uint64_t area = static_cast<uint64_t>(kx) * ky, recip = ((uint64_t{1} << 32) + area / 2) / area;
  for (int r = 0; r < ny; ++r) {
    std::fill(acc.begin(), acc.end(), Acc{0});
    for (int i = 0; i < ky; ++i) accumulate(src.data + static_cast<size_t>(r * ky + i) * src.stride, acc.data(), n);
    uint8_t* o = out + static_cast<size_t>(r) * nx * 3;
    for (int u = 0; u < nx; ++u) {
      const Acc* a = acc.data() + static_cast<size_t>(u) * kx * 3;
      uint32_t s0 = 0, s1 = 0, s2 = 0;
      for (int i = 0; i < kx; ++i) {
        s0 += a[i * 3];
        s1 += a[i * 3 + 1];
        s2 += a[i * 3 + 2];
      }
      o[u * 3 + 0] = static_cast<uint8_t>((s0 * recip + (uint64_t{1} << 31)) >> 32);
      o[u * 3 + 1] = static_cast<uint8_t>((s1 * recip + (uint64_t{1} << 31)) >> 32);
      o[u * 3 + 2] = static_cast<uint8_t>((s2 * recip + (uint64_t{1} << 31)) >> 32);
    }
  }
}

}  // namespace

void resize_rgb(const RgbView& src, double x, double y, double w, double h, uint8_t* out, int out_w, int out_h,
                size_t out_stride) {
  if (out_w <= 0 || out_h <= 0 || src.width <= 0 || src.height <= 0) return;
  const double fx = w / out_w, fy = h / out_h;
  // Shrinking by 2 or more: average whole k x k blocks of the pixels around the box first (an
  // exact box filter), then the bilinear step shrinks by less than 2.
  const int kx = std::max(1, static_cast<int>(std::floor(fx))), ky = std::max(1, static_cast<int>(std::floor(fy)));
  if (kx > 1 || ky > 1) {
    const int x0 = std::clamp(static_cast<int>(std::floor(x)), 0, src.width - 1);
    const int y0 = std::clamp(static_cast<int>(std::floor(y)), 0, src.height - 1);
    const int nx = std::max(1, (std::min(static_cast<int>(std::ceil(x + w)), src.width) - x0) / kx);
    const int ny = std::max(1, (std::min(static_cast<int>(std::ceil(y + h)), src.height) - y0) / ky);
    // A box of less than one block at the view's edge: its one block is what the view holds.
    const int bx = std::min(nx * kx, src.width - x0), by = std::min(ny * ky, src.height - y0);
    thread_local std::vector<uint8_t> reduced;
    RgbView region{src.data + static_cast<size_t>(y0) * src.stride + static_cast<size_t>(x0) * 3, bx, by, src.stride};
    reduced.resize(static_cast<size_t>(nx) * ny * 3);
    // A column's sum over the block's rows fits 16 bits up to 257 rows (257 * 255 = 65535).
    if (by / ny <= 257) {
      box_average<uint16_t>(region, bx / nx, by / ny, nx, ny, reduced.data());
    } else {
      box_average<uint32_t>(region, bx / nx, by / ny, nx, ny, reduced.data());
    }
    // Reduced pixel u covers source [x0 + u*kx, x0 + (u+1)*kx): in its coordinates the box starts
    // at (x - x0) / kx.
    RgbView small{reduced.data(), nx, ny, static_cast<size_t>(nx) * 3};
    bilinear(small, (x - x0) / kx, (y - y0) / ky, fx / kx, fy / ky, out, out_w, out_h, out_stride);
    return;
  }
  bilinear(src, x, y, fx, fy, out, out_w, out_h, out_stride);
}

}  // namespace stallscope::loader
