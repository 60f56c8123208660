"""The Python package's own rules, read from its source: the traceback filter knows every file of
the package, the hooks' run-time state lives in one module, and the hooks name events only
through stallscope/_vocab.py."""

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
