"""The Prometheus endpoint of `stallscope run --metrics-port` on a real PyTorch training loop whose
input pipeline is slow by construction (programs/metrics_train.py: each sample's __getitem__ sleeps
20 ms, batches of 4, a trivial step): the text parses with prometheus_client, the stall fraction is
high and samples/s agrees with the sleep; a real Prometheus server scrapes it; every metric the
Grafana dashboard (assets/grafana/stallscope.json) queries is one the endpoint serves; a port in use
stops the run before the program starts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import HAVE_TORCH, LAUNCHER, PROGRAMS, REPO, base_env

prometheus_client = pytest.importorskip("prometheus_client", reason="prometheus_client is not installed "
                                        "(scripts/setup.sh installs it)")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

TRAIN = PROGRAMS / "metrics_train.py"
SLEEP_S, BATCH = 0.02, 4  # as in programs/metrics_train.py
MAX_SAMPLES_PER_S = 1 / SLEEP_S  # next() sleeps BATCH x SLEEP_S per batch of BATCH samples
DASHBOARD = REPO / "assets" / "grafana" / "stallscope.json"
DOCS = REPO / "docs" / "metrics.md"

pytestmark = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def scrape(port: int) -> dict:
    """{(name, labels without job/rank/host as a sorted tuple): value} and the raw text."""
    text = get(f"http://127.0.0.1:{port}/metrics")
    values = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            extra = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("job", "rank", "host")))
            values[(s.name, extra)] = (s.value, s.labels)
    return {"values": values, "text": text}


def value(sc: dict, name: str, **labels) -> float:
    return sc["values"][(name, tuple(sorted(labels.items())))][0]


class Session:
    """`stallscope run --metrics-port P --job JOB -- python metrics_train.py` until stop()."""

    def __init__(self, tmp: Path, job: str | None = None):
        self.port = free_port()
        self.stop_file = tmp / "stop"
        self.db = tmp / "metrics-run.db"
        args = [str(LAUNCHER), "run", "--metrics-port", str(self.port), "-o", str(self.db)]
        if job:
            args += ["--job", job]
        args += ["--", sys.executable, str(TRAIN), "120", "0", str(self.stop_file)]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=base_env())
        self.out = self.err = ""

    def wait_for_steps(self, steps: int, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"stallscope ended early: {self.proc.communicate()}"
            try:
                last = scrape(self.port)
                if value(last, "stallscope_steps_total") >= steps:
                    return last
            except (OSError, KeyError):
                pass
            time.sleep(0.25)
        raise AssertionError(f"no {steps} steps in {timeout} s; last scrape: {last and last['text']}")

    def stop(self) -> int:
        self.stop_file.touch()
        try:
            self.out, self.err = self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        return self.proc.returncode


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = Session(tmp_path_factory.mktemp("metrics"), job="metrics-test")
    try:
        s.wait_for_steps(10)
        yield s
    finally:
        rc = s.stop()
    assert rc == 0, s.err
    # The endpoint stopped with the run.
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{s.port}/metrics", timeout=2)


@pytest.mark.timed
def test_scrapes_follow_a_slow_loop(session):
    scrapes = []
    for _ in range(4):
        time.sleep(1.0)
        scrapes.append(scrape(session.port))
    last = scrapes[-1]
    assert value(last, "stallscope_up") == 1
    labels = last["values"][("stallscope_up", ())][1]
    assert labels["job"] == "metrics-test" and labels["rank"] == "0" and labels["host"] == socket.gethostname()
    steps = [value(s, "stallscope_steps_total") for s in scrapes]
    assert steps == sorted(steps) and steps[-1] > steps[0], steps
    assert value(last, "stallscope_samples_total") == BATCH * value(last, "stallscope_steps_total")
    stall = value(last, "stallscope_stall_fraction")
    recent = value(last, "stallscope_stall_recent_fraction")
    data_wait = value(last, "stallscope_stall_cause_fraction", cause="data_wait")
    assert stall > 0.5 and recent > 0.5, last["text"]
    assert abs(data_wait - stall) < 0.05  # all of it waiting in next(): no workers to start
    rate = value(last, "stallscope_samples_per_second")
    # At most one sample per sleep; the trivial step and a loaded machine make it a little slower.
    assert 0.4 * MAX_SAMPLES_PER_S < rate <= 1.05 * MAX_SAMPLES_PER_S, rate
    cpu = [k for k in last["values"] if k[0] == "stallscope_process_cpu_cores"]
    assert any(dict(k[1]).get("role") == "train" for k in cpu), last["text"]
    for name in ("stallscope_process_sys_cpu_cores", "stallscope_process_minor_faults_per_second"):
        assert any(k[0] == name and dict(k[1]).get("role") == "train" for k in last["values"]), last["text"]
    assert value(last, "stallscope_dropped_events_total") == 0
    print(f"scraped: stall {stall:.3f} (recent {recent:.3f}), {rate:.1f} samples/s, "
          f"steps {steps}", file=sys.stderr)


def test_series_stay_as_many_as_the_workers_are_restarted_every_epoch(tmp_path):
    """A rank's series are bounded by its places, not its processes: 2 workers started again every
    epoch (no persistent_workers) keep the series of their index, so a scrape after five epochs holds
    no more series than one after the first (docs/metrics.md, "How many series")."""
    port = free_port()
    stop = tmp_path / "stop"
    proc = subprocess.Popen([str(LAUNCHER), "run", "-q", "--metrics-port", str(port), "-o", str(tmp_path / "w.db"),
                             "--", sys.executable, str(TRAIN), "120", "2", str(stop)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
    seen = set()  # (name, labels without job/rank/host) over every scrape
    workers = set()
    try:
        deadline = time.monotonic() + 120
        steps = 0
        while steps < 16 * 5 and time.monotonic() < deadline:  # five epochs of 16 batches
            assert proc.poll() is None, proc.communicate()
            try:
                sc = scrape(port)
            except OSError:
                time.sleep(0.25)
                continue
            seen |= set(sc["values"])
            workers |= {dict(k[1]).get("worker") for k in sc["values"] if dict(k[1]).get("role") == "worker"}
            steps = sc["values"].get(("stallscope_steps_total", ()), (0,))[0]
            time.sleep(0.2)
        assert steps >= 80, f"{steps} steps in 120 s"
    finally:
        stop.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert workers == {"0", "1"}, workers
    per_process = {k for k in seen if k[0].startswith("stallscope_process_")}
    places = {(dict(k[1])["role"], dict(k[1]).get("worker")) for k in per_process}
    assert places <= {("train", None), ("worker", "0"), ("worker", "1"), ("other", None)}, places
    # The documented bound: 18 series a rank, and 5 a place (the training process, each worker, the
    # others summed), whatever the epochs.
    assert len(seen) <= 18 + 5 * (1 + 2 + 1), sorted(seen)
    assert len(per_process) <= 5 * (1 + 2 + 1), sorted(per_process)


def served_names(text: str) -> set:
    return set(re.findall(r"^# TYPE (\S+) ", text, flags=re.M))


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_grafana_dashboard_queries_served_metrics(session):
    dashboard = json.loads(DASHBOARD.read_text())
    assert 35 <= dashboard["schemaVersion"] <= 41
    assert any(v["type"] == "datasource" and v["query"] == "prometheus" for v in dashboard["templating"]["list"])
    exprs = dashboard_queries()
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v.get("definition")]
    used = {name for e in exprs for name in re.findall(r"\bstallscope_[a-zA-Z0-9_]+", e)}
    assert used, exprs
    served = served_names(get(f"http://127.0.0.1:{session.port}/metrics"))
    assert used <= served, f"queried but not served: {sorted(used - served)}"


def test_docs_list_every_served_metric(session):
    served = served_names(get(f"http://127.0.0.1:{session.port}/metrics"))
    documented = set(re.findall(r"^\| `(stallscope_[a-z0-9_]+)` \|", DOCS.read_text(), flags=re.M))
    missing = {"served, not documented": sorted(served - documented),
               "documented, not served": sorted(documented - served)}
    assert served == documented, missing


@pytest.mark.timed
def test_real_prometheus_scrapes_the_endpoint(session, tmp_path):
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is not installed (scripts/setup.sh installs Debian's prometheus)")
    config = tmp_path / "prometheus.yml"
    # honor_labels: the endpoint's job label (the training job) stays; without it Prometheus renames
    # it exported_job and puts the scrape job's name in its place.
    config.write_text(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: stallscope
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:{session.port}"]
""")
    web = free_port()
    prom = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{web}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        query = urllib.parse.quote('stallscope_stall_fraction{job="metrics-test"}')
        deadline = time.monotonic() + 60
        result, answer = None, ""
        while time.monotonic() < deadline and result is None:
            assert prom.poll() is None, f"prometheus ended: {prom.communicate()[1][-2000:]}"
            time.sleep(0.5)
            try:
                answer = get(f"http://127.0.0.1:{web}/api/v1/query?query={query}")
            except OSError:
                continue
            data = json.loads(answer)
            if data.get("status") == "success" and data["data"]["result"]:
                result = data["data"]["result"][0]
        assert result is not None, f"no stallscope_stall_fraction in Prometheus after 60 s: {answer}"
        assert result["metric"]["rank"] == "0"
        stall = float(result["value"][1])
        assert stall > 0.5, result
        print(f"prometheus: stallscope_stall_fraction = {stall:.3f}", file=sys.stderr)
        # Every query of the Grafana dashboard is PromQL that this Prometheus accepts, and those of
        # the metrics a CPU run serves find series.
        for expr in dashboard_queries():
            q = expr.replace("$__rate_interval", "1m").replace("$job", ".*").replace("$rank", ".*")
            data = json.loads(get(f"http://127.0.0.1:{web}/api/v1/query?query={urllib.parse.quote(q)}"))
            assert data["status"] == "success", (expr, data)
    finally:
        prom.send_signal(signal.SIGTERM)
        try:
            prom.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.communicate()


def _ptrace_blocked() -> str | None:
    """Why `stallscope attach` cannot trace a process that is not its child here, or None."""
    try:
        scope = int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return None
    if scope >= 3 or (scope >= 1 and os.geteuid() != 0):
        return f"kernel.yama.ptrace_scope={scope}: stallscope attach cannot trace the test's process"
    return None


@pytest.mark.timed
@pytest.mark.skipif(_ptrace_blocked() is not None, reason=_ptrace_blocked() or "")
def test_attach_serves_the_same_metrics_with_the_targets_labels(tmp_path):
    """`stallscope attach --metrics-port` without -o: the recording's name is found once it starts;
    rank and job come from the target's environment, not stallscope's."""
    stop = tmp_path / "stop"
    target = subprocess.Popen([sys.executable, str(TRAIN), "120", "0", str(stop)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=base_env(RANK="2", TORCHELASTIC_RUN_ID="elastic-7"))
    attach = None
    try:
        assert target.stdout.readline().strip() == "training", target.stderr.read()
        port = free_port()
        attach = subprocess.Popen([str(LAUNCHER), "attach", "--metrics-port", str(port), str(target.pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                  env=base_env(RANK="9"))
        deadline = time.monotonic() + 60
        last = None
        while time.monotonic() < deadline:
            assert attach.poll() is None, attach.communicate()
            try:
                last = scrape(port)
                if value(last, "stallscope_steps_total") >= 10:
                    break
            except (OSError, KeyError):
                pass
            time.sleep(0.25)
        assert last is not None and value(last, "stallscope_steps_total") >= 10, last and last["text"]
        labels = last["values"][("stallscope_up", ())][1]
        assert (labels["job"], labels["rank"]) == ("elastic-7", "2"), labels
        assert value(last, "stallscope_up") == 1
        assert value(last, "stallscope_stall_fraction") > 0.5, last["text"]
        stop.touch()
        assert target.wait(timeout=60) == 0
        _, err = attach.communicate(timeout=60)
        assert attach.returncode == 0, err
        with pytest.raises(OSError):
            get(f"http://127.0.0.1:{port}/metrics", timeout=2)
    finally:
        stop.touch()
        for p in (attach, target):
            if p is not None and p.poll() is None:
                p.kill()
            if p is not None:
                p.communicate()


def test_a_port_in_use_stops_the_run_before_the_program(tmp_path):
    marker = tmp_path / "started"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = subprocess.run([str(LAUNCHER), "run", "--metrics-port", str(port), "-o", str(tmp_path / "r.db"), "--",
                            sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
                           capture_output=True, text=True, env=base_env(), timeout=60)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("\n") == 1 and "in use" in p.stderr, p.stderr
    assert not marker.exists() and not (tmp_path / "r.db").exists()
    p = subprocess.run([str(LAUNCHER), "run", "--metrics-port", "0", "--", sys.executable, "-c", "pass"],
                       capture_output=True, text=True, env=base_env(), timeout=60)
    assert p.returncode == 2 and "--metrics-port" in p.stderr, p.stderr
