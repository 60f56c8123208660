"""The recorder on a machine without a screen (a GPU node): `stallscope`, libstallscope.so and the
Python modules link no GUI library, and `stallscope ui` there says in one line where the dashboard
can be seen instead of failing inside the dashboard.

The dashboard is its own executable, stallscope-ui, beside stallscope in bin/ (docs/dashboard.md);
`stallscope ui` checks for a display and the OpenGL library and then runs it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, LAUNCHER, LIBRARY

DASHBOARD = BUILD / "bin" / "stallscope-ui"

# Libraries of a window (X11 and its xcb, OpenGL in every packaging: libGL, libOpenGL, libGLX,
# libGLdispatch, libEGL), of the dashboard (GLFW, ImGui, stb) and of OpenCV.
GUI_LIBRARY = re.compile(r"^lib(X|xcb|GL|OpenGL|EGL|glfw|imgui|stb|opencv)")


def needed(path: Path) -> list[str]:
    """Every shared library `path` loads, its own and theirs (ldd), by name."""
    if shutil.which("ldd"):
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=60, check=True).stdout
        return [line.split()[0] for line in out.splitlines() if line.strip() and "=>" in line]
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, timeout=60, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def recorder_files() -> list[Path]:
    lib = BUILD / "lib"
    return [LAUNCHER, LIBRARY, *sorted(lib.glob("_stallscope_loader*.so")), *sorted(lib.glob("_stallscope_hooks*.so"))]


@pytest.mark.parametrize("name", ["bin/stallscope", "lib/libstallscope.so", "lib/_stallscope_loader*.so",
                                  "lib/_stallscope_hooks*.so"])
def test_the_recorder_links_no_gui_library(name):
    files = sorted(BUILD.glob(name))
    if not files:
        pytest.skip(f"{name} is not built in {BUILD}")
    for f in files:
        libs = needed(f)
        assert libs, f"ldd found no libraries in {f}"
        gui = [n for n in libs if GUI_LIBRARY.match(n)]
        assert not gui, f"{f.relative_to(BUILD)} loads {gui}: a headless node would need them"


def no_display_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}


def needs_dashboard():
    if not DASHBOARD.exists():
        pytest.skip(f"the dashboard is not built ({DASHBOARD})")


def test_ui_without_a_display_says_where_to_look_in_one_line(tmp_path):
    needs_dashboard()
    # The file need not exist: the display is checked before anything else.
    r = subprocess.run([str(LAUNCHER), "ui", str(tmp_path / "run.db")], env=no_display_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("stallscope: ui: no display here"), lines[0]
    assert "machine with a screen" in lines[0] and "stallscope ui" in lines[0], lines[0]
    assert "stallscope report" in lines[0], lines[0]
    assert r.stdout == ""
    # Options or not, the same answer: the dashboard cannot run here whatever it is asked.
    r = subprocess.run([str(LAUNCHER), "ui", "--screenshot", str(tmp_path / "x.png")], env=no_display_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r
    assert not (tmp_path / "x.png").exists()


def test_ui_in_a_wayland_session_without_xwayland_says_the_dashboard_speaks_x11(tmp_path):
    # GLFW is built for X11: WAYLAND_DISPLAY alone would only fail later, inside GLFW.
    needs_dashboard()
    env = dict(no_display_env(), WAYLAND_DISPLAY="wayland-0")
    r = subprocess.run([str(LAUNCHER), "ui", str(tmp_path / "run.db")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("stallscope: ui: no X11 display here"), lines[0]
    assert "XWayland" in lines[0] and "machine with a screen" in lines[0], lines[0]


def test_ui_help_needs_no_display():
    needs_dashboard()
    for flag in ("--help", "-h"):
        r = subprocess.run([str(LAUNCHER), "ui", flag], env=no_display_env(), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r
        assert r.stdout.startswith("Usage: stallscope ui "), r.stdout
        for option in ("--screenshot", "--size", "--range", "--detail-rows"):  # the dashboard's own
            assert option in r.stdout, (option, r.stdout)
        assert r.stderr == ""


def test_ui_without_the_dashboard_beside_it_says_so(tmp_path):
    # A stallscope whose bin/ has no stallscope-ui (installed without the dashboard, or copied alone).
    needs_dashboard()
    alone = tmp_path / "bin" / "stallscope"
    alone.parent.mkdir()
    shutil.copy2(LAUNCHER, alone)
    r = subprocess.run([str(alone), "ui", "run.db"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert "stallscope-ui" in lines[0] and "stallscope report" in lines[0], lines[0]


def test_ui_runs_the_dashboard_with_the_same_arguments(tmp_path):
    # Through exec: the dashboard's own usage error and exit status (2), worded as `stallscope ui`'s.
    needs_dashboard()
    env = no_display_env()
    env["DISPLAY"] = ":999"  # named, never connected to: the command line is refused first
    r = subprocess.run([str(LAUNCHER), "ui", "--size", "12", "run.db"], env=env, capture_output=True, text=True,
                       timeout=60)
    if "OpenGL library" in r.stderr:
        pytest.skip(f"no OpenGL library here: {r.stderr.strip()}")
    assert r.returncode == 2, r
    want = "stallscope: --size needs WIDTHxHEIGHT, e.g. 1600x1000 (see 'stallscope ui --help')"
    assert r.stderr.splitlines() == [want], r.stderr


def test_the_dashboard_links_no_opengl():
    # ImGui's OpenGL backend and the window load libGL.so.1 when the window opens; nothing links it.
    needs_dashboard()
    libs = needed(DASHBOARD)
    assert not [n for n in libs if re.match(r"^lib(GL|OpenGL|EGL)", n)], libs
