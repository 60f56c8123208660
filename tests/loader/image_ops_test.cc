// The native image ops: torchvision's crop arithmetic, the DCT scale rule, partial decoding against
// a full decode, colour spaces, layouts, flips, determinism, and corrupt or truncated JPEGs.
#include "loader/image_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <span>

#include "loader/jpeg_decoder.h"
#include "loader/resize.h"
#include "tests/loader/jpeg_fixtures.h"

namespace stallscope::loader {
namespace {

using testing::encode_jpeg;
using testing::make_photo;

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Output {
  Status status;
  std::vector<std::byte> data;
  CropPlan plan;
  StageTimes times;
};
Output run(const ImageTransform& t, const std::string& jpeg, uint64_t seed) {
  ImagePipeline p(t);
  Output o;
  o.data.resize(t.bytes());
  Rng rng(seed);
  o.status = p.run(bytes_of(jpeg), rng, o.data.data(), &o.times, &o.plan);
  return o;
}

TEST(ImageTransform, ShapesAndValidation) {
  ImageTransform t = ImageTransform::random_resized_crop(224);
  EXPECT_TRUE(t.validate().ok());
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.bytes(), 3u * 224 * 224 * 4);
  t.layout = ImageTransform::Layout::kUInt8HWC;
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{224, 224, 3}));
  EXPECT_EQ(t.bytes(), 3u * 224 * 224);
  t.scale_min = 0;
  EXPECT_FALSE(t.validate().ok());
  t = ImageTransform::resize_center_crop(256, 224);
  t.norm_std[1] = 0;
  EXPECT_FALSE(t.validate().ok());
  t.norm_std[1] = 1;
  t.flip_p = 1.5;
  EXPECT_FALSE(t.validate().ok());
  EXPECT_NE(ImageTransform::random_resized_crop(224).describe().find("RandomResizedCrop((224, 224)"),
            std::string::npos);
}

// torchvision's get_params: every box fits, its area and aspect ratio are within the ranges (up to
// the rounding of w and h), and the fallback is the central crop clamped to the ratio range.
TEST(PlanCrop, RandomResizedCropFollowsTorchvision) {
  ImageTransform t = ImageTransform::random_resized_crop(224);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    Rng rng(seed);
    CropPlan p = plan_crop(t, 500, 375, rng);
    ASSERT_GE(p.x, 0);
    ASSERT_GE(p.y, 0);
    ASSERT_LE(p.x + p.w, 500);
    ASSERT_LE(p.y + p.h, 375);
    ASSERT_EQ(p.w, std::floor(p.w));
    double area = p.w * p.h / (500.0 * 375);
    ASSERT_GE(area, 0.08 * 0.9);
    ASSERT_LE(area, 1.0);
    ASSERT_TRUE(p.clamp_to_box);
    ASSERT_EQ(p.out_w, 224);
  }
  // A very wide image: no try can fit a box of ratio <= 4/3 and scale >= 0.99 in it, so the
  // fallback takes the full height and w = round(h * 4/3), centred.
  t.scale_min = 0.99;
  Rng rng(1);
  CropPlan p = plan_crop(t, 1000, 100, rng);
  EXPECT_EQ(p.h, 100);
  EXPECT_EQ(p.w, 133);
  EXPECT_EQ(p.x, (1000 - 133) / 2);
  EXPECT_EQ(p.y, 0);
}

// Resize(256) + CenterCrop(224) of a 500x375 image: resized to 341x256 (int(256 * 500 / 375)),
// the crop starts at round((341 - 224) / 2) = 58 (and round(16.0) = 16).
TEST(PlanCrop, ResizeCenterCropFollowsTorchvision) {
  ImageTransform t = ImageTransform::resize_center_crop(256, 224);
  Rng rng(0);
  CropPlan p = plan_crop(t, 500, 375, rng);
  EXPECT_DOUBLE_EQ(p.x, 58 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(p.w, 224 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(p.y, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(p.h, 224 * 375.0 / 256);
  EXPECT_FALSE(p.clamp_to_box);
  EXPECT_FALSE(p.flip);
  // Python's round() halves to even: (343 - 224) / 2 = 59.5 -> 60; (341 - 224) / 2 = 58.5 -> 58.
  t.resize_short = 0;
  t.resize_h = 256;
  t.resize_w = 343;
  p = plan_crop(t, 343, 256, rng);
  EXPECT_DOUBLE_EQ(p.x, 60);
  t.resize_w = 341;
  p = plan_crop(t, 341, 256, rng);
  EXPECT_DOUBLE_EQ(p.x, 58);
  // A crop larger than the image: padded by (crop - n) // 2 before, the image lands there.
  t = ImageTransform::resize_center_crop(0, 224);
  t.resize_short = 0;
  p = plan_crop(t, 101, 300, rng);
  EXPECT_EQ(p.out_x, (224 - 101) / 2);
  EXPECT_EQ(p.out_w, 101);
  EXPECT_DOUBLE_EQ(p.w, 101);
  EXPECT_EQ(p.out_y, 0);
  EXPECT_DOUBLE_EQ(p.y, 38);  // round((300 - 224) / 2)
}

// The smallest M with box * M / 8 >= output on both axes, rounded up to 1, 2, 4 or 8 (the scales
// libjpeg-turbo has SIMD code for).
TEST(DctScale, SmallestScaleThatCoversTheOutput) {
  auto scale = [](double w, double h) {
    CropPlan p;
    p.w = w;
    p.h = h;
    p.out_w = p.out_h = 224;
    return choose_dct_scale(p);
  };
  EXPECT_EQ(scale(3000, 3000), 1);  // 375 >= 224
  EXPECT_EQ(scale(1792, 1792), 1);  // exactly 224
  EXPECT_EQ(scale(1791, 1792), 2);
  EXPECT_EQ(scale(1000, 900), 2);  // 250 x 225
  EXPECT_EQ(scale(800, 900), 4);   // 2/8 would give 200; 3/8 is rounded up
  EXPECT_EQ(scale(500, 500), 4);   // 250
  EXPECT_EQ(scale(448, 448), 4);
  EXPECT_EQ(scale(300, 250), 8);  // 7/8 of 250 is 218.75
  EXPECT_EQ(scale(440, 440), 8);  // 4/8 would give 220; 5/8 to 7/8 are rounded up
  EXPECT_EQ(scale(224, 224), 8);
  EXPECT_EQ(scale(100, 500), 8);  // smaller than the output: full size
}

// A 4000x3000 image to a 224 crop decodes at 1/8 or 1/4 as the rule says, and the pipeline
// reports the scale it used.
TEST(DctScale, LargeImageDecodesScaledDown) {
  std::string jpeg = encode_jpeg(make_photo(4000, 3000, 5), 4000, 3000);
  ImageTransform t = ImageTransform::random_resized_crop(224);
  t.layout = ImageTransform::Layout::kUInt8HWC;
  int seen[9] = {};
  for (uint64_t seed = 0; seed < 12; ++seed) {
    Output o = run(t, jpeg, seed);
    ASSERT_TRUE(o.status.ok()) << o.status.message();
    EXPECT_EQ(o.plan.dct_scale, choose_dct_scale(o.plan));
    EXPECT_LE(o.plan.dct_scale, 2) << "box " << o.plan.w << "x" << o.plan.h;  // every box is >= 0.08 of 12 MP
    ++seen[o.plan.dct_scale];
  }
  EXPECT_GT(seen[1] + seen[2], 0);
  // The whole image (scale=(1, 1)): 1/8 gives 500x375, enough for 224.
  t.scale_min = 1.0;
  t.ratio_min = t.ratio_max = 4.0 / 3.0;
  Output o = run(t, jpeg, 1);
  ASSERT_TRUE(o.status.ok());
  EXPECT_EQ(o.plan.dct_scale, 1);
  EXPECT_EQ(o.plan.w, 4000);
}

// A region decoded at full scale is the same pixels as a full decode by libturbojpeg (the same
// IDCT and upsampling), except where libjpeg's column crop makes the chroma upsampler see an edge.
TEST(JpegDecoder, RegionMatchesFullDecode) {
  for (testing::Sampling s : {testing::Sampling::k444, testing::Sampling::k420}) {
    testing::JpegOptions opt;
    opt.sampling = s;
    std::string jpeg = encode_jpeg(make_photo(333, 250, 9), 333, 250, opt);
    int w = 0, h = 0;
    std::vector<uint8_t> full = testing::decode_jpeg(jpeg, &w, &h);
    JpegDecoder d;
    Result<JpegInfo> info = d.open(bytes_of(jpeg));
    ASSERT_TRUE(info.ok()) << info.status().message();
    EXPECT_EQ(info->width, 333);
    EXPECT_EQ(info->height, 250);
    ScaledRegion r{8, 70, 41, 150, 120};
    DecodedImage img;
    ASSERT_TRUE(d.decode(r, &img).ok());
    EXPECT_LE(img.x, 70);
    EXPECT_GE(img.x + img.width, 220);
    EXPECT_EQ(img.y, 41);
    EXPECT_EQ(img.height, 120);
    int differ = 0;
    for (int y = 0; y < img.height; ++y) {
      for (int x = 2; x < img.width - 2; ++x) {  // the crop's own two edge columns may differ
        for (int c = 0; c < 3; ++c) {
          differ += img.row(y)[x * 3 + c] != full[(static_cast<size_t>(y + img.y) * w + x + img.x) * 3 + c];
        }
      }
    }
    EXPECT_EQ(differ, 0) << "sampling " << static_cast<int>(s);
    // The whole image at 1/2: libjpeg's size rule.
    ASSERT_TRUE(d.open(bytes_of(jpeg)).ok());
    ASSERT_TRUE(d.decode({4, 0, 0, 167, 125}, &img).ok());
    EXPECT_EQ(img.scaled_width, 167);
    EXPECT_EQ(img.scaled_height, 125);
    EXPECT_EQ(img.width, 167);
  }
}

TEST(JpegDecoder, GrayscaleAndCmykBecomeRgb) {
  std::vector<uint8_t> rgb = make_photo(64, 48, 3);
  testing::JpegOptions gray;
  gray.sampling = testing::Sampling::kGray;
  JpegDecoder d;
  DecodedImage img;
  std::string g = encode_jpeg(rgb, 64, 48, gray);
  ASSERT_TRUE(d.open(bytes_of(g)).ok());
  ASSERT_TRUE(d.decode_full(&img).ok());
  ASSERT_EQ(img.width, 64);
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    ASSERT_EQ(img.rgb[i], img.rgb[i + 1]);
    ASSERT_EQ(img.rgb[i], img.rgb[i + 2]);
  }
  // A flat CMYK image (stored values as libjpeg keeps them, Adobe-inverted): stored (255, 155, 55,
  // 205) are inks c=0, m=100, y=200, k=50, so R = 205 - 205*0/255 = 205, G = 205 - 80 = 125,
  // B = 205 - 161 = 44 (Pillow's cmyk2rgb).
  std::vector<uint8_t> cmyk(64 * 48 * 4);
  for (size_t i = 0; i < cmyk.size(); i += 4) {
    cmyk[i] = 255;
    cmyk[i + 1] = 155;
    cmyk[i + 2] = 55;
    cmyk[i + 3] = 205;
  }
  std::string c = testing::encode_cmyk_jpeg(cmyk, 64, 48);
  Result<JpegInfo> info = d.open(bytes_of(c));
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->components, 4);
  ASSERT_TRUE(d.decode_full(&img).ok());
  EXPECT_NEAR(img.rgb[0], 205, 2);
  EXPECT_NEAR(img.rgb[1], 125, 2);
  EXPECT_NEAR(img.rgb[2], 44, 2);
}

// Damaged data is an error with a one-line message, never a crash, and the decoder goes on with
// the next image.
TEST(JpegDecoder, CorruptAndTruncatedAreErrors) {
  std::string good = encode_jpeg(make_photo(320, 240, 4), 320, 240);
  ImageTransform t = ImageTransform::resize_center_crop(0, 200);
  t.resize_short = 0;
  ImagePipeline p(t);
  std::vector<std::byte> out(t.bytes());
  auto run_on = [&](const std::string& data) {
    Rng rng(0);
    return p.run(bytes_of(data), rng, out.data(), nullptr);
  };
  ASSERT_TRUE(run_on(good).ok());

  std::string truncated = good.substr(0, good.size() / 2);
  Status st = run_on(truncated);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find('\n'), std::string::npos);
  EXPECT_NE(st.message().find("JPEG"), std::string::npos) << st.message();

  // Cut off below the rows a crop needs: libjpeg never reads that far, the missing EOI tells.
  JpegDecoder d;
  std::string cut = good.substr(0, good.size() - 200);
  ASSERT_TRUE(d.open(bytes_of(cut)).ok());
  DecodedImage img;
  st = d.decode({8, 0, 0, 64, 16}, &img);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();

  // A real error in the data: the frame header names a quantisation table the file never
  // defines (libjpeg's error_exit, as in Pillow).
  std::string bad_table = good;
  size_t sof0 = bad_table.find("\xFF\xC0");
  ASSERT_NE(sof0, std::string::npos);
  bad_table[sof0 + 10 + 2] = 3;  // the first component's Tq
  st = run_on(bad_table);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("corrupt JPEG"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("Quantization table"), std::string::npos) << st.message();

  // An unknown marker inside the entropy-coded data: libjpeg stops the scan there (a warning) and
  // fails when it reads the markers after it. A crop that stops above it fails the same way, so a
  // sample never succeeds in one epoch and fails in another.
  std::string marker = good;
  marker[marker.size() / 3] = static_cast<char>(0xFF);
  marker[marker.size() / 3 + 1] = static_cast<char>(0x24);
  st = run_on(marker);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Unsupported marker type 0x24"), std::string::npos) << st.message();
  ASSERT_TRUE(d.open(bytes_of(marker)).ok());
  st = d.decode({8, 0, 0, 64, 16}, &img);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Unsupported marker type 0x24"), std::string::npos) << st.message();

  // A header that claims 20000 x 20000 pixels: refused before any decoding, as Pillow refuses it.
  std::string bomb = good;
  size_t sof = bomb.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) {
    bomb[at] = static_cast<char>(20000 >> 8);
    bomb[at + 1] = static_cast<char>(20000 & 0xFF);
  }
  st = run_on(bomb);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("20000x20000"), std::string::npos) << st.message();

  std::string header_only = good.substr(0, 300);
  EXPECT_FALSE(run_on(header_only).ok());
  EXPECT_FALSE(run_on("").ok());
  std::string png = "\x89PNG\r\n\x1a\n0000";
  st = run_on(png);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("PNG"), std::string::npos);
  EXPECT_TRUE(run_on(good).ok());  // still usable
}

// libjpeg's warnings about corrupt data do not fail an image (Pillow ignores them): extra bytes
// between the last scan and the EOI, and garbage in the entropy-coded data, decode with the
// warning noted. Truncation stays an error (above).
TEST(JpegDecoder, CorruptDataWarningsAreNotErrors) {
  std::string good = encode_jpeg(make_photo(320, 240, 4), 320, 240);
  JpegDecoder d;
  DecodedImage want, img;
  ASSERT_TRUE(d.open(bytes_of(good)).ok());
  ASSERT_TRUE(d.decode_full(&want).ok());
  EXPECT_STREQ(d.warning(), "");

  ASSERT_EQ(good.substr(good.size() - 2), "\xFF\xD9");
  std::string extra = good.substr(0, good.size() - 2) + std::string(240, '\x5A') + "\xFF\xD9";
  ASSERT_TRUE(d.open(bytes_of(extra)).ok());
  Status st = d.decode_full(&img);
  ASSERT_TRUE(st.ok()) << st.message();
  // (libjpeg counts the bytes its entropy decoder had not read ahead: 239 or 240.)
  EXPECT_NE(std::string(d.warning()).find("extraneous bytes before marker 0xd9"), std::string::npos) << d.warning();
  EXPECT_EQ(img.rgb, want.rgb);
  // A crop above the last row never reaches the EOI (no warning then), and the file is whole.
  ASSERT_TRUE(d.open(bytes_of(extra)).ok());
  ASSERT_TRUE(d.decode({8, 0, 0, 64, 16}, &img).ok());

  std::string garbage = good;
  for (size_t i = garbage.size() / 3; i < garbage.size() / 3 + 64; ++i) garbage[i] = static_cast<char>(i * 37);
  garbage[garbage.size() / 3 + 10] = static_cast<char>(0xFF);
  garbage[garbage.size() / 3 + 11] = static_cast<char>(0xD0 + 5);
  ASSERT_TRUE(d.open(bytes_of(garbage)).ok());
  st = d.decode_full(&img);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(std::string(d.warning()).rfind("Corrupt JPEG data", 0), 0u) << d.warning();

  // The warning belongs to one image: the next one starts without it.
  ASSERT_TRUE(d.open(bytes_of(good)).ok());
  EXPECT_STREQ(d.warning(), "");
}

TEST(ImagePipeline, DeterministicPerSeed) {
  std::string jpeg = encode_jpeg(make_photo(500, 375, 1), 500, 375);
  ImageTransform t = ImageTransform::random_resized_crop(224);
  Output a = run(t, jpeg, 42), b = run(t, jpeg, 42), c = run(t, jpeg, 43);
  ASSERT_TRUE(a.status.ok() && b.status.ok() && c.status.ok());
  EXPECT_EQ(a.data, b.data);
  EXPECT_NE(a.data, c.data);
  EXPECT_GT(a.times.decode_ns, 0u);
  EXPECT_GT(a.times.augment_ns, 0u);
}

// The flip is drawn after the crop: p=1 and p=0 give the same crop, mirrored.
TEST(ImagePipeline, FlipMirrorsTheSameCrop) {
  std::string jpeg = encode_jpeg(make_photo(500, 375, 2), 500, 375);
  for (auto layout : {ImageTransform::Layout::kUInt8HWC, ImageTransform::Layout::kFloat32CHW}) {
    ImageTransform t = ImageTransform::random_resized_crop(224, 0.0);
    t.layout = layout;
    ImageTransform f = t;
    f.flip_p = 1.0;
    for (uint64_t seed = 0; seed < 5; ++seed) {
      Output a = run(t, jpeg, seed), b = run(f, jpeg, seed);
      ASSERT_TRUE(a.status.ok() && b.status.ok());
      EXPECT_FALSE(a.plan.flip);
      EXPECT_TRUE(b.plan.flip);
      EXPECT_EQ(a.plan.x, b.plan.x);
      size_t px = layout == ImageTransform::Layout::kUInt8HWC ? 3 : 4;
      for (int y = 0; y < 224; y += 37) {
        for (int x = 0; x < 224; ++x) {
          if (layout == ImageTransform::Layout::kUInt8HWC) {
            ASSERT_EQ(std::memcmp(&a.data[(y * 224 + x) * px], &b.data[(y * 224 + 223 - x) * px], 3), 0);
          } else {
            for (int c = 0; c < 3; ++c) {
              size_t i = (static_cast<size_t>(c) * 224 * 224 + y * 224 + x) * 4;
              size_t j = (static_cast<size_t>(c) * 224 * 224 + y * 224 + 223 - x) * 4;
              ASSERT_EQ(std::memcmp(&a.data[i], &b.data[j], 4), 0);
            }
          }
        }
      }
    }
  }
}

// The three layouts hold the same image: CHW is HWC transposed; float is (v / 255 - mean) / std.
TEST(ImagePipeline, LayoutsAgree) {
  std::string jpeg = encode_jpeg(make_photo(400, 300, 6), 400, 300);
  ImageTransform hwc = ImageTransform::resize_center_crop(256, 224);
  hwc.layout = ImageTransform::Layout::kUInt8HWC;
  ImageTransform chw = hwc, f = hwc;
  chw.layout = ImageTransform::Layout::kUInt8CHW;
  f.layout = ImageTransform::Layout::kFloat32CHW;
  f.norm_mean = {0.485f, 0.456f, 0.406f};
  f.norm_std = {0.229f, 0.224f, 0.225f};
  Output a = run(hwc, jpeg, 0), b = run(chw, jpeg, 0), c = run(f, jpeg, 0);
  ASSERT_TRUE(a.status.ok() && b.status.ok() && c.status.ok());
  const auto* u = reinterpret_cast<const uint8_t*>(a.data.data());
  const auto* v = reinterpret_cast<const uint8_t*>(b.data.data());
  const auto* w = reinterpret_cast<const float*>(c.data.data());
  for (int ch = 0; ch < 3; ++ch) {
    for (int i = 0; i < 224 * 224; i += 7) {
      uint8_t px = u[i * 3 + ch];
      ASSERT_EQ(v[ch * 224 * 224 + i], px);
      ASSERT_EQ(w[ch * 224 * 224 + i], (px / 255.f - f.norm_mean[ch]) / f.norm_std[ch]);
    }
  }
}

// CenterCrop larger than the image: zeros around it (normalised like any 0), as torchvision pads.
TEST(ImagePipeline, CenterCropPadsWithZeros) {
  std::vector<uint8_t> white(60 * 40 * 3, 255);
  std::string jpeg = encode_jpeg(white, 60, 40);
  ImageTransform t;
  t.crop = ImageTransform::Crop::kResizeCenter;
  t.out_h = t.out_w = 64;
  t.layout = ImageTransform::Layout::kUInt8HWC;
  Output o = run(t, jpeg, 0);
  ASSERT_TRUE(o.status.ok()) << o.status.message();
  const auto* px = reinterpret_cast<const uint8_t*>(o.data.data());
  EXPECT_EQ(o.plan.out_x, 2);
  EXPECT_EQ(o.plan.out_y, 12);
  EXPECT_EQ(px[(0 * 64 + 0) * 3], 0);
  EXPECT_EQ(px[(12 * 64 + 1) * 3], 0);
  EXPECT_GE(px[(12 * 64 + 2) * 3], 250);
  EXPECT_GE(px[(51 * 64 + 61) * 3], 250);
  EXPECT_EQ(px[(52 * 64 + 61) * 3], 0);
  EXPECT_EQ(px[(51 * 64 + 62) * 3], 0);
}

// Partial, DCT-scaled decoding changes little: against a full-size decode resized by the same
// code, the difference stays small for every scale the rule picks.
TEST(ImagePipeline, ScaledDecodeCloseToFullDecode) {
  std::string jpeg = encode_jpeg(make_photo(1600, 1200, 8), 1600, 1200);
  int w = 0, h = 0;
  std::vector<uint8_t> full = testing::decode_jpeg(jpeg, &w, &h);
  ImageTransform t = ImageTransform::random_resized_crop(224, 0.0);
  t.layout = ImageTransform::Layout::kUInt8HWC;
  double total = 0;
  size_t n = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Output o = run(t, jpeg, seed);
    ASSERT_TRUE(o.status.ok());
    std::vector<uint8_t> want(224 * 224 * 3);
    RgbView box{&full[(static_cast<size_t>(o.plan.y) * w + static_cast<size_t>(o.plan.x)) * 3],
                static_cast<int>(o.plan.w), static_cast<int>(o.plan.h), static_cast<size_t>(w) * 3};
    resize_rgb(box, 0, 0, box.width, box.height, want.data(), 224, 224, 224 * 3);
    const auto* got = reinterpret_cast<const uint8_t*>(o.data.data());
    for (size_t i = 0; i < want.size(); ++i) total += std::abs(int{got[i]} - int{want[i]});
    n += want.size();
  }
  EXPECT_LT(total / n, 3.0);
}

}  // namespace
}  // namespace stallscope::loader
