"""The Python package's own rules, read from its source: the traceback filter knows every file of
the package, the hooks' run-time state lives in one module, the hooks' modules import each other
one way, and the hooks name events only through stallscope/_vocab.py."""

from __future__ import annotations

import ast
import re
import sys

from conftest import PYTHON_DIR

PKG = PYTHON_DIR / "stallscope"
HOOKS = PKG / "hooks"


def parse(path):
    return ast.parse(path.read_text(), filename=str(path))


def test_every_file_of_the_package_counts_as_ours():
    sys.path.insert(0, str(PYTHON_DIR))
    try:
        from stallscope import _tb
    finally:
        sys.path.remove(str(PYTHON_DIR))
    files = sorted(PKG.rglob("*.py"))
    assert HOOKS / "_main.py" in files and HOOKS / "_worker.py" in files
    assert [f for f in files if not _tb.is_ours(str(f))] == []
    assert not _tb.is_ours(str(PYTHON_DIR / "stallscope_other" / "x.py"))


def test_hooks_rebind_state_only_in_the_state_module():
    # A name imported by value from _state would keep the value it had at import.
    state = parse(HOOKS / "_state.py")
    classes = {n.name for n in state.body if isinstance(n, ast.ClassDef)}
    for path in sorted(HOOKS.glob("*.py")):
        if path.name == "_state.py":
            continue
        for node in ast.walk(parse(path)):
            assert not isinstance(node, ast.Global), f"{path.name}:{node.lineno}: global {node.names}"
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "_state":
                names = {a.name for a in node.names}
                assert names <= classes, f"{path.name}:{node.lineno}: import {names - classes} as S.<name>"


def test_hooks_modules_import_each_other_one_way():
    # Imports inside functions count too: they are how a circle hides. _install owns the
    # installation and imports _main and _worker; they reach its later steps through _state.
    mods = {p.stem for p in HOOKS.glob("*.py")}
    graph = {}
    for path in HOOKS.glob("*.py"):
        deps = set()
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {a.name for a in node.names} if node.module is None else {node.module}
        graph[path.stem] = (deps & mods) - {path.stem}
    assert "_install" in graph["__init__"] and {"_main", "_worker"} <= graph["_install"]

    def circle_from(start, node, path):
        for dep in sorted(graph[node]):
            if dep == start:
                return [*path, start]
            if dep not in path:
                found = circle_from(start, dep, [*path, dep])
                if found:
                    return found
        return None

    circles = [c for c in (circle_from(m, m, [m]) for m in sorted(graph)) if c]
    assert circles == [], " -> ".join(circles[0]) if circles else ""


def test_hooks_name_events_only_through_the_vocabulary():
    vocab = parse(PKG / "_vocab.py")
    names = {n.value.value for n in vocab.body
             if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    assert {"dl.next", "dl.fetch", "stallscope.hooks"} <= names
    event_like = re.compile(r"^(dl|proc|stallscope)\.[a-z_]+$|^dl-")
    for path in sorted(HOOKS.glob("*.py")):
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in names and not event_like.match(node.value), \
                    f"{path.name}:{node.lineno}: {node.value!r} belongs in stallscope/_vocab.py"
