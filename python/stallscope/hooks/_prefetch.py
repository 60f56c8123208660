"""`--loader tuned` with CUDA: batch k+1 is copied to the GPU on a side stream while the training
step works on batch k (the PrefetchLoader of timm and NVIDIA's examples, put around torch's
iterator without editing the script).

Per batch, from the iterator of torch's DataLoader (its batches pinned by pin_memory=True):
  1. with the side stream current, every CPU tensor of the batch (in lists, tuples, named tuples
     and dicts, as torch's pin_memory walks them) is copied with .to(device, non_blocking=True);
     a tensor already on the device is handed as it is, and so is a batch that holds no CPU
     tensor; an event is recorded on the side stream after the copies;
  2. at hand-over, the consumer's current stream waits on that event (on the GPU: the host does
     not block), and each copied tensor is record_stream'ed on the consumer's stream, so that the
     caching allocator does not give its memory to a later copy on the side stream while kernels
     queued on the consumer's stream still read it (the race SPDL documents);
  3. then the next batch is taken from torch's iterator and its copy enqueued, before batch k is
     returned: the copy of k+1 overlaps step k. Taking it blocks as long as torch's next() would
     (with workers it is usually ready: they prefetch). An exception from that next() is kept
     and raised at the script's next call, where it would have come without the prefetch.

The batch the script gets is the same structure, dtypes and values on the device; `x.to(device)`
in the script is then a no-op. The torch.cuda calls are in CudaOps, so a test can run the logic
with a stand-in on a machine without a GPU.
"""

from __future__ import annotations

import collections.abc

_END = object()


class _Raised:
    """What torch's next() raised while the batch before was being handed."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


class CudaOps:
    """The torch.cuda calls of the prefetch, in one place (tests use a stand-in)."""

    def __init__(self, torch, device):
        self._torch = torch
        self.device = device

    def new_stream(self):
        return self._torch.cuda.Stream(device=self.device)

    def using(self, stream):
        return self._torch.cuda.stream(stream)

    def needs_copy(self, t) -> bool:
        return t.device.type == "cpu"

    def copy(self, t):
        # Allocated while the side stream is current: the caching allocator ties the block to it.
        return t.to(self.device, non_blocking=True)

    def event_after(self, stream):
        event = self._torch.cuda.Event()
        event.record(stream)
        return event

    def current_stream(self):
        return self._torch.cuda.current_stream(self.device)

    def wait(self, stream, event):
        stream.wait_event(event)

    def record_stream(self, t, stream):
        t.record_stream(stream)


def _move(batch, ops, is_tensor, moved):
    """The batch with its CPU tensors copied by ops (appended to `moved`); everything else as is."""
    if is_tensor(batch):
        if not ops.needs_copy(batch):
            return batch
        out = ops.copy(batch)
        moved.append(out)
        return out
    if isinstance(batch, (str, bytes)):
        return batch
    if isinstance(batch, collections.abc.Mapping):
        items = {k: _move(v, ops, is_tensor, moved) for k, v in batch.items()}
        try:
            return type(batch)(items)
        except Exception:
            return items  # a mapping that cannot be made from a dict (torch's pin_memory does the same)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # named tuple
        return type(batch)(*(_move(v, ops, is_tensor, moved) for v in batch))
    if isinstance(batch, tuple):
        return tuple(_move(v, ops, is_tensor, moved) for v in batch)
    if isinstance(batch, list):
        return [_move(v, ops, is_tensor, moved) for v in batch]
    return batch


class DevicePrefetch:
    """An iterator over torch's DataLoader iterator that hands each batch on the device, copied
    one batch ahead on a side stream (see the module's doc). len() and attributes are those of
    the iterator it wraps."""

    def __init__(self, it, ops, is_tensor, stream=None):
        self._it = it
        self._ops = ops
        self._is_tensor = is_tensor
        self._stream = stream if stream is not None else ops.new_stream()
        self._ready = None  # (batch, moved tensors, event) of the next batch, copy enqueued
        self._ended = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)

    def _stage(self):
        """Takes the next batch from torch's iterator and enqueues its copy; _END at the end, a
        _Raised when torch's next() raised (raised again at the next __next__, where the script
        would have seen it)."""
        try:
            batch = next(self._it)
        except StopIteration:
            self._ended = True
            return _END
        except Exception as e:
            return _Raised(e)
        ops = self._ops
        moved = []
        with ops.using(self._stream):
            out = _move(batch, ops, self._is_tensor, moved)
            event = ops.event_after(self._stream) if moved else None
        return out, moved, event

    def __next__(self):
        ready = self._ready
        self._ready = None
        if ready is None:
            if self._ended:
                raise StopIteration
            ready = self._stage()
        if ready is _END:
            raise StopIteration
        if type(ready) is _Raised:
            e = ready.error
            ready = None
            raise e
        out, moved, event = ready
        if event is not None:
            ops = self._ops
            consumer = ops.current_stream()
            ops.wait(consumer, event)
            for t in moved:
                ops.record_stream(t, consumer)
        if not self._ended:
            self._ready = self._stage()  # the next copy overlaps the step on this batch
        return out
