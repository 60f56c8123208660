// JPEG sources: a torchvision ImageFolder tree and WebDataset-style tar shards. Both give two
// fields, `image` (the ImageTransform's output: float32 [3, H, W] or uint8 [3, H, W] / [H, W, 3])
// and `label` (int64), and run the transform natively (image_ops.h). The samples are listed once,
// when the source is opened; reading one is a read of its bytes (open + read, or pread into a
// shard), a partial DCT-scaled decode and the fused transform.
//
// ImageFolder: the classes are root's subfolders sorted by name, the samples the files below each
// class with torchvision's image extensions, in torchvision's order (make_dataset: sorted
// os.walk(class, followlinks=True), the files of each folder sorted); a class without a file is an
// error, as in torchvision. Only JPEG is decoded: another image format fails its read with a
// one-line message naming the file, so the caller can fall back to torch's loader.
//
// Tar shards: WebDataset's layout, `key.jpg` (or `.jpeg`) and `key.cls` (the class as decimal
// text) adjacent in the tar, the key being the member's path up to the first dot of its file name;
// other members of a key are ignored. Shards must be uncompressed (members are read with pread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "loader/image_ops.h"
#include "loader/source.h"

namespace stallscope::loader {

// torchvision's IMG_EXTENSIONS: the files an ImageFolder lists.
extern const char* const kImageExtensions[9];

class ImageFolderSource : public Source {
 public:
  // Lists the tree under `root`. Errors: no class folder, a class without an image, a bad
  // transform, an unreadable root.
  static Result<std::unique_ptr<ImageFolderSource>> open(const std::string& root, const ImageTransform& transform);
  // The samples as given, (path, label) in that order: a torchvision ImageFolder's `samples` after
  // its caller filtered or reordered them (an `is_valid_file`, a subset). `root` and `classes` are
  // for messages and the caller; no file is opened. Errors: no sample, a bad transform.
  static Result<std::unique_ptr<ImageFolderSource>> from_samples(const std::string& root,
                                                                 std::vector<std::string> classes,
                                                                 std::vector<std::pair<std::string, int64_t>> samples,
                                                                 const ImageTransform& transform);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const override;
  std::string describe(int64_t index) const override;  // the path below root: "cat/001.jpg"
  std::string kind() const override { return "image_folder"; }

  const std::string& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const { return samples_[static_cast<size_t>(index)].path; }
  int64_t label(int64_t index) const { return samples_[static_cast<size_t>(index)].label; }
  const ImageTransform& transform() const { return transform_; }
  // The first sample whose name does not end in .jpg or .jpeg (-1: none), for a caller that would
  // rather fall back to torch's loader than fail on a PNG mid-epoch. By name only: the bytes are
  // checked when the sample is read.
  int64_t first_non_jpeg_name() const { return first_non_jpeg_; }

 private:
  struct Sample {
    std::string path;  // root + "/" + class + ...
    int64_t label;
  };
  ImageFolderSource(std::string root, const ImageTransform& transform);
  void find_first_non_jpeg();

  std::string root_;
  ImageTransform transform_;
  std::vector<Field> fields_;
  std::vector<std::string> classes_;
  std::vector<Sample> samples_;
  int64_t first_non_jpeg_ = -1;
  uint64_t id_;  // which per-thread decoder belongs to this source
};

class TarShardSource : public Source {
 public:
  // Indexes every shard (names, offsets, sizes, labels). Errors name the shard and the member: a
  // malformed or truncated tar, a key without its .jpg or .cls, a label that is not an integer.
  static Result<std::unique_ptr<TarShardSource>> open(const std::vector<std::string>& shards,
                                                      const ImageTransform& transform);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const override;
  std::string describe(int64_t index) const override;  // "shard-000.tar:n01440764_10026.jpg"
  std::string kind() const override { return "tar_shards"; }

  const std::vector<std::string>& shards() const { return shards_; }
  int64_t label(int64_t index) const { return samples_[static_cast<size_t>(index)].label; }
  const std::string& member(int64_t index) const { return samples_[static_cast<size_t>(index)].member; }
  const ImageTransform& transform() const { return transform_; }

 private:
  struct Sample {
    uint32_t shard;
    int64_t offset, size;  // of the image's data in the shard
    int64_t label;
    std::string member;  // the image's member name
  };
  TarShardSource(std::vector<std::string> shards, const ImageTransform& transform);

  std::vector<std::string> shards_;
  ImageTransform transform_;
  std::vector<Field> fields_;
  std::vector<Sample> samples_;
  uint64_t id_;
};

// WebDataset's split of a member name into key and extension (webdataset's base_plus_ext): the key
// is the path up to the first dot of the file name, the extension the rest, lower-cased. False for
// a name without a dot in its file name (WebDataset skips those).
bool split_key(const std::string& name, std::string* key, std::string* ext);

}  // namespace stallscope::loader
