// Indexing an uncompressed tar (a WebDataset shard) once, so that its members can then be read at
// random with pread: libarchive reads the headers (ustar, pax and GNU long names alike), and the
// only file that includes archive.h is tar_index.cc. Compressed tars cannot be read at random and
// are refused with a message that says so.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace stallscope::loader {

struct TarMember {
  std::string name;    // the member's path inside the tar
  int64_t offset = 0;  // of its data in the file
  int64_t size = 0;
  std::string contents;  // filled for the members keep_contents() chose
};

// The regular files of the tar at `path`, in archive order. Members for which keep_contents(name)
// is true (small ones: labels) have their data read now; a kept member larger than
// max_kept_bytes is an error. Errors are one line naming the file and, when one is at fault, the
// member ("shard.tar: truncated tar archive after member 'a/017.jpg'").
Result<std::vector<TarMember>> index_tar(const std::string& path,
                                         const std::function<bool(std::string_view)>& keep_contents = nullptr,
                                         int64_t max_kept_bytes = 4096);

}  // namespace stallscope::loader
