// libarchive behind index_tar (see tar_index.h). After archive_read_next_header the tar reader has
// consumed exactly the member's header blocks (pax and GNU long-name records included) and none of
// its data, so the uncompressed position archive_filter_bytes(a, 0) is where the data starts.
#include "loader/tar_index.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace stallscope::loader {
namespace {

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string one_line(const char* s) {
  std::string m = s ? s : "unknown error";
  for (char& c : m) {
    if (c == '\n') c = ' ';
  }
  // libarchive's first letter is upper case; ours follow "path: " in lower case.
  if (!m.empty() && m[0] >= 'A' && m[0] <= 'Z' && (m.size() < 2 || !(m[1] >= 'A' && m[1] <= 'Z')))
    m[0] = static_cast<char>(m[0] - 'A' + 'a');
  return m;
}

}  // namespace

Result<std::vector<TarMember>> index_tar(const std::string& path,
                                         const std::function<bool(std::string_view)>& keep_contents,
                                         int64_t max_kept_bytes) {
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return Status::Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error(path + ": not a regular file");
  unsigned char magic[2] = {0, 0};
  if (::pread(file.fd, magic, 2, 0) == 2) {
    if ((magic[0] == 0x1f && magic[1] == 0x8b) || (magic[0] == 'B' && magic[1] == 'Z') ||
        (magic[0] == 0xfd && magic[1] == '7') || (magic[0] == 0x28 && magic[1] == 0xb5)) {
      return Status::Error(path + ": compressed tar; shards must be uncompressed to be read at random");
    }
  }

  std::unique_ptr<archive, ArchiveDeleter> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_none(a.get());
  auto not_tar = [&](const std::string& what) { return Status::Error(path + ": not a tar archive (" + what + ")"); };
  if (archive_read_open_fd(a.get(), file.fd, 1 << 16) != ARCHIVE_OK) {
    return not_tar(one_line(archive_error_string(a.get())));
  }
  std::vector<TarMember> members;
  auto where = [&]() {
    return members.empty() ? std::string(" at the first member") : " after member '" + members.back().name + "'";
  };
  for (;;) {
    archive_entry* entry = nullptr;
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r == ARCHIVE_WARN) r = ARCHIVE_OK;  // e.g. a pax attribute libarchive does not know
    if (r != ARCHIVE_OK) {
      std::string what = one_line(archive_error_string(a.get()));
      if (members.empty() && what.find("nrecognized archive format") != std::string::npos) {
        return not_tar(what);
      }
      return Status::Error(path + ": " + what + where());
    }
    if (archive_entry_filetype(entry) != AE_IFREG) continue;  // directories, links
    TarMember m;
    const char* name = archive_entry_pathname(entry);
    m.name = name ? name : "";
    m.size = archive_entry_size(entry);
    m.offset = archive_filter_bytes(a.get(), 0);
    if (m.size < 0 || m.offset < 0 || m.offset + m.size > static_cast<int64_t>(st.st_size)) {
      return Status::Error(path + ": truncated tar archive: member '" + m.name + "' needs " + std::to_string(m.size) +
                           " bytes at offset " + std::to_string(m.offset) + ", the file has " +
                           std::to_string(st.st_size));
    }
    if (keep_contents && keep_contents(m.name)) {
      if (m.size > max_kept_bytes) {
        return Status::Error(path + ": member '" + m.name + "' is " + std::to_string(m.size) +
                             " bytes, more than the " + std::to_string(max_kept_bytes) + " expected");
      }
      m.contents.resize(static_cast<size_t>(m.size));
      la_ssize_t got = archive_read_data(a.get(), m.contents.data(), m.contents.size());
      if (got != static_cast<la_ssize_t>(m.size)) {
        return Status::Error(path + ": cannot read member '" + m.name +
                             "': " + one_line(got < 0 ? archive_error_string(a.get()) : "short read"));
      }
    }
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace stallscope::loader
