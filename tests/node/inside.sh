#!/usr/bin/env bash
# Runs inside a bare Debian root as an ordinary user (tests/node/run.sh puts it there): installs the
# wheel into a fresh venv as a user would and uses every recorder command on real training.
# Prints one "step  seconds" line per step; a failed check prints "FAIL: ..." and exits 1.
#   inside.sh FULL|NOTORCH      (NOTORCH: a Python that torch 2.13 does not install on)
set -uo pipefail
MODE=$1
C=/opt/check  # what run.sh copied in: the wheel, pip's files, these scripts, JPEGs, a recording
cd "$HOME"
fail() { echo "FAIL: $*"; exit 1; }
# step NAME CMD...: runs CMD (its output in $HOME/NAME.log), times it, fails the test if it fails.
step() {
  local name=$1 t0=$EPOCHREALTIME
  shift
  "$@" >"$HOME/$name.log" 2>&1 || { cat "$HOME/$name.log"; fail "$name: exit $?: $*"; }
  printf '%-34s %7.2f s\n' "$name" "$(python3 -c "print($EPOCHREALTIME - $t0)")"
}
[ ! -e /work ] || fail "the build machine's /work is visible in the root"
[ "$(id -u)" != 0 ] || fail "running as root"
command -v cc gcc g++ c++ >/dev/null && fail "a compiler is installed in the root"

step venv python3 -m venv venv
PIP=(venv/bin/pip install -q --no-index --disable-pip-version-check --find-links "$C/pip")
if [ "$MODE" = FULL ]; then
  step pip-install-torch "${PIP[@]}" torch==2.13.0 numpy
fi
step pip-install-wheel "${PIP[@]}" "$C"/stallscope-*.whl
export PATH="$HOME/venv/bin:$PATH"
step version stallscope --version
grep -q '^stallscope ' version.log || fail "--version printed: $(cat version.log)"

# Every ELF file of the install: its libraries resolve here, and none is a GUI library or OpenCV
# but where the dashboard's executable loads them at run time (it names none of them either).
TREE=$(python3 -c "import os, sysconfig; print(os.path.join(sysconfig.get_paths()['platlib'], '_stallscope'))")
step elf-deps python3 "$C/elf_check.py" "$TREE"
# Nothing of the build tree is named in the install (a path compiled in, an RPATH).
if grep -rl --binary-files=text -e "/work/" -e "$C/build" "$TREE" >grep.log 2>&1; then
  fail "the install names the build machine's paths: $(cat grep.log)"
fi

# The extension modules of this Python load (the hooks' module inside a recorded process, beside the
# collector it calls), each the file built for this CPython.
step modules stallscope run -q -o modules.db -- python3 -c "
import sys
from stallscope import _ext
tag = 'cpython-%d%d-' % sys.version_info[:2]
for m in ('_stallscope_loader', '_stallscope_hooks'):
    f = _ext.load(m, _ext.module_dirs()).__file__
    assert tag in f, (m, f)
    print(m, f)"

# The dashboard: no display here, so one line that names another machine, and exit 1.
step ui-help stallscope ui --help
stallscope ui "$C/run.db" >ui.out 2>ui.err
rc=$?
[ "$rc" = 1 ] || fail "stallscope ui exited $rc: $(cat ui.err)"
[ "$(wc -l <ui.err)" = 1 ] || fail "stallscope ui said more than one line: $(cat ui.err)"
grep -q -i "machine" ui.err || fail "stallscope ui does not name another machine: $(cat ui.err)"
printf '%-34s %s\n' "ui-without-display" "$(cat ui.err)"

# A recording made on another node (Debian 12's, where it ran first) reads here.
if [ -s "$C/run.db" ]; then
  step report-copied stallscope report "$C/run.db"
  step export-copied stallscope export -o copied-trace.json "$C/run.db"
fi

if [ "$MODE" = NOTORCH ]; then
  # Recording works without torch too (the sampler and the process tree; no DataLoader to see).
  step run-plain stallscope run -q -o plain.db -- python3 -c "import time; [sum(range(10**5)) for _ in range(300)]"
  step report-plain stallscope report plain.db
  exit 0
fi

# --- a real training loop, recorded; the same losses and exit code as without stallscope -------
step train-plain python3 "$C/train.py"
step run stallscope run -q -o run.db -- python3 "$C/train.py" --maps maps.txt
diff train-plain.log run.log >/dev/null || fail "the losses differ under stallscope: $(diff train-plain.log run.log)"
grep -q "$HOME/venv/" maps.txt || fail "libstallscope.so was not mapped from the venv: $(cat maps.txt)"
if grep -v "^$HOME/venv/" maps.txt | grep -q .; then fail "stallscope files mapped from elsewhere: $(cat maps.txt)"; fi
step report stallscope report run.db
step report-json stallscope report --json run.db
python3 -c "
import json, sys
r = json.load(open('report-json.log'))
assert r['samples'] >= 3 * 512, r['samples']
assert r['loader']['kind'] == 'torch', r['loader']
" || fail "report --json: $(head -c 400 report-json.log)"
step export stallscope export -o trace.json run.db
python3 -c "import json; assert json.load(open('trace.json'))['traceEvents']" || fail "the export has no events"
# The user's exit code comes back unchanged.
stallscope run -q -o exit3.db -- python3 -c "import sys; sys.exit(3)"
[ $? = 3 ] || fail "stallscope run did not return the script's exit code 3"

# --- the reference loader: swapped in by flag, and over JPEGs -------------------------------------
step run-loader-reference stallscope run -q --loader reference -o ref.db -- python3 "$C/train.py" --epochs 2 --tensors
step report-reference stallscope report --json ref.db
grep -q '"kind": *"reference"' report-reference.log || fail "--loader reference did not swap the loader in"
step run-jpeg stallscope run -q -o jpeg.db -- python3 "$C/train_jpeg.py" "$C/images"
grep -q "^samples 96 " run-jpeg.log || fail "the JPEG loop saw: $(cat run-jpeg.log)"

# --- the metrics endpoint, scraped while the job runs ---------------------------------------------
stallscope run -q --metrics-port 9464 -o metrics.db -- python3 "$C/train.py" --epochs 6 --sleep-ms 3 >metrics-run.log 2>&1 &
job=$!
step metrics-scrape python3 -c "
import time, urllib.request
for _ in range(300):
    try:
        body = urllib.request.urlopen('http://127.0.0.1:9464/metrics', timeout=1).read().decode()
        if 'stallscope_' in body:
            break
    except OSError:
        pass
    time.sleep(0.1)
else:
    raise SystemExit('no stallscope_ metrics at 127.0.0.1:9464')"
wait $job || fail "the job under --metrics-port failed: $(cat metrics-run.log)"

# --- attach to a training process that started without stallscope ---------------------------------
python3 "$C/train.py" --epochs 40 --sleep-ms 2 >attached-run.log 2>&1 &
job=$!
sleep 4
step attach stallscope attach -q -d 4 -o attach.db "$job"
wait $job || fail "the attached training failed: $(cat attached-run.log)"
step report-attach stallscope report --json attach.db
python3 -c "
import json
r = json.load(open('report-attach.log'))
assert r['samples'] > 0, r['samples']" || fail "attach recorded no batches"
cp run.db /opt/out/run.db
echo "all checks passed"
