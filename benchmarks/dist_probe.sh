#!/bin/bash
# Issue 38's checks of jobs on a lent machine of 2 or 4 GPUs, in one call of the `device` tool:
#   bash benchmarks/dist_probe.sh NPROC MINUTES HARD_SECONDS [tests]
# With "tests", first the gpu-marked tests of CUDA graphs and of the no-overlap twins (about 3
# minutes; their output in
# $OUT/gpu-tests.txt): a job's (tests/test_distributed.py, 2 GPUs: a DDP training step captured with
# its all-reduces, faster than eager, the replicas' weights equal after the replays; an FSDP2 step
# captured; cudagraphs-compile under DDP), a single GPU's (tests/backends/test_backends.py) and the
# capture's own on a GPU (tests/capture: a run's profiled steps, a recorded loop timed with CUDA
# events; tests/test_api.py: profile comparing cudagraphs with eager).
# Then workloads/predict-dist.toml on NPROC ranks (--set nproc=NPROC), each rank on CPUs of its own
# (TRACEKIT_CPU_BINDING=exclusive unless set otherwise), for MINUTES of cells, through
# benchmarks/lease_call.sh (resumable from $REPORTS/predict-dist/manifests.jsonl.gz; its cells
# packed into $OUT/cells.tar.xz.NN, to unpack here with benchmarks/lease_unpack.sh; the bench's
# output in $OUT/log.txt), everything stopped at HARD_SECONDS from the start.
#   2 GPUs: bash benchmarks/dist_probe.sh 2 6 560 tests
#   4 GPUs: bash benchmarks/dist_probe.sh 4 8 560
set -o pipefail
NPROC=$1; MINUTES=$2; HARD=$3; TESTS=$4; PY=${PYTHON:-python3}
$PY -c "import msgspec, click, rich, jinja2, pytest" 2>/dev/null || {
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  export PYTHONPATH=/tmp/site:$PWD; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $OUT/gpu.txt 2>&1
if [ "$TESTS" = tests ]; then
  PYTHONUNBUFFERED=1 timeout -s INT 330 $PY -m pytest -q -p no:cacheprovider -rs -m gpu \
    tests/test_distributed.py tests/backends/test_backends.py tests/capture tests/test_api.py 2>&1 |
    tee $OUT/gpu-tests.txt
fi
TRACEKIT_CPU_BINDING=${TRACEKIT_CPU_BINDING-exclusive} bash "$(dirname "$0")/lease_call.sh" predict-dist "$MINUTES" $((HARD - SECONDS)) --set nproc="$NPROC"
