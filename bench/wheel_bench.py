"""The self-contained wheel (scripts/wheel.sh) beside the build from source, on this machine.

Installs the wheel into a fresh venv (timed, torch and numpy seen from this Python's site-packages),
then runs, interleaved (each repetition runs every variant, in an order that turns), so that the
machine's noise hits both alike:
  - `stallscope --version`: the command on PATH (the venv's console script, which starts Python
    and execs the native executable), the wheel's executable itself, and the build's;
  - the per-batch cost: bench/overhead_train.py's tiny-batch loop (batches of 4 from memory, an empty
    step: the per-batch hooks are all stallscope adds) plain, under the wheel's `stallscope run` and
    under the build's;
  - the reference loader: stallscope.ReferenceLoader over an ImageFolder of JPEGs (decode, random
    resized crop to 224, flip, normalise; 2 threads), samples/s, from the wheel and from the build.
Prints one table, goal beside figure, ratios wheel / build.
    python3 bench/wheel_bench.py [--wheel dist/stallscope-*.whl] [--build build] [--reps 5]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

LOADER_LOOP = r"""
import json, sys, time, stallscope
root = sys.argv[1]
t = stallscope.ImageTransform(crop="random_resized_crop", size=224, flip=0.5)
loader = stallscope.ReferenceLoader.from_image_folder(root, t, batch_size=32, shuffle=True, threads=2)
for _ in loader:  # one epoch to warm the page cache and the pool
    pass
n, t0 = 0, time.perf_counter()
for _ in range(3):
    for images, labels in loader:
        n += len(labels)
module = stallscope.reference_loader._native_module().__file__
print(json.dumps({"samples_per_s": n / (time.perf_counter() - t0), "module": module}))
"""


def timed(cmd, env=None):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"wheel_bench: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-800:]}")
    return dt, out.stdout


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def make_images(root, n=256):
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    for c in range(4):
        os.makedirs(f"{root}/c{c}", exist_ok=True)
        for i in range(n // 4):
            a = (rng.random((375, 500, 3)) * 255).astype(np.uint8)
            a[:, :, c % 3] //= 2
            Image.fromarray(a).save(f"{root}/c{c}/{i}.jpg", quality=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", default=None, help="the wheel (default: the newest dist/stallscope-*.whl)")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="the build from source to compare with")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    wheel = args.wheel or max(glob.glob(os.path.join(REPO, "dist", "stallscope-*.whl")), key=os.path.getmtime,
                              default=None)
    if not wheel or not os.path.isfile(wheel):
        sys.exit("wheel_bench: no wheel; make one with scripts/wheel.sh (or pass --wheel)")
    build_exe = os.path.join(args.build, "bin", "stallscope")
    if not os.access(build_exe, os.X_OK):
        sys.exit(f"wheel_bench: no {build_exe}; build first (scripts/setup.sh) or pass --build")
    tmp = tempfile.mkdtemp(prefix="stallscope-wheel-bench-")
    try:
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        vpy = os.path.join(venv, "bin", "python")
        install_s, _ = timed([vpy, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                              "--disable-pip-version-check", wheel])
        console = os.path.join(venv, "bin", "stallscope")
        where = ("import os, stallscope; "
                 "print(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(stallscope.__file__)))))")
        tree = subprocess.run([vpy, "-c", where],
                              capture_output=True, text=True, check=True).stdout.strip()
        wheel_exe = os.path.join(tree, "bin", "stallscope")
        images = os.path.join(tmp, "images")
        make_images(images)
        train = os.path.join(HERE, "overhead_train.py")
        # The build's package, and its library and modules (not another build's beside the sources).
        build_env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"),
                         STALLSCOPE_LIBRARY=os.path.join(os.path.abspath(args.build), "lib", "libstallscope.so"))

        version = {"console script (wheel)": [console], "executable (wheel)": [wheel_exe],
                   "executable (build)": [build_exe]}
        tiny = {"plain": [sys.executable, train, "--mode", "tiny"],
                "wheel": [console, "run", "-q", "-o", None, "--", vpy, train, "--mode", "tiny"],
                "build": [build_exe, "run", "-q", "-o", None, "--", sys.executable, train, "--mode", "tiny"]}
        loader = {"wheel": ([vpy, "-c", LOADER_LOOP, images], None),
                  "build": ([sys.executable, "-c", LOADER_LOOP, images], build_env)}
        ver = {k: [] for k in version}
        us = {k: [] for k in tiny}
        sps = {k: [] for k in loader}
        modules = {}
        for rep in range(args.reps):
            turn = rep % 3
            for k in list(version)[turn:] + list(version)[:turn]:
                ver[k].append(statistics.median(timed([*version[k], "--version"])[0] for _ in range(5)))
            for k in list(tiny)[turn:] + list(tiny)[:turn]:
                cmd = [os.path.join(tmp, f"tiny-{k}-{rep}.db") if a is None else a for a in tiny[k]]
                us[k].append(last_json(timed(cmd)[1])["us_per_batch"])
            for k in list(loader)[rep % 2:] + list(loader)[:rep % 2]:
                cmd, env = loader[k]
                r = last_json(timed(cmd, env)[1])
                sps[k].append(r["samples_per_s"])
                modules[k] = r["module"]

        med = statistics.median
        size_mb = os.path.getsize(wheel) / 1e6
        print(f"Wheel: {os.path.basename(wheel)} ({size_mb:.1f} MB); build: {args.build}; {args.reps} interleaved "
              f"repetitions, medians")
        print(f"  the loader's module: wheel {modules['wheel']}; build {modules['build']}")
        print()
        print("| figure | goal | wheel | build | wheel / build |")
        print("|---|---|---|---|---|")
        print(f"| pip install of the wheel into a fresh venv | < 30 s | {install_s:.1f} s | | |")
        console_ms = med(ver["console script (wheel)"]) * 1e3
        print(f"| `stallscope --version`, console script on PATH | < 50 ms | {console_ms:.1f} ms | | |")
        print(f"| `stallscope --version`, the executable | < 50 ms | {med(ver['executable (wheel)']) * 1e3:.1f} ms | "
              f"{med(ver['executable (build)']) * 1e3:.1f} ms | "
              f"{med(ver['executable (wheel)']) / med(ver['executable (build)']):.2f} |")
        added = {k: med(u - p for u, p in zip(us[k], us["plain"], strict=True)) for k in ("wheel", "build")}
        print(f"| per-batch cost, tiny-batch loop ({med(us['plain']):.0f} us/batch plain) | as the build | "
              f"+{added['wheel']:.2f} us | +{added['build']:.2f} us | "
              f"{med(us['wheel']) / med(us['build']):.3f} (us/batch) |")
        print(f"| ReferenceLoader, JPEG folder 500x375 -> 224, 2 threads | as the build | "
              f"{med(sps['wheel']):.0f} samples/s | {med(sps['build']):.0f} samples/s | "
              f"{med(sps['wheel']) / med(sps['build']):.3f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
