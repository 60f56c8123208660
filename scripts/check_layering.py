#!/usr/bin/env python3
"""Checks that the rooms include each other one way only (docs/architecture.md).

Each room (top-level folder of C++ code) may include its own headers and those of the rooms
listed for it below; `stallscope/` (the public headers under include/) is open to every room.
Some headers are private to their room: SQLite is seen by storage/ only, so SQL lives there.
A room that includes one above it, tests/, or another room's private header fails the check with
one line per include:

    ui/views.h:14: ui includes inject/ (ui may include: common, collector, storage, analysis, ui)

  scripts/check_layering.py [--root DIR]   check the tree at DIR (default: this repository)
  scripts/check_layering.py --self-test    show that a wrong include is caught

Exit status: 0 when every include is allowed, 1 when some are not, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

# Bottom up. A room may include the rooms named here (itself included); nothing else of the project.
ALLOWED: dict[str, tuple[str, ...]] = {
    "common": ("common",),
    "collector": ("common", "collector"),
    "storage": ("common", "collector", "storage"),
    "remote": ("common", "collector", "storage", "remote"),
    "inject": ("common", "collector", "storage", "inject"),
    "analysis": ("common", "collector", "storage", "analysis"),
    "loader": ("common", "loader"),
    "ui": ("common", "collector", "storage", "remote", "analysis", "ui"),
    "export": ("common", "collector", "storage", "analysis", "export"),
    "pyhooks": ("common", "pyhooks"),
    "cli": ("common", "collector", "storage", "remote", "inject", "analysis", "loader", "ui", "export", "cli"),
}
# Include prefixes that name a part of the project; any other prefix is a library's.
PROJECT = set(ALLOWED) | {"tests", "bench", "stallscope"}
OPEN_TO_ALL = {"stallscope"}  # include/stallscope: the public C API and the version
# Headers only their own room may include.
PRIVATE = {"storage/sqlite.h": "storage", "storage/row_decode.h": "storage"}
SUFFIXES = {".h", ".hh", ".hpp", ".c", ".cc", ".cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(([A-Za-z0-9_]+)/[^"]+)"')


def violations(root: Path) -> list[str]:
    out = []
    for room, allowed in ALLOWED.items():
        folder = root / room
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header, target = m.group(1), m.group(2)
                if header in PRIVATE and PRIVATE[header] != room:
                    out.append(f"{path.relative_to(root)}:{number}: {room} includes {header}, private to {PRIVATE[header]}/")
                    continue
                if target not in PROJECT or target in OPEN_TO_ALL or target in allowed:
                    continue
                out.append(
                    f"{path.relative_to(root)}:{number}: {room} includes {target}/ "
                    f"({room} may include: {', '.join(allowed)})"
                )
    return out


def self_test() -> int:
    """A tree with allowed and forbidden includes: the check must report exactly the forbidden ones."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "storage").mkdir()
        (root / "ui").mkdir()
        (root / "storage" / "ok.cc").write_text('#include "collector/event.h"\n#include "stallscope/version.h"\n')
        (root / "storage" / "bad.cc").write_text('#include <vector>\n#include "analysis/report.h"\n')
        (root / "storage" / "sql.cc").write_text('#include "storage/sqlite.h"\n')
        (root / "ui" / "bad.h").write_text('#pragma once\n#include "inject/launcher.h"\n#include "storage/reader.h"\n')
        (root / "ui" / "sql.cc").write_text('#include "storage/sqlite.h"\n')
        found = violations(root)
        expected = [
            "storage/bad.cc:2: storage includes analysis/",
            "ui/bad.h:2: ui includes inject/",
            "ui/sql.cc:1: ui includes storage/sqlite.h, private to storage/",
        ]
        if len(found) != len(expected) or not all(f.startswith(e) for f, e in zip(found, expected, strict=True)):
            print("check_layering self-test FAILED; found:", *found, sep="\n  ", file=sys.stderr)
            return 1
        print("check_layering self-test: a wrong include is reported:", *found, sep="\n  ")
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--self-test", action="store_true", help="show that a wrong include is caught")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.root.is_dir():
        print(f"check_layering: {args.root} is not a folder; pass the repository root", file=sys.stderr)
        return 2
    found = violations(args.root)
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"check_layering: {len(found)} include(s) against the layering (docs/architecture.md)", file=sys.stderr)
        return 1
    print(f"check_layering: {', '.join(ALLOWED)}: every include goes one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
