// libFuzzer target: the reference loader's tar shard index (libarchive behind loader/tar_index.h)
// on any bytes, written to a file first as the loader reads shards from files.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "loader/tar_index.h"
#include "tests/fuzz/scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = stallscope::fuzz::scratch_path("shard.tar");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  const bool written = ::write(fd, data, size) == static_cast<ssize_t>(size);
  ::close(fd);
  if (!written) return 0;
  auto members = stallscope::loader::index_tar(
      path, [](std::string_view name) { return name.ends_with(".cls") || name.ends_with(".txt"); });
  if (members.ok()) {
    for (const auto& m : *members) {
      if (m.size < 0 || m.contents.size() > 4096) std::abort();
    }
  }
  return 0;
}
