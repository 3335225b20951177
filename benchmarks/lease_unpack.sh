#!/bin/bash
# Unpack what benchmarks/lease_call.sh brought back:   bash benchmarks/lease_unpack.sh FILES_AT SUITE
# Cells go to .gpu/full/SUITE/ (traces gzipped again; the report is written from there with
# `tracekit bench workloads/SUITE.toml --traces .gpu/full --reports reports/h100 --report-only ...`);
# each finished cell's run.json (status other than skipped/running/interrupted) goes into
# $REPORTS/SUITE/manifests.jsonl.gz (REPORTS: reports/h100, or reports/h200), replacing the cell's
# old manifest there, where the next call finds the cells done (commit it: only the working tree
# travels). PYTHON (python3) runs benchmarks/packed_manifests.py (the standard library only).
set -e
FILES=$1; SUITE=$2; R=${REPORTS:-reports/h100}; PY=${PYTHON:-python3}
NEW=$(mktemp -d); trap 'rm -rf $NEW' EXIT
cat $FILES/cells.tar.xz.* | xz -d | tar xf - -C $NEW
find $NEW -name '*.pt.trace.json' -print0 | xargs -0 -r gzip -f -6
mkdir -p .gpu/full
# a cell measured again (--force) replaces its old traces: a folder's trace files are one run
(cd $NEW && find . -name run.json) | while read f; do
  rm -f .gpu/full/$(dirname $f)/*.pt.trace.json.gz
done
cp -r $NEW/. .gpu/full/
$PY "$(dirname "$0")/packed_manifests.py" add --finished $R/$SUITE/manifests.jsonl.gz $NEW/$SUITE
