// JPEG throughput of one core: the loader's JPEG source (read + DCT-scaled partial decode +
// RandomResizedCrop to 224 + flip + normalise to float CHW) beside libjpeg-turbo's own full-size
// decode of the same files, the limit a decoder-bound pipeline works against. The files are
// photograph-like 500x375 JPEGs (quality 90, 4:2:0) written to an ImageFolder under $TMPDIR and
// read from the page cache. Times are this thread's CPU time (the machine is shared: waiting for a
// core is not the loader's cost), best of three passes; samples/s is per core.
//   jpeg_bench [images (default 200)]
//   jpeg_bench DIR [images]   the first `images` JPEGs under DIR (an ImageFolder tree, sorted
//                             by path) instead, so that bench/loader_bench.py states the limit
//                             for the very files its loaders read
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "loader/image_ops.h"
#include "loader/jpeg_decoder.h"
#include "loader/jpeg_source.h"
#include "tests/loader/jpeg_fixtures.h"

namespace {

using namespace stallscope::loader;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Best of three passes over n items: seconds per item.
double per_item(int n, const std::function<void(int)>& one) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = thread_cpu_s();
    for (int i = 0; i < n; ++i) one(i);
    best = std::min(best, (thread_cpu_s() - t0) / n);
  }
  return best;
}

void row(const char* what, double s, const char* note = "") {
  std::printf("%-58s %9.0f %9.1f   %s\n", what, 1.0 / s, s * 1e6, note);
}

}  // namespace

int main(int argc, char** argv) {
  // Either the JPEGs under a given folder, or n made here (and removed at the end).
  std::string given;
  if (argc > 1 && std::filesystem::is_directory(argv[1])) given = argv[1];
  const int arg_n = given.empty() ? 1 : 2;
  const int n_asked = argc > arg_n ? std::max(1, std::atoi(argv[arg_n])) : 200;
  std::vector<std::string> jpegs;
  std::vector<std::pair<int, int>> dims;  // width, height
  size_t total_bytes = 0;
  std::string root;
  if (!given.empty()) {
    root = given;
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      std::string ext = e.path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
      if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
    if (paths.size() > static_cast<size_t>(n_asked)) paths.resize(n_asked);
    tjhandle hdr = tjInitDecompress();
    for (const auto& p : paths) {
      std::ifstream f(p, std::ios::binary);
      jpegs.emplace_back((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      int w = 0, h = 0, sub = 0, cs = 0;
      const auto* d = reinterpret_cast<const unsigned char*>(jpegs.back().data());
      if (tjDecompressHeader3(hdr, d, jpegs.back().size(), &w, &h, &sub, &cs) != 0) {
        std::fprintf(stderr, "jpeg_bench: %s: %s\n", p.c_str(), tjGetErrorStr2(hdr));
        return 1;
      }
      dims.emplace_back(w, h);
      total_bytes += jpegs.back().size();
    }
    tjDestroy(hdr);
    if (jpegs.empty()) {
      std::fprintf(stderr, "jpeg_bench: no .jpg or .jpeg file under %s\n", root.c_str());
      return 1;
    }
    std::printf("%zu JPEGs from %s, %.1f KB on average; one thread, CPU time\n", jpegs.size(), root.c_str(),
                static_cast<double>(total_bytes) / static_cast<double>(jpegs.size()) / 1024);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    root = std::string(tmp ? tmp : "/tmp") + "/stallscope-jpeg-bench-" + std::to_string(::getpid());
    stallscope::testing::make_dirs(root + "/c0");
    stallscope::testing::make_dirs(root + "/c1");
    for (int i = 0; i < n_asked; ++i) {
      jpegs.push_back(stallscope::testing::encode_jpeg(stallscope::testing::make_photo(500, 375, 1000 + i), 500, 375));
      dims.emplace_back(500, 375);
      std::ofstream(root + "/c" + std::to_string(i % 2) + "/" + std::to_string(1000 + i) + ".jpg", std::ios::binary)
          << jpegs.back();
      total_bytes += jpegs.back().size();
    }
    std::printf("%d JPEGs, 500x375, quality 90, 4:2:0, %.1f KB on average; one thread, CPU time\n", n_asked,
                static_cast<double>(total_bytes) / n_asked / 1024);
  }
  const int n = static_cast<int>(jpegs.size());
  std::printf("%-58s %9s %9s\n", "", "samples/s", "us/sample");

  // The limit: libjpeg-turbo decoding the whole image to RGB.
  tjhandle tj = tjInitDecompress();
  size_t most = 0;
  for (auto [w, h] : dims) most = std::max(most, static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  std::vector<uint8_t> rgb(most);
  double tj_full = per_item(n, [&](int i) {
    const auto* d = reinterpret_cast<const unsigned char*>(jpegs[i].data());
    auto [w, h] = dims[i];
    if (tjDecompress2(tj, d, jpegs[i].size(), rgb.data(), w, 0, h, TJPF_RGB, 0) != 0) std::abort();
  });
  tjDestroy(tj);
  row("libjpeg-turbo full decode (TurboJPEG, RGB)", tj_full, "the limit");

  // The loader's decoder on the whole image, at each DCT scale (what a crop of that size costs).
  JpegDecoder dec;
  DecodedImage img;
  for (int m : {8, 7, 6, 5, 4, 2}) {
    double s = per_item(n, [&](int i) {
      std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(jpegs[i].data()), jpegs[i].size());
      if (!dec.open(b).ok()) std::abort();
      if (!dec.decode({m, 0, 0, dims[i].first, dims[i].second}, &img).ok()) std::abort();
    });
    std::string what = "loader decoder, whole image at " + std::to_string(m) + "/8";
    row(what.c_str(), s);
  }

  // The transform from memory, then the source with its file reads.
  ImageTransform t = ImageTransform::random_resized_crop(224, 0.5);
  t.norm_mean = {0.485f, 0.456f, 0.406f};
  t.norm_std = {0.229f, 0.224f, 0.225f};
  std::vector<std::byte> out(t.bytes());
  ImagePipeline pipeline(t);
  int scales[9] = {};
  StageTimes times;
  double pipe = per_item(n, [&](int i) {
    std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(jpegs[i].data()), jpegs[i].size());
    Rng rng(static_cast<uint64_t>(i) * 7919 + 1);
    CropPlan plan;
    if (!pipeline.run(b, rng, out.data(), &times, &plan).ok()) std::abort();
    ++scales[plan.dct_scale];
  });
  row("transform from memory: RRC 224 + flip + normalise (float)", pipe);
  for (auto [layout, what] : {std::pair{ImageTransform::Layout::kUInt8CHW, "transform from memory, uint8 CHW out"},
                              std::pair{ImageTransform::Layout::kUInt8HWC, "transform from memory, uint8 HWC out"}}) {
    ImageTransform u = t;
    u.layout = layout;
    ImagePipeline p(u);
    double s = per_item(n, [&](int i) {
      std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(jpegs[i].data()), jpegs[i].size());
      Rng rng(static_cast<uint64_t>(i) * 7919 + 1);
      if (!p.run(b, rng, out.data(), nullptr).ok()) std::abort();
    });
    row(what, s);
  }

  auto src = ImageFolderSource::open(root, t);
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", src.status().message().c_str());
    return 1;
  }
  int64_t label = 0;
  std::byte* dst[2] = {out.data(), reinterpret_cast<std::byte*>(&label)};
  StageTimes stage;
  double source = per_item(n, [&](int i) {
    Rng rng(static_cast<uint64_t>(i) * 7919);
    if (!(*src)->read(i, dst, rng, &stage).ok()) std::abort();
  });
  row("ImageFolderSource.read: file read + the same transform", source);
  std::printf("\nper sample in ImageFolderSource.read (3 passes): read %.0f us, decode %.0f us, augment %.0f us\n",
              static_cast<double>(stage.read_ns) / 3 / n / 1e3, static_cast<double>(stage.decode_ns) / 3 / n / 1e3,
              static_cast<double>(stage.augment_ns) / 3 / n / 1e3);
  std::printf("DCT scales chosen (of %d crops):", 3 * n);
  for (int m = 1; m <= 8; ++m) {
    if (scales[m]) std::printf(" %d/8: %d", m, scales[m]);
  }
  std::printf("\nsource / libjpeg-turbo full decode: %.2f\n", tj_full / source);
  if (given.empty()) std::filesystem::remove_all(root);
  return 0;
}
