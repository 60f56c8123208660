// A batch's field as a DLPack capsule ("dltensor"), so PyTorch (torch.from_dlpack) gets a tensor
// over the pool slot without a copy. Only this file pair includes dlpack.h. Each capsule holds a
// reference to the slot; its deleter drops it — PyTorch calls the deleter when the tensor is
// freed, on whichever thread frees it, with or without the GIL, so the deleter touches no Python
// API. A capsule that is never consumed drops its reference when it is garbage-collected.
#pragma once

#include <Python.h>

#include <cstdint>

#include "loader/buffer_pool.h"
#include "loader/source.h"

namespace stallscope::loader {

// A new reference to a capsule over field `f` of `slot` holding `samples` rows of `field`; null
// with a Python error set on failure.
PyObject* field_capsule(const SlotRef& slot, size_t f, const Field& field, int64_t samples);

}  // namespace stallscope::loader
