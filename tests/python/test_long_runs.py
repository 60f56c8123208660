"""Long runs (docs/robustness.md, "Long runs"): a fork storm of non-persistent workers, with the
training process's and the launcher's descriptors, threads and memory, and /dev/shm, measured from
/proc at the start and the end. CI runs the shortened form; `scripts/soak.sh` runs the long one
(STALLSCOPE_STORM_EPOCHS=1000)."""

from __future__ import annotations

import os
import re

import pytest

from conftest import PROGRAMS, Recording, run_plain, run_recorded

pytestmark = pytest.mark.torch
EPOCHS = int(os.environ.get("STALLSCOPE_STORM_EPOCHS", "150"))
MiB = 1024


def fd_targets(fig, in_proc):
    """The targets of a process's descriptors: those in /proc (in_proc) or the others."""
    return [t for t in fig["fd_targets"].values() if t.startswith("/proc/") == in_proc]


def test_a_fork_storm_leaks_nothing_and_changes_nothing(tmp_path):
    timeout = 60 + EPOCHS  # about 0.08 s per epoch here: a deadlock, not a slow machine, hits it
    args = [PROGRAMS / "fork_storm.py", EPOCHS]
    plain = run_plain(args, timeout=timeout)
    r = run_recorded(tmp_path / "storm.db", args, timeout=timeout)
    assert plain.rc == r.rc == 0, r.stderr
    assert r.result["total"] == plain.result["total"]
    start, end = r.result["start"], r.result["end"]
    # The training process: the same descriptors and threads after EPOCHS x 2 workers came and
    # went, and no more memory growth than without stallscope (plus 4 MiB).
    assert end["self"]["fds"] == start["self"]["fds"] and end["self"]["threads"] == start["self"]["threads"], r.result
    grown = end["self"]["rss_kb"] - start["self"]["rss_kb"]
    plain_grown = plain.result["end"]["self"]["rss_kb"] - plain.result["start"]["self"]["rss_kb"]
    assert grown <= max(0, plain_grown) + 4 * MiB, (grown, plain_grown)
    # The launcher (the program's parent): flat too. Its /proc sampler holds one /proc file or
    # directory open for a moment now and then (once 10 at the start and 9 at the end):
    # those are counted apart, and there is never more than one.
    assert sorted(fd_targets(end["parent"], False)) == sorted(fd_targets(start["parent"], False)), r.result
    assert len(fd_targets(start["parent"], True)) <= 1 and len(fd_targets(end["parent"], True)) <= 1, r.result
    assert end["parent"]["threads"] == start["parent"]["threads"], r.result
    assert end["parent"]["rss_kb"] - start["parent"]["rss_kb"] <= 8 * MiB, r.result
    # Nothing new left in /dev/shm.
    assert set(end["shm"]) <= set(start["shm"]), set(end["shm"]) - set(start["shm"])
    # Every epoch and every worker recorded, nothing dropped.
    rec = Recording(r.db)
    assert len(rec.instants("dl.epoch_end")) == EPOCHS
    assert len(rec.instants("dl.worker_start")) == len(rec.instants("dl.worker_stop")) == 2 * EPOCHS
    assert not rec.q("SELECT value FROM meta WHERE key = 'dropped_events' AND value != '0'")
    print(f"\nstorm: {EPOCHS} epochs, {2 * EPOCHS} workers; training fds {start['self']['fds']}->"
          f"{end['self']['fds']}, threads {start['self']['threads']}->{end['self']['threads']}, RSS "
          f"{grown / MiB:+.1f} MiB (unprofiled {plain_grown / MiB:+.1f}); launcher fds {start['parent']['fds']}->"
          f"{end['parent']['fds']}, RSS {(end['parent']['rss_kb'] - start['parent']['rss_kb']) / MiB:+.1f} MiB")


SOAK_S = float(os.environ.get("STALLSCOPE_SOAK_S", "20"))


@pytest.mark.timed
@pytest.mark.parametrize("workers", [0, 2])
def test_a_soak_at_a_high_event_rate(tmp_path, workers):
    """Tiny batches for SOAK_S seconds (about 100,000 events/s on one thread without workers;
    15,000 with two, whose queue events the launcher holds until their time order is known): the
    training process's and the launcher's memory stay flat, drops are counted the same in the
    recording and in the launcher's last line, and the database's bytes per hour are reported."""
    args = [PROGRAMS / "soak_train.py", SOAK_S, workers]
    plain = run_plain([PROGRAMS / "soak_train.py", 1, workers])
    r = run_recorded(tmp_path / "soak.db", args, timeout=120 + 2 * SOAK_S)
    assert plain.rc == r.rc == 0, r.stderr
    assert r.result["sums"] == plain.result["sums"]  # every epoch the same, and as without stallscope
    notes = [n for n in r.result["notes"] if n["t"] >= 0.2 * SOAK_S]  # after the warm-up
    assert len(notes) >= 3, r.result["notes"]
    third = max(1, len(notes) // 3)
    for who, limit in (("self", 8 * MiB), ("parent", 8 * MiB)):
        rss = [n[who]["rss_kb"] for n in notes]
        assert max(rss) - min(rss) <= limit, (who, rss)
        assert len({n[who]["threads"] for n in notes}) == 1, (who, notes)
        # Descriptors: the launcher's /proc sampler holds one open for a moment now and then (a
        # 10-minute soak saw 9 and 10); a leak would lift the floor.
        fds = [n[who]["fds"] for n in notes]
        assert max(fds) - min(fds) <= 2 and min(fds[-third:]) <= min(fds[:third]), (who, fds)
    rec = Recording(r.db)
    rows = rec.q("SELECT value FROM meta WHERE key = 'dropped_events'")
    dropped = int(rows[0]["value"])
    events = rec.q("SELECT sum(events) AS n FROM flushes")[0]["n"]
    assert f"{dropped} dropped" in r.stderr, r.stderr
    assert dropped <= 0.01 * (events + dropped), (dropped, events)
    handed = rec.q("SELECT count(*) AS n FROM span_view WHERE name = 'dl.next' AND arg1 >= 0")[0]["n"]
    assert handed >= 0.99 * r.result["batches"], (handed, r.result["batches"])
    size = sum(p.stat().st_size for p in tmp_path.glob("soak.db*"))
    # The launcher's last line says the same growth, over the whole run (start-up included).
    m = re.search(r"; ([\d.]+) (MiB|GiB), ([\d.]+) (MiB|GiB) per hour\)", r.stderr)
    assert m, r.stderr
    said = float(m[3]) * (2**30 if m[4] == "GiB" else 2**20)
    own = size / r.result["seconds"] * 3600
    assert 0.7 * own <= said <= 1.05 * own, (said, own)
    launcher = [n["parent"]["rss_kb"] / MiB for n in notes]
    training = [n["self"]["rss_kb"] / MiB for n in notes]
    print(f"\nsoak: {SOAK_S:.0f} s, {workers} workers, {r.result['batches'] / r.result['seconds']:,.0f} batches/s, "
          f"{events / r.result['seconds']:,.0f} events/s recorded, {dropped} dropped, database "
          f"{size / r.result['seconds'] * 3600 / 2**30:.2f} GiB per hour; launcher RSS "
          f"{min(launcher):.1f}-{max(launcher):.1f} MiB, training RSS {min(training):.1f}-{max(training):.1f} MiB")
