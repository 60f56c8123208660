"""Start-up and packaging: the sitecustomize chain, lazy installation, the library-less fallback,
the public API's failure paths, and traceback stripping as a unit."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from conftest import LIBRARY, PYTHON_DIR, base_env, run_plain, run_recorded


def py(code: str) -> list:
    return ["-c", textwrap.dedent(code)]


# ------------------------------------------------------------------------------------ sitecustomize

def test_startup_imports_nothing_heavy(tmp_path):
    r = run_recorded(tmp_path / "a.db", py("""
        import sys
        heavy = ["torch", "ctypes", "stallscope.hooks", "stallscope._native"]
        print("LOADED", [m for m in heavy if m in sys.modules])
        print("FINDER", any(type(f).__name__ == "_DataLoaderImportFinder" for f in sys.meta_path))
    """))
    assert r.rc == 0, r.stderr
    assert "LOADED []" in r.stdout and "FINDER True" in r.stdout


@pytest.mark.torch
def test_hooks_install_when_the_dataloader_module_is_imported(tmp_path):
    code = py("""
        import sys
        import torch.utils.data
        from torch.utils.data import DataLoader
        print("HOOKS", "stallscope.hooks" in sys.modules, DataLoader.__iter__.__module__,
              DataLoader.__iter__.__code__.co_filename.endswith("stallscope/hooks/_main.py"))
        print("FINDER", any(type(f).__name__ == "_DataLoaderImportFinder" for f in sys.meta_path))
    """)
    r = run_recorded(tmp_path / "a.db", code)
    assert r.rc == 0, r.stderr
    assert "HOOKS True" in r.stdout and "True\n" in r.stdout.split("HOOKS")[1]
    assert "FINDER False" in r.stdout  # the finder leaves sys.meta_path once it fired
    # Without a session (PYTHONPATH alone, as a leaked environment would have) nothing is installed.
    env = base_env(PYTHONPATH=f"{PYTHON_DIR}/stallscope/_boot:{PYTHON_DIR}")
    r = run_plain(code, env=env)
    assert r.rc == 0, r.stderr
    assert "HOOKS False" in r.stdout and r.stderr == ""


def write_user_sitecustomize(d, body):
    d.mkdir()
    (d / "sitecustomize.py").write_text(textwrap.dedent(body))
    return d


def test_users_sitecustomize_still_runs(tmp_path):
    user = write_user_sitecustomize(tmp_path / "user", """
        import os
        os.environ["USER_SITECUSTOMIZE"] = "ran"
        MARK = "the user's module"
    """)
    code = py("""
        import os, sys
        print("ENV", os.environ.get("USER_SITECUSTOMIZE"))
        print("MODULE", getattr(sys.modules.get("sitecustomize"), "MARK", None))
    """)
    r = run_recorded(tmp_path / "a.db", code, env=base_env(PYTHONPATH=str(user)))
    assert r.rc == 0, r.stderr
    assert "ENV ran" in r.stdout and "MODULE the user's module" in r.stdout


def test_users_failing_sitecustomize_is_reported_as_without_stallscope(tmp_path):
    user = write_user_sitecustomize(tmp_path / "user", """
        print("user sitecustomize starts")
        1 / 0
    """)
    code = py("print('program runs')")
    env = base_env(PYTHONPATH=str(user))
    plain = run_plain(code, env=env)
    rec = run_recorded(tmp_path / "a.db", code, env=env)
    assert "ZeroDivisionError" in plain.stderr and "program runs" in plain.stdout
    assert (rec.rc, rec.stdout, rec.stderr_without_stallscope()) == (plain.rc, plain.stdout, plain.stderr)


# ------------------------------------------------------------------------------- library fallback

def copy_package(tmp_path):
    """The package alone, where no libstallscope.so can be found relative to it."""
    dst = tmp_path / "pkg"
    shutil.copytree(PYTHON_DIR / "stallscope", dst / "stallscope",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_missing_library_makes_everything_a_noop(tmp_path):
    pkg = copy_package(tmp_path)
    code = py(f"""
        import stallscope
        from stallscope import _native as N
        print("AVAILABLE", N.available)
        N.instant(N.intern("x"), 1, 2, 3); N.span_begin_args(0, 1, 2, 3); N.span_end(); N.thread_name("t")
        print("START", stallscope.start({str(tmp_path / 'x.db')!r}), stallscope.is_recording())
        print("DONE")
    """)
    r = run_plain(code, env=base_env(PYTHONPATH=str(pkg), STALLSCOPE_LIBRARY=str(tmp_path / "nope.so")))
    assert r.rc == 0, r.stderr
    assert "AVAILABLE False" in r.stdout and "START False False" in r.stdout and "DONE" in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stallscope: cannot load libstallscope.so"), r.stderr
    assert not (tmp_path / "x.db").exists()


def test_record_to_bad_path_runs_the_body_unrecorded(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = py(f"""
        import stallscope
        with stallscope.record({str(blocker / 'x.db')!r}) as recording:
            print("BODY", recording, stallscope.is_recording())
        print("AFTER", stallscope.is_recording())
    """)
    r = run_plain(code, env=base_env(PYTHONPATH=str(PYTHON_DIR), STALLSCOPE_LIBRARY=str(LIBRARY)))
    assert r.rc == 0, r.stderr
    assert "BODY False False" in r.stdout and "AFTER False" in r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stallscope: cannot record to"), r.stderr


def test_record_start_stop_sets_and_restores_the_environment(tmp_path):
    code = py(f"""
        import os, stallscope
        before = os.environ.get("STALLSCOPE_SHM")
        with stallscope.record({str(tmp_path / 'x.db')!r}) as recording:
            during = os.environ.get("STALLSCOPE_SHM")
            lib = os.environ["STALLSCOPE_LIBRARY"]
            print("DURING", recording, stallscope.is_recording(), bool(during), os.path.isabs(lib))
        print("AFTER", before, os.environ.get("STALLSCOPE_SHM"), stallscope.is_recording())
    """)
    r = run_plain(code, env=base_env(PYTHONPATH=str(PYTHON_DIR), STALLSCOPE_LIBRARY=str(LIBRARY)))
    assert r.rc == 0, r.stderr
    assert "DURING True True True True" in r.stdout and "AFTER None None False" in r.stdout
    assert (tmp_path / "x.db").exists()


def test_record_keep_detail_reaches_the_recorder(tmp_path):
    """stallscope.record(path, keep_detail=...) is `stallscope run --keep-detail` in-process: the
    recorder's writer gets the window (meta keep_detail_ns, which it reads at start)."""
    code = py(f"""
        import stallscope
        for name, keep in (("a", "10s"), ("b", "1.5h"), ("c", 90), ("d", None)):
            with stallscope.record({str(tmp_path)!r} + "/" + name + ".db", keep_detail=keep) as recording:
                print(name, recording)
    """)
    r = run_plain(code, env=base_env(PYTHONPATH=str(PYTHON_DIR), STALLSCOPE_LIBRARY=str(LIBRARY)))
    assert r.rc == 0 and r.stderr == "", r.stderr
    assert r.stdout.split() == ["a", "True", "b", "True", "c", "True", "d", "True"], r.stdout
    for name, want in (("a", "10000000000"), ("b", "5400000000000"), ("c", "90000000000"), ("d", None)):
        con = sqlite3.connect(tmp_path / f"{name}.db")
        try:
            got = con.execute("SELECT value FROM meta WHERE key = 'keep_detail_ns'").fetchone()
        finally:
            con.close()
        assert (got[0] if got else None) == want, (name, got)


@pytest.mark.parametrize("keep", ["'soon'", "'5s'", "0", "True", "'-1h'", "float('nan')"])
def test_record_keep_detail_that_is_not_a_duration_runs_the_body_unrecorded(tmp_path, keep):
    code = py(f"""
        import stallscope
        with stallscope.record({str(tmp_path / 'x.db')!r}, keep_detail={keep}) as recording:
            print("BODY", recording, stallscope.is_recording())
    """)
    r = run_plain(code, env=base_env(PYTHONPATH=str(PYTHON_DIR), STALLSCOPE_LIBRARY=str(LIBRARY)))
    assert r.rc == 0, r.stderr
    assert "BODY False False" in r.stdout, r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "keep_detail=" in lines[0] and "at least 10 s" in lines[0], r.stderr
    assert not (tmp_path / "x.db").exists()


# ----------------------------------------------------------------------------- traceback stripping

# A "stallscope" function: compiled with a file name inside the package, so that its frames count
# as ours exactly as the hooks' frames do.
FAKE_HOOK = '''
def wrapper(fn, *args):
    return fn(*args)
'''

USER_CODE = '''
import sys
sys.path.insert(0, {pkgdir!r})
from stallscope import _tb
ns = {{}}
if {through_hook}:
    exec(compile({fake!r}, {fake_file!r}, "exec"), ns)
    call = ns["wrapper"]
else:
    import operator
    call = operator.call  # C function: calls without a frame of its own, like a stripped wrapper

def inner():
    raise KeyError("deep")

def middle():
    try:
        call(inner)
    except KeyError as e:
        raise ValueError("wrapped") from e

def outer():
    try:
        call(middle)
    finally:
        pass

if {install}:
    _tb.install_excepthooks()
{mode}
'''

MAIN = "call(outer)"
THREAD = "import threading; t = threading.Thread(target=lambda: call(outer)); t.start(); t.join()"


def run_snippet(tmp_path, through_hook, install, mode):
    fake_file = str(PYTHON_DIR / "stallscope" / "_fake_hook_for_tests.py")
    # The same script path in every run, so tracebacks compare byte for byte.
    script = tmp_path / "snippet" / "prog.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(USER_CODE.format(pkgdir=str(PYTHON_DIR), fake=FAKE_HOOK, fake_file=fake_file,
                                       through_hook=through_hook, install=install, mode=mode))
    p = subprocess.run([sys.executable, "prog.py"], cwd=script.parent, capture_output=True, text=True,
                       env=base_env())
    return p.returncode, p.stderr


@pytest.mark.parametrize("mode", [MAIN, THREAD], ids=["sys.excepthook", "threading.excepthook"])
def test_excepthook_removes_our_frames_from_the_whole_chain(tmp_path, mode):
    reference = run_snippet(tmp_path, through_hook=False, install=False, mode=mode)
    unstripped = run_snippet(tmp_path, through_hook=True, install=False, mode=mode)
    stripped = run_snippet(tmp_path, through_hook=True, install=True, mode=mode)
    assert "The above exception was the direct cause" in reference[1]
    # Without the hook our frames show (twice: in the cause and in the final exception) ...
    assert unstripped[1].count("_fake_hook_for_tests.py") >= 2
    # ... with it the output is the reference, byte for byte.
    assert stripped == reference


def test_strip_tb_keeps_positions_and_leaves_foreign_tracebacks_alone():
    sys.path.insert(0, str(PYTHON_DIR))
    try:
        from stallscope import _tb
    finally:
        sys.path.remove(str(PYTHON_DIR))
    ns = {}
    exec(compile(FAKE_HOOK, str(PYTHON_DIR / "stallscope" / "_fake.py"), "exec"), ns)

    def boom():
        raise OSError("x")

    for through in (False, True):
        try:
            (ns["wrapper"] if through else (lambda f: f()))(boom)
        except OSError as e:
            tb = e.__traceback__
        frames = []
        t = _tb.strip_tb(tb)
        if not through:
            assert t is tb
        while t is not None:
            frames.append((t.tb_frame.f_code.co_name, t.tb_lineno, t.tb_lasti))
            t = t.tb_next
        assert [f[0] for f in frames if f[0] in ("wrapper", "boom")] == ["boom"]
    # A traceback made only of our frames is kept as it is (there would be nothing left to show).
    try:
        exec(compile("raise OSError('ours')", str(PYTHON_DIR / "stallscope" / "_fake.py"), "exec"), {})
    except OSError as e:
        tb = e.__traceback__.tb_next  # skip this test's frame: only the fake-package frame is left
        assert _tb.strip_tb(tb) is tb
    assert os.sep in _tb._PKG_PREFIXES[0]
