"""Checks the GPU recordings made by tests/gpu/run.sh and prints a table.

For each variant:
- kernels were recorded, and the report's mode is gpu;
- the batches' host-to-device copies (the copies of exactly one input batch's bytes) are pageable
  for `pageable` and pinned for `pinned` and `compute`; other copies (the model's weights at
  `.to(device)`) are counted apart;
- every batch's NVTX range "train_step" (torch.cuda.nvtx) is in the timeline, one per batch;
- clocks line up: each batch copy starts on the GPU after the host call that issued it (joined by
  CUPTI's correlation id) began, and, for pageable copies, which the host waits for, before that
  call returned;
- the dominant stall cause matches the variant (data-bound: data_wait; compute: GPU busy most of
  the loop);
- `profiler` (torch.profiler with CUDA activity over batches 30-39): stallscope's GPU capture goes
  on through the profiler's span (all batch copies recorded); if the profiler saw no GPU events (one
  CUPTI client per process), stallscope said so on stderr, with what to do;
- `profiler` again under STALLSCOPE_GPU=off: the profiler sees GPU events, the recording has no GPU
  records, and the rest (NVTX ranges, the DataLoader) is still there;
- `pageable`, `pinned` and `compute` again under STALLSCOPE_GPU=light: no kernel or copy records,
  report mode gpu_light, at least 90 % of the next() calls marked, and light mode's stall (the GPU
  idle while the loop waits for data, and the loader's start) within 3 points of full mode's
  data_wait + loader_start; full mode's other causes (transfers, syncs, other host work), which
  light mode does not see, are printed beside it.
"""
import json
import sqlite3
import subprocess
import sys

BATCHES = 60
BATCH_BYTES = 64 * 3 * 64 * 64 * 4  # gpu_train.py: 64 images of 3x64x64 float32
TOLERANCE_NS = 2_000  # clock alignment slack: 2 us


def alignment(con):
    """(copies joined to their host call, copies starting before their call, pageable copies
    starting after their call returned, median lead in us) for the batch H2D copies."""
    rows = con.execute(
        "SELECT g.src_kind, g.start_ns, s.start_ns, s.end_ns FROM gpu_view g JOIN span_view s "
        "ON s.arg0 = g.correlation_id AND s.name LIKE 'cuda.cudaMemcpy%' "
        "WHERE g.kind = 'memcpy' AND g.copy_kind = 'HtoD' AND g.bytes = ?", (BATCH_BYTES,)).fetchall()
    early = sum(1 for _, g, s, _ in rows if g < s - TOLERANCE_NS)
    late = sum(1 for kind, g, _, e in rows if kind == "pageable" and g > e + TOLERANCE_NS)
    leads = sorted((g - s) / 1000 for _, g, s, _ in rows)
    return len(rows), early, late, leads[len(leads) // 2] if leads else None


def profiler_events(out, name):
    with open(f"{out}/{name}.out") as f:
        for line in f:
            if line.startswith("profiler gpu events:"):
                return int(line.split(":")[1])
    return None


def profiler_checks(out, failures):
    """torch.profiler beside stallscope's GPU capture, and with it off. Returns the profiler's GPU
    event counts (GPU capture on, off)."""
    on = profiler_events(out, "profiler")
    with open(f"{out}/profiler.err") as f:
        said = "torch.profiler asks for CUDA activity" in f.read()
    if on is None:
        failures.append("profiler: the profiler's event count is missing")
    elif on == 0 and not said:
        failures.append("profiler: torch.profiler saw no GPU events and stallscope did not say why")
    off = profiler_events(out, "profiler-gpu-off")
    if not off:
        failures.append(f"profiler-gpu-off: torch.profiler saw {off} GPU events with STALLSCOPE_GPU=off")
    con = sqlite3.connect(f"{out}/profiler-gpu-off.db")
    gpu = con.execute("SELECT count(*) FROM gpu_activities").fetchone()[0]
    nvtx = con.execute("SELECT count(*) FROM span_view WHERE name = 'train_step'").fetchone()[0]
    nexts = con.execute("SELECT count(*) FROM span_view WHERE name = 'dl.next'").fetchone()[0]
    if gpu or nvtx != BATCHES or nexts < BATCHES:
        failures.append(f"profiler-gpu-off: {gpu} GPU records (expected 0), {nvtx} NVTX ranges, {nexts} next() calls")
    return on, off


def report_json(build, db):
    return json.loads(subprocess.run([f"{build}/bin/stallscope", "report", "--json", db],
                                     capture_output=True, text=True, check=True).stdout)


def light_checks(build, out, failures):
    """Light mode against full mode on the same variant (separate runs). Returns table rows."""
    rows = []
    for variant in ("pageable", "pinned", "compute"):
        full, light = report_json(build, f"{out}/{variant}.db"), report_json(build, f"{out}/{variant}-light.db")
        con = sqlite3.connect(f"{out}/{variant}-light.db")
        work = con.execute("SELECT count(*) FROM gpu_activities WHERE kind != 'mark'").fetchone()[0]
        fc = full["stall"]["by_cause"]
        full_data = (fc.get("data_wait", 0) + fc.get("loader_start", 0)) / full["wall_s"]
        full_other = sum(v for k, v in fc.items() if k not in ("data_wait", "loader_start")) / full["wall_s"]
        light_data = light["stall"]["fraction"]
        g = light.get("gpu_light") or {}
        marked, calls = g.get("calls_marked", 0), g.get("calls", 0)
        rows.append((variant, full_data, light_data, full_other, f"{marked}/{calls}", g.get("queued_p50_ms")))
        if work:
            failures.append(f"{variant}-light: {work} kernel/copy records in light mode (CUPTI was on)")
        if light["mode"] != "gpu_light":
            failures.append(f"{variant}-light: report mode {light['mode']}, expected gpu_light")
        if calls == 0 or marked < 0.9 * calls:
            failures.append(f"{variant}-light: {marked} of {calls} next() calls marked")
        if abs(light_data - full_data) > 0.03:
            failures.append(f"{variant}-light: stall {light_data:.3f} against full mode's data_wait + loader_start "
                            f"{full_data:.3f} (more than 3 points apart)")
    return rows


def main():
    build, out = sys.argv[1], sys.argv[2]
    failures = []
    rows = []
    variants = ("pageable", "pinned", "compute", "profiler")
    for variant in variants:
        db = f"{out}/{variant}.db"
        con = sqlite3.connect(db)
        kernels = con.execute("SELECT count(*) FROM gpu_activities WHERE kind = 'kernel'").fetchone()[0]
        batch = dict(con.execute(
            "SELECT src_kind, count(*) FROM gpu_activities WHERE kind = 'memcpy' AND copy_kind = 'HtoD' "
            "AND bytes = ? GROUP BY src_kind", (BATCH_BYTES,)).fetchall())
        other = con.execute("SELECT count(*) FROM gpu_activities WHERE kind = 'memcpy' AND copy_kind = 'HtoD' "
                            "AND bytes != ?", (BATCH_BYTES,)).fetchone()[0]
        nvtx = con.execute("SELECT count(*) FROM span_view WHERE name = 'train_step'").fetchone()[0]
        joined, early, late, lead_us = alignment(con)
        report = json.loads(subprocess.run([f"{build}/bin/stallscope", "report", "--json", db],
                                           capture_output=True, text=True, check=True).stdout)
        causes = report["stall"]["by_cause"]
        top = max(causes, key=causes.get) if causes else "-"
        busy = (report.get("gpu") or {}).get("busy_fraction")
        rows.append((variant, kernels, batch.get("pageable", 0), batch.get("pinned", 0), other, nvtx,
                     f"{joined}/{early}/{late}", lead_us, report["mode"], top, report["stall"]["fraction"], busy))
        if kernels == 0:
            failures.append(f"{variant}: no kernels recorded")
        if report["mode"] != "gpu":
            failures.append(f"{variant}: report mode {report['mode']}")
        want = "pageable" if variant == "pageable" else "pinned"
        if batch.get(want, 0) != BATCHES or sum(batch.values()) != BATCHES:
            failures.append(f"{variant}: batch H2D copies by source {batch}, expected {BATCHES} {want}")
        if nvtx != BATCHES:
            failures.append(f"{variant}: {nvtx} NVTX train_step ranges, expected {BATCHES}")
        if joined < BATCHES:
            failures.append(f"{variant}: only {joined} of {BATCHES} batch copies joined to their host call")
        if early or late:
            failures.append(f"{variant}: clocks disagree: {early} copies start before their call, "
                            f"{late} pageable copies after it returned")
        if variant in ("pageable", "pinned", "profiler") and top != "data_wait":
            failures.append(f"{variant}: dominant stall cause {top}, expected data_wait")
        if variant == "compute" and (busy is None or busy < 0.5):
            failures.append(f"compute: GPU busy fraction {busy}, expected > 0.5")
    print("| variant | kernels | batch H2D pageable | batch H2D pinned | other H2D | NVTX ranges "
          "| joined/early/late | median lead | mode | top stall cause | stall fraction | GPU busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lead = "-" if r[7] is None else f"{r[7]:.1f} us"
        busy = "-" if r[11] is None else f"{r[11]:.2f}"
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]} | {lead} | {r[8]} | {r[9]} "
              f"| {r[10]:.2f} | {busy} |")
    on, off = profiler_checks(out, failures)
    print(f"torch.profiler's GPU events: {on} beside stallscope's GPU capture, {off} with STALLSCOPE_GPU=off")
    light_rows = light_checks(build, out, failures)
    print("\n| variant | full: data_wait + loader_start | light: stall | full: other causes (not seen by light) "
          "| light: calls marked | light: queued at next() p50 |")
    print("|---|---|---|---|---|---|")
    for v, fd, ld, fo, marked, q in light_rows:
        print(f"| {v} | {fd:.3f} | {ld:.3f} | {fo:.3f} | {marked} | {'-' if q is None else f'{q:.2f} ms'} |")
    for f in failures:
        print("FAIL:", f)
    checked = len(variants) + 1 + 3  # + profiler-gpu-off, + three light variants
    failed = len({f.split(':')[0] for f in failures})
    print(f"{checked - failed} passed, {failed} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
