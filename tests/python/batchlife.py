"""Checks on a recording that every batch handed to the training loop had a complete life
(docs/events.md, "Batch life"): dl.sent -> worker dl.fetch -> dl.put -> dl.recv -> dl.next end,
with the loader/worker/pid/generation labels agreeing across processes."""

from __future__ import annotations

import bisect
from collections import defaultdict

# Cross-process order is checked with a little slack for dl.sent only: it is emitted right after
# torch's index_queue.put() returns, so a worker could in principle start fetching a few
# microseconds before the main thread writes the instant.
SENT_SLACK_NS = 2_000_000


class Epochs:
    """Epoch windows per loader, from dl.epoch_begin: [begin(E), begin(E+1))."""

    def __init__(self, rec):
        self.begins = defaultdict(list)  # L -> [(ts, E)]
        for r in rec.instants("dl.epoch_begin"):
            self.begins[r["arg0"]].append((r["ts_ns"], r["arg1"]))
        for L, b in self.begins.items():
            assert [e for _, e in b] == list(range(len(b))), f"loader {L}: epochs not 0,1,2...: {b}"

    def window(self, L, E):
        b = self.begins[L]
        return b[E][0], (b[E + 1][0] if E + 1 < len(b) else float("inf"))

    def epoch_at(self, L, ts):
        b = self.begins[L]
        i = bisect.bisect_right([t for t, _ in b], ts) - 1
        assert i >= 0, f"loader {L}: event at {ts} before its first epoch"
        return b[i][1]


def handed_batches(rec):
    """(L, E) -> [B handed, in order] from the dl.next spans (StopIteration calls excluded)."""
    out = defaultdict(list)
    for s in rec.spans("dl.next"):
        if s["arg1"] >= 0:
            out[(s["arg0"], s["arg2"])].append(s["arg1"])
    return out


def check_batch_lives(rec, *, persistent=False):
    """Asserts the life of every handed batch of every multi-process loader; returns the number of
    batches checked."""
    ep = Epochs(rec)
    workers = defaultdict(list)  # (L, W) -> [(ts, pid, start_epoch)]
    pid_of = {}
    for r in rec.instants("dl.worker_start"):
        L, W, pid = r["arg0"], r["arg1"], r["arg2"]
        assert pid > 0
        assert pid not in pid_of, f"pid {pid} announced twice"
        pid_of[pid] = (L, W)
        workers[(L, W)].append((r["ts_ns"], pid, ep.epoch_at(L, r["ts_ns"])))
    names = rec.thread_names()

    def index(rows, key):
        d = defaultdict(list)
        for r in rows:
            d[key(r)].append(r)
        return d

    sent = index(rec.instants("dl.sent"), lambda r: (r["arg0"], r["arg1"]))
    recv = index(rec.instants("dl.recv"), lambda r: (r["arg0"], r["arg1"]))
    fetch = index([s for s in rec.spans("dl.fetch") if s["pid"] in pid_of], lambda s: (s["pid"], s["arg0"]))
    put = index(rec.instants("dl.put"), lambda r: (r["pid"], r["arg0"]))
    nexts = [s for s in rec.spans("dl.next") if s["arg1"] >= 0]

    checked = 0
    for n in nexts:
        L, B, E = n["arg0"], n["arg1"], n["arg2"]
        if not any(k[0] == L for k in workers):
            continue  # a loader without workers
        lo, hi = ep.window(L, E)
        s = [r for r in sent[(L, B)] if lo <= r["ts_ns"] < hi]
        assert len(s) == 1, f"L{L} E{E} B{B}: {len(s)} dl.sent in the epoch"
        s = s[0]
        W = s["arg2"]
        # The worker process that served (L, W) when the batch was sent.
        cands = [w for w in workers[(L, W)] if w[0] <= s["ts_ns"]]
        assert cands, f"L{L} E{E} B{B}: no dl.worker_start for worker {W} before dl.sent"
        _, pid, start_epoch = cands[-1]
        G = E - start_epoch
        if persistent:
            assert start_epoch == 0, "persistent workers start in epoch 0"
        else:
            assert G == 0, f"L{L} E{E} B{B}: non-persistent worker {pid} started in epoch {start_epoch}"
        f = [x for x in fetch[(pid, B)] if x["arg2"] == G]
        assert len(f) == 1, f"L{L} E{E} B{B}: {len(f)} dl.fetch in worker pid {pid} with G={G}"
        f = f[0]
        assert f["arg1"] == W and f["dur_ns"] is not None
        assert names.get((pid, f["tid"])) == f"dl-worker-{W}", names.get((pid, f["tid"]))
        p = [x for x in put[(pid, B)] if x["arg2"] == G]
        assert len(p) == 1, f"L{L} E{E} B{B}: {len(p)} dl.put in worker pid {pid} with G={G}"
        p = p[0]
        assert p["arg1"] == W
        rv = [r for r in recv[(L, B)] if lo <= r["ts_ns"] < hi]
        assert len(rv) == 1, f"L{L} E{E} B{B}: {len(rv)} dl.recv in the epoch"
        rv = rv[0]
        assert rv["arg2"] == W
        # Time order along the batch's life.
        assert s["ts_ns"] - SENT_SLACK_NS <= f["start_ns"], (s, f)
        assert f["end_ns"] <= p["ts_ns"] <= rv["ts_ns"] <= n["end_ns"], (f, p, rv, n)
        checked += 1
    return checked
