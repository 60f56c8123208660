"""`pip install .` into a fresh virtual environment, then the installed `stallscope` used as a pip
user would: record an example, report it, export it, swap in the reference loader, open the
dashboard, `python -m stallscope`, `import stallscope`.

The environment is new (python -m venv, torch==<the version installed here> from the package
index), the build is the one pip runs (scikit-build-core, pyproject.toml), and every program runs
with the source tree out of its paths: no STALLSCOPE_* or PYTHONPATH variables, the current
directory elsewhere. Everything the installed command and package load must come from the
environment.

The build goes to <repo>/build-pip. When ccache is installed, the build uses it with the same
settings as scripts/test.sh's main build (RelWithDebInfo, -Werror, base directory the repository),
so the compiler's work is shared with that build: this test then costs about a minute, not five.
With STALLSCOPE_TEST_WHEEL naming a wheel (scripts/test.sh sets it to the one scripts/wheel.sh
built from this tree through the same pyproject.toml), that wheel is installed instead of building
the tree a second time.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import BUILD, REPO, xvfb_display

# scripts/test.sh runs this file once its wheel is built, with STALLSCOPE_TEST_WHEEL naming it.
pytestmark = pytest.mark.wheel

SLOW_GETITEM = REPO / "examples" / "slow_getitem.py"
# A dataset the reference loader reads natively (TensorDataset): 2 epochs of 16 batches.
TENSOR_TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
ds = TensorDataset(torch.randn(512, 16), torch.randn(512, 1))
model = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
for epoch in range(2):
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
print("done")
"""


@dataclass
class Installed:
    venv: Path  # the virtual environment
    env: dict[str, str]  # a shell's environment with it activated
    site: Path  # its site-packages
    base: Path  # a directory outside the source tree: the current directory of every program run


def torch_version() -> str | None:
    try:
        out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().split("+")[0] if out.returncode == 0 else None


def cmake_cache(path: Path) -> dict[str, str]:
    """NAME -> value of a CMakeCache.txt, or {} when there is none."""
    out = {}
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            if line and line[0] not in "#/" and ":" in line and "=" in line:
                name, _, rest = line.partition(":")
                out[name] = rest.partition("=")[2]
    return out


def clean_env(venv: Path) -> dict[str, str]:
    """The environment of a shell with the venv activated, nothing of stallscope's or the repo's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STALLSCOPE_") and k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["VIRTUAL_ENV"] = str(venv)
    env.pop("PYTHONHOME", None)
    return env


def run(cmd, *, env, cwd, timeout=600, check=True):
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {p.returncode}\n--- stdout\n{p.stdout[-4000:]}\n"
                             f"--- stderr\n{p.stderr[-4000:]}")
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The environment after `pip install <repo>` (or of the wheel built from it) into a new venv that
    held only torch."""
    version = torch_version()
    if version is None:
        pytest.skip("torch is not installed here (scripts/setup.sh installs it): the installed command needs "
                    "it to record an example")
    base = tmp_path_factory.mktemp("pip")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = clean_env(venv)
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", f"torch=={version}"], env=env, cwd=base, timeout=900)

    wheel = os.environ.get("STALLSCOPE_TEST_WHEEL")
    if wheel:
        run([py, "-m", "pip", "install", "-q", wheel], env=env, cwd=base, timeout=600)
    else:
        build(py, env, base)
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"], env=env,
                    cwd=base).stdout.strip())
    return Installed(venv=venv, env=env, site=site, base=base)


def build(py: str, env: dict[str, str], base: Path) -> None:
    """`pip install <repo>`: scikit-build-core builds the tree into <repo>/build-pip."""
    build_env = dict(env)
    args = [py, "-m", "pip", "install", "-q", str(REPO),
            f"--config-settings=build-dir={REPO / 'build-pip'}",
            "--config-settings=cmake.build-type=RelWithDebInfo",
            "--config-settings=cmake.define.STALLSCOPE_WERROR=ON"]
    main_cache = cmake_cache(BUILD / "CMakeCache.txt")
    if shutil.which("ccache") and main_cache.get("CMAKE_CXX_COMPILER_LAUNCHER") == "ccache":
        # ccache hashes the compiler's name too: the main build's (c++ or g++) is named.
        build_env.update(CCACHE_BASEDIR=str(REPO), CCACHE_NOHASHDIR="true")
        for lang in ("C", "CXX"):
            args.append(f"--config-settings=cmake.define.CMAKE_{lang}_COMPILER_LAUNCHER=ccache")
            if main_cache.get(f"CMAKE_{lang}_COMPILER"):
                args.append(f"--config-settings=cmake.define.CMAKE_{lang}_COMPILER={main_cache[f'CMAKE_{lang}_COMPILER']}")
    run(args, env=build_env, cwd=base, timeout=1800)


def test_the_install_tree_is_inside_the_environment(installed):
    venv = installed.venv
    env = installed.env
    site = installed.site
    base = installed.base
    tree = site / "_stallscope"
    for rel in ("bin/stallscope", "lib/libstallscope.so", "python/stallscope/__init__.py",
                "python/stallscope/_boot/sitecustomize.py", "share/stallscope/assets/fonts/DejaVuSans.ttf"):
        assert (tree / rel).is_file(), f"{rel} is not installed under {tree}"
    assert any(p.name.startswith("_stallscope_loader.") for p in (tree / "lib").iterdir()), \
        "the reference loader's native module is not installed"
    assert any(p.name.startswith("_stallscope_hooks.") for p in (tree / "lib").iterdir()), \
        "the hooks' C module is not installed"
    assert (site / "_stallscope.pth").read_text().strip() == "_stallscope/python"
    assert (venv / "bin" / "stallscope").is_file()

    # The package, its native library and the loader's module, as a plain `import stallscope` finds them.
    probe = ("import stallscope, stallscope._native as n, stallscope.reference_loader as r\n"
             "assert n.available, n.load_error\n"
             "print(stallscope.__file__); print(n.lib_path); print(r._native_module().__file__)\n")
    out = run([str(venv / "bin" / "python"), "-c", probe], env=env, cwd=base).stdout.split()
    for path in out:
        assert Path(path).resolve().is_relative_to(tree), f"{path} is not from the environment's install tree"


def test_python_dash_m_stallscope_runs_the_installed_command(installed):
    venv = installed.venv
    env = installed.env
    base = installed.base
    p = run([str(venv / "bin" / "python"), "-m", "stallscope", "--version"], env=env, cwd=base)
    assert p.stdout.startswith("stallscope 0.1.0"), p.stdout
    p = run(["stallscope", "report", "--help"], env=env, cwd=base)
    assert "Usage: stallscope report" in p.stdout
    # Errors and exit statuses are the executable's own (exec, not a child).
    p = run(["stallscope", "report", str(base / "missing.db")], env=env, cwd=base, check=False)
    assert p.returncode != 0 and p.stderr.count("\n") == 1 and "missing.db" in p.stderr, p.stderr


@pytest.mark.timed
def test_record_report_and_export_an_example(installed):
    env = installed.env
    base = installed.base
    db = base / "run.db"
    p = run(["stallscope", "run", "-o", str(db), "--", "python", str(SLOW_GETITEM)], env=env, cwd=base)
    assert f"recording saved to {db}" in p.stderr, p.stderr
    with sqlite3.connect(db) as c:
        spans = c.execute("SELECT count(*) FROM span_view").fetchone()[0]
    assert spans > 0, "the recording holds no spans"

    report = json.loads(run(["stallscope", "report", "--json", str(db)], env=env, cwd=base).stdout)
    assert report["steps"] == 80, report.get("steps")
    # slow_getitem.py stalls about 80 % of the time by construction.
    assert 0.6 < report["stall"]["fraction"] < 0.95, report["stall"]["fraction"]

    trace = base / "run.json"
    run(["stallscope", "export", str(db), "-o", str(trace)], env=env, cwd=base)
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X" or e.get("ph") == "B") > 0
    csv_dir = base / "run-csv"
    run(["stallscope", "export", "--format", "csv", str(db), "-o", str(csv_dir)], env=env, cwd=base)
    assert (csv_dir / "spans.csv").read_text().count("\n") > 1


def test_the_reference_loader_swaps_in_from_the_installed_tree(installed):
    env = installed.env
    base = installed.base
    db = base / "ref.db"
    script = base / "tensor_train.py"
    script.write_text(TENSOR_TRAIN)
    p = run(["stallscope", "run", "--loader", "reference", "-o", str(db), "--", "python", str(script)],
            env=env, cwd=base)
    assert "recording saved" in p.stderr, p.stderr
    report = json.loads(run(["stallscope", "report", "--json", str(db)], env=env, cwd=base).stdout)
    assert report["steps"] == 32, report.get("steps")
    assert [ld["kind"] for ld in report["loaders"]] == ["reference"], report["loaders"]


def test_the_dashboard_opens_a_recording(installed):
    env = installed.env
    base = installed.base
    db = base / "run.db"
    if not db.exists():
        run(["stallscope", "run", "-o", str(db), "--", "python", str(SLOW_GETITEM)], env=env, cwd=base)
    with xvfb_display() as display:
        if display is None:
            pytest.skip("Xvfb is not installed (apt-get install xvfb): the dashboard needs a display")
        shot = base / "ui.png"
        layout = base / "ui.json"
        run(["stallscope", "ui", "--screenshot", str(shot), "--layout-dump", str(layout), str(db)],
            env={**env, "DISPLAY": f":{display}"}, cwd=base, timeout=120)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "main" in layout.read_text()
