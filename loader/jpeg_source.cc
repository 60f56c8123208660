// The ImageFolder and tar-shard sources (see jpeg_source.h): listing the samples, reading their
// bytes, and the per-thread decoder each worker thread keeps.
#include "loader/jpeg_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <utility>

#include "loader/tar_index.h"

namespace stallscope::loader {

const char* const kImageExtensions[9] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t next_source_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// Each loader thread keeps one decoder (libjpeg state, scratch buffers) and one read buffer for the
// source it last read; read() stays const and needs no lock.
struct ThreadScratch {
  uint64_t source = 0;
  std::unique_ptr<ImagePipeline> pipeline;
  std::vector<uint8_t> bytes;
};
ThreadScratch& scratch_for(uint64_t source, const ImageTransform& t) {
  thread_local ThreadScratch s;
  if (s.source != source || !s.pipeline) {
    s.pipeline = std::make_unique<ImagePipeline>(t);
    s.source = source;
  }
  return s;
}

std::vector<Field> image_fields(const ImageTransform& t) {
  Field image;
  image.name = "image";
  image.dtype = t.dtype();
  image.shape = t.shape();
  Field label;
  label.name = "label";
  label.dtype = DType::kInt64;
  return {image, label};
}

// Whether name ends with one of `exts` (lower case), ignoring case: has_file_allowed_extension.
bool has_extension(const std::string& name, std::initializer_list<const char*> exts) {
  std::string lower = name;
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const char* ext : exts) {
    size_t n = std::strlen(ext);
    if (lower.size() >= n && lower.compare(lower.size() - n, n, ext) == 0) return true;
  }
  return false;
}

bool has_image_extension(const std::string& name) {
  for (const char* ext : kImageExtensions) {
    if (has_extension(name, {ext})) return true;
  }
  return false;
}

struct DirEntry {
  std::string name;
  bool is_dir;  // following symbolic links, as os.scandir's is_dir() does
};

// The entries of `dir` ("." and ".." left out); false when it cannot be listed.
bool list_dir(const std::string& dir, std::vector<DirEntry>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    out->push_back({std::move(name), is_dir});
  }
  ::closedir(d);
  return true;
}

// os.walk(top, followlinks=True), as (folder, files) pairs in walk order. Folders that cannot be
// listed are left out (os.walk ignores errors by default). A folder reached twice through links
// is walked once: Python would loop until the path grows too long.
void walk(const std::string& top, std::set<std::pair<dev_t, ino_t>>* seen,
          std::vector<std::pair<std::string, std::vector<std::string>>>* out) {
  struct stat st {};
  if (::stat(top.c_str(), &st) != 0 || !seen->insert({st.st_dev, st.st_ino}).second) return;
  std::vector<DirEntry> entries;
  if (!list_dir(top, &entries)) return;
  std::vector<std::string> files, dirs;
  for (DirEntry& e : entries) (e.is_dir ? dirs : files).push_back(std::move(e.name));
  out->push_back({top, std::move(files)});
  for (const std::string& d : dirs) walk(top + "/" + d, seen, out);
}

Status read_file(const std::string& path, std::vector<uint8_t>* bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Error(std::string("cannot stat: ") + std::strerror(e));
  }
  bytes->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes->size()) {
    ssize_t n = ::pread(fd, bytes->data() + done, bytes->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return Status::Error(n < 0 ? std::string("read failed: ") + std::strerror(e) : "file shrank while read");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

// The transform of one image into dst[0] and its label into dst[1].
Status decode_sample(ThreadScratch& s, int64_t label, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) {
  Status st = s.pipeline->run(s.bytes, rng, dst[0], times);
  if (!st.ok()) return st;
  std::memcpy(dst[1], &label, sizeof label);
  return Status::Ok();
}

// Python's int() on the text of a .cls member: surrounding whitespace, an optional sign, digits.
bool parse_label(const std::string& text, int64_t* out) {
  size_t b = 0, e = text.size();
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (b < e && space(text[b])) ++b;
  while (e > b && space(text[e - 1])) --e;
  if (b == e) return false;
  bool negative = false;
  if (text[b] == '+' || text[b] == '-') negative = text[b++] == '-';
  if (b == e) return false;
  int64_t v = 0;
  for (size_t i = b; i < e; ++i) {
    char c = text[i];
    if (c == '_' && i > b && i + 1 < e && text[i - 1] != '_') continue;  // int("1_000") is 1000
    if (c < '0' || c > '9') return false;
    if (v > (INT64_MAX - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = negative ? -v : v;
  return true;
}

std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 32)) out += (c >= 32 && c < 127) ? c : '?';
  return s.size() > 32 ? out + "..." : out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ImageFolder

ImageFolderSource::ImageFolderSource(std::string root, const ImageTransform& transform)
    : root_(std::move(root)), transform_(transform), fields_(image_fields(transform)), id_(next_source_id()) {}

Result<std::unique_ptr<ImageFolderSource>> ImageFolderSource::open(const std::string& root,
                                                                   const ImageTransform& transform) {
  Status valid = transform.validate();
  if (!valid.ok()) return valid;
  std::string top = root;
  while (top.size() > 1 && top.back() == '/') top.pop_back();
  std::vector<DirEntry> entries;
  if (!list_dir(top, &entries)) return Status::Error(root + ": cannot list: " + std::strerror(errno));
  std::unique_ptr<ImageFolderSource> src(new ImageFolderSource(top, transform));
  for (const DirEntry& e : entries) {
    if (e.is_dir) src->classes_.push_back(e.name);
  }
  std::sort(src->classes_.begin(), src->classes_.end());
  if (src->classes_.empty())
    return Status::Error(root + ": no class folder in it (an ImageFolder needs root/class/image.jpg)");

  std::vector<std::string> empty;
  for (size_t c = 0; c < src->classes_.size(); ++c) {
    std::vector<std::pair<std::string, std::vector<std::string>>> folders;
    std::set<std::pair<dev_t, ino_t>> seen;
    walk(top + "/" + src->classes_[c], &seen, &folders);
    std::sort(folders.begin(), folders.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t before = src->samples_.size();
    for (auto& [folder, files] : folders) {
      std::sort(files.begin(), files.end());
      for (const std::string& f : files) {
        if (has_image_extension(f)) src->samples_.push_back({folder + "/" + f, static_cast<int64_t>(c)});
      }
    }
    if (src->samples_.size() == before) empty.push_back(src->classes_[c]);
  }
  src->find_first_non_jpeg();
  if (!empty.empty()) {
    std::string names;
    for (const std::string& n : empty) names += (names.empty() ? "" : ", ") + n;
    std::string exts;
    for (const char* e : kImageExtensions) exts += (exts.empty() ? "" : ", ") + std::string(e);
    return Status::Error(root + ": no image file for the classes " + names + " (extensions: " + exts + ")");
  }
  return src;
}

Result<std::unique_ptr<ImageFolderSource>> ImageFolderSource::from_samples(
    const std::string& root, std::vector<std::string> classes, std::vector<std::pair<std::string, int64_t>> samples,
    const ImageTransform& transform) {
  Status valid = transform.validate();
  if (!valid.ok()) return valid;
  if (samples.empty()) return Status::Error(root + ": the image folder has no sample");
  std::string top = root;
  while (top.size() > 1 && top.back() == '/') top.pop_back();
  std::unique_ptr<ImageFolderSource> src(new ImageFolderSource(top, transform));
  src->classes_ = std::move(classes);
  src->samples_.reserve(samples.size());
  for (auto& [path, label] : samples) src->samples_.push_back({std::move(path), label});
  src->find_first_non_jpeg();
  return src;
}

void ImageFolderSource::find_first_non_jpeg() {
  for (size_t i = 0; i < samples_.size() && first_non_jpeg_ < 0; ++i) {
    if (!has_extension(samples_[i].path, {".jpg", ".jpeg"})) first_non_jpeg_ = static_cast<int64_t>(i);
  }
}

Status ImageFolderSource::read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const {
  if (index < 0 || index >= size()) {
    return Status::Error(root_ + ": sample " + std::to_string(index) + " out of range (" + std::to_string(size()) +
                         ")");
  }
  const Sample& s = samples_[static_cast<size_t>(index)];
  ThreadScratch& scratch = scratch_for(id_, transform_);
  uint64_t t0 = now_ns();
  Status st = read_file(s.path, &scratch.bytes);
  if (times) times->read_ns += now_ns() - t0;
  if (st.ok()) st = decode_sample(scratch, s.label, dst, rng, times);
  if (!st.ok()) return Status::Error(s.path + " (sample " + std::to_string(index) + "): " + st.message());
  return Status::Ok();
}

std::string ImageFolderSource::describe(int64_t index) const {
  if (index < 0 || index >= size()) return root_ + " sample " + std::to_string(index);
  const std::string& path = samples_[static_cast<size_t>(index)].path;
  // Samples given by a caller may lie outside root: their whole path then.
  if (path.size() > root_.size() + 1 && path.compare(0, root_.size(), root_) == 0 && path[root_.size()] == '/')
    return path.substr(root_.size() + 1);
  return path;
}

// ---------------------------------------------------------------------------------------------
// Tar shards

bool split_key(const std::string& name, std::string* key, std::string* ext) {
  size_t slash = name.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;  // webdataset's [^.]+ needs a character
  *key = name.substr(0, dot);
  *ext = name.substr(dot + 1);
  for (char& c : *ext) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return true;
}

TarShardSource::TarShardSource(std::vector<std::string> shards, const ImageTransform& transform)
    : shards_(std::move(shards)), transform_(transform), fields_(image_fields(transform)), id_(next_source_id()) {}

Result<std::unique_ptr<TarShardSource>> TarShardSource::open(const std::vector<std::string>& shards,
                                                             const ImageTransform& transform) {
  Status valid = transform.validate();
  if (!valid.ok()) return valid;
  if (shards.empty()) return Status::Error("tar shards: no shard given");
  std::unique_ptr<TarShardSource> src(new TarShardSource(shards, transform));
  auto is_label = [](std::string_view name) { return name.size() > 4 && name.substr(name.size() - 4) == ".cls"; };
  for (size_t si = 0; si < shards.size(); ++si) {
    const std::string& shard = shards[si];
    Result<std::vector<TarMember>> members = index_tar(shard, is_label);
    if (!members.ok()) return members.status();

    // Members of one key are adjacent: a key ends where the next one starts.
    std::string key, image_member, label_member;
    const TarMember* image = nullptr;
    const TarMember* label = nullptr;
    auto finish = [&]() -> Status {
      if (key.empty()) return Status::Ok();
      if (!image) {
        return Status::Error(shard + ": key '" + key + "' has no .jpg member (member '" + (label ? label->name : key) +
                             "')");
      }
      if (!label) return Status::Error(shard + ": key '" + key + "' has no .cls member (member '" + image->name + "')");
      int64_t value = 0;
      if (!parse_label(label->contents, &value)) {
        return Status::Error(shard + ": member '" + label->name + "': label '" + printable(label->contents) +
                             "' is not an integer");
      }
      src->samples_.push_back({static_cast<uint32_t>(si), image->offset, image->size, value, image->name});
      return Status::Ok();
    };
    for (const TarMember& m : *members) {
      std::string k, ext;
      if (!split_key(m.name, &k, &ext)) continue;
      if (k != key) {
        Status st = finish();
        if (!st.ok()) return st;
        key = k;
        image = label = nullptr;
      }
      if (ext == "jpg" || ext == "jpeg" || ext == "cls") {
        const TarMember*& slot = ext == "cls" ? label : image;
        if (slot)
          return Status::Error(shard + ": member '" + m.name + "': key '" + key +
                               "' appears twice with that extension");
        slot = &m;
      }
    }
    Status st = finish();
    if (!st.ok()) return st;
  }
  if (src->samples_.empty())
    return Status::Error("tar shards: no sample (key.jpg + key.cls) in " + shards.front() +
                         (shards.size() > 1 ? " and the others" : ""));
  return src;
}

Status TarShardSource::read(int64_t index, std::span<std::byte* const> dst, Rng& rng, StageTimes* times) const {
  if (index < 0 || index >= size()) {
    return Status::Error("tar shards: sample " + std::to_string(index) + " out of range (" + std::to_string(size()) +
                         ")");
  }
  const Sample& s = samples_[static_cast<size_t>(index)];
  const std::string& shard = shards_[s.shard];
  ThreadScratch& scratch = scratch_for(id_, transform_);
  auto fail = [&](const std::string& what) {
    return Status::Error(shard + ": member '" + s.member + "' (sample " + std::to_string(index) + "): " + what);
  };
  uint64_t t0 = now_ns();
  // One open per read: a data set may have thousands of shards, more than a process's descriptors.
  int fd = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open the shard: ") + std::strerror(errno));
  scratch.bytes.resize(static_cast<size_t>(s.size));
  size_t done = 0;
  while (done < scratch.bytes.size()) {
    ssize_t n =
        ::pread(fd, scratch.bytes.data() + done, scratch.bytes.size() - done, static_cast<off_t>(s.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return fail(n < 0 ? std::string("read failed: ") + std::strerror(e)
                        : "the shard is shorter than when it was indexed");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (times) times->read_ns += now_ns() - t0;
  Status st = decode_sample(scratch, s.label, dst, rng, times);
  if (!st.ok()) return fail(st.message());
  return Status::Ok();
}

std::string TarShardSource::describe(int64_t index) const {
  if (index < 0 || index >= size()) return "tar shards sample " + std::to_string(index);
  const Sample& s = samples_[static_cast<size_t>(index)];
  return shards_[s.shard] + ":" + s.member;
}

}  // namespace stallscope::loader
