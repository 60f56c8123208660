// libFuzzer target: the command line (cli/app.cc) parsed, never run. The input is the words after
// `stallscope`, one a line (at most 32). Whatever they are, parsing ends in help or version
// (exit 0, nothing on the usage stream), a command line that parsed (0), or one usage error:
// exit 2 and exactly one line `stallscope: ... (see '... --help')`.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/command.h"

namespace {

std::vector<std::string> words_of(std::string_view in) {
  std::vector<std::string> words = {"stallscope"};
  while (!in.empty() && words.size() <= 32) {
    const size_t nl = in.find('\n');
    words.emplace_back(in.substr(0, nl));
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  return words;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {  // help texts go to stdout: nobody reads them here
    return std::freopen("/dev/null", "w", stdout) != nullptr;
  }();
  (void)quiet;
  std::vector<std::string> words = words_of(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  char* text = nullptr;
  size_t len = 0;
  FILE* lines = open_memstream(&text, &len);
  if (lines == nullptr) return 0;
  FILE* before = stallscope::cli::usage_stream();
  stallscope::cli::usage_stream() = lines;
  const int rc = stallscope::cli::run_command_line(static_cast<int>(words.size()), argv.data(), /*execute=*/false);
  stallscope::cli::usage_stream() = before;
  std::fclose(lines);
  const std::string said(text, len);
  std::free(text);

  if (rc != 0 && rc != 2) std::abort();  // parsing knows no other outcome
  if (rc == 0 && !said.empty()) std::abort();
  if (rc == 2) {
    const size_t first_nl = said.find('\n');
    if (said.rfind("stallscope: ", 0) != 0 || first_nl != said.size() - 1) std::abort();  // one line
    if (said.size() < 10 || said.compare(said.size() - 10, 10, " --help')\n") != 0) std::abort();
  }
  return 0;
}
