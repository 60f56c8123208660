"""stallscope.ReferenceLoader against plain Python: every sample's content and order for a seed
(arrays and .npy files), batches shaped like torch's DataLoader over the same TensorDataset, len and
drop_last, sharding, resume equal to an uninterrupted run, errors that name the file and the
sample index without hanging, threads stopped by break and del, and its events under
`stallscope run`.

The order is recomputed from its definition (loader_plain.py: splitmix64, Fisher-Yates from the
end, rank r takes positions r, r+W, ...), independently of the C++ code. Tests that could hang if the loader
misbehaved, or that count threads, run in a child process with a timeout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import LOADER_CHILD_PRELUDE, LOADER_MODULE, PYTHON_DIR, base_env, import_stallscope, run_recorded
from loader_plain import FakeCuda, epoch_order, expected_batches

pytestmark = pytest.mark.torch

MODULE = LOADER_MODULE
ss = import_stallscope()  # skips this module unless the loader is built and torch installed

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

RL = ss.ReferenceLoader

# ---------------------------------------------------------------------------------------------
# Data


def data(n=103):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 255, (n, 3, 4, 5), dtype=torch.uint8, generator=g)
    y = torch.arange(n, dtype=torch.int64) * 3 + 1
    z = torch.randn(n, 7, generator=g)
    return x, y, z


# ---------------------------------------------------------------------------------------------
# Content and order


@pytest.mark.parametrize("shuffle,seed,batch,drop_last,threads", [
    (False, 0, 10, False, 1), (True, 0, 10, False, 2), (True, 12345, 7, True, 3), (True, 2**63 + 5, 1, False, 4),
    (True, 3, 200, False, 2),
])
def test_arrays_every_sample_and_order_match_a_plain_reading(shuffle, seed, batch, drop_last, threads):
    x, y, z = data()
    loader = RL.from_tensors(x, y, z, batch_size=batch, shuffle=shuffle, seed=seed, drop_last=drop_last,
                             threads=threads, prefetch=3)
    for epoch in range(3):
        want = expected_batches(103, batch, shuffle=shuffle, seed=seed, epoch=epoch, drop_last=drop_last)
        got = list(loader)
        assert len(got) == len(want) == len(loader)
        for (xb, yb, zb), idx in zip(got, want, strict=True):
            assert torch.equal(xb, x[idx]) and torch.equal(yb, y[idx]) and torch.equal(zb, z[idx])


def test_npy_every_sample_and_order_match_a_plain_reading(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "img": rng.integers(0, 255, (57, 6, 5, 3), dtype=np.uint8),
        "label": np.arange(57, dtype=np.int64) * 7,
        "feat": rng.standard_normal((57, 11)).astype(np.float32),
        "mask": rng.integers(0, 2, 57).astype(bool),
        "half": rng.standard_normal((57, 2)).astype(np.float16),
        "i16": rng.integers(-300, 300, (57,), dtype=np.int16),
    }
    paths = []
    for k, (name, a) in enumerate(arrays.items()):
        p = tmp_path / f"{name}.npy"
        with open(p, "wb") as f:  # every format version the loader reads
            np.lib.format.write_array(f, a, version=[(1, 0), (2, 0), (3, 0)][k % 3])
        paths.append(p)
    loader = RL.from_npy(*paths, batch_size=8, shuffle=True, seed=99, threads=2)
    plain = [np.load(p) for p in paths]  # read whole, the plain way
    for epoch in range(2):
        want = expected_batches(57, 8, shuffle=True, seed=99, epoch=epoch)
        got = list(loader)
        assert len(got) == len(want)
        for batch, idx in zip(got, want, strict=True):
            for t, a in zip(batch, plain, strict=True):
                assert t.dtype == torch.from_numpy(a).dtype
                assert np.array_equal(t.numpy(), a[idx])


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
def test_npy_memmap_and_arrays_of_numpy(tmp_path):
    a = np.arange(40 * 3, dtype=np.float64).reshape(40, 3)
    np.save(tmp_path / "a.npy", a)
    mm = np.load(tmp_path / "a.npy", mmap_mode="r")  # a read-only memmap, as the A/B swap sees it
    loader = RL.from_tensors(mm, batch_size=16, unwrap=True)
    dl = DataLoader(mm, batch_size=16)  # torch over the array itself: batches are tensors
    for got, want in zip(loader, dl, strict=True):
        assert type(got) is type(want) and got.dtype == want.dtype
        assert torch.equal(got, want)
    fortran = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(6, 2))
    got = next(iter(RL.from_tensors(fortran, batch_size=6)))[0]
    assert np.array_equal(got.numpy(), fortran)


def test_set_epoch_chooses_the_next_epoch():
    x, y, _ = data(50)
    loader = RL.from_tensors(x, y, batch_size=50, shuffle=True, seed=4)
    loader.set_epoch(6)
    (_, yb), = list(loader)
    assert yb.tolist() == y[epoch_order(50, shuffle=True, seed=4, epoch=6)].tolist()
    (_, yb), = list(loader)  # then 7
    assert yb.tolist() == y[epoch_order(50, shuffle=True, seed=4, epoch=7)].tolist()


# ---------------------------------------------------------------------------------------------
# Like torch's DataLoader


@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_look_like_torch_dataloader_over_the_same_tensordataset(drop_last):
    n = 45
    ds = TensorDataset(torch.randn(n, 3, 2), torch.arange(n), torch.randint(0, 9, (n, 4), dtype=torch.uint8),
                       torch.rand(n) > 0.5, torch.randn(n, 2, dtype=torch.float64), torch.randn(n).half())
    ours = RL.from_tensors(ds, batch_size=8, drop_last=drop_last)
    theirs = DataLoader(ds, batch_size=8, drop_last=drop_last)
    assert len(ours) == len(theirs) == (5 if drop_last else 6)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert type(a) is type(b) is list
        assert [t.dtype for t in a] == [t.dtype for t in b]
        assert [t.shape for t in a] == [t.shape for t in b]
        assert all(torch.equal(s, t) for s, t in zip(a, b, strict=True))
    single = TensorDataset(torch.arange(10))
    a, b = next(iter(RL.from_tensors(single, batch_size=4))), next(iter(DataLoader(single, batch_size=4)))
    assert type(a) is type(b) is list and len(a) == len(b) == 1


def test_len_and_drop_last():
    x = torch.zeros(10, 1)
    for n, batch, drop, want in [(10, 3, False, 4), (10, 3, True, 3), (10, 5, True, 2), (10, 11, True, 0),
                                 (10, 11, False, 1)]:
        loader = RL.from_tensors(x[:n], batch_size=batch, drop_last=drop)
        assert len(loader) == want == len(list(loader))
    assert [len(b[0]) for b in RL.from_tensors(x, batch_size=4)] == [4, 4, 2]


def test_settings_are_checked():
    x = torch.zeros(10, 1)
    with pytest.raises(ValueError, match="batch_size"):
        RL.from_tensors(x, batch_size=0)
    with pytest.raises(ValueError, match="rank 3"):
        RL.from_tensors(x, rank=3, world_size=2)
    with pytest.raises(ValueError, match="bfloat16"):
        RL.from_tensors(x.bfloat16())
    with pytest.raises(ValueError, match="different lengths"):
        RL.from_tensors(x, torch.zeros(9))
    with pytest.raises(ValueError, match="threads"):
        RL.from_tensors(x, threads=0)


# ---------------------------------------------------------------------------------------------
# Sharding


@pytest.mark.parametrize("world", [2, 3, 4, 8])
def test_sharding_covers_each_index_once_per_epoch(world):
    n = 103
    y = torch.arange(n)
    for epoch in range(2):
        seen = []
        for rank in range(world):
            loader = RL.from_tensors(y, batch_size=5, shuffle=True, seed=1, rank=rank, world_size=world)
            loader.set_epoch(epoch)
            mine = [int(v) for (b,) in loader for v in b]
            assert mine == epoch_order(n, shuffle=True, seed=1, epoch=epoch, rank=rank, world=world)
            seen += mine
        assert sorted(seen) == list(range(n))


def test_rank_and_world_size_default_to_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = RL.from_tensors(torch.arange(20), batch_size=100)
    assert [int(v) for v in next(iter(loader))[0]] == list(range(2, 20, 3))
    assert loader.state_dict()["rank"] == 2 and loader.state_dict()["world_size"] == 3


# ---------------------------------------------------------------------------------------------
# Resume


def collect(loader, epochs, stop_after=None):
    """Labels of each batch, epoch by epoch; stops (break) after `stop_after` batches of the last."""
    out = []
    for e in range(epochs):
        for k, (yb,) in enumerate(loader):
            out.append((e, yb.tolist()))
            if stop_after is not None and e == epochs - 1 and k + 1 == stop_after:
                break
    return out


@pytest.mark.parametrize("stop_after", [1, 4, 9, 10])
def test_state_dict_resume_equals_an_uninterrupted_run(stop_after):
    y = torch.arange(97)
    kw = {"batch_size": 10, "shuffle": True, "seed": 8, "threads": 3}
    whole = [b for _, b in collect(RL.from_tensors(y, **kw), 4)]
    first = RL.from_tensors(y, **kw)
    head = [b for _, b in collect(first, 2, stop_after)]
    state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
    second = RL.from_tensors(y, **kw, prefetch=7)  # prefetch and threads do not change the order
    second.load_state_dict(state)
    tail = [b for _, b in collect(second, 2)]  # the rest of epoch 1 (none after its last batch), then more
    assert len(head) + len(tail) == (40 if stop_after == 10 else 30)
    assert head + tail == whole[: len(head) + len(tail)]


def test_resume_twice_and_at_an_epoch_boundary():
    y = torch.arange(60)
    kw = {"batch_size": 7, "shuffle": True, "seed": 2}
    whole = [b for _, b in collect(RL.from_tensors(y, **kw), 3)]
    a = RL.from_tensors(y, **kw)
    got = [b for _, b in collect(a, 1)]  # a whole epoch: the state is at the boundary
    assert a.state_dict()["epoch"] == 1 and a.state_dict()["batches_handed"] == 0
    b = RL.from_tensors(y, **kw)
    b.load_state_dict(a.state_dict())
    got += [b_ for _, b_ in collect(b, 1, 3)]
    c = RL.from_tensors(y, **kw)
    c.load_state_dict(b.state_dict())
    c.set_epoch(1)  # the loop's own set_epoch(epoch) after resuming keeps the position
    got += [b_ for _, b_ in collect(c, 2)]
    assert got == whole


def test_resume_with_uneven_shards():
    y = torch.arange(103)
    for rank in range(4):
        kw = {"batch_size": 4, "shuffle": True, "seed": 5, "rank": rank, "world_size": 4}
        whole = [b for _, b in collect(RL.from_tensors(y, **kw), 2)]
        a = RL.from_tensors(y, **kw)
        head = [b for _, b in collect(a, 2, 3)]
        b = RL.from_tensors(y, **kw)
        b.load_state_dict(a.state_dict())
        assert head + [b_ for _, b_ in collect(b, 1)] == whole


def test_a_state_of_other_settings_is_refused_in_one_line():
    y = torch.arange(50)
    a = RL.from_tensors(y, batch_size=5, shuffle=True, seed=1)
    next(iter(a))
    state = a.state_dict()
    for kw, what in [({"batch_size": 6, "shuffle": True, "seed": 1}, "batch_size"),
                     ({"batch_size": 5, "shuffle": True, "seed": 2}, "seed"),
                     ({"batch_size": 5, "shuffle": False, "seed": 1}, "shuffle"),
                     ({"batch_size": 5, "shuffle": True, "seed": 1, "world_size": 2, "rank": 0}, "world_size")]:
        with pytest.raises(ValueError, match=what) as e:
            RL.from_tensors(y, **kw).load_state_dict(state)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="dataset_len"):
        RL.from_tensors(torch.arange(51), batch_size=5, shuffle=True, seed=1).load_state_dict(state)
    with pytest.raises(ValueError):
        RL.from_tensors(y, batch_size=5).load_state_dict({"epoch": 0})


def test_no_batch_buffer_is_allocated_after_warm_up():
    loader = RL.from_tensors(torch.randn(200, 64), torch.arange(200), batch_size=10, threads=2)
    for _batch in loader:
        pass
    first = loader.pool_stats()
    for _ in range(3):
        for _batch in loader:
            pass
    assert loader.pool_stats()["allocations"] == first["allocations"]
    assert loader.pool_stats()["grown"] == 0
    kept = list(loader)  # a loop that keeps every batch: the pool grows instead of stalling
    assert len(kept) == 20 and loader.pool_stats()["grown"] > 0


# ---------------------------------------------------------------------------------------------
# The device path's logic, with a stand-in for torch.cuda (no GPU here; tests/gpu/loader_race.py
# checks the real thing)


class PinnedNative:
    """The native loader, claiming page-locked memory, recording watch_copy calls."""

    def __init__(self, native):
        self._n = native
        self.watched = []
        self.leases = []

    pinned = True

    def watch_copy(self, lease, device, stream, batch, nbytes):
        self.watched.append((device, stream, batch, nbytes))
        self.leases.append(lease)  # held, as the watcher thread would until the copy completed

    def __getattr__(self, name):
        return getattr(self._n, name)


def test_device_path_logic_with_a_stand_in_for_cuda():
    x, y, z = data()
    loader = RL.from_tensors(x, y, z, batch_size=10, shuffle=True, seed=3, threads=2)
    fake = FakeCuda()
    native = PinnedNative(loader._native)
    loader._native, loader._device, loader._cuda = native, "fake", fake
    loader._transforms = [lambda t: t.float() / 255, None, None]  # uint8 sent, normalised on the device
    handed = 0
    for epoch in range(2):
        want = expected_batches(103, 10, shuffle=True, seed=3, epoch=epoch)
        got = list(loader)
        assert len(got) == len(want)
        for (xb, yb, zb), idx in zip(got, want, strict=True):
            assert xb.dtype == torch.float32 and torch.equal(xb, x[idx].float() / 255)
            assert torch.equal(yb, y[idx]) and torch.equal(zb, z[idx])
            for t in (xb, yb, zb):
                assert (t.data_ptr(), "consumer") in fake.recorded, "handed tensors are record_stream'ed"
        handed += len(got)
    assert fake.waits == [("consumer", e) for e in range(1, handed + 1)], "the consumer waits on each copy's event"
    row = x[0].numel() + 8 + z[0].numel() * 4
    assert [w[2] for w in native.watched] == list(range(11)) * 2
    assert all(w[:2] == (0, 1234) for w in native.watched)
    assert [w[3] for w in native.watched[:11]] == [row * 10] * 10 + [row * 3]
    # A loop left early: the batch copied ahead is dropped, the threads stop.
    it = iter(loader)
    next(it)
    del it
    assert loader.pool_stats()["free"] == loader.pool_stats()["slots"] - len(native.leases)
    native.leases.clear()
    assert loader.pool_stats()["free"] == loader.pool_stats()["slots"]


# ---------------------------------------------------------------------------------------------
# Child processes: errors, stopping, threads, signals


PRELUDE = LOADER_CHILD_PRELUDE


# Starting a child (Python, NumPy, torch) is not what these tests time: on a machine at load 20 it
# took 70 s, beyond the body's bound, with the loader doing nothing wrong (docs/decisions.md).
STARTUP_S = 300


def child(body: str, timeout=60, env=None):
    """Runs PRELUDE + body in a fresh interpreter; returns the RESULT dict it printed. `timeout`
    bounds the body, from the end of the imports: past it the child prints every thread's stack and
    exits (faulthandler), so a hang says where it is."""
    code = (PRELUDE + f"import faulthandler; faulthandler.dump_traceback_later({timeout}, exit=True)\n"
            + textwrap.dedent(body))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout + STARTUP_S,
                       env=env or base_env())
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"rc={p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")


def test_malformed_npy_raises_naming_the_file(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.arange(10, dtype=np.float32))
    raw = good.read_bytes()
    bad = {
        "truncated.npy": raw[:-8],
        "fortran.npy": raw.replace(b"'fortran_order': False", b"'fortran_order': True "),
        "bigendian.npy": raw.replace(b"'<f4'", b"'>f4'"),
        "header.npy": raw.replace(b"'shape': (10,)", b"'shape': [10,]"),
        "dtype.npy": raw.replace(b"'<f4'", b"'<c8'"),
        "magic.npy": b"not an npy file at all",
    }
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content)
    r = child(f"""
        out = {{}}
        for name in {sorted(bad)!r}:
            path = os.path.join({str(tmp_path)!r}, name)
            try:
                RL.from_npy({str(good)!r}, path)
                out[name] = None
            except LoaderError as e:
                out[name] = [str(e), isinstance(e, RuntimeError)]
        print("RESULT " + json.dumps(out))
    """)
    for name in bad:
        assert r[name] is not None, f"{name} was accepted"
        msg, is_runtime = r[name]
        assert str(tmp_path / name) in msg and "\n" not in msg and is_runtime


def test_a_failing_source_raises_naming_file_and_index_and_joins_every_thread():
    r = child("""
        before = threads()
        src = M.synthetic_source(400, fail_at=137, delay_us=300, name="shard-7.tar")
        loader = RL(src, batch_size=10, threads=4, prefetch=8)
        got, err, kind = [], None, None
        t0 = time.monotonic()
        try:
            for idx, val in loader:
                got.append(idx.tolist())
        except LoaderError as e:
            err, kind = str(e), type(e).__mro__[1].__name__
        elapsed = time.monotonic() - t0
        print("RESULT " + json.dumps(dict(got=got, err=err, kind=kind, elapsed=elapsed, before=before,
                                          after=settle(before))))
    """)
    assert r["err"] is not None
    assert "shard-7.tar" in r["err"] and "137" in r["err"], r["err"]
    assert r["kind"] == "RuntimeError"
    assert r["got"] == [list(range(b * 10, b * 10 + 10)) for b in range(13)], "the batches before it, in order"
    assert r["after"] == r["before"], "every loader thread joined"
    assert r["elapsed"] < 20


def test_break_and_del_stop_the_threads():
    r = child("""
        x = torch.randn(5000, 32)
        loader = RL.from_tensors(x, batch_size=4, threads=3, prefetch=6)
        before = threads()
        out = {"before": before}
        for b in loader:
            out["during"] = threads()
            break
        out["after_break"] = settle(before)
        it = iter(loader)
        next(it)
        del it
        out["after_del"] = settle(before)
        it = iter(loader)
        next(it)
        cycle = [it]
        cycle.append(cycle)
        del it, cycle
        gc.collect()
        out["after_gc"] = settle(before)
        # A new iter() while an epoch runs ends the old iterator (as torch's DataLoader does).
        a = iter(loader); next(a); b = iter(loader); next(b)
        out["old_ended"] = next(a, "ended") == "ended"
        del a, b
        out["after_two"] = settle(before)
        print("RESULT " + json.dumps(out))
    """)
    assert r["during"] >= r["before"] + 3
    for k in ("after_break", "after_del", "after_gc", "after_two"):
        assert r[k] == r["before"], (k, r)
    assert r["old_ended"]


def test_ctrl_c_while_waiting_for_a_batch_interrupts_and_stops_the_threads():
    r = child("""
        import signal
        # Ctrl-C in a terminal: Python's handler, whatever this test's runner left. A job started in
        # the background by a non-interactive shell inherits SIGINT ignored, and Python then installs
        # no handler: the SIGINT below was ignored and the epoch ran on past the timeout.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        before = threads()
        src = M.synthetic_source(100, delay_us=2_000_000)  # 0.5 to 2 s per sample
        loader = RL(src, batch_size=50, threads=2)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        t0 = time.monotonic()
        try:
            for b in loader:
                pass
            what = "finished"
        except KeyboardInterrupt:
            what = "interrupted"
        print("RESULT " + json.dumps(dict(what=what, waited=time.monotonic() - t0, before=before,
                                          after=settle(before + 1))))
    """)
    assert r["what"] == "interrupted"
    assert r["waited"] < 5, "the wait for a batch lets Ctrl-C through"
    assert r["after"] <= r["before"] + 1  # the Timer's thread may linger a moment


def test_ctrl_c_the_moment_the_epoch_starts_stops_its_threads():
    # The SIGINT handler runs when a call returns: here right after begin_epoch, before the iterator
    # holds the epoch (os.kill runs it at once in the main thread).
    r = child("""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as above
        class InterruptedStart:
            def __init__(self, n):
                self._n = n
            def begin_epoch(self):
                started = self._n.begin_epoch()
                os.kill(os.getpid(), signal.SIGINT)
                return started
            def __getattr__(self, name):
                return getattr(self._n, name)
        before = threads()
        src = M.synthetic_source(100, delay_us=200_000)
        loader = RL(src, batch_size=10, threads=2)
        loader._native = InterruptedStart(loader._native)
        try:
            for b in loader:
                pass
            what = "finished"
        except KeyboardInterrupt:
            what = "interrupted"
        print("RESULT " + json.dumps(dict(what=what, before=before, after=settle(before))))
    """)
    assert r["what"] == "interrupted"
    assert r["after"] <= r["before"], "the threads of an epoch interrupted as it started still run"


def test_importing_stallscope_loads_neither_torch_nor_the_loader():
    code = (f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); import stallscope; "
            "ok = 'torch' not in sys.modules and '_stallscope_loader' not in sys.modules; "
            "stallscope.ReferenceLoader; print('RESULT', int(ok and 'torch' not in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=base_env())
    assert "RESULT 1" in p.stdout, p.stdout + p.stderr


def test_without_the_native_module_the_api_says_so_in_one_line():
    code = (f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r}); import stallscope.reference_loader as r; "
            "r._module_dirs = lambda: []\n"
            "try:\n    r.ReferenceLoader([1, 2])\nexcept ImportError as e:\n    print('RESULT', repr(str(e)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=base_env())
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")), "")
    assert "not built" in line and "\\n" not in line, p.stdout + p.stderr


# ---------------------------------------------------------------------------------------------
# Under `stallscope run`


def test_recording_holds_the_loaders_events(tmp_path):
    prog = tmp_path / "train_ref.py"
    prog.write_text(textwrap.dedent(f"""
        import importlib.util, json, sys
        spec = importlib.util.spec_from_file_location("_stallscope_loader", {str(MODULE)!r})
        M = importlib.util.module_from_spec(spec); spec.loader.exec_module(M); sys.modules["_stallscope_loader"] = M
        sys.path.insert(0, {str(PYTHON_DIR)!r})
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        import stallscope
        ds = TensorDataset(torch.randn(96, 8), torch.arange(96))
        torch_loader = DataLoader(ds, batch_size=16)
        for _ in torch_loader:
            pass
        loader = stallscope.ReferenceLoader.from_tensors(ds, batch_size=16, shuffle=True, threads=2, prefetch=4)
        n = 0
        for epoch in range(2):
            for x, y in loader:
                n += 1
        print("RESULT " + json.dumps(dict(batches=n)))
    """))
    r = run_recorded(tmp_path / "ref.db", [prog], timeout=180)
    assert r.rc == 0, r.stderr
    from conftest import Recording

    rec = Recording(tmp_path / "ref.db")
    configs = rec.configs()
    refs = {L: c for L, c in configs.items() if c.get("kind") == "reference"}
    assert len(refs) == 1 and len(configs) == 2, configs  # the torch loader's L differs
    (L, doc), = refs.items()
    assert doc["num_workers"] == 2 and doc["prefetch"] == 4 and doc["batch_size"] == 16
    assert doc["shuffle"] is True and doc["seed"] == 0 and doc["drop_last"] is False
    assert doc["rank"] == 0 and doc["world_size"] == 1 and doc["dataset_len"] == 96
    assert doc["batches_per_epoch"] == 6 and doc["source"] == "arrays" and doc["dataset_class"] == "TensorDataset"
    assert doc["created_at"] == "train_ref.py:13" and doc["torch_version"] == torch.__version__
    assert doc["pin_memory"] is False and doc["device"] is None
    nexts = [s for s in rec.spans("dl.next") if s["arg0"] == L]
    assert len(nexts) == 2 * 7  # 6 batches and the StopIteration, per epoch
    assert sorted(s["arg1"] for s in nexts) == sorted([-1] * 2 + list(range(6)) * 2)
    names = rec.thread_names()
    fetches = [s for s in rec.spans("dl.fetch") if s["arg0"] == L]
    assert len(fetches) == 12
    loader_threads = {(f["pid"], f["tid"]) for f in fetches}
    assert all(names.get(t, "").startswith("ss-loader-") for t in loader_threads), names
    assert {f["arg2"] for f in fetches} <= {0, 1}
    stages = rec.instants("dl.stages")
    assert len(stages) == 12 and all(s["arg0"] >= 0 for s in stages)
    for ev in ("dl.sent", "dl.put", "dl.recv"):
        assert len([i for i in rec.instants(ev) if i["arg0"] == L]) == 12, ev
    begins = [i for i in rec.instants("dl.epoch_begin") if i["arg0"] == L]
    ends = [i for i in rec.instants("dl.epoch_end") if i["arg0"] == L]
    assert [(i["arg1"], i["arg2"]) for i in begins] == [(0, 2), (1, 2)]
    assert [(i["arg1"], i["arg2"]) for i in ends] == [(0, 6), (1, 6)]
