"""`python -m stallscope ...` and the `stallscope` command that `pip install` puts on PATH.

Both run the native `stallscope` executable of the same install tree with the same arguments
(exec: same process, so signals and the exit status are the executable's own). The tree is the one
`cmake --install` makes (PREFIX/python/stallscope beside PREFIX/bin) or, in a source checkout, the
build directory (python/stallscope beside build/bin).
"""

from __future__ import annotations

import os
import sys


def _executable() -> str | None:
    pkg = os.path.dirname(os.path.realpath(__file__))
    root = os.path.dirname(os.path.dirname(pkg))
    for path in (os.path.join(root, "bin", "stallscope"), os.path.join(root, "build", "bin", "stallscope")):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main() -> int:
    exe = _executable()
    if exe is None:
        sys.stderr.write("stallscope: the stallscope executable is not installed beside this package "
                         f"({os.path.dirname(os.path.realpath(__file__))}); reinstall with `pip install .` "
                         "or build with cmake\n")
        return 2
    try:
        os.execv(exe, ["stallscope", *sys.argv[1:]])
    except OSError as e:
        sys.stderr.write(f"stallscope: cannot run {exe}: {e}\n")
        return 2
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
