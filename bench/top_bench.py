"""What `stallscope top` costs: its own CPU while it follows a running job, and the job's speed with
and without it.

Runs tests/python/programs/top_train.py (a DataLoader with workers whose samples sleep, a small
model) under `stallscope run`, in interleaved pairs: one run without `top`, one with `top PID`
attached in a pseudo-terminal of 80x24 for the whole training (the order alternates from pair to
pair, so that a drift of the machine falls on both sides). Reported: top's CPU from
/proc/PID/stat (user + system time over its wall time, in % of one core), and the job's samples/s
(its own clock) with top over without, per pair and their median.
    python3 bench/top_bench.py [--pairs N] [--steps N] [--sleep S] [--build DIR]
"""
import argparse
import fcntl
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time

from bench_rows import row as bench_row

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TRAIN = os.path.join(REPO, "tests", "python", "programs", "top_train.py")
CPU_GOAL = 2.0  # % of a core
SPEED_GOAL = 0.99  # samples/s with top / without, at least
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15 of proc(5))


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


class Top:
    """`stallscope top PID` in a pseudo-terminal of 80x24; its output drained and dropped."""

    def __init__(self, launcher, pid, env):
        self.pid, fd = pty.fork()
        if self.pid == 0:
            os.execve(launcher, [launcher, "top", str(pid)], env)
        self.fd = fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.frames = 0
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.t0, self.cpu0 = time.perf_counter(), 0.0

    def _drain(self):
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.frames += data.count(b"\x1b[H")

    def start_measuring(self):
        self.t0, self.cpu0 = time.perf_counter(), cpu_seconds(self.pid)

    def stop(self):
        """top's CPU in % of a core since start_measuring(); then `q`, and its exit status."""
        cpu = 100 * (cpu_seconds(self.pid) - self.cpu0) / (time.perf_counter() - self.t0)
        os.write(self.fd, b"q")
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return cpu, os.waitstatus_to_exitcode(status)


def one(launcher, with_top, steps, sleep, tmp, n, env):
    db = os.path.join(tmp, f"run{n}.db")
    p = subprocess.Popen([launcher, "run", "-q", "-o", db, "--", sys.executable, TRAIN, str(steps), "2", str(sleep)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.stdout.readline().strip() != "training":
        sys.exit(f"top_bench: the training did not start: {p.stderr.read()[-500:]}")
    top = cpu = None
    if with_top:
        pid = None
        for _ in range(200):
            pid = next((c for c in children(p.pid) if "top_train.py" in open(f"/proc/{c}/cmdline").read()), None)
            if pid:
                break
            time.sleep(0.05)
        top = Top(launcher, pid, env)
        time.sleep(2)  # past its first read of the recording and first analysis: the steady cost
        top.start_measuring()
    while p.poll() is None:  # the training's end; top is stopped at once
        time.sleep(0.1)
    if top:
        cpu, rc = top.stop()
        if rc != 0:
            sys.exit(f"top_bench: top exited with status {rc}")
        if top.frames < 3:
            sys.exit(f"top_bench: top drew {top.frames} frames")
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"top_bench: the training failed (rc {p.returncode}): {err[-500:]}")
    rate = next(float(ln.split()[1]) for ln in out.splitlines() if ln.startswith("RATE "))
    return rate, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=600, help="steps per run (about 20 ms each)")
    ap.add_argument("--sleep", type=float, default=0.01,
                    help="seconds each sample sleeps in __getitem__ (less: more batches, and rows, a second)")
    ap.add_argument("--build", default=os.environ.get("STALLSCOPE_BUILD", os.path.join(REPO, "build")))
    a = ap.parse_args()
    launcher = os.path.join(a.build, "bin", "stallscope")
    if not os.path.exists(launcher):
        sys.exit(f"top_bench: no {launcher}; build first, or pass --build DIR")
    with tempfile.TemporaryDirectory() as tmp:
        runtime = os.path.join(tmp, "runtime")
        os.mkdir(runtime, 0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith("STALLSCOPE_") and k != "LD_PRELOAD"}
        env.update(XDG_RUNTIME_DIR=runtime, LANG="C.UTF-8", TERM="xterm")
        pairs = []
        for i in range(a.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {w: one(launcher, w, a.steps, a.sleep, tmp, 2 * i + j, env) for j, w in enumerate(order)}
            pairs.append((got[False][0], got[True][0], got[True][1]))
            print(f"pair {i + 1}: without top {got[False][0]:.1f} samples/s, with top {got[True][0]:.1f}, "
                  f"top's CPU {got[True][1]:.2f} % of a core", flush=True)
    ratios = [w / wo for wo, w, _ in pairs]
    cpus = [c for _, _, c in pairs]
    ratio, cpu = statistics.median(ratios), statistics.median(cpus)
    print()
    print(f"{'figure':<44}{'goal':>12}{'measured':>14}")
    print(f"{'top CPU, % of a core (median of ' + str(len(cpus)) + ')':<44}{'< 2 %':>12}{cpu:>12.2f} %")
    print(f"{'top CPU, highest run':<44}{'':>12}{max(cpus):>12.2f} %")
    print(f"{'samples/s with top / without (median)':<44}{'>= 0.99':>12}{ratio:>14.3f}")
    print(f"{'  per pair':<44}{'':>12}{'  ' + ' '.join(f'{r:.3f}' for r in ratios):>14}")
    print(f"{'samples/s without top (median)':<44}{'':>12}{statistics.median(p[0] for p in pairs):>14.1f}")
    print(f"{'  spread of the pairs without top (max/min)':<44}{'':>12}"
          f"{max(p[0] for p in pairs) / min(p[0] for p in pairs):>14.3f}")
    bench_row("top: its CPU while following a job", f"{cpu:.2f} % of a core", "< 2 %", met=cpu < CPU_GOAL)
    bench_row("top: the job's samples/s with top / without", f"{ratio:.3f}", ">= 0.99", met=ratio >= SPEED_GOAL)


if __name__ == "__main__":
    main()
