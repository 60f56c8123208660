// _stallscope_loader: the Python binding of the reference loader (python/stallscope/
// reference_loader.py is its only user; the API users see is there). Thin: sources (arrays, .npy
// files, JPEGs in an ImageFolder tree or tar shards, with the native ImageTransform), the Loader's
// calls, and batches as DLPack capsules (dlpack_export.h). The GIL is released for every call
// that waits or does native work: opening files, starting and stopping threads, waiting for a
// batch. A wait for a batch wakes every 100 ms to let Ctrl-C through (PyErr_CheckSignals).
// Errors reach Python as LoaderError (a RuntimeError) whose message names the file and the sample
// index; a state of other settings is refused with ValueError. No C++ exception crosses into
// Python other than through pybind11's translation.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "common/cpus.h"
#include "loader/array_source.h"
#include "loader/image_ops.h"
#include "loader/jpeg_source.h"
#include "loader/loader.h"
#include "loader/npy_source.h"
#include "loader/python/dlpack_export.h"

namespace py = pybind11;

namespace stallscope::loader {
namespace {

struct LoaderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A source with what keeps its memory alive (the arrays of an ArraySource).
struct PySource {
  std::shared_ptr<Source> source;
  py::object keepalive;
};

// What one batch's capsules hold: the slot, for watch_copy.
struct PyLease {
  SlotRef slot;
};

// A source for tests: sample i is the int64 i (and `width` float32 copies of it); sample
// `fail_at` fails naming `name`; every read sleeps `delay_us` times (1 + index % 4) / 4, so
// batches finish out of order.
class SyntheticSource : public Source {
 public:
  SyntheticSource(int64_t n, int64_t fail_at, int64_t delay_us, std::string name, int64_t width)
      : n_(n), fail_at_(fail_at), delay_us_(delay_us), name_(std::move(name)) {
    fields_.push_back(Field{"index", DType::kInt64, {}});
    fields_.push_back(Field{"value", DType::kFloat32, {width}});
  }
  int64_t size() const override { return n_; }
  const std::vector<Field>& fields() const override { return fields_; }
  Status read(int64_t index, std::span<std::byte* const> dst, Rng&, StageTimes*) const override {
    if (delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_ * (1 + index % 4) / 4));
    if (index == fail_at_) return Status::Error(describe(index) + ": injected failure");
    std::memcpy(dst[0], &index, sizeof index);
    auto* v = reinterpret_cast<float*>(dst[1]);
    for (int64_t i = 0; i < fields_[1].shape[0]; ++i) v[i] = static_cast<float>(index);
    return Status::Ok();
  }
  std::string describe(int64_t index) const override { return name_ + " sample " + std::to_string(index); }
  std::string kind() const override { return "synthetic"; }

 private:
  int64_t n_, fail_at_, delay_us_;
  std::string name_;
  std::vector<Field> fields_;
};

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kFloat16,
                  DType::kFloat32, DType::kFloat64, DType::kBool}) {
    if (name == dtype_name(t)) return t;
  }
  throw py::value_error("dtype " + name + " is not supported by the reference loader");
}

// ImageTransform's enums by the names reference_loader.py uses.
const char* crop_name(ImageTransform::Crop c) {
  return c == ImageTransform::Crop::kRandomResized ? "random_resized_crop" : "resize_center_crop";
}
ImageTransform::Crop crop_from(const std::string& name) {
  if (name == "random_resized_crop") return ImageTransform::Crop::kRandomResized;
  if (name == "resize_center_crop") return ImageTransform::Crop::kResizeCenter;
  throw py::value_error("crop must be 'random_resized_crop' or 'resize_center_crop', not '" + name + "'");
}
const char* layout_name(ImageTransform::Layout l) {
  switch (l) {
    case ImageTransform::Layout::kUInt8HWC: return "uint8_hwc";
    case ImageTransform::Layout::kUInt8CHW: return "uint8_chw";
    case ImageTransform::Layout::kFloat32CHW: break;
  }
  return "float32_chw";
}
ImageTransform::Layout layout_from(const std::string& name) {
  if (name == "uint8_hwc") return ImageTransform::Layout::kUInt8HWC;
  if (name == "uint8_chw") return ImageTransform::Layout::kUInt8CHW;
  if (name == "float32_chw") return ImageTransform::Layout::kFloat32CHW;
  throw py::value_error("layout must be 'uint8_hwc', 'uint8_chw' or 'float32_chw', not '" + name + "'");
}

// The JPEG sources' own settings, for ReferenceLoader (classes) and `stallscope run --loader`
// (whether a tree holds files that are not JPEG by their name).
const ImageFolderSource* image_folder(const PySource& s) {
  return dynamic_cast<const ImageFolderSource*>(s.source.get());
}
const ImageTransform* transform_of(const PySource& s) {
  if (const auto* f = image_folder(s)) return &f->transform();
  if (const auto* t = dynamic_cast<const TarShardSource*>(s.source.get())) return &t->transform();
  return nullptr;
}

py::list fields_of(const Source& s) {
  py::list out;
  for (const Field& f : s.fields()) out.append(py::make_tuple(f.name, dtype_name(f.dtype), f.shape));
  return out;
}

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

class PyLoader {
 public:
  PyLoader(py::object source, const LoaderOptions& o) : source_obj_(std::move(source)) {
    auto& src = source_obj_.cast<PySource&>();
    Result<std::unique_ptr<Loader>> r = [&] {
      py::gil_scoped_release nogil;  // pinned allocation can take a while
      return Loader::create(src.source, o);
    }();
    if (!r.ok()) throw py::value_error(r.status().message());
    loader_ = std::move(r.value());
  }
  ~PyLoader() {
    // Joins the threads and waits for pending copies: without the GIL, unless Python is going
    // down (then no other thread may take it anyway).
    if (!python_finalizing()) {
      py::gil_scoped_release nogil;
      loader_.reset();
    } else {
      loader_.reset();
    }
  }

  Loader& get() { return *loader_; }

  // (B, W, samples, [capsule per field], lease) of the next batch; None at the end of the epoch.
  py::object next(int64_t token) {
    for (;;) {
      Pipeline::Next n;
      {
        py::gil_scoped_release nogil;
        n = loader_->next(token, std::chrono::milliseconds(100));
      }
      if (n.got == Pipeline::Got::kTimeout) {
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        continue;
      }
      return to_python(std::move(n));
    }
  }

  // As next(), but False at once when the next batch is not ready.
  py::object try_next(int64_t token) {
    Pipeline::Next n;
    {
      py::gil_scoped_release nogil;
      n = loader_->next(token, std::chrono::milliseconds(0));
    }
    if (n.got == Pipeline::Got::kTimeout) return py::bool_(false);
    return to_python(std::move(n));
  }

 private:
  py::object to_python(Pipeline::Next n) {
    if (n.got == Pipeline::Got::kEnd) return py::none();
    if (n.got == Pipeline::Got::kError) throw LoaderError(n.error.message());
    const std::vector<Field>& fields = loader_->source().fields();
    py::list capsules;
    for (size_t f = 0; f < fields.size(); ++f) {
      PyObject* c = field_capsule(n.batch.slot, f, fields[f], n.batch.samples);
      if (c == nullptr) throw py::error_already_set();
      capsules.append(py::reinterpret_steal<py::object>(c));
    }
    py::object lease = py::cast(PyLease{n.batch.slot});
    return py::make_tuple(n.batch.index, n.batch.worker, n.batch.samples, capsules, lease);
  }

  py::object source_obj_;  // declared first: outlives loader_, whose threads read the source
  std::unique_ptr<Loader> loader_;
};

py::dict state_dict(const SamplerState& s) {
  py::dict d;
  d["epoch"] = s.epoch;
  d["batches_handed"] = s.batches_handed;
  d["dataset_len"] = s.options.dataset_len;
  d["batch_size"] = s.options.batch_size;
  d["shuffle"] = s.options.shuffle;
  d["seed"] = s.options.seed;
  d["drop_last"] = s.options.drop_last;
  d["rank"] = s.options.rank;
  d["world_size"] = s.options.world_size;
  d["fingerprint"] = s.fingerprint;
  return d;
}

SamplerState state_from(const py::dict& d) {
  auto get = [&d](const char* key) -> py::object {
    if (!d.contains(key)) throw py::value_error(std::string("cannot resume: the state has no '") + key + "'");
    return d[key];
  };
  SamplerState s;
  try {
    s.epoch = get("epoch").cast<int64_t>();
    s.batches_handed = get("batches_handed").cast<int64_t>();
    s.options.dataset_len = get("dataset_len").cast<int64_t>();
    s.options.batch_size = get("batch_size").cast<int64_t>();
    s.options.shuffle = get("shuffle").cast<bool>();
    s.options.seed = get("seed").cast<uint64_t>();
    s.options.drop_last = get("drop_last").cast<bool>();
    s.options.rank = get("rank").cast<int64_t>();
    s.options.world_size = get("world_size").cast<int64_t>();
    s.fingerprint = get("fingerprint").cast<uint64_t>();
  } catch (const py::cast_error&) {
    throw py::value_error("cannot resume: the state holds a value of the wrong type");
  }
  return s;
}

}  // namespace
}  // namespace stallscope::loader

PYBIND11_MODULE(_stallscope_loader, m) {
  using namespace stallscope;
  using namespace stallscope::loader;
  m.doc() = "Native core of stallscope.ReferenceLoader (use that class, not this module).";
  py::register_exception<LoaderError>(m, "LoaderError", PyExc_RuntimeError);

  py::class_<PySource>(m, "Source")
      .def_property_readonly("kind", [](const PySource& s) { return s.source->kind(); })
      .def_property_readonly("size", [](const PySource& s) { return s.source->size(); })
      .def_property_readonly("fields", [](const PySource& s) { return fields_of(*s.source); })
      .def("describe", [](const PySource& s, int64_t i) { return s.source->describe(i); })
      // ImageFolder: its class names (None for other sources), and the first sample whose name
      // is not .jpg/.jpeg (-1: none).
      .def_property_readonly("classes",
                             [](const PySource& s) -> py::object {
                               const ImageFolderSource* f = image_folder(s);
                               return f ? py::cast(f->classes()) : py::none();
                             })
      .def_property_readonly("first_non_jpeg",
                             [](const PySource& s) -> int64_t {
                               const ImageFolderSource* f = image_folder(s);
                               return f ? f->first_non_jpeg_name() : -1;
                             })
      .def_property_readonly("transform", [](const PySource& s) -> py::object {
        const ImageTransform* t = transform_of(s);
        return t ? py::cast(*t) : py::none();
      });

  py::class_<PyLease>(m, "Lease");

  py::class_<ImageTransform>(m, "ImageTransform")
      .def(py::init<>())
      .def_property(
          "crop", [](const ImageTransform& t) { return crop_name(t.crop); },
          [](ImageTransform& t, const std::string& v) { t.crop = crop_from(v); })
      .def_readwrite("out_h", &ImageTransform::out_h)
      .def_readwrite("out_w", &ImageTransform::out_w)
      .def_readwrite("scale_min", &ImageTransform::scale_min)
      .def_readwrite("scale_max", &ImageTransform::scale_max)
      .def_readwrite("ratio_min", &ImageTransform::ratio_min)
      .def_readwrite("ratio_max", &ImageTransform::ratio_max)
      .def_readwrite("resize_short", &ImageTransform::resize_short)
      .def_readwrite("resize_h", &ImageTransform::resize_h)
      .def_readwrite("resize_w", &ImageTransform::resize_w)
      .def_readwrite("flip_p", &ImageTransform::flip_p)
      .def_property(
          "layout", [](const ImageTransform& t) { return layout_name(t.layout); },
          [](ImageTransform& t, const std::string& v) { t.layout = layout_from(v); })
      .def_readwrite("norm_mean", &ImageTransform::norm_mean)
      .def_readwrite("norm_std", &ImageTransform::norm_std)
      .def_property_readonly("shape", &ImageTransform::shape)
      .def_property_readonly("dtype", [](const ImageTransform& t) { return dtype_name(t.dtype()); })
      .def("describe", &ImageTransform::describe)
      .def("validate", [](const ImageTransform& t) {
        Status st = t.validate();
        if (!st.ok()) throw py::value_error(st.message());
      });

  // arrays: [(name, dtype name, shape, data address)]; keepalive: what owns the memory.
  m.def(
      "array_source",
      [](const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>, uintptr_t>>& arrays,
         py::object keepalive) {
        std::vector<ArrayField> fields;
        for (const auto& [name, dtype, shape, address] : arrays) {
          fields.push_back(
              ArrayField{name, dtype_from_name(dtype), shape, reinterpret_cast<const std::byte*>(address)});
        }
        Result<std::unique_ptr<ArraySource>> r = ArraySource::create(std::move(fields));
        if (!r.ok()) throw py::value_error(r.status().message());
        return PySource{std::shared_ptr<Source>(std::move(r.value())), std::move(keepalive)};
      },
      py::arg("arrays"), py::arg("keepalive"));

  m.def(
      "npy_source",
      [](const std::vector<std::string>& paths) {
        Result<std::unique_ptr<NpySource>> r = [&] {
          py::gil_scoped_release nogil;
          return NpySource::open(paths);
        }();
        if (!r.ok()) throw LoaderError(r.status().message());
        return PySource{std::shared_ptr<Source>(std::move(r.value())), py::none()};
      },
      py::arg("paths"));

  // JPEG sources: errors in listing or indexing (a malformed tar, a class without an image) are
  // LoaderError naming the file; a bad transform is ValueError.
  auto jpeg_source = [](auto open) {
    Result<std::unique_ptr<Source>> r = [&]() -> Result<std::unique_ptr<Source>> {
      py::gil_scoped_release nogil;
      auto opened = open();
      if (!opened.ok()) return opened.status();
      return std::unique_ptr<Source>(std::move(opened.value()));
    }();
    if (!r.ok()) throw LoaderError(r.status().message());
    return PySource{std::shared_ptr<Source>(std::move(r.value())), py::none()};
  };
  m.def(
      "image_folder_source",
      [jpeg_source](const std::string& root, const ImageTransform& t) {
        Status valid = t.validate();
        if (!valid.ok()) throw py::value_error(valid.message());
        return jpeg_source([&] { return ImageFolderSource::open(root, t); });
      },
      py::arg("root"), py::arg("transform"));
  m.def(
      "image_samples_source",
      [jpeg_source](const std::string& root, std::vector<std::string> classes,
                    std::vector<std::pair<std::string, int64_t>> samples, const ImageTransform& t) {
        Status valid = t.validate();
        if (!valid.ok()) throw py::value_error(valid.message());
        return jpeg_source(
            [&] { return ImageFolderSource::from_samples(root, std::move(classes), std::move(samples), t); });
      },
      py::arg("root"), py::arg("classes"), py::arg("samples"), py::arg("transform"));
  m.def(
      "tar_shard_source",
      [jpeg_source](const std::vector<std::string>& shards, const ImageTransform& t) {
        Status valid = t.validate();
        if (!valid.ok()) throw py::value_error(valid.message());
        return jpeg_source([&] { return TarShardSource::open(shards, t); });
      },
      py::arg("shards"), py::arg("transform"));

  m.def(
      "synthetic_source",
      [](int64_t n, int64_t fail_at, int64_t delay_us, const std::string& name, int64_t width) {
        return PySource{std::make_shared<SyntheticSource>(n, fail_at, delay_us, name, width), py::none()};
      },
      py::arg("n"), py::arg("fail_at") = -1, py::arg("delay_us") = 0, py::arg("name") = "synthetic",
      py::arg("width") = 4);

  m.def("cpu_budget", [] {
    const cpus::Budget b = cpus::budget();
    py::dict d;
    d["affinity"] = b.affinity;
    d["quota"] = b.quota ? py::cast(*b.quota) : py::none();
    d["usable"] = b.usable;
    d["default_threads"] = std::max(1, b.usable - 1);
    return d;
  });

  py::class_<PyLoader>(m, "Loader")
      .def(py::init([](py::object source, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last, int64_t rank,
                       int64_t world_size, int threads, int prefetch, bool pin_memory, int64_t loader_id) {
             if (!py::isinstance<PySource>(source)) throw py::type_error("source must be a _stallscope_loader.Source");
             LoaderOptions o;
             o.batch_size = batch_size;
             o.shuffle = shuffle;
             o.seed = seed;
             o.drop_last = drop_last;
             o.rank = rank;
             o.world_size = world_size;
             o.threads = threads;
             o.prefetch = prefetch;
             o.pin_memory = pin_memory;
             o.loader_id = loader_id;
             return std::make_unique<PyLoader>(std::move(source), o);
           }),
           py::arg("source"), py::arg("batch_size"), py::arg("shuffle"), py::arg("seed"), py::arg("drop_last"),
           py::arg("rank"), py::arg("world_size"), py::arg("threads"), py::arg("prefetch"), py::arg("pin_memory"),
           py::arg("loader_id"))
      .def_property_readonly("threads", [](PyLoader& l) { return l.get().options().threads; })
      .def_property_readonly("prefetch", [](PyLoader& l) { return l.get().options().prefetch; })
      .def_property_readonly("dataset_len", [](PyLoader& l) { return l.get().dataset_len(); })
      .def_property_readonly("batches_per_epoch", [](PyLoader& l) { return l.get().batches_per_epoch(); })
      .def_property_readonly("pinned", [](PyLoader& l) { return l.get().pool().pinned(); })
      .def_property_readonly("pin_note", [](PyLoader& l) { return l.get().pool().note(); })
      .def_property_readonly("loader_id", [](PyLoader& l) { return l.get().options().loader_id; })
      .def("set_loader_id",
           [](PyLoader& l, int64_t id) {
             py::gil_scoped_release nogil;
             l.get().set_loader_id(id);
           })
      .def("bind_events",
           [](PyLoader& l, const std::string& path) {
             py::gil_scoped_release nogil;
             return l.get().bind_events(path);
           })
      .def("set_epoch", [](PyLoader& l, int64_t e) { l.get().set_epoch(e); })
      .def("begin_epoch",
           [](PyLoader& l) {
             Result<Loader::EpochStart> r = [&] {
               py::gil_scoped_release nogil;
               return l.get().begin_epoch();
             }();
             if (!r.ok()) throw LoaderError(r.status().message());
             return py::make_tuple(r->epoch, r->first_batch, r->token);
           })
      .def("next", &PyLoader::next, py::arg("token"))
      .def("try_next", &PyLoader::try_next, py::arg("token"))
      .def("handed", [](PyLoader& l, int64_t token, int64_t n) { l.get().handed(token, n); })
      .def(
          "stop",
          [](PyLoader& l, int64_t token) {
            py::gil_scoped_release nogil;
            l.get().stop(token);
          },
          py::arg("token") = -1)
      .def("state", [](PyLoader& l) { return state_dict(l.get().state()); })
      .def("load_state",
           [](PyLoader& l, const py::dict& d) {
             const SamplerState s = state_from(d);
             Status st;
             {
               py::gil_scoped_release nogil;
               st = l.get().load_state(s);
             }
             if (!st.ok()) throw py::value_error(st.message());
           })
      .def("watch_copy",
           [](PyLoader& l, const PyLease& lease, int device, uintptr_t stream, int64_t batch, int64_t bytes) {
             Status st = l.get().watch_copy(lease.slot, device, stream, batch, bytes);
             if (!st.ok()) throw LoaderError(st.message());
           })
      .def("copies_pending", [](PyLoader& l) { return l.get().copies_pending(); })
      .def("pool_stats", [](PyLoader& l) {
        const BufferPool& p = l.get().pool();
        py::dict d;
        d["slots"] = p.slots();
        d["free"] = p.free_slots();
        d["grown"] = p.grown();
        d["allocations"] = p.allocations();
        d["bytes"] = p.bytes();
        d["pinned"] = p.pinned();
        return d;
      });
}
