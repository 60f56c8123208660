"""One row of `bench/run`'s table. A benchmark calls row() for each headline figure; when
STALLSCOPE_BENCH_ROWS names a file (bench/run sets it), the row is appended to it as one JSON line.
Without it nothing is written: the benchmark's own tables are its output."""
from __future__ import annotations

import json
import os


def row(name: str, value: str, goal: str = "", peer: str = "", met: bool | None = None) -> None:
    path = os.environ.get("STALLSCOPE_BENCH_ROWS")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"row": name, "value": value, "goal": goal, "peer": peer, "met": met}) + "\n")
