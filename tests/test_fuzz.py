"""Issues 31 and 40: fuzzing every verb with damaged copies of real traces (Hypothesis).

Each case takes a real trace (our own in tests/data, and other projects' in
../shared/fixtures where present; without them, ours alone), damages a copy of its events --
drops a share of the launch calls, flow events, markers or GPU ops; removes, nulls or retypes
a field (ts, dur, args, correlation, pid, tid, cat, name, ph, stream...) on a share of them;
negative and huge durations; duplicated, shuffled and junk events; another displayTimeUnit;
and issue 40's names and numbers: marker numbers past int64 or not numbers, ids past int64
and uint64, ts and dur shifted near 1e19 or scaled, every dur 0, categories relabelled
(kernel as gpu_op...) -- writes it (plain or gzipped, maybe cut at a random byte), and runs
a verb in-process on it (tests/fuzzing.py: the corpus and the damages; tests/fuzz_verbs.py:
the verbs and the property).

Property: the exit code is one the README documents for the verb (never 70), nothing says
"internal error" (an analysis that raised), there is no traceback, no case hangs
(``HANG_S``), and an untouched trace beside it is kept, with the figures it has alone.
test_fuzz_folders.py damages folders; test_properties.py the bytes of a trace for the reader alone.

``TRACEKIT_FUZZ_EXAMPLES`` (200 by default) sets the cases: ``test_damaged_real_traces``
(analyze) runs that many, about 45 s on 2 cores; every verb's quick test 6% of them (12, and 7 of
the issue's reproductions: about 6 s), its slow test (``make test-all``) half (100: about a
minute). ``make fuzz`` runs them with 3000.
"""

import random
import tempfile
from pathlib import Path

import pytest
from fuzz_verbs import KEEP, VERBS, assert_untouched, bench_suite, check, check_kept, run_verb
from fuzzing import UNTOUCHED, corpus, damage, damaged_bytes, fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st
from owndata import DATA, FIXTURES

from tracekit.errors import ExitCode

MLP = next((DATA / "h100" / "mlp-train-step" / "eager").glob("*.pt.trace.json.gz"))   # the issue's F
CASE = dict(source=st.sampled_from(corpus()), span=st.tuples(st.floats(0, 1), st.floats(0.02, 1)),
            damages=st.lists(damage, min_size=1, max_size=4), gz=st.booleans(), cut=st.none() | st.floats(0, 1),
            rnd=st.randoms(use_true_random=False))


def _known(test):
    """Cases run first every time: our trace without most launch calls, and HTA's 2-rank NCCL
    trace with some dropped (NCCL kernels whose launch is outside the trace: exit 70 before issue 31);
    issue 40's: our MLP training step with a marker numbered past int64 (exit 70 before), every dur
    0 (the critical path's exit 70), its kernels relabelled (silently "integrity ok" before)."""
    nccl = FIXTURES / "dist" / "hta-trace-filter-sampled-2rank" / "sampled_rank-0.json.gz"
    cases = [(UNTOUCHED, (0, 1), [("drop", "launch", 0.9)])] + ([(nccl, (0.75, 1), [("drop", "launch", 0.3)])]
                                                             if nccl in corpus() else [])
    cases += [(MLP, (0, 1), [("marker number", 2 ** 63, 0.3)]), (MLP, (0, 1), [("zero durations",)]),
              (MLP, (0, 1), [("relabel", ("kernel", "gpu_op"), 1.0)])]
    for source, span, damages in cases:
        test = example(source=source, span=span, damages=damages, gz=False, cut=None, beside=True, rnd=None)(test)
    return test


@fuzz_settings()
@given(beside=st.booleans(), **CASE)
@_known
def test_damaged_real_traces(source, span, damages, gz, cut, beside, rnd):
    """`tracekit analyze` of a damaged copy, alone or in a folder beside an untouched real trace."""
    raw = damaged_bytes(source, span, damages, gz, cut, rnd or random.Random(0))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        folder.mkdir()
        damaged = folder / ("damaged.json.gz" if gz else "damaged.json")
        damaged.write_bytes(raw)
        if beside:
            (folder / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        r = run_verb("analyze", folder if beside else damaged, Path(tmp))
    where = f"{source} {span} damaged by {damages} (gzip {gz}, cut {cut})"
    check("analyze", r, where)
    if beside:
        assert r.exit_code in (ExitCode.OK, ExitCode.PARTIAL), where
        assert_untouched(r.stdout, where)


def _every_verb(verb, source, span, damages, gz, cut, beside, rnd) -> None:
    """``verb`` on a damaged copy: analyze, --critical-path and --annotate of it alone or of its
    folder beside the untouched trace (``beside``), whatif of it, diff and compare of the untouched
    trace and it, bench --report-only of a suite whose eager cell is the untouched trace and whose
    reduce-overhead cell is the damaged copy; the property of tests/fuzz_verbs.py's ``check``, and
    where the untouched trace was given, ``check_kept``."""
    raw = damaged_bytes(source, span, damages, gz, cut, rnd or random.Random(0))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        suite = None
        if verb == "bench":
            suite, eager, folder = bench_suite(tmp)
            (eager / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        else:
            folder = tmp / "traces"
            folder.mkdir()
        damaged = folder / ("damaged.pt.trace.json.gz" if gz else "damaged.pt.trace.json")
        damaged.write_bytes(raw)
        in_folder = beside and verb in ("analyze", "critical-path", "annotate")
        if in_folder:
            (folder / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        r = run_verb(verb, folder if in_folder else damaged, tmp, suite=suite)
        where = f"{source} {span} damaged by {damages} (gzip {gz}, cut {cut}{', beside' if in_folder else ''})"
        check(verb, r, where)
        if in_folder or verb in KEEP - {"analyze", "critical-path"}:
            check_kept(verb, r, tmp, where)


def _issue(test):
    """The issue's reproductions of names and numbers, run first every time: a marker numbered
    past int64 (exit 70 in analyze, whatif and diff before), every dur 0 (analyze --critical-path
    exit 70, whatif exit 2 before), the kernels relabelled gpu_op, a tenth of the events without a
    numeric ts (diff exit 0, the damage unsaid, before), ts shifted near 1e19."""
    cases = [("whatif", [("marker number", 2 ** 63, 0.3)]), ("diff", [("marker number", 2 ** 63, 0.3)]),
             ("critical-path", [("zero durations",)]), ("whatif", [("zero durations",)]),
             ("whatif", [("relabel", ("kernel", "gpu_op"), 1.0)]), ("diff", [("field", "ts", "text", "any", 0.1)]),
             ("annotate", [("shift", "both", 1e19)])]
    for verb, damages in cases:
        test = example(verb=verb, source=MLP, span=(0, 1), damages=damages, gz=True, cut=None, beside=True,
                       rnd=None)(test)
    return test


@fuzz_settings(0.06)
@given(verb=st.sampled_from(sorted(VERBS)), beside=st.booleans(), **CASE)
@_issue
def test_every_verb_on_damaged_real_traces_quick(verb, source, span, damages, gz, cut, beside, rnd):
    """Every verb (analyze, --critical-path, --annotate, whatif, diff, compare, bench
    --report-only) on a few damaged copies, and the issue's reproductions: the fast suite's share."""
    _every_verb(verb, source, span, damages, gz, cut, beside, rnd)


@pytest.mark.slow
@fuzz_settings(0.5)
@given(verb=st.sampled_from(sorted(VERBS)), beside=st.booleans(), **CASE)
def test_every_verb_on_damaged_real_traces(verb, source, span, damages, gz, cut, beside, rnd):
    """Every verb on many damaged copies (half of ``TRACEKIT_FUZZ_EXAMPLES``)."""
    _every_verb(verb, source, span, damages, gz, cut, beside, rnd)
