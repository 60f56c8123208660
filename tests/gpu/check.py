"""Checks the three GPU recordings made by tests/gpu/run.sh and prints a table.

For each variant: kernels and copies were recorded; host-to-device copies are pageable for
`pageable` and pinned for `pinned`; the report's mode is gpu and the dominant stall cause matches
the variant (data-bound: data_wait; compute: GPU busy most of the loop).
"""
import json
import sqlite3
import subprocess
import sys


def main():
    build, out = sys.argv[1], sys.argv[2]
    failures = []
    rows = []
    for variant in ("pageable", "pinned", "compute"):
        db = f"{out}/{variant}.db"
        con = sqlite3.connect(db)
        kernels = con.execute("SELECT count(*) FROM gpu_activities WHERE kind = 'kernel'").fetchone()[0]
        h2d = dict(con.execute(
            "SELECT src_kind, count(*) FROM gpu_activities WHERE kind = 'memcpy' AND copy_kind = 'HtoD' "
            "GROUP BY src_kind").fetchall())
        report = json.loads(subprocess.run([f"{build}/bin/stallscope", "report", "--json", db],
                                           capture_output=True, text=True, check=True).stdout)
        causes = report["stall"]["by_cause"]
        top = max(causes, key=causes.get) if causes else "-"
        busy = report.get("gpu", {}).get("busy_fraction")
        rows.append((variant, kernels, h2d.get("pageable", 0), h2d.get("pinned", 0), report["mode"], top,
                     report["stall"]["fraction"], busy))
        if kernels == 0:
            failures.append(f"{variant}: no kernels recorded")
        if report["mode"] != "gpu":
            failures.append(f"{variant}: report mode {report['mode']}")
        if variant == "pageable" and not (h2d.get("pageable", 0) > 0 and h2d.get("pinned", 0) == 0):
            failures.append(f"pageable: H2D copies by source {h2d}")
        if variant == "pinned" and not (h2d.get("pinned", 0) > 0 and h2d.get("pageable", 0) == 0):
            failures.append(f"pinned: H2D copies by source {h2d}")
        if variant in ("pageable", "pinned") and top != "data_wait":
            failures.append(f"{variant}: dominant stall cause {top}, expected data_wait")
        if variant == "compute" and (busy is None or busy < 0.5):
            failures.append(f"compute: GPU busy fraction {busy}, expected > 0.5")
    print("| variant | kernels | H2D pageable | H2D pinned | mode | top stall cause | stall fraction | GPU busy |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        busy = "-" if r[7] is None else f"{r[7]:.2f}"
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.2f} | {busy} |")
    for f in failures:
        print("FAIL:", f)
    print(f"{3 - len({f.split(':')[0] for f in failures})} passed, {len({f.split(':')[0] for f in failures})} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
