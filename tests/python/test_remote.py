"""The dashboard on another machine (docs/dashboard.md, "Remote nodes"): a real sshd started on a
loopback port with keys made here, the user's real ssh client, `stallscope serve` on the node's
side, and the dashboard's own source (tests/ui/source_probe.cc) or the dashboard under Xvfb on
this side. A relay of our own (programs/delay_relay.py) adds 25 ms each way and a 10 MB/s cap,
and is killed mid-session to cut the link."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BUILD, LAUNCHER, base_env, wait_for, xvfb_display
from remote_node import SSH_USER, Node

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
SSH = shutil.which("ssh")
PROBE = BUILD / "bin" / "source_probe"
UI = BUILD / "bin" / "stallscope-ui"
PROGRAMS = Path(__file__).parent / "programs"
RELAY = PROGRAMS / "delay_relay.py"
TRAIN = PROGRAMS / "metrics_train.py"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path(SSHD).exists() or SSH is None or not PROBE.exists(),
    reason="needs root, Debian's openssh-server (sshd), ssh and the build's source_probe")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = Node(tmp_path_factory.mktemp("node"))
    yield n
    n.stop()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished recording of a real training loop (a slow input pipeline)."""
    db = tmp_path_factory.mktemp("rec") / "run.db"
    r = subprocess.run([str(LAUNCHER), "run", "-q", "-o", str(db), "--", sys.executable, str(TRAIN), "3"],
                       capture_output=True, text=True, env=base_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return db


def probe(path: str, env: dict, *args, timeout=120) -> tuple[int, list[dict], str]:
    p = subprocess.run([str(PROBE), path, *args], capture_output=True, text=True, env=env, timeout=timeout)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")], p.stderr


class LiveTraining:
    """A real training loop recorded live to `db` until stop(): its result is checked on exit."""

    def __init__(self, db: Path):
        self.db, self.stop_file = db, db.with_suffix(".stop")
        self.proc = subprocess.Popen([str(LAUNCHER), "run", "-q", "-o", str(db), "--", sys.executable, str(TRAIN),
                                      "60", "0", str(self.stop_file)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=base_env())

    def __enter__(self) -> LiveTraining:
        assert wait_for(self.db.exists, 30)
        return self

    def stop(self) -> None:
        self.stop_file.write_text("")

    def __exit__(self, kind, value, tb) -> None:
        self.stop()
        out, err = self.proc.communicate(timeout=60)
        if kind is None:  # the training's own result, unchanged by what read its recording
            assert self.proc.returncode == 0, err
            assert "steps" in out


def test_a_finished_recording_reads_the_same_over_ssh(node, finished):
    rc, local, _ = probe(str(finished), node.env(), "--until-settled", "--seconds", "60")
    assert rc == 0
    rc, remote, err = probe(f"ssh://node1{finished}", node.env(), "--until-settled", "--seconds", "60")
    assert rc == 0, err
    last_l, last_r = local[-1], remote[-1]
    assert last_r["state"] == "finished" and last_r["analysis"]
    assert (last_r["rows"], last_r["end_ns"]) == (last_l["rows"], last_l["end_ns"]) and last_l["rows"] > 100
    assert last_r["bytes"] > 0 and last_l["bytes"] == 0


def test_the_dashboard_over_ssh_draws_what_it_draws_locally(node, finished, tmp_path):
    if not UI.exists():
        pytest.skip("the dashboard is not built")
    with xvfb_display() as display:
        if display is None:
            pytest.skip("Xvfb is not installed")
        dumps = {}
        for name, path in (("local", str(finished)), ("ssh", f"ssh://node1{finished}")):
            out = tmp_path / f"{name}.json"
            r = subprocess.run([str(UI), "--screenshot", str(tmp_path / f"{name}.png"), "--layout-dump", str(out),
                                "--size", "1400x900", path], env=node.env(DISPLAY=f":{display}"),
                               capture_output=True, text=True, timeout=180)
            assert r.returncode == 0, r.stderr
            dumps[name] = json.loads(out.read_text())

    def comparable(d: dict) -> dict:
        d = dict(d)
        # The header's timings ("read in 12 ms, analysed in 40 ms") are the link's; the rest must match.
        d["header_stats"] = d.get("header_stats", "").split(", read in")[0]
        d.pop("path", None)
        d.pop("title", None)
        return d

    assert comparable(dumps["ssh"]) == comparable(dumps["local"])


@pytest.mark.timed
def test_live_sessions_are_listed_and_followed_over_ssh(node, tmp_path):
    with LiveTraining(tmp_path / "live.db") as training:
        db = training.db
        listed = subprocess.run([str(PROBE), "--list", "ssh://node1"], capture_output=True, text=True,
                                env=node.env(), timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert f"live {db}" in listed.stdout, listed.stdout
        rc, seen, err = probe(f"ssh://node1{db}", node.env(), "--seconds", "5")
        assert rc == 0, err
        live = [s for s in seen if s["state"] == "live"]
        assert live, seen[-3:]
        assert live[-1]["rows"] > live[0]["rows"], "the remote view did not follow the live recording"


@pytest.mark.timed
def test_a_cut_link_is_said_retried_and_resumed_without_losing_or_doubling_rows(node, tmp_path):
    with LiveTraining(tmp_path / "cut.db") as training:
        db = training.db
        # Followed until the recording is complete and read: the link is cut while it is live.
        follower = subprocess.Popen([str(PROBE), f"ssh://slow{db}", "--until-finished", "--seconds", "120",
                                     "--no-analysis"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=node.env())
        time.sleep(4)
        assert node.cut_link() >= 1
        time.sleep(3)  # down for 3 s: the reconnections fail meanwhile
        node.restore_link()
        time.sleep(3)
        training.stop()
        out, err = follower.communicate(timeout=180)
        assert follower.returncode == 0, f"rc={follower.returncode}: {err}\n{out[-2000:]}"
    seen = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    down = [i for i, s in enumerate(seen) if s["link_error"]]
    assert down, "the cut link was not reported"
    assert "retrying" in seen[down[0]]["link_error"]
    assert seen[down[0]]["rows"] > 0, "what was read before the cut was dropped"
    assert any(not s["link_error"] for s in seen[down[-1] + 1:]), "the link did not come back"
    # Once the recording is complete, the remote view holds exactly its rows: none lost, none twice.
    rc, local, _ = probe(str(db), node.env(), "--until-settled", "--no-analysis", "--seconds", "60")
    assert rc == 0
    assert seen[-1]["state"] == "finished"
    assert seen[-1]["rows"] == local[-1]["rows"]
    report = subprocess.run([str(LAUNCHER), "report", str(db)], capture_output=True, text=True, env=base_env(),
                            timeout=120)
    assert report.returncode == 0, report.stderr


def test_another_user_cannot_read_a_recording_through_serve(node, finished, tmp_path):
    if subprocess.run(["id", "-u", SSH_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--create-home", "--shell", "/bin/sh", SSH_USER], check=True)
    # A login by key only: an account with a locked password is refused by sshd without PAM.
    subprocess.run(["usermod", "-p", "*", SSH_USER], check=True)
    # The folder is open to all; only the file's mode keeps the other user out.
    shared = Path(tempfile.mkdtemp(prefix="stallscope-remote-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        db = shared / "mine.db"
        shutil.copy(finished, db)
        os.chmod(db, 0o644)
        rc, seen, err = probe(f"ssh://other{db}", node.env(), "--until-settled", "--seconds", "60")
        assert rc == 0 and seen[-1]["rows"] > 100, err  # readable to all: the other user reads it
        os.chmod(db, 0o600)
        rc, _, err = probe(f"ssh://other{db}", node.env(), "--until-settled", "--seconds", "60")
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert rc == 1
    line = err.strip().splitlines()[-1]
    assert "permission denied" in line and SSH_USER in line, err


def test_serve_port_wants_its_token_and_works_through_a_relay(node, finished, tmp_path):
    token_file = tmp_path / "token"
    serve = subprocess.Popen([str(LAUNCHER), "serve", "--port", "0", "--token-file", str(token_file)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    relay = None
    try:
        first = serve.stdout.readline()
        port = int(first.split("127.0.0.1:")[1].split()[0])
        assert oct(token_file.stat().st_mode & 0o777) == "0o600"
        token = token_file.read_text().strip()
        rc, _, err = probe(f"tcp://127.0.0.1:{port}{finished}", base_env(), "--until-settled", "--seconds", "30")
        assert rc == 1 and "token" in err, err
        relay = subprocess.Popen([sys.executable, str(RELAY), "--listen", "0", "--connect", f"127.0.0.1:{port}"],
                                 stdout=subprocess.PIPE, text=True)
        relay_port = int(relay.stdout.readline())
        rc, seen, err = probe(f"tcp://127.0.0.1:{relay_port}{finished}?token={token}", base_env(), "--until-settled",
                              "--seconds", "60")
        assert rc == 0, err
        assert seen[-1]["state"] == "finished" and seen[-1]["rows"] > 100
    finally:
        if relay:
            relay.kill()
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=30)
    assert not token_file.exists()


def frame(version: int, ftype: int, payload: bytes) -> bytes:
    return b"SSRP" + bytes([version, ftype, 0, 0]) + struct.pack("<III", 0, len(payload), len(payload)) + payload


@pytest.mark.parametrize("data, words", [
    (b"GET / HTTP/1.1\r\n\r\n" + b"x" * 8, "not a stallscope frame"),
    (frame(9, 1, b"\x05hello\x00"), "protocol version 9"),
    (b"SSRP\x01\x01\x00\x00" + struct.pack("<III", 0, 1 << 30, 1 << 30), "above the limit"),
])
def test_serve_refuses_what_it_does_not_speak_in_one_line(data, words):
    r = subprocess.run([str(LAUNCHER), "serve", "--stdio"], input=data, capture_output=True, timeout=30,
                       env=base_env())
    assert r.returncode == 2
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and words in lines[0], lines


def test_a_node_without_stallscope_is_said_in_one_line(node):
    rc, _, err = probe("ssh://node1/tmp/x.db", node.env(STALLSCOPE_REMOTE_COMMAND="/nonexistent/stallscope"),
                       "--seconds", "20", "--until-settled")
    assert rc == 1
    assert "STALLSCOPE_REMOTE_COMMAND" in err and "node1" in err, err


def test_top_shows_a_node_recording_over_ssh(node, finished):
    local = subprocess.run([str(LAUNCHER), "top", "--once", str(finished)], capture_output=True, text=True,
                           env=node.env(), timeout=120)
    remote = subprocess.run([str(LAUNCHER), "top", "--once", f"ssh://node1{finished}"], capture_output=True,
                            text=True, env=node.env(), timeout=120)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    # The same frame but its first line (the path: a file here, a URI there).
    assert remote.stdout.splitlines()[1:] == local.stdout.splitlines()[1:]
    assert "samples/s" in remote.stdout


def test_two_nodes_recordings_compare_as_two_local_files(node, finished, tmp_path):
    if not UI.exists():
        pytest.skip("the dashboard is not built")
    other = tmp_path / "b.db"
    r = subprocess.run([str(LAUNCHER), "run", "-q", "-o", str(other), "--", sys.executable, str(TRAIN), "2", "1"],
                       capture_output=True, text=True, env=base_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    with xvfb_display() as display:
        if display is None:
            pytest.skip("Xvfb is not installed")
        dumps = {}
        for name, paths in (("local", [str(finished), str(other)]),
                            ("ssh", [f"ssh://node1{finished}", f"ssh://node2{other}"])):
            out = tmp_path / f"{name}.json"
            r = subprocess.run([str(UI), "--screenshot", str(tmp_path / f"{name}.png"), "--layout-dump", str(out),
                                "--size", "1400x900", *paths], env=node.env(DISPLAY=f":{display}"),
                               capture_output=True, text=True, timeout=240)
            assert r.returncode == 0, r.stderr
            dumps[name] = json.loads(out.read_text())
    local, remote = dumps["local"], dumps["ssh"]
    # The verdict and the strip's figures of the two runs: the same read from two nodes as from two files
    # (the verdict names each run by its path: a URI here).
    assert remote.get("compare"), remote
    remote["compare"]["verdict_text"] = remote["compare"]["verdict_text"].replace("ssh://node1", "").replace(
        "ssh://node2", "")
    assert remote["compare"] == local["compare"]
    assert [s["lanes"] for s in remote["sides"]] == [s["lanes"] for s in local["sides"]]


def test_a_long_recordings_overview_costs_two_round_trips_and_reads_as_locally(node, finished):
    """A recording cut into the whole run's overview and the detail of its latest part (a detail
    budget smaller than the recording): over the link, the plan's and the overview's calls go out
    at once (Reader::expect; STALLSCOPE_LINK_TRACE names them "sent ahead"), and the view is the
    one read locally."""
    args = ("--until-settled", "--no-analysis", "--detail-rows", "100", "--seconds", "60")
    rc, local, err = probe(str(finished), node.env(), *args)
    assert rc == 0, err
    rc, remote, err = probe(f"ssh://node1{finished}", node.env(STALLSCOPE_LINK_TRACE="1"), *args)
    assert rc == 0, err
    last_l, last_r = local[-1], remote[-1]
    assert last_l["overview_rows"] > last_l["rows"] > 0, last_l  # cut: the overview holds more than the detail
    for key in ("state", "rows", "overview_rows", "lanes", "end_ns"):
        assert last_r[key] == last_l[key], (key, last_r, last_l)
    calls = [line for line in err.splitlines() if line.startswith("stallscope link: call ")]
    ahead = [line for line in calls if "(sent ahead)" in line]
    # has_summaries, time_of_last_rows, end_ns, string_ids, meta; then rows_per_bucket, span_totals,
    # processes, threads, counter_tracks, counter_totals, queue_summaries, gpu_totals (and the
    # batches' flow where recorded).
    assert len(ahead) >= 13, "\n".join(calls)
    # And none of them was wasted: each call's arguments were the ones sent ahead.
    assert "sent ahead and not asked for" not in err, err
