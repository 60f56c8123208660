// A disk slow to sync, for tests/python/test_robustness.py: preloaded into the launcher, every
// fsync and fdatasync first sleeps SLOW_SYNC_MS milliseconds (default 300), as a busy or network
// disk can; SQLite syncs at each WAL checkpoint.
#include <dlfcn.h>
#include <time.h>

#include <cstdlib>

namespace {
void nap() {
  const char* s = std::getenv("SLOW_SYNC_MS");
  const long ms = s != nullptr ? std::atol(s) : 300;
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}
template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int fsync(int fd) {
  nap();
  return next<int (*)(int)>("fsync")(fd);
}

extern "C" __attribute__((visibility("default"))) int fdatasync(int fd) {
  nap();
  return next<int (*)(int)>("fdatasync")(fd);
}
