// DLPack capsules over pool slots; see dlpack_export.h.
#include "loader/python/dlpack_export.h"

#include <dlpack/dlpack.h>

#include <new>
#include <vector>

namespace stallscope::loader {
namespace {

// DLPack 0.6 (Debian's) predates kDLBool (0.8); PyTorch reads code 6 as bool.
constexpr uint8_t kBoolCode = 6;

DLDataType dl_dtype(DType t) {
  DLDataType d{};
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::kUInt8: d.code = kDLUInt; break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: d.code = kDLInt; break;
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64: d.code = kDLFloat; break;
    case DType::kBool: d.code = kBoolCode; break;
  }
  return d;
}

// The capsule's tensor, with the shape arrays it points to and the slot it keeps.
struct Export {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  SlotRef slot;
};

void delete_export(DLManagedTensor* m) { delete static_cast<Export*>(m->manager_ctx); }

// Runs when the capsule is collected. A consumer that took the tensor renamed the capsule
// ("used_dltensor") and owns the deleter call; otherwise it is ours to call.
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // a pending exception must survive the collection
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  PyErr_Restore(type, value, traceback);
}

}  // namespace

PyObject* field_capsule(const SlotRef& slot, size_t f, const Field& field, int64_t samples) {
  auto* e = new (std::nothrow) Export();
  if (e == nullptr) return PyErr_NoMemory();
  e->slot = slot;
  e->shape.push_back(samples);
  e->shape.insert(e->shape.end(), field.shape.begin(), field.shape.end());
  e->strides.assign(e->shape.size(), 1);
  for (size_t d = e->shape.size() - 1; d > 0; --d) e->strides[d - 1] = e->strides[d] * e->shape[d];
  DLTensor& t = e->managed.dl_tensor;
  t.data = slot->field(f);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(e->shape.size());
  t.dtype = dl_dtype(field.dtype);
  t.shape = e->shape.data();
  t.strides = e->strides.data();
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_export;
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
  if (capsule == nullptr) delete e;
  return capsule;
}

}  // namespace stallscope::loader
