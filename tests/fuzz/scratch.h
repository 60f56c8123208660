// Scratch files of a fuzz target or corpus replay: one path per name and process under /tmp,
// removed (with SQLite's -wal and -shm beside it, or a directory with its contents) when the
// process exits normally: libFuzzer's time or run limit, or the end of a replay. A crash leaves
// them, beside the input that caused it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <system_error>

namespace stallscope::fuzz {

inline const std::string& scratch_path(const std::string& name) {
  struct Paths {
    std::map<std::string, std::string> by_name;
    ~Paths() {
      for (const auto& [name, path] : by_name) {
        std::error_code ec;
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove_all(path + suffix, ec);
      }
    }
  };
  static Paths paths;
  auto it = paths.by_name.find(name);
  if (it == paths.by_name.end()) {
    it = paths.by_name.emplace(name, "/tmp/stallscope-fuzz-" + std::to_string(::getpid()) + "-" + name).first;
  }
  return it->second;
}

}  // namespace stallscope::fuzz
