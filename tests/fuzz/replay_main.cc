// A main() for the fuzz targets in builds without libFuzzer (gcc, the ASan and plain builds): runs
// the target once on every file of the corpus folders given, so each crash the fuzzer found, kept
// in tests/fuzz/corpus/, stays a regression test in every build.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> files;
    struct stat st;
    if (::stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 2;
    }
    if (S_ISDIR(st.st_mode)) {
      if (DIR* d = ::opendir(argv[i])) {
        while (const dirent* e = ::readdir(d)) {
          if (e->d_name[0] != '.') files.push_back(std::string(argv[i]) + "/" + e->d_name);
        }
        ::closedir(d);
      }
    } else {
      files.push_back(argv[i]);
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      const std::string bytes = s.str();
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++runs;
    }
  }
  std::printf("%zu inputs ran\n", runs);
  return runs > 0 ? 0 : 1;
}
