#!/bin/bash
# Unpack what benchmarks/lease_call.sh brought back:   bash benchmarks/lease_unpack.sh FILES_AT SUITE
# Cells go to .gpu/full/SUITE/ (traces gzipped again; the report is written from there with
# `tracekit bench workloads/SUITE.toml --traces .gpu/full --reports reports/h100 --report-only ...`);
# each finished cell's run.json (status other than skipped/running/interrupted) also to $REPORTS/SUITE/traces/
# (REPORTS: reports/h100, or reports/h200),
# where the next call finds the cells done (commit them: only the working tree travels).
set -e
FILES=$1; SUITE=$2; R=${REPORTS:-reports/h100}
mkdir -p $R/$SUITE/traces
mkdir -p .gpu/full
# a cell measured again (--force) replaces its old traces: a folder's trace files are one run
cat $FILES/cells.tar.xz.* | xz -d | tar tf - | grep '/run.json$' | while read f; do
  rm -f .gpu/full/$(dirname $f)/*.pt.trace.json.gz
done
cat $FILES/cells.tar.xz.* | xz -d | tar xf - -C .gpu/full
find .gpu/full/$SUITE -name '*.pt.trace.json' -print0 | xargs -0 -r gzip -f -6
(cd .gpu/full/$SUITE && find . -name run.json) | while read f; do
  if ! grep -q -E '"status": "(skipped|running|interrupted)"' .gpu/full/$SUITE/$f; then
    mkdir -p $R/$SUITE/traces/$(dirname $f)
    cp .gpu/full/$SUITE/$f $R/$SUITE/traces/$f
  fi
done
echo "$(find $R/$SUITE/traces -name run.json | wc -l) cells done"
