// A test program using NVTX v3 (header-only, as PyTorch and CUDA libraries do): nested push/pop
// ranges in the default domain and in a named domain, a registered string, marks, a start/end
// range ended on another thread, and a thread name.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

int main() {
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), "nvtx-main");
  nvtxDomainHandle_t domain = nvtxDomainCreateA("my_library");
  nvtxStringHandle_t registered = nvtxDomainRegisterStringA(domain, "registered_range");
  for (int i = 0; i < 10; ++i) {
    nvtxRangePushA("outer");
    nvtxEventAttributes_t a = {};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 7;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "inner";
    nvtxDomainRangePushEx(domain, &a);
    usleep(100);
    nvtxDomainRangePop(domain);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = registered;
    nvtxDomainRangePushEx(domain, &a);
    nvtxDomainRangePop(domain);
    nvtxRangePop();
  }
  nvtxMarkA("checkpoint");
  nvtxRangeId_t id = nvtxRangeStartA("async_range");
  std::thread t([id] { nvtxRangeEnd(id); });
  t.join();
  const int unmatched = nvtxRangePop();  // nothing open: NVTX reports a negative level
  std::printf("nvtx_emitter: done (unmatched pop %s)\n", unmatched < 0 ? "negative" : "non-negative");
  return 0;
}
