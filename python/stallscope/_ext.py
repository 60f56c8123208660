"""Finding the project's extension modules (_stallscope_loader, _stallscope_hooks): beside the
libstallscope.so the launcher named, then the build and install trees next to this package (as
_native finds the library), then sys.path (a pip install puts them in _stallscope/lib, which the
trees above already cover)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def module_dirs() -> list[str]:
    """Where an extension module may be, most specific first."""
    out = []
    lib = os.environ.get("STALLSCOPE_LIBRARY")
    if lib:
        out.append(os.path.dirname(os.path.abspath(lib)))
    for pkg in (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.realpath(__file__))):
        for rel in (("..", "..", "lib"), ("..", "..", "build", "lib")):
            d = os.path.normpath(os.path.join(pkg, *rel))
            if d not in out:
                out.append(d)
    return out


def load(name: str, dirs: list[str]):
    """The extension module `name` (from sys.modules, one of dirs, or sys.path), or raises
    ImportError with one line saying why not. A None in sys.modules blocks it, as Python's import
    does."""
    if name in sys.modules:
        mod = sys.modules[name]
        if mod is None:
            raise ImportError(f"{name} is blocked (None in sys.modules)")
        return mod
    tried = []
    for d in dirs:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, name + suffix)
            if not os.path.exists(path):
                continue
            try:
                spec = importlib.util.spec_from_file_location(name, path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            except Exception as e:
                tried.append(f"{path}: {e}")
                continue
            sys.modules[name] = mod
            return mod
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    raise ImportError("; ".join(tried) if tried else f"no {name} in {', '.join(dirs)}")
