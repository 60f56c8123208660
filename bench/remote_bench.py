#!/usr/bin/env python3
"""The dashboard over a slow link, side by side with the dashboard on the same machine
(docs/dashboard.md, "Remote nodes"). A real sshd on loopback and the user's ssh, through a relay
that adds 25 ms each way (50 ms RTT) and caps each direction at 10 MB/s; the dashboard's own
source (tests/ui/source_probe) reads:

  whole run   a long recording opened (overview of the whole run + the detail window): seconds to
              the first complete view, and the bytes that crossed the link (goal < 2 s, < 20 MB)
  live        a real training loop followed live, local and remote at once: how far behind the
              wall clock the newest event shown is, p50 and p99 (goal: remote p99 <= 250 ms; the
              local figure beside it: the recorder's own flush period is part of both)
  frames      bench/ui_bench on the same long recording, local and over the link: the CPU time of
              a whole dashboard frame while panning (the link's reads happen on the reader's
              thread, outside the frames: goal "as local"), and the time a moved view's detail
              window takes to arrive

    bench/remote_bench.py [--build DIR] [--db LONG.db] [--live-seconds S] [--rounds N] [--frames N]

--db: the long recording (default: bench/ui_bench's one-hour synthetic recording, ~10 M events,
generated once with `ui_bench --generate-only`; report_bench keeps a 24-hour one in $TMPDIR that
can be named here). Needs root (sshd), openssh-server and the build's source_probe.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "python"))


def probe(build: Path, path: str, env: dict, *args: str) -> list[dict]:
    p = subprocess.run([str(build / "bin" / "source_probe"), path, *args], capture_output=True, text=True, env=env,
                       timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"remote_bench: source_probe {path} failed: {p.stderr.strip()}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def whole_run(build: Path, path: str, env: dict) -> tuple[float, int, int]:
    """Seconds to the first view that is not loading, bytes received then, rows held."""
    seen = probe(build, path, env, "--until-settled", "--no-analysis", "--seconds", "600")
    first = next(s for s in seen if s["state"] != "loading" and s["rows"] > 0)
    return first["t"], first["bytes"], first["rows"]


def ui_bench(build: Path, path: str, env: dict, frames: int) -> dict[str, str]:
    """bench/ui_bench's table for `path` (250 000 detail rows, as the dashboard holds remotely):
    measure -> the rest of its line."""
    p = subprocess.run([str(build / "bin" / "ui_bench"), "--db", path, "--detail-rows", "250000", "--frames",
                        str(frames)], capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"remote_bench: ui_bench {path} failed: {p.stderr.strip()[-400:]}")
    out = {}
    for line in p.stdout.splitlines():
        for key in ("frame, whole run, moving: median", "frame, whole run, moving: p99",
                    "frame, 1 minute, moving: median", "frame, 1 minute, moving: p99", "detail windows read"):
            if line.strip().startswith(key):
                out[key] = line.strip()[len(key):].split()
    return out


def figure(words: list[str]) -> str:
    """ui_bench's "p99 (max 1.8)  1.78 ms ..." or "1.10 ms ...": the first number before "ms"."""
    return next(words[i - 1] for i, w in enumerate(words) if w == "ms" and i > 0)


def mean_ms(words: list[str]) -> str:
    """ui_bench's "131  -  mean 169 ms, max 221 ms (outside the frame times)": the mean."""
    return words[words.index("mean") + 1]


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, round(q * (len(v) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--db", help="the long recording (default: ui_bench's one-hour one)")
    ap.add_argument("--live-seconds", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="opens of the long recording, interleaved local/remote")
    ap.add_argument("--frames", type=int, default=120, help="ui_bench's frames per zoom level (0: no frame figures)")
    args = ap.parse_args()
    build = Path(args.build).resolve()
    os.environ.setdefault("STALLSCOPE_BUILD", str(build))
    from conftest import LAUNCHER, base_env
    from remote_node import Node

    db = args.db
    if not db:
        db = os.path.join(tempfile.gettempdir(), "stallscope-ui-bench-10000000.db")
        if not os.path.exists(db):
            print("remote_bench: generating the one-hour recording (ui_bench --generate-only)...", flush=True)
            subprocess.run([str(build / "bin" / "ui_bench"), "--generate-only", "--db", db], check=True,
                           stdout=subprocess.DEVNULL)
    root = Path(tempfile.mkdtemp(prefix="stallscope-remote-bench-"))
    node = Node(root)
    try:
        env = node.env()
        rows = []
        local_t, remote_t, remote_bytes = [], [], []
        for _ in range(args.rounds):  # interleaved: the machine's noise falls on both alike
            t, _, held = whole_run(build, db, env)
            local_t.append(t)
            t, b, held_r = whole_run(build, f"ssh://slow{os.path.abspath(db)}", env)
            remote_t.append(t)
            remote_bytes.append(b)
            assert held_r > 0 and held > 0
        size_mb = os.path.getsize(db) / 1e6
        rows.append(("whole run, first view (s)", "< 2 s", f"{statistics.median(remote_t):.2f}",
                     f"{statistics.median(local_t):.2f}"))
        rows.append((f"  bytes over the link (file {size_mb:.0f} MB)", "< 20 MB",
                     f"{statistics.median(remote_bytes) / 1e6:.1f} MB", "-"))

        if args.frames > 0:  # ui_bench's frames, the same recording read both ways
            local_f = ui_bench(build, db, env, args.frames)
            remote_f = ui_bench(build, f"ssh://slow{os.path.abspath(db)}", env, args.frames)
            for key, label in (("frame, whole run, moving: median", "frame, whole run, panning: median (ms)"),
                               ("frame, whole run, moving: p99", "frame, whole run, panning: p99 (ms)"),
                               ("frame, 1 minute, moving: median", "frame, 1 minute, panning: median (ms)"),
                               ("frame, 1 minute, moving: p99", "frame, 1 minute, panning: p99 (ms)")):
                rows.append((label, "as local", figure(remote_f[key]), figure(local_f[key])))
            rows.append(("a moved view's detail window: mean (ms)", "-", mean_ms(remote_f["detail windows read"]),
                         mean_ms(local_f["detail windows read"])))

        # Live: a real loop, followed locally and over the link at once.
        tmp = Path(tempfile.mkdtemp(prefix="stallscope-remote-live-"))
        live_db = tmp / "live.db"
        stop = tmp / "stop"
        train = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(live_db), "--", sys.executable,
                                  str(REPO / "tests/python/programs/metrics_train.py"), str(args.live_seconds + 30),
                                  "0", str(stop)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=base_env())
        while not live_db.exists():
            time.sleep(0.05)
        time.sleep(1)
        results: dict[str, list[dict]] = {}

        def follow(name: str, path: str) -> None:
            results[name] = probe(build, path, env, "--seconds", str(args.live_seconds), "--no-analysis")

        threads = [threading.Thread(target=follow, args=("local", str(live_db))),
                   threading.Thread(target=follow, args=("remote", f"ssh://slow{live_db}"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.write_text("")
        train.wait(timeout=120)
        lag = {k: [s["lag_ms"] for s in v if s["state"] == "live" and s["lag_ms"] >= 0] for k, v in results.items()}
        rows.append(("live: behind the wall clock, p50 (ms)", "-", f"{pct(lag['remote'], 0.5):.0f}",
                     f"{pct(lag['local'], 0.5):.0f}"))
        rows.append(("live: behind the wall clock, p99 (ms)", "<= 250", f"{pct(lag['remote'], 0.99):.0f}",
                     f"{pct(lag['local'], 0.99):.0f}"))
        rows.append(("live: snapshots seen", "-", str(len(lag["remote"])), str(len(lag["local"]))))
    finally:
        node.stop()
    print(f"\nremote_bench: 50 ms RTT, 10 MB/s, {args.rounds} interleaved opens of {os.path.basename(db)}; "
          f"live {args.live_seconds:.0f} s")
    print(f"| {'figure':44} | {'goal':8} | {'over ssh':>10} | {'local':>8} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 12}|{'-' * 10}|")
    for name, goal, remote, local in rows:
        print(f"| {name:44} | {goal:8} | {remote:>10} | {local:>8} |")


if __name__ == "__main__":
    main()
