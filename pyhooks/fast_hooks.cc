// _stallscope_hooks: the per-batch DataLoader hooks of the training process's main thread in C
// (python/stallscope/hooks/_fast.py loads it; _main.py keeps the same hooks in Python as the
// fallback). Three callables, each wrapping one torch callable and emitting the events of its
// Python twin with the same arguments, in the same order:
//   MethodHook _BaseDataLoaderIter.__next__  -> _main._it_next (dl.next, dl.cpu, dl.parallel, dl.epoch_end,
//                                             the multi-process hand-off of _main._handed)
//              _MultiProcessingDataLoaderIter._try_put_index, _get_data
//                                          -> _main._mp_try_put_index, _mp_get_data (dl.sent, dl.recv)
//   SpanCall   fetcher.fetch / collate_fn    -> _main._instrument_fetcher (dl.fetch, dl.collate; in
//                                             place on the batches next() chose: _main._spans_wanted)
// In light GPU mode, __next__ also calls ss_gpu_mark at the start and end of torch's next().
// The collector's functions are resolved from the libstallscope.so the process already loaded
// (bind()), and called directly: no ctypes on the per-batch path. The wrapped callable runs
// untouched; its result and its exception (type, value, traceback) pass through unchanged, and
// this module adds no frame to the traceback. Our own bookkeeping never raises: a failure there is
// cleared, as the Python hooks swallow theirs.
#include <Python.h>
#include <dlfcn.h>
#include <structmember.h>
#include <time.h>

#include <cstdint>

#include "stallscope/stallscope.h"

namespace {

// ---------------------------------------------------------------------------------------------
// [SECTION] The collector's C API, resolved once by bind()

using SpanBeginArgsFn = decltype(&ss_span_begin_args);
using SpanEndFn = decltype(&ss_span_end);
using SpanEndArgsFn = decltype(&ss_span_end_args);
using InstantFn = decltype(&ss_instant);
using GpuMarkFn = decltype(&ss_gpu_mark);
using ParallelTotalsFn = decltype(&ss_parallel_totals);

SpanBeginArgsFn g_span_begin_args = nullptr;
SpanEndFn g_span_end = nullptr;
SpanEndArgsFn g_span_end_args = nullptr;
InstantFn g_instant = nullptr;
GpuMarkFn g_gpu_mark = nullptr;  // light GPU mode only (ss_gpu_marks_wanted()); else null
ParallelTotalsFn g_parallel_totals = nullptr;

// Event ids of the current session (set_ids(), from hooks/_state.refresh_ids()).
uint32_t g_next = 0, g_fetch = 0, g_collate = 0, g_cpu = 0, g_epoch_end = 0, g_sent = 0, g_recv = 0, g_parallel = 0,
         g_parallel_next = 0;
// dl.cpu sampling (_main._cpu_last, _main._marks): a next() call is marked when the process's CPU
// time was read at the end of the call before it (armed), and the hooks arm at the end of a call
// when g_mark_gap_ns have passed since they last armed: every call on loops slower than the gap,
// about one per gap on faster ones. g_cpu_last: that CPU time (-1: none yet).
int64_t g_cpu_last = -1;
bool g_armed = true;  // the first call is marked (its arg2 is -1)
int64_t g_armed_at = 0;
int64_t g_mark_gap_ns = 1'000'000;
// dl.parallel (_main._par_last): the parallel-region totals (ss_parallel_totals) read where the hooks
// last armed, beside g_cpu_last.
struct ParTotals {
  uint64_t v[3] = {0, 0, 0};  // regions, their wall ns, their bodies' ns
  bool ok = false;
};
ParTotals g_par_last;

ParTotals par_totals() {
  ParTotals t;
  if (g_parallel_totals != nullptr) {
    g_parallel_totals(t.v);
    t.ok = true;
  }
  return t;
}

// Interned attribute names.
PyObject* s_stallscope_it = nullptr;
PyObject* s_num_yielded = nullptr;
PyObject* s_task_info = nullptr;
PyObject* s_last_it = nullptr;
PyObject* s_L = nullptr;
PyObject* s_E = nullptr;
PyObject* s_B = nullptr;
PyObject* s_ctx = nullptr;
PyObject* s_mp = nullptr;
PyObject* s_ended = nullptr;
PyObject* s_recv = nullptr;
PyObject* s_send_idx = nullptr;
PyObject* s_in_reset = nullptr;
PyObject* s_N = nullptr;
PyObject* s_spans = nullptr;
PyObject* s_toggle = nullptr;

// An exception held aside while our bookkeeping runs, then restored exactly as it was.
struct SavedError {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exc = PyErr_GetRaisedException();
  void restore() { PyErr_SetRaisedException(exc); }
#else
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  SavedError() { PyErr_Fetch(&type, &value, &tb); }
  void restore() { PyErr_Restore(type, value, tb); }
#endif
};

// ctypes' conversion of a Python int to c_int64 / c_int32: the low bits, no overflow error.
bool as_i64(PyObject* o, int64_t* out) {
  if (o == nullptr || !PyLong_Check(o)) return false;
  const unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

PyObject* new_ref(PyObject* o) {  // Py_NewRef is Python 3.10's
  Py_INCREF(o);
  return o;
}

int32_t i32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v))); }

// Python's // for the microsecond conversions of _main._cpu_mark.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t clock_ns(clockid_t id) {  // time.process_time_ns / time.thread_time_ns on Linux
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Attribute `name` of `o` as an int64; false (error cleared) when missing or not an int.
bool attr_i64(PyObject* o, PyObject* name, int64_t* out) {
  PyObject* v = PyObject_GetAttr(o, name);
  const bool ok = as_i64(v, out);
  Py_XDECREF(v);
  if (!ok) PyErr_Clear();
  return ok;
}

// Truth of attribute `name` of `o`: 1, 0, or -1 (error cleared).
int attr_true(PyObject* o, PyObject* name) {
  PyObject* v = PyObject_GetAttr(o, name);
  const int t = v != nullptr ? PyObject_IsTrue(v) : -1;
  Py_XDECREF(v);
  if (t < 0) PyErr_Clear();
  return t;
}

// ---------------------------------------------------------------------------------------------
// [SECTION] Slot: a field of hooks/_state's _ItState or _FetchCtx, which keep them in __slots__.
// Where an object's type is one whose field `name` is a plain slot (a writable object member, the
// type's attribute access the generic one), the field is read and written at its offset, as the
// slot's descriptor does, without the attribute lookup: about 20 ns each, a dozen per batch. Any
// other type goes through PyObject_GetAttr / PyObject_SetAttr. One Slot per field and call site's
// class, so that its cached type does not change from call to call.
struct Slot {
  PyObject* const* name;
  PyTypeObject* type = nullptr;   // a strong reference: the type whose offset is known
  PyTypeObject* plain = nullptr;  // the latest type found without such a slot (compared only)
  Py_ssize_t off = 0;
};

void slot_learn(PyTypeObject* t, Slot& s) {
  s.plain = t;
  if (t->tp_getattro != PyObject_GenericGetAttr || t->tp_setattro != PyObject_GenericSetAttr) return;
  PyObject* d = PyObject_GetAttr(reinterpret_cast<PyObject*>(t), *s.name);
  if (d == nullptr) {
    PyErr_Clear();
    return;
  }
  if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
    const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(d)->d_member;
    if (m->type == T_OBJECT_EX && (m->flags & READONLY) == 0 && m->offset > 0) {
      Py_INCREF(t);
      Py_XDECREF(s.type);
      s.type = t;
      s.off = m->offset;
      s.plain = nullptr;
    }
  }
  Py_DECREF(d);
}

PyObject** slot_at(PyObject* o, Slot& s) {
  PyTypeObject* t = Py_TYPE(o);
  if (t != s.type && t != s.plain) slot_learn(t, s);
  return t == s.type ? reinterpret_cast<PyObject**>(reinterpret_cast<char*>(o) + s.off) : nullptr;
}

// A new reference to the field, or nullptr with Python's error (an unset slot: its AttributeError).
PyObject* slot_get(PyObject* o, Slot& s) {
  PyObject** at = slot_at(o, s);
  if (at != nullptr && *at != nullptr) return new_ref(*at);
  return PyObject_GetAttr(o, *s.name);
}

int slot_set(PyObject* o, Slot& s, PyObject* v) {
  PyObject** at = slot_at(o, s);
  if (at == nullptr) return PyObject_SetAttr(o, *s.name, v);
  PyObject* old = *at;
  *at = new_ref(v);
  Py_XDECREF(old);
  return 0;
}

bool slot_i64(PyObject* o, Slot& s, int64_t* out) {
  PyObject* v = slot_get(o, s);
  const bool ok = as_i64(v, out);
  Py_XDECREF(v);
  if (!ok) PyErr_Clear();
  return ok;
}

int slot_true(PyObject* o, Slot& s) {
  PyObject* v = slot_get(o, s);
  const int t = v != nullptr ? PyObject_IsTrue(v) : -1;
  Py_XDECREF(v);
  if (t < 0) PyErr_Clear();
  return t;
}

// The fields read on every batch: of the iterator's _ItState, and of the fetcher's _FetchCtx.
Slot it_L{&s_L}, it_E{&s_E}, it_ctx{&s_ctx}, it_mp{&s_mp};
Slot ctx_L{&s_L}, ctx_B{&s_B}, ctx_N{&s_N}, ctx_spans{&s_spans}, ctx_toggle{&s_toggle};

// _main._spans_wanted: whether batch B's fetch and collate spans are recorded, given whether its
// next() call is marked and the epoch's batches when their sizes are all known (N, else -1).
bool spans_wanted(bool marked, int64_t B, int64_t N) { return marked || N < 0 || B == 0 || B >= N - 1; }

int64_t ctx_n(PyObject* ctx) {
  int64_t N = -1;
  return slot_i64(ctx, ctx_N, &N) ? N : -1;
}

// _main._it_next's ctx.toggle(want) where the fetcher's wrappers' state (ctx.spans) differs from
// `want`: about twice a millisecond on a fast loop, never on a slow one. A failure leaves the
// wrappers as they are (error cleared).
void span_toggle(PyObject* ctx, bool want) {
  PyObject* cur = slot_get(ctx, ctx_spans);
  if (cur != nullptr && (cur == Py_True) != want) {
    PyObject* toggle = slot_get(ctx, ctx_toggle);
    if (toggle != nullptr && toggle != Py_None) {
      PyObject* arg = want ? Py_True : Py_False;
      Py_XDECREF(PyObject_Vectorcall(toggle, &arg, 1, nullptr));
    }
    Py_XDECREF(toggle);
  }
  Py_XDECREF(cur);
  PyErr_Clear();
}

// The clocks a dl.next span's end needs (_main._cpu_end), read before the span ends: a CPU-clock
// read is a system call, and at its return the scheduler may hand the core to another thread whose
// turn has come (on a machine with more runnable threads than cores). Read inside the span, that
// wait counts where the script's own clock around next() puts it, not in the step after it; the
// reads at the start come after the span begins for the same reason (docs/decisions.md).
struct CpuEnd {
  int64_t t1 = -1;  // this thread's CPU time (marked calls only)
  int64_t c1 = -1;  // the process's (marked calls, and unmarked ones that arm)
  ParTotals par;    // the parallel-region totals, read with c1
  int64_t now = 0;
  bool due = false;  // arm the next call
};

CpuEnd cpu_end(int64_t c0) {
  CpuEnd e;
  e.now = clock_ns(CLOCK_MONOTONIC);
  e.due = g_mark_gap_ns <= 0 || e.now - g_armed_at >= g_mark_gap_ns;
  if (c0 >= 0) e.t1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (c0 >= 0 || e.due) {
    e.c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    e.par = par_totals();
  }
  return e;
}

// _main._cpu_mark: after a dl.next span, dl.cpu when the call was marked (c0 >= 0: its CPU clocks
// were read at its start, and p0 the parallel-region totals), dl.parallel when regions ran in the
// step before it and dl.parallel_next when they ran inside the call; then arming for the next call
// when due.
void cpu_mark(int64_t c0, int64_t t0, const ParTotals& p0, const CpuEnd& e) {
  if (c0 >= 0) {
    const int64_t mine = floor_div(e.t1 - t0, 1000);
    int64_t others = floor_div(e.c1 - c0, 1000) - mine;
    if (others < 0) others = 0;
    const int64_t between = g_cpu_last >= 0 ? floor_div(c0 - g_cpu_last, 1000) : -1;
    g_instant(g_cpu, others, i32(mine), i32(between));
    if (g_cpu_last >= 0 && p0.ok && g_par_last.ok && p0.v[0] > g_par_last.v[0]) {
      // The times are converted from the TSC's ticks at each read: early on, one read's rate may
      // differ from the next by a little, so a difference is taken as 0 rather than below it.
      auto us = [&](int k) {
        return p0.v[k] > g_par_last.v[k] ? static_cast<int64_t>((p0.v[k] - g_par_last.v[k]) / 1000) : 0;
      };
      g_instant(g_parallel, us(2), i32(us(1)), i32(static_cast<int64_t>(p0.v[0] - g_par_last.v[0])));
    }
    // dl.parallel_next: the regions inside the call itself (the fetch without workers).
    if (p0.ok && e.par.ok && e.par.v[0] > p0.v[0]) {
      auto us = [&](int k) { return e.par.v[k] > p0.v[k] ? static_cast<int64_t>((e.par.v[k] - p0.v[k]) / 1000) : 0; };
      g_instant(g_parallel_next, us(2), i32(us(1)), i32(static_cast<int64_t>(e.par.v[0] - p0.v[0])));
    }
  }
  g_armed = e.due;
  if (g_armed) {
    g_cpu_last = e.c1;
    g_par_last = e.par;
    g_armed_at = e.now;
  }
}

// _main._handed: the batch just handed by a multi-process iterator, the one received but no longer
// in _task_info. Returns false (error cleared) where the Python twin would raise.
bool handed(PyObject* it, PyObject* s, int64_t dflt, int64_t* out) {
  *out = dflt;
  PyObject* recv = PyObject_GetAttr(s, s_recv);
  if (recv == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool ok = true;
  const int nonempty = PyObject_IsTrue(recv);
  if (nonempty < 0) {
    ok = false;
  } else if (nonempty) {
    PyObject* ti = PyObject_GetAttr(it, s_task_info);
    PyObject* iter = ti != nullptr ? PyObject_GetIter(recv) : nullptr;
    PyObject* found = nullptr;
    if (iter != nullptr) {
      while (PyObject* i = PyIter_Next(iter)) {
        const int in = PySequence_Contains(ti, i);
        if (in == 0) {
          found = i;
          break;
        }
        Py_DECREF(i);
        if (in < 0) break;
      }
    }
    Py_XDECREF(iter);
    if (PyErr_Occurred()) {
      ok = false;
    } else if (found != nullptr) {
      int64_t b = 0;
      PyObject* discard = PyObject_CallMethod(recv, "discard", "O", found);
      if (discard == nullptr || !as_i64(found, &b)) {
        ok = false;
      } else {
        *out = b;
      }
      Py_XDECREF(discard);
    }
    Py_XDECREF(found);
    Py_XDECREF(ti);
  }
  Py_DECREF(recv);
  if (!ok) PyErr_Clear();
  return ok;
}

// ---------------------------------------------------------------------------------------------
// [SECTION] MethodHook: _BaseDataLoaderIter.__next__ (and, below, the multi-process iterator's
// _try_put_index and _get_data): a method descriptor, one type with a vectorcall per method

struct MethodHook {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* orig;   // torch's method
  PyObject* state;  // __next__: hooks/_state's module dict (its _last_it); _get_data: the stop marker class
  PyObject* dict;   // __wrapped__, __name__, ... (functools.wraps)
};

PyObject* next_call_orig(MethodHook* h, PyObject* self) { return PyObject_Vectorcall(h->orig, &self, 1, nullptr); }

// The iterator's _ItState (a new reference), or nullptr (error cleared). Read as
// object.__getattribute__ does (hooks/_state.it_state), never through the iterator's __dict__:
// asking for it makes CPython move the instance's inline values into a dict for good, and torch's
// own attribute reads on the iterator slower. Where the type's attribute access is the generic one,
// a missing attribute raises nothing (an iterator we do not follow costs no exception per batch).
PyObject* it_state(PyObject* self) {
  PyObject* s = nullptr;
  if (Py_TYPE(self)->tp_getattro == PyObject_GenericGetAttr) {
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(self, s_stallscope_it, &s) < 0) PyErr_Clear();
#else
    if (_PyObject_LookupAttr(self, s_stallscope_it, &s) < 0) PyErr_Clear();
#endif
    return s;
  }
  s = PyObject_GenericGetAttr(self, s_stallscope_it);
  if (s == nullptr) PyErr_Clear();
  return s;
}

PyObject* next_run(MethodHook* h, PyObject* self) {
  PyObject* s = it_state(self);
  if (s == nullptr || s == Py_None) {  // an iterator we do not follow
    Py_XDECREF(s);
    return next_call_orig(h, self);
  }
  // Our bookkeeping only: on failure, run next() unrecorded (never twice).
  int64_t L = 0, E = 0, B = 0;
  PyObject* b_obj = nullptr;
  bool ok = slot_i64(s, it_L, &L) && slot_i64(s, it_E, &E);
  if (ok) {
    b_obj = PyObject_GetAttr(self, s_num_yielded);
    ok = as_i64(b_obj, &B);
  }
  if (ok) {
    PyObject* ctx = slot_get(s, it_ctx);
    ok = ctx != nullptr && (ctx == Py_None || slot_set(ctx, ctx_B, b_obj) == 0);
    if (ok && ctx != Py_None) span_toggle(ctx, spans_wanted(g_armed, B, ctx_n(ctx)));
    Py_XDECREF(ctx);
  }
  Py_XDECREF(b_obj);
  if (!ok) {
    PyErr_Clear();
    Py_DECREF(s);
    return next_call_orig(h, self);
  }
  g_span_begin_args(g_next, L, i32(B), i32(E));
  if (g_gpu_mark != nullptr) g_gpu_mark(1);
  const bool marked = g_armed;  // its clocks are read inside the span (cpu_end)
  const int64_t c0 = marked ? clock_ns(CLOCK_PROCESS_CPUTIME_ID) : -1;
  const int64_t t0 = marked ? clock_ns(CLOCK_THREAD_CPUTIME_ID) : -1;
  const ParTotals p0 = marked ? par_totals() : ParTotals{};

  PyObject* data = next_call_orig(h, self);
  if (g_gpu_mark != nullptr) g_gpu_mark(2);  // touches no Python state: an exception set stays as it is
  if (data == nullptr) {
    const bool stop = PyErr_ExceptionMatches(PyExc_StopIteration);
    SavedError saved;
    if (stop) {
      const CpuEnd ce = cpu_end(c0);
      g_span_end_args(L, -1, i32(E));
      cpu_mark(c0, t0, p0, ce);
      const int ended = attr_true(s, s_ended);
      if (ended == 0 && PyObject_SetAttr(s, s_ended, Py_True) == 0) {
        int64_t n = 0;
        if (attr_i64(self, s_num_yielded, &n)) g_instant(g_epoch_end, L, i32(E), i32(n));
      }
    } else {
      g_armed = false;  // the call raised: no mark, and the next call's arg2 would span this one
      int64_t ignored = 0;
      const int mp = slot_true(s, it_mp);
      if (mp >= 0 && (mp == 0 || handed(self, s, -1, &ignored))) g_span_end_args(L, -1, i32(E));
    }
    PyErr_Clear();
    saved.restore();
    Py_DECREF(s);
    return nullptr;
  }
  const CpuEnd ce = cpu_end(c0);
  const int mp = slot_true(s, it_mp);
  bool handed_ok = mp == 0;
  if (mp > 0) {
    int64_t b = B;
    handed_ok = handed(self, s, B, &b);
    if (handed_ok) g_span_end_args(L, i32(b), i32(E));
  } else if (mp == 0) {
    g_span_end();  // the batch handed is the one begun with: keep the begin's arguments
  }
  if (handed_ok && PyDict_SetItem(h->state, s_last_it, s) == 0) {
    cpu_mark(c0, t0, p0, ce);
  } else {
    PyErr_Clear();
    g_armed = false;
  }
  Py_DECREF(s);
  return data;
}

PyObject* next_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* h = reinterpret_cast<MethodHook*>(callable);
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)) {
    // Not next(it): hand the call to torch's function as it came (its own TypeError, if any).
    return PyObject_Vectorcall(h->orig, args, nargsf, kwnames);
  }
  return next_run(h, args[0]);
}

// _main._mp_try_put_index: dl.sent when torch sent an index (its _send_idx moved).
PyObject* sent_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* h = reinterpret_cast<MethodHook*>(callable);
  PyObject* self = PyVectorcall_NARGS(nargsf) >= 1 ? args[0] : nullptr;
  PyObject* before = self != nullptr ? PyObject_GetAttr(self, s_send_idx) : nullptr;
  if (before == nullptr) {
    PyErr_Clear();
    return PyObject_Vectorcall(h->orig, args, nargsf, kwnames);
  }
  PyObject* r = PyObject_Vectorcall(h->orig, args, nargsf, kwnames);
  if (r == nullptr) {
    Py_DECREF(before);
    return nullptr;
  }
  PyObject* after = PyObject_GetAttr(self, s_send_idx);
  const int moved = after != nullptr ? PyObject_RichCompareBool(after, before, Py_NE) : -1;
  Py_XDECREF(after);
  PyObject* s = moved > 0 ? it_state(self) : nullptr;
  if (s != nullptr && s != Py_None) {
    PyObject* ti = PyObject_GetAttr(self, s_task_info);
    PyObject* info = ti != nullptr ? PyObject_GetItem(ti, before) : nullptr;
    PyObject* w = info != nullptr ? PySequence_GetItem(info, 0) : nullptr;
    int64_t L = 0, b = 0, wid = 0;
    if (w != nullptr && attr_i64(s, s_L, &L) && as_i64(before, &b) && as_i64(w, &wid)) {
      g_instant(g_sent, L, i32(b), i32(wid));
    }
    Py_XDECREF(w);
    Py_XDECREF(info);
    Py_XDECREF(ti);
  }
  Py_XDECREF(s);
  Py_DECREF(before);
  PyErr_Clear();  // our bookkeeping's failures only: r is torch's result
  return r;
}

// _main._mp_get_data: dl.recv for a batch taken off the result queue (not while _reset drains).
PyObject* recv_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* h = reinterpret_cast<MethodHook*>(callable);
  PyObject* r = PyObject_Vectorcall(h->orig, args, nargsf, kwnames);
  if (r == nullptr || PyVectorcall_NARGS(nargsf) < 1) return r;
  PyObject* self = args[0];
  PyObject* s = it_state(self);
  if (s != nullptr && s != Py_None && attr_true(s, s_in_reset) == 0) {
    PyObject* idx = PySequence_GetItem(r, 0);
    PyObject* data = idx != nullptr ? PySequence_GetItem(r, 1) : nullptr;
    const int stop = data != nullptr ? PyObject_IsInstance(data, h->state) : -1;
    if (stop == 0 && PyLong_CheckExact(idx)) {
      PyObject* recv = PyObject_GetAttr(s, s_recv);
      PyObject* added = recv != nullptr ? PyObject_CallMethod(recv, "add", "O", idx) : nullptr;
      PyObject* ti = added != nullptr ? PyObject_GetAttr(self, s_task_info) : nullptr;
      PyObject* info = ti != nullptr ? PyObject_CallMethod(ti, "get", "O", idx) : nullptr;
      int64_t L = 0, b = 0, wid = -1;
      bool ok = info != nullptr && attr_i64(s, s_L, &L) && as_i64(idx, &b);
      const int has = ok ? PyObject_IsTrue(info) : -1;
      if (has > 0) {
        PyObject* w = PySequence_GetItem(info, 0);
        ok = as_i64(w, &wid);
        Py_XDECREF(w);
      }
      if (ok && has >= 0) g_instant(g_recv, L, i32(b), i32(wid));
      Py_XDECREF(info);
      Py_XDECREF(ti);
      Py_XDECREF(added);
      Py_XDECREF(recv);
    }
    Py_XDECREF(data);
    Py_XDECREF(idx);
  }
  Py_XDECREF(s);
  PyErr_Clear();  // our bookkeeping's failures only: r is torch's result
  return r;
}

// ---------------------------------------------------------------------------------------------
// [SECTION] SpanCall: fetcher.fetch (dl.fetch) and fetcher.collate_fn (dl.collate)

enum SpanKind : int { kFetch = 0, kCollate = 1, kCollateOne = 2 };  // kCollateOne: auto_collation off

struct SpanCall {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* orig;  // torch's fetch or collate_fn
  PyObject* ctx;   // the fetcher's _FetchCtx (L, B)
  int kind;
  PyObject* dict;
};

PyObject* span_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* c = reinterpret_cast<SpanCall*>(callable);
  bool begun = false;
  int64_t L = -1, B = 0;
  if (slot_i64(c->ctx, ctx_L, &L) && L >= 0 && slot_i64(c->ctx, ctx_B, &B)) {
    if (c->kind == kFetch) {
      g_span_begin_args(g_fetch, L, i32(B), -1);
      begun = true;
    } else {
      Py_ssize_t n = 1;
      if (c->kind == kCollate) n = PyVectorcall_NARGS(nargsf) >= 1 ? PyObject_Size(args[0]) : -1;
      if (n >= 0) {
        g_span_begin_args(g_collate, L, i32(B), i32(n));
        begun = true;
      } else {
        PyErr_Clear();
      }
    }
  }
  PyObject* r = PyObject_Vectorcall(c->orig, args, nargsf, kwnames);
  if (begun) g_span_end();
  return r;
}

// ---------------------------------------------------------------------------------------------
// [SECTION] The two types: method descriptor (MethodHook), plain callable (SpanCall), both with a
// __dict__ for functools.wraps, both tracked by the garbage collector (a fetcher holds its
// SpanCall, which holds the fetcher's bound methods).

template <typename T>
int hook_traverse(PyObject* o, visitproc visit, void* arg) {
  auto* h = reinterpret_cast<T*>(o);
  Py_VISIT(Py_TYPE(o));
  Py_VISIT(h->orig);
  Py_VISIT(h->dict);
  if constexpr (requires { h->ctx; }) Py_VISIT(h->ctx);
  if constexpr (requires { h->state; }) Py_VISIT(h->state);
  return 0;
}

template <typename T>
int hook_clear(PyObject* o) {
  auto* h = reinterpret_cast<T*>(o);
  Py_CLEAR(h->orig);
  Py_CLEAR(h->dict);
  if constexpr (requires { h->ctx; }) Py_CLEAR(h->ctx);
  if constexpr (requires { h->state; }) Py_CLEAR(h->state);
  return 0;
}

template <typename T>
void hook_dealloc(PyObject* o) {
  PyTypeObject* tp = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  hook_clear<T>(o);
  tp->tp_free(o);
  Py_DECREF(tp);
}

PyObject* hook_call(PyObject* o, PyObject* args, PyObject* kwargs) { return PyVectorcall_Call(o, args, kwargs); }

PyObject* next_descr_get(PyObject* self, PyObject* obj, PyObject* /*type*/) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

template <typename T>
PyMemberDef* hook_members() {
  static PyMemberDef members[] = {
      {"__vectorcalloffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(T, vectorcall)), READONLY, nullptr},
      {"__dictoffset__", T_PYSSIZET, static_cast<Py_ssize_t>(offsetof(T, dict)), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr},
  };
  return members;
}

PyGetSetDef g_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

template <typename F>
void* slot(F f) {
  return reinterpret_cast<void*>(f);
}

PyType_Slot g_next_slots[] = {
    {Py_tp_doc, const_cast<char*>("DataLoader iterator __next__ recording dl.next (stallscope)")},
    {Py_tp_call, slot(hook_call)},
    {Py_tp_descr_get, slot(next_descr_get)},
    {Py_tp_traverse, slot(hook_traverse<MethodHook>)},
    {Py_tp_clear, slot(hook_clear<MethodHook>)},
    {Py_tp_dealloc, slot(hook_dealloc<MethodHook>)},
    {Py_tp_members, hook_members<MethodHook>()},
    {Py_tp_getset, g_getset},
    {0, nullptr},
};

PyType_Slot g_span_slots[] = {
    {Py_tp_doc, const_cast<char*>("DataLoader fetch or collate_fn recording dl.fetch / dl.collate (stallscope)")},
    {Py_tp_call, slot(hook_call)},
    {Py_tp_traverse, slot(hook_traverse<SpanCall>)},
    {Py_tp_clear, slot(hook_clear<SpanCall>)},
    {Py_tp_dealloc, slot(hook_dealloc<SpanCall>)},
    {Py_tp_members, hook_members<SpanCall>()},
    {Py_tp_getset, g_getset},
    {0, nullptr},
};

constexpr unsigned long kHookFlags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;

PyType_Spec g_next_spec = {"_stallscope_hooks.MethodHook", static_cast<int>(sizeof(MethodHook)), 0,
                           static_cast<unsigned int>(kHookFlags | Py_TPFLAGS_METHOD_DESCRIPTOR), g_next_slots};
PyType_Spec g_span_spec = {"_stallscope_hooks.SpanCall", static_cast<int>(sizeof(SpanCall)), 0,
                           static_cast<unsigned int>(kHookFlags), g_span_slots};

PyObject* g_next_type = nullptr;
PyObject* g_span_type = nullptr;

// ---------------------------------------------------------------------------------------------
// [SECTION] Module functions

bool bound() { return g_span_begin_args != nullptr; }

PyObject* no_bind() {
  PyErr_SetString(PyExc_RuntimeError, "_stallscope_hooks: bind() has not succeeded");
  return nullptr;
}

// bind(library_path or None): resolve the collector's functions from the copy the process loaded
// (ctypes loads it RTLD_LOCAL: only its own handle finds the symbols; a preloaded copy is global).
PyObject* mod_bind(PyObject* /*m*/, PyObject* arg) {
  void* handle = nullptr;
  if (arg != Py_None) {
    const char* path = PyUnicode_AsUTF8(arg);
    if (path == nullptr) return nullptr;
    if (path[0] == '/') handle = dlopen(path, RTLD_NOLOAD | RTLD_NOW);
  }
  if (handle == nullptr) handle = RTLD_DEFAULT;
  auto* begin = reinterpret_cast<SpanBeginArgsFn>(dlsym(handle, "ss_span_begin_args"));
  auto* end = reinterpret_cast<SpanEndFn>(dlsym(handle, "ss_span_end"));
  auto* end_args = reinterpret_cast<SpanEndArgsFn>(dlsym(handle, "ss_span_end_args"));
  auto* instant = reinterpret_cast<InstantFn>(dlsym(handle, "ss_instant"));
  if (begin == nullptr || end == nullptr || end_args == nullptr || instant == nullptr) {
    PyErr_SetString(PyExc_OSError, "libstallscope.so is not loaded in this process (ss_span_begin_args not found)");
    return nullptr;
  }
  g_span_begin_args = begin;
  g_span_end = end;
  g_span_end_args = end_args;
  g_instant = instant;
  g_parallel_totals = reinterpret_cast<ParallelTotalsFn>(dlsym(handle, "ss_parallel_totals"));
  auto* marks_wanted = reinterpret_cast<int (*)()>(dlsym(handle, "ss_gpu_marks_wanted"));
  g_gpu_mark = marks_wanted != nullptr && marks_wanted() == 1
                   ? reinterpret_cast<GpuMarkFn>(dlsym(handle, "ss_gpu_mark"))
                   : nullptr;
  Py_RETURN_NONE;
}

// set_ids(next, fetch, collate, cpu, epoch_end, sent, recv, parallel, parallel_next): the session's event ids (0:
// not recording).
PyObject* mod_set_ids(PyObject* /*m*/, PyObject* const* args, Py_ssize_t n) {
  constexpr Py_ssize_t kIds = 9;
  if (n != kIds) {
    PyErr_SetString(PyExc_TypeError, "set_ids() takes 9 ids");
    return nullptr;
  }
  uint32_t ids[kIds];
  for (Py_ssize_t i = 0; i < kIds; ++i) {
    const unsigned long v = PyLong_AsUnsignedLong(args[i]);
    if (v == static_cast<unsigned long>(-1) && PyErr_Occurred()) return nullptr;
    ids[i] = static_cast<uint32_t>(v);
  }
  g_next = ids[0];
  g_fetch = ids[1];
  g_collate = ids[2];
  g_cpu = ids[3];
  g_epoch_end = ids[4];
  g_sent = ids[5];
  g_recv = ids[6];
  g_parallel = ids[7];
  g_parallel_next = ids[8];
  Py_RETURN_NONE;
}

// set_mark_gap(ns): dl.cpu sampling's gap (_state.MARK_GAP_NS; 0: every next() call).
PyObject* mod_set_mark_gap(PyObject* /*m*/, PyObject* arg) {
  const long long v = PyLong_AsLongLong(arg);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  g_mark_gap_ns = v;
  Py_RETURN_NONE;
}

PyObject* method_hook(vectorcallfunc call, PyObject* orig, PyObject* state) {
  if (!bound()) return no_bind();
  auto* tp = reinterpret_cast<PyTypeObject*>(g_next_type);
  auto* h = PyObject_GC_New(MethodHook, tp);
  if (h == nullptr) return nullptr;
  h->vectorcall = call;
  h->orig = new_ref(orig);
  h->state = new_ref(state);
  h->dict = nullptr;
  PyObject_GC_Track(h);
  return reinterpret_cast<PyObject*>(h);
}

// next_hook(orig_next, state_dict) -> MethodHook
PyObject* mod_next_hook(PyObject* /*m*/, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 || !PyCallable_Check(args[0]) || !PyDict_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "next_hook(orig_next, state_dict)");
    return nullptr;
  }
  return method_hook(next_vectorcall, args[0], args[1]);
}

// sent_hook(orig_try_put_index) -> MethodHook
PyObject* mod_sent_hook(PyObject* /*m*/, PyObject* orig) {
  if (!PyCallable_Check(orig)) {
    PyErr_SetString(PyExc_TypeError, "sent_hook(orig_try_put_index)");
    return nullptr;
  }
  return method_hook(sent_vectorcall, orig, Py_None);
}

// recv_hook(orig_get_data, stop_marker_class) -> MethodHook
PyObject* mod_recv_hook(PyObject* /*m*/, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 || !PyCallable_Check(args[0]) || !PyType_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "recv_hook(orig_get_data, stop_marker_class)");
    return nullptr;
  }
  return method_hook(recv_vectorcall, args[0], args[1]);
}

// span_call(orig, ctx, kind) -> SpanCall; kind 0 fetch, 1 collate (size of the batch's list),
// 2 collate without auto_collation (one sample).
PyObject* mod_span_call(PyObject* /*m*/, PyObject* const* args, Py_ssize_t n) {
  long kind = -1;
  if (n == 3) kind = PyLong_AsLong(args[2]);
  if (n != 3 || !PyCallable_Check(args[0]) || kind < kFetch || kind > kCollateOne) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "span_call(orig, ctx, kind 0..2)");
    return nullptr;
  }
  if (!bound()) return no_bind();
  auto* tp = reinterpret_cast<PyTypeObject*>(g_span_type);
  auto* c = PyObject_GC_New(SpanCall, tp);
  if (c == nullptr) return nullptr;
  c->vectorcall = span_vectorcall;
  c->orig = new_ref(args[0]);
  c->ctx = new_ref(args[1]);
  c->kind = static_cast<int>(kind);
  c->dict = nullptr;
  PyObject_GC_Track(c);
  return reinterpret_cast<PyObject*>(c);
}

PyMethodDef g_methods[] = {
    {"bind", mod_bind, METH_O, "bind(library_path or None): resolve libstallscope's functions"},
    {"set_ids", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mod_set_ids)), METH_FASTCALL,
     "set_ids(next, fetch, collate, cpu, epoch_end, sent, recv, parallel, parallel_next)"},
    {"set_mark_gap", mod_set_mark_gap, METH_O, "set_mark_gap(ns): dl.cpu sampling's gap (0: every next() call)"},
    {"next_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mod_next_hook)), METH_FASTCALL,
     "next_hook(orig_next, state_dict): the dl.next wrapper of _BaseDataLoaderIter.__next__"},
    {"sent_hook", mod_sent_hook, METH_O, "sent_hook(orig): the dl.sent wrapper of _try_put_index"},
    {"recv_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mod_recv_hook)), METH_FASTCALL,
     "recv_hook(orig, stop_marker_class): the dl.recv wrapper of _get_data"},
    {"span_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(mod_span_call)), METH_FASTCALL,
     "span_call(orig, ctx, kind): the dl.fetch (0) / dl.collate (1, 2 one sample) wrapper"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef g_module = {PyModuleDef_HEAD_INIT,
                        "_stallscope_hooks",
                        "stallscope's per-batch DataLoader hooks in C (python/stallscope/hooks/_fast.py)",
                        -1,
                        g_methods,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr};

bool intern_names() {
  struct Name {
    PyObject** slot;
    const char* text;
  };
  const Name names[] = {
      {&s_stallscope_it, "_stallscope_it"},
      {&s_num_yielded, "_num_yielded"},
      {&s_task_info, "_task_info"},
      {&s_last_it, "_last_it"},
      {&s_L, "L"},
      {&s_E, "E"},
      {&s_B, "B"},
      {&s_ctx, "ctx"},
      {&s_mp, "mp"},
      {&s_ended, "ended"},
      {&s_recv, "recv"},
      {&s_send_idx, "_send_idx"},
      {&s_in_reset, "in_reset"},
      {&s_N, "N"},
      {&s_spans, "spans"},
      {&s_toggle, "toggle"},
  };
  for (const Name& n : names) {
    if (*n.slot == nullptr) *n.slot = PyUnicode_InternFromString(n.text);
    if (*n.slot == nullptr) return false;
  }
  return true;
}

}  // namespace

PyMODINIT_FUNC PyInit__stallscope_hooks(void) {
  if (!intern_names()) return nullptr;
  if (g_next_type == nullptr) g_next_type = PyType_FromSpec(&g_next_spec);
  if (g_span_type == nullptr) g_span_type = PyType_FromSpec(&g_span_spec);
  if (g_next_type == nullptr || g_span_type == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&g_module);
  if (m == nullptr) return nullptr;
  Py_INCREF(g_next_type);
  Py_INCREF(g_span_type);
  if (PyModule_AddObject(m, "MethodHook", g_next_type) < 0 || PyModule_AddObject(m, "SpanCall", g_span_type) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
