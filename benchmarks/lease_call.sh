#!/bin/bash
# One call of a study's full grid on a lent GPU machine (the `device` tool), resumable across
# calls and machines:   bash benchmarks/lease_call.sh SUITE MINUTES HARD_SECONDS [BENCH OPTIONS...]
#
# The cells already done are the manifests committed in $REPORTS/SUITE/manifests.jsonl.gz (REPORTS:
# reports/h100, or reports/h200 for the H200's suites; it travels with the working tree), unpacked
# into the lease dir as run.json files by benchmarks/packed_manifests.py; `tracekit bench` skips
# them and runs the rest for MINUTES (what `make bench-h100-full FULL_SUITES=SUITE` runs). At HARD_SECONDS the bench
# is interrupted whatever it is doing, so that the cells finished are always packed: their run.json,
# cell.log, a job's launcher.log and traces (uncompressed, then xz: about 20x smaller than gzip's 6x) into
# $OUT/cells.tar.xz.NN, 15 MiB parts (the tool brings back at most 8 files, 16 MiB each).
# Unpack them here with benchmarks/lease_unpack.sh. PYTHON (python3) runs tracekit. Options after
# HARD_SECONDS go to `tracekit bench` (to measure cells again: --force --only 'lm-large-512-*/*').
# The runs live in LEASE_DIR (/tmp/tracekit-lease), which outlasts the call on a warm machine: a
# call made at once after another (a machine stays warm only 30 s) resumes from the cells of the
# last one before they are unpacked and committed here. Packed traces are deleted there, so that
# each call's report (written by the bench at its end) analyzes only that call's own cells.
set -o pipefail
SUITE=$1; MINUTES=$2; HARD=$3; shift 3; PY=${PYTHON:-python3}
$PY -c "import msgspec, click, rich, jinja2" 2>/dev/null || {
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}; }
L=${LEASE_DIR:-/tmp/tracekit-lease}; W=$(mktemp -d); mkdir -p $L/runs/$SUITE $W/pack
R=${REPORTS:-reports/h100}
if [ -f $R/$SUITE/manifests.jsonl.gz ]; then
  $PY "$(dirname "$0")/packed_manifests.py" unpack $R/$SUITE/manifests.jsonl.gz $L/runs/$SUITE || exit 1; fi
touch $W/stamp; sleep 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1
PYTHONUNBUFFERED=1 timeout -s INT $HARD $PY -m tracekit bench workloads/$SUITE.toml --traces $L/runs \
  --reports $L/runs --max-minutes $MINUTES --timeout 300 --html-plots link "$@" 2>&1 | tee $OUT/log.txt
cd $L/runs
find $SUITE -type f -newer $W/stamp \( -name run.json -o -name cell.log -o -name launcher.log \) | while read f; do
  mkdir -p $W/pack/$(dirname $f); cp $f $W/pack/$f; done
find $SUITE -type f -newer $W/stamp -name '*.pt.trace.json.gz' | while read f; do
  mkdir -p $W/pack/$(dirname $f); zcat $f > $W/pack/${f%.gz} && rm $f; done
(cd $W/pack && tar cf - $SUITE) | xz -T0 -6 > $W/cells.tar.xz
ls -la $W/cells.tar.xz
split -b 15M -d $W/cells.tar.xz $OUT/cells.tar.xz.
rm -rf $W
