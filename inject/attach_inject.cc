// Loading the collector into a running process and calling its attach entry points; see
// attach_inject.h.
#include "inject/attach_inject.h"

#include <dlfcn.h>
#include <time.h>

#include <memory>

#include "inject/remote_call.h"

namespace stallscope::attach {
namespace {

double mono_ms() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

}  // namespace

std::string inject(pid_t pid, const Payload& payload, const std::string& code, EntryPoints* entries) {
  const std::string& lib = payload.lib;
  std::string error;
  const uint64_t r_dlopen = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlopen"), &error);
  if (r_dlopen == 0) return error;
  const uint64_t r_dlsym = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlsym"), &error);
  if (r_dlsym == 0) return error;
  const uint64_t r_dlerror = remote_address_of(pid, ::dlsym(RTLD_DEFAULT, "dlerror"), &error);
  if (r_dlerror == 0) return error;

  const double t0 = mono_ms();
  std::unique_ptr<RemoteThread> t = RemoteThread::seize(pick_thread(pid), &error);
  if (!t) return error;
  const uint64_t a_lib = t->push_string(lib);
  const uint64_t a_begin = t->push_string("ss_attach_begin");
  const uint64_t a_end = t->push_string("ss_attach_end");
  const uint64_t a_shm = t->push_string(payload.shm);
  const uint64_t a_code = t->push_string(code);
  const std::string zeros(512, '\0');
  const uint64_t a_err = t->push(zeros.data(), zeros.size());
  if (!a_lib || !a_begin || !a_end || !a_shm || !a_code || !a_err) {
    t->detach(nullptr);
    return "cannot write into the memory of process " + std::to_string(pid);
  }
  uint64_t handle = 0;
  if (!t->call(r_dlopen, {a_lib, static_cast<uint64_t>(RTLD_NOW)}, &handle, &error)) return error;
  if (handle == 0) {
    uint64_t msg = 0;
    std::string why = "unknown reason";
    if (t->call(r_dlerror, {}, &msg, &error) && msg != 0) why = t->read_string(msg, 400);
    t->detach(nullptr);
    return "cannot load " + lib + " into process " + std::to_string(pid) + ": " + why;
  }
  if (!t->call(r_dlsym, {handle, a_begin}, &entries->begin, &error)) return error;
  if (!t->call(r_dlsym, {handle, a_end}, &entries->end, &error)) return error;
  if (entries->begin == 0 || entries->end == 0) {
    t->detach(nullptr);
    return lib + " has no attach entry points (an older build?); rebuild stallscope";
  }
  uint64_t rc = 0;
  if (!t->call(entries->begin, {a_shm, a_code, a_err, zeros.size()}, &rc, &error)) return error;
  if (static_cast<int>(rc) != 0) {
    const std::string why = t->read_string(a_err, 511);
    t->detach(nullptr);
    return why.empty() ? "the library refused to attach" : why;
  }
  if (!t->detach(&error)) return error;
  entries->paused_ms = mono_ms() - t0;
  return {};
}

std::string eject(pid_t pid, uint64_t end_fn, const std::string& code) {
  std::string error;
  std::unique_ptr<RemoteThread> t = RemoteThread::seize(pick_thread(pid), &error);
  if (!t) return error;
  const uint64_t a_code = t->push_string(code);
  const std::string zeros(512, '\0');
  const uint64_t a_err = t->push(zeros.data(), zeros.size());
  if (!a_code || !a_err) {
    t->detach(nullptr);
    return "cannot write into the memory of process " + std::to_string(pid);
  }
  uint64_t rc = 0;
  if (!t->call(end_fn, {a_code, a_err, zeros.size()}, &rc, &error)) return error;
  if (static_cast<int>(rc) != 0) {
    const std::string why = t->read_string(a_err, 511);
    t->detach(nullptr);
    return why;
  }
  if (!t->detach(&error)) return error;
  return {};
}

}  // namespace stallscope::attach
