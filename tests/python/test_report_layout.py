"""`stallscope report` read at a glance, on real recordings: its first screen says how much time was
lost and to what, then "What to do": numbered actions, a line each as the user types it, with the
predicted speed-up (a range where the model marks it uncertain), and at most three lines of why
each. `--explain` still gives every recommendation's evidence in full, and `--json` has both the
recommendations and the actions."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import LAUNCHER, REPO, run_recorded

pytestmark = [pytest.mark.torch, pytest.mark.timed]  # every test here measures time (conftest.py)

EXAMPLES = REPO / "examples"
FIRST_SCREEN = 25
ACTION = re.compile(r"^  (?P<n>\d+)\. (?P<line>.+?) {3,}(?P<gain>.+)$")
TIMES = re.compile(r"(\d+(?:\.\d+)?)x")


def report(db, *args):
    p = subprocess.run([str(LAUNCHER), "report", *args, str(db)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def recorded(tmp_path, script, *args):
    db = tmp_path / "run.db"
    r = run_recorded(db, [EXAMPLES / script, *args], timeout=180)
    assert r.rc == 0, f"{script}: rc={r.rc}\n{r.stdout}\n{r.stderr}"
    return report(db), report(db, "--explain"), json.loads(report(db, "--json"))


def first_screen(text):
    """The first screen's lost line and its numbered actions, parsed; and its why lines by action."""
    lines = text.splitlines()[:FIRST_SCREEN]
    lost = [ln for ln in lines if ln.startswith("Lost: ")]
    at = lines.index(next(ln for ln in lines if ln.startswith("What to do")))
    actions = []
    for ln in lines[at + 1:]:
        m = ACTION.match(ln)
        if not m:
            break
        actions.append(m)
    why, current = {}, None
    for ln in lines[lines.index("Why") + 1:] if "Why" in lines else []:
        m = re.match(r"^  (\d+)\. (.*)$", ln)
        if m:
            current = int(m[1])
            why[current] = [m[2]]
        elif ln.startswith("     ") and current is not None:
            why[current].append(ln.strip())
        else:
            break
    return lost, actions, why


def check_gain(action, doc_action):
    """The line's speed-up: the model's figure with its confidence, or a range where uncertain; never
    a bare multiplier when uncertain."""
    gain = action["gain"]
    assert gain == doc_action["gain_text"], (gain, doc_action)
    figures = [float(x) for x in TIMES.findall(gain)]
    if doc_action["basis"] != "model":
        return
    assert figures, gain
    if doc_action["uncertain"]:
        assert "uncertain" in gain, gain
        lo, hi = doc_action["speedup_low"], doc_action["speedup_high"]
        assert lo is not None and lo < doc_action["speedup"], doc_action
        if hi is None:
            assert gain.startswith("at least ") or "at least " in gain, gain
        else:
            assert hi > doc_action["speedup"], doc_action
            assert len(figures) >= 2, f"an uncertain prediction is a range: {gain}"
    else:
        assert f"confidence {doc_action['confidence']}" in gain, gain
        assert figures[0] == pytest.approx(doc_action["speedup"], rel=0.06), (gain, doc_action)


def check_layout(text, explain, doc):
    lost, actions, why = first_screen(text)
    # How much was lost, to what.
    assert len(lost) == 1, text
    assert f"{100 * doc['stall']['fraction']:.1f}%" in lost[0], (lost, doc["stall"])
    assert "waiting in next()" in lost[0] or "starting the loader" in lost[0], lost
    # What to do: the JSON's actions, numbered, each on the first screen with its speed-up.
    assert doc["recommendations"], "the recording should get advice"
    assert len(actions) == len(doc["actions"]) >= 1, (text, doc["actions"])
    for k, (m, a) in enumerate(zip(actions, doc["actions"], strict=True)):
        assert int(m["n"]) == k + 1
        assert m["line"].strip() == a["line"], (m["line"], a["line"])
        check_gain(m, a)
        assert 1 <= len(a["why"]) <= 3, a["why"]
        assert why.get(k + 1) == a["why"], (why, a["why"])
    # Every recommendation belongs to exactly the action that lists it.
    for rec in doc["recommendations"]:
        n = rec["plan_action"]
        assert n is not None and rec["id"] in doc["actions"][n - 1]["recommendations"], (rec["id"], n)
    # One plan: each knob is set by one action only.
    assert sum("DataLoader(..., num_workers=" in a["line"] for a in doc["actions"]) <= 1, doc["actions"]
    assert sum("torch.set_num_threads" in a["line"] for a in doc["actions"]) <= 1, doc["actions"]
    # The rest of the report stays below; the long evidence only with --explain.
    for section in ("\nLoader ", "\nWhat-if ", "\nRecommendations\n"):
        assert section in text and section in explain, section
    for rec in doc["recommendations"]:
        head = f"[{rec['severity']}] {rec['id']}: "
        assert head + rec["message"][:40] in explain, (head, explain)
        if rec["action"]:
            assert head + rec["action"][:40] in text, (head, text)
            assert rec["message"][:60] not in text, rec["message"]
    assert text.splitlines()[:FIRST_SCREEN] == explain.splitlines()[:FIRST_SCREEN]
    return actions


def test_workers_restarting_every_epoch_get_one_plan_on_the_first_screen(tmp_path):
    # 6 batches of 8 ms an epoch against 250 ms to start workers, re-created every epoch: loading
    # inside the loop beats starting workers at all (test_report_truth measures that advice).
    text, explain, doc = recorded(tmp_path, "respawn_workers.py", "--epochs", "4", "--batches", "6",
                                  "--init-ms", "250")
    actions = check_layout(text, explain, doc)
    assert doc["whatif"]["best"]["num_workers"] == 0, doc["whatif"]["best"]
    recs = {r["id"]: r for r in doc["recommendations"]}
    assert "reduce_num_workers" in recs, list(recs)
    first = doc["actions"][0]
    assert actions[0]["line"].strip() == first["line"]
    plan = next(a for a in doc["actions"] if "reduce_num_workers" in a["recommendations"])
    if "limit_torch_threads" in recs:
        # Two rules on the same knobs, one plan: the one-thread setting the thread advice names,
        # with torch.set_num_threads(1), once; the workers' rule is part of it.
        assert "limit_torch_threads" in plan["recommendations"], doc["actions"]
        suggested = recs["limit_torch_threads"]["evidence"]["suggested"]
        assert plan["line"] == f"DataLoader(..., {suggested}) + torch.set_num_threads(1)", plan
        assert plan["speedup"] == pytest.approx(
            recs["limit_torch_threads"]["evidence"]["predicted_samples_per_s"]
            / doc["whatif"]["candidates"][0]["samples_per_s"], rel=1e-6)
        assert plan["uncertain"], plan  # a one-thread step is the model's estimate
    else:
        assert plan["line"] == "DataLoader(..., num_workers=0)", plan
    if plan["line"].startswith("DataLoader(..., num_workers=0)"):
        assert plan["why"][0].startswith("Starting the 2 workers costs"), plan["why"]


def test_a_loop_without_workers_is_told_to_start_them(tmp_path):
    text, explain, doc = recorded(tmp_path, "slow_getitem.py", "--epochs", "2", "--batches", "30")
    check_layout(text, explain, doc)
    first = doc["actions"][0]
    assert first["line"].startswith("DataLoader(..., num_workers="), first
    assert "increase_num_workers" in first["recommendations"], first
    assert first["speedup"] > 1.3, first
