// The loader's events through libstallscope's C API, resolved at run time; see events.h.
#include "loader/events.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "common/vocabulary.h"

namespace stallscope::loader {
namespace {
int32_t clamp32(int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)); }
}  // namespace

bool Events::bind(const std::string& library_path) {
  if (bound()) return true;
  // The copy the process loaded (ctypes loads it RTLD_LOCAL: only its own handle finds the
  // symbols); a preloaded copy is in the global scope.
  void* handle = nullptr;
  if (!library_path.empty() && library_path.front() == '/')
    handle = dlopen(library_path.c_str(), RTLD_NOLOAD | RTLD_NOW);
  if (handle == nullptr) handle = RTLD_DEFAULT;
  auto sym = [handle](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
    return fn != nullptr;
  };
  SpanBeginArgs begin = nullptr;
  const bool ok = sym(span_end_, "ss_span_end") && sym(span_end_args_, "ss_span_end_args") &&
                  sym(instant_, "ss_instant") && sym(intern_, "ss_intern") && sym(thread_name_, "ss_thread_name") &&
                  sym(is_recording_, "ss_is_recording") && sym(span_empty_, "ss_span_empty") &&
                  sym(begin, "ss_span_begin_args");
  if (!ok) {
    span_end_ = nullptr;
    span_empty_ = nullptr;
    span_end_args_ = nullptr;
    instant_ = nullptr;
    intern_ = nullptr;
    thread_name_ = nullptr;
    is_recording_ = nullptr;
    return false;
  }
  span_begin_args_ = begin;
  bound_.store(true, std::memory_order_release);  // last: a thread that sees it sees the pointers
  return true;
}

// Ids are stored with release and loaded with acquire: a thread that sees an id also sees the
// function pointers bind() wrote before it (the copy watcher may have started before the first
// recorded epoch bound them).
void Events::intern() {
  if (!bound()) return;
  auto id = [this](vocab::Event e) { return intern_(std::string(vocab::name_of(e)).c_str()); };
  sent_.store(id(vocab::Event::kDlSent), std::memory_order_release);
  fetch_.store(id(vocab::Event::kDlFetch), std::memory_order_release);
  stages_.store(id(vocab::Event::kDlStages), std::memory_order_release);
  collate_.store(id(vocab::Event::kDlCollate), std::memory_order_release);
  put_.store(id(vocab::Event::kDlPut), std::memory_order_release);
  copy_.store(id(vocab::Event::kDlCopy), std::memory_order_release);
}

bool Events::recording() const { return bound() && is_recording_() != 0; }

void Events::sent(int64_t loader, int64_t batch, int32_t worker) const {
  if (const uint32_t id = sent_.load(std::memory_order_acquire)) instant_(id, loader, clamp32(batch), worker);
}

bool Events::fetch_begin(int64_t loader, int64_t batch, int32_t worker) const {
  const uint32_t id = fetch_.load(std::memory_order_acquire);
  if (id != 0) span_begin_args_(id, loader, clamp32(batch), worker);
  return id != 0;
}

void Events::fetch_end() const {
  if (bound()) span_end_();
}

void Events::stages(int64_t read_us, int64_t decode_us, int64_t augment_us) const {
  if (const uint32_t id = stages_.load(std::memory_order_acquire)) {
    instant_(id, read_us, clamp32(decode_us), clamp32(augment_us));
  }
}

void Events::collate(int64_t loader, int64_t batch, int64_t samples) const {
  if (const uint32_t id = collate_.load(std::memory_order_acquire)) {
    span_empty_(id, loader, clamp32(batch), clamp32(samples));
  }
}

void Events::put(int64_t loader, int64_t batch, int32_t worker) const {
  if (const uint32_t id = put_.load(std::memory_order_acquire)) instant_(id, loader, clamp32(batch), worker);
}

bool Events::copy_begin(int64_t loader, int64_t batch, int64_t bytes) const {
  const uint32_t id = copy_.load(std::memory_order_acquire);
  if (id != 0) span_begin_args_(id, bytes, clamp32(loader), clamp32(batch));
  return id != 0;
}

void Events::copy_end() const {
  if (bound()) span_end_();
}

void Events::thread_name(const std::string& name) const {
  if (bound()) thread_name_(name.c_str());
}

}  // namespace stallscope::loader
