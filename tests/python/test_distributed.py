"""Multi-rank jobs for real: `stallscope run -- torchrun --nproc_per_node 2` of a DDP job on gloo
(tests/python/programs/ddp_prog.py) whose rank 1 has the slower input pipeline. Every rank says who
it is, DDP's gradient buckets and the explicit all_reduce are recorded as collectives on both
ranks with matching numbers, the report names rank 1 the slowest and puts rank 0's wait in the
collectives, not in its data; and the training's result is the same as without stallscope, with
DDP's built-in reduction, with a communication hook the program registers itself, and with a
built-in hook registered after the first forward (when stallscope's timing hook is in place), the
DDP module being freed when the program drops it. A job that exits the moment its last reduction
completes exits cleanly (tests/python/programs/ddp_exit_prog.py), and the exit wait that makes it
so lasts until stallscope's callbacks are freed and no longer than its bound."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import LAUNCHER, PROGRAMS, PYTHON_DIR, base_env

pytestmark = pytest.mark.torch

PROG = PROGRAMS / "ddp_prog.py"
CHECKSUM = re.compile(r"CHECKSUM (\S+)")


def ddp_env():
    """The jobs' environment: gloo on the loopback interface (every rank is on this host), not on
    whatever the host name resolves to."""
    return base_env(GLOO_SOCKET_IFNAME="lo")


def torchrun(*args):
    exe = shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def job(tmp_path, recorded, *extra, name="job.db"):
    cmd = [*torchrun(), "--standalone", "--nproc_per_node", "2", str(PROG), *extra]
    db = tmp_path / (name if recorded else "none")
    if recorded:
        cmd = [str(LAUNCHER), "run", "-o", str(db), "--", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ddp_env(), timeout=180, cwd=tmp_path)
    m = CHECKSUM.search(p.stdout)
    assert p.returncode == 0 and m, f"rc={p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    if "--free-check" in extra:
        # Both ranks dropped their DDP module and it was freed: stallscope's hook holds no
        # reference to it (the reducer holds the hook, and the module the reducer).
        assert p.stdout.count("FREED True") == 2, p.stdout
    return m.group(1), db


def rows(db, sql):
    import sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("extra", [[], ["--user-hook"], ["--late-builtin"]],
                         ids=["ddp-default", "user-hook", "late-builtin-hook"])
@pytest.mark.timed
def test_ddp_job_ranks_collectives_and_the_slowest_rank(tmp_path, extra):
    plain, _ = job(tmp_path, False, *extra, "--free-check")
    recorded, db = job(tmp_path, True, *extra, "--free-check")
    assert recorded == plain  # the same training result, to the last digit

    ranks = rows(db, "SELECT pid, arg0, arg2 FROM instant_view WHERE name = 'dist.rank' ORDER BY arg0")
    assert [(r[1], r[2]) for r in ranks] == [(0, 2), (1, 2)]
    pid = {r[1]: r[0] for r in ranks}
    # DDP's buckets: issued and done on both ranks, the same numbers on each. Timed by stallscope's
    # hook (op ddp.all_reduce); a hook the program registered before its first DataLoader iteration
    # shows as the asynchronous all_reduce it calls.
    issued = {}
    bucket_ops = "('ddp.all_reduce', 'all_reduce')"
    for rank, p in pid.items():
        issued[rank] = {seq for (seq,) in rows(db, f"SELECT i.arg1 FROM instant_view i JOIN strings s ON s.id = i.arg2 "
                                                    f"WHERE i.name = 'dist.issue' AND s.value IN {bucket_ops} "
                                                    f"AND i.pid = {p}")}
        done = {seq for (seq,) in rows(db, f"SELECT arg1 FROM instant_view WHERE name = 'dist.done' AND pid = {p}")}
        assert len(issued[rank]) >= 24 and issued[rank] <= done, (rank, len(issued[rank]), len(done))
    assert issued[0] == issued[1]
    # The explicit all_reduce at each epoch's end: a span on both ranks, the same numbers.
    spans = {rank: [r[0] for r in rows(db, f"SELECT s.arg1 FROM span_view s JOIN strings n ON n.id = s.arg2 "
                                          f"WHERE s.name = 'dist.collective' AND n.value = 'all_reduce' "
                                          f"AND s.pid = {p} ORDER BY s.start_ns")] for rank, p in pid.items()}
    assert len(spans[0]) == 2 and spans[0] == spans[1]

    out = subprocess.run([str(LAUNCHER), "report", "--json", str(db)], capture_output=True, text=True, check=True)
    rep = json.loads(out.stdout)
    assert rep["slowest_rank"]["rank"] == 1, rep["slowest_rank"]
    r0, r1 = rep["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    # Rank 0 waits for rank 1 in the collectives, not for its own data; rank 1 waits for its data.
    data0 = r0["stall"]["by_cause"].get("data_wait", 0.0)
    assert r0["collective_wait_s"] > 3 * data0, r0
    assert r1["stall"]["fraction"] > 0.6 and r0["stall"]["fraction"] < 0.3, (r0, r1)
    # The job's headline figures are the slowest rank's.
    assert rep["training_pid"] == pid[1]


def test_a_ddp_job_that_exits_the_moment_its_last_reduction_completes_exits_cleanly(tmp_path):
    # programs/ddp_exit_prog.py: gloo's threads still have to take the GIL to free stallscope's
    # callbacks on the last step's futures (and PyTorch's works) when the interpreter finalizes,
    # which aborts the process if nothing waits for them. Without stallscope's wait at exit it
    # aborted 6 times in 6 (plain PyTorch: 7 in 8); with it, never.
    for i in range(3):
        db = tmp_path / f"exit{i}.db"
        cmd = [str(LAUNCHER), "run", "-q", "-o", str(db), "--", *torchrun(), "--standalone", "--nproc_per_node", "2",
               str(PROGRAMS / "ddp_exit_prog.py")]
        p = subprocess.run(cmd, capture_output=True, text=True, env=ddp_env(), timeout=180, cwd=tmp_path)
        assert p.returncode == 0, f"run {i}: rc={p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
        assert "terminate called" not in p.stderr, p.stderr[-3000:]
        # The hooks were in: DDP's buckets timed on both ranks.
        assert rows(db, "SELECT COUNT(DISTINCT pid) FROM instant_view WHERE name = 'dist.done'") == [(2,)]


QUIESCE = """
import json, os, threading, torch
import stallscope.hooks._dist as D
import stallscope.hooks._state as S
out = {"none": D._quiesce()}  # no callback ever made: no wait at all
f = torch.futures.Future()
child = f.then(D._tracked(lambda fut: fut.value()))
threading.Timer(0.3, lambda: f.set_result(1)).start()  # completed, and the callback freed, on another thread
out["waited"] = D._quiesce(grace_s=0)
out["freed"] = all(r() is None for r in S._dist_callbacks)
out["child"] = child.done()
never = torch.futures.Future()
never.add_done_callback(D._tracked(lambda fut: None))
pid = os.fork()  # a forked child inherits the list, not the threads: it does not wait
if pid == 0:
    os._exit(0 if D._quiesce(wait_s=0.5) == 0.0 else 3)
out["child_status"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
out["bounded"] = D._quiesce(wait_s=0.2, grace_s=0.05)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.timed
def test_the_exit_wait_lasts_until_the_callbacks_are_freed_and_no_longer_than_its_bound():
    p = subprocess.run([sys.executable, "-c", QUIESCE], capture_output=True, text=True, timeout=60,
                       env=base_env(PYTHONPATH=str(PYTHON_DIR)))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.split("RESULT ", 1)[1])
    assert out["none"] == 0.0
    assert 0.25 < out["waited"] < 1.5 and out["freed"] and out["child"], out
    assert out["child_status"] == 0, out
    assert 0.24 < out["bounded"] < 1.0, out


@pytest.mark.timed
def test_one_recording_per_rank_then_merged(tmp_path):
    # torchrun starts `stallscope run` as each rank: every rank writes its own recording, named by
    # its rank, which `stallscope merge` makes one recording of the job.
    cmd = [*torchrun(), "--standalone", "--nproc_per_node", "2", "--no-python", str(LAUNCHER), "run", "-q",
           "-o", "part-{rank}.db", "--", sys.executable, str(PROG), "--epochs", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ddp_env(), timeout=180, cwd=tmp_path)
    assert p.returncode == 0 and CHECKSUM.search(p.stdout), f"{p.stdout}\n{p.stderr[-3000:]}"
    parts = sorted(tmp_path.glob("part-*.db"))
    assert [f.name for f in parts] == ["part-0.db", "part-1.db"]
    for rank, f in enumerate(parts):
        assert rows(f, "SELECT value FROM meta WHERE key = 'rank'") == [(str(rank),)]
        assert rows(f, "SELECT value FROM meta WHERE key = 'world_size'") == [("2",)]
    m = subprocess.run([str(LAUNCHER), "merge", *map(str, parts), "-o", str(tmp_path / "job.db")],
                       capture_output=True, text=True)
    assert m.returncode == 0, m.stderr
    assert "same host: one monotonic clock (exact)" in m.stderr, m.stderr
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(tmp_path / "job.db")], capture_output=True,
                         text=True, check=True)
    rep = json.loads(out.stdout)
    assert [r["rank"] for r in rep["ranks"]] == [0, 1]
    assert rep["slowest_rank"]["rank"] == 1
    assert rep["ranks"][0]["collective_wait_s"] > 0.3


@pytest.mark.timed
def test_a_four_rank_job_gives_the_same_job_view_from_its_folder_as_from_its_merged_file(tmp_path):
    # Four ranks of a real gloo job, each recording itself into job/ (rank 2's input 8x slower):
    # `report job/` reads them where they lie, `report --job` the merged file, and both name rank 2.
    (tmp_path / "job").mkdir()
    cmd = [*torchrun(), "--standalone", "--nproc_per_node", "4", "--no-python", str(LAUNCHER), "run", "-q",
           "-o", "job/part-{rank}.db", "--", sys.executable, str(PROG), "--epochs", "1", "--samples", "768",
           "--slow-rank", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ddp_env(), timeout=300, cwd=tmp_path)
    assert p.returncode == 0 and CHECKSUM.search(p.stdout), f"{p.stdout}\n{p.stderr[-3000:]}"
    parts = sorted((tmp_path / "job").glob("part-*.db"))
    assert len(parts) == 4
    m = subprocess.run([str(LAUNCHER), "merge", *map(str, parts), "-o", str(tmp_path / "merged.db")],
                       capture_output=True, text=True)
    assert m.returncode == 0, m.stderr

    def view(*args):
        out = subprocess.run([str(LAUNCHER), "report", "--json", *args], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    folder, merged = view(str(tmp_path / "job")), view("--job", str(tmp_path / "merged.db"))
    for v in (folder, merged):
        assert v["schema"] == "stallscope.job/1"
        assert v["world_size"] == 4 and v["ranks_read"] == 4
        assert v["ranks"][0]["rank"] == 2, [(r["rank"], r["data_stall_share"]) for r in v["ranks"]]
        assert v["slow_ranks"] == [2]
        # DDP reduces asynchronously: the others' wait for rank 2 is the estimate, and it is the larger.
        others = [r for r in v["ranks"] if r["rank"] != 2]
        assert all(r["behind_s"] > v["ranks"][0]["behind_s"] for r in others)
        assert [n["node"] for n in v["nodes"]] == [v["ranks"][0]["node"]]  # one host
    assert folder["slow_nodes"] == merged["slow_nodes"] == []
    by_rank = {r["rank"]: r for r in merged["ranks"]}
    for r in folder["ranks"]:
        m = by_rank[r["rank"]]
        for key in ("batches", "samples", "steps", "fetches", "collectives", "node"):
            assert r[key] == m[key], (r["rank"], key, r[key], m[key])
        # Job time starts at the earliest recording's start, the merged file's at its first input's.
        assert r["start_s"] - folder["start_s"] == pytest.approx(m["start_s"] - merged["start_s"], abs=1e-6)
        assert r["window_s"] == pytest.approx(m["window_s"], abs=1e-6)
        assert r["data_stall_share"] == pytest.approx(m["data_stall_share"], abs=0.002)
    assert folder["ranks"][0]["samples"] == 768 // 4
    # The estimate of the others' wait against what the whole report measures from every collective.
    out = subprocess.run([str(LAUNCHER), "report", "--json", str(tmp_path / "merged.db")], capture_output=True,
                         text=True, check=True)
    measured = {r["rank"]: r["collective_wait_s"] for r in json.loads(out.stdout)["ranks"]}
    for r in folder["ranks"]:
        if r["rank"] != 2:
            assert r["behind_s"] == pytest.approx(measured[r["rank"]], rel=0.25), (r["rank"], measured)
