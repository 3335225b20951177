"""Every verb that reads traces, run in-process on a damaged input by the fuzz tests
(tests/test_fuzz.py, tests/test_fuzz_folders.py), and the property each run must have (issue 40):
no hang, no traceback, no internal error, an exit code the README's table documents for the verb,
and the untouched trace beside a damaged input kept, with the figures it has alone.
"""

import json
import math
import signal
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from click.testing import CliRunner
from fuzzing import UNTOUCHED

from tracekit.cli import main
from tracekit.errors import ExitCode

HANG_S = 120   # one case (two small traces analyzed, the report written) takes under a few seconds
# Every verb that reads traces, and the exit codes each may end with (the README's table). Never
# 70 (a bug), and never "internal error" in what it prints.
COMMON = {ExitCode.OK, ExitCode.NOT_FOUND, ExitCode.NO_TRACES, ExitCode.CORRUPT_GZIP, ExitCode.TRUNCATED,
          ExitCode.NOT_JSON, ExitCode.NOT_A_TRACE, ExitCode.BAD_CONTENT, ExitCode.PARTIAL}
VERBS = {"analyze": COMMON, "critical-path": COMMON, "annotate": COMMON, "compare": COMMON, "bench": COMMON,
         "whatif": COMMON | {ExitCode.CANNOT_MODEL}, "diff": COMMON}
# The one reason a trace cannot be modelled that is not a bug: its iterations all come out 0 µs
# (what --json writes of it: "µs" is escaped there).
CANNOT_MODEL = "no iteration of the model is longer than 0 "
# The verbs that report the untouched trace beside the damaged input: they exit 0 or 10, never
# the damaged input's own code, and name it.
KEEP = {"analyze", "critical-path", "compare", "bench"}


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a case ran over {HANG_S} s")


@contextmanager
def no_hang():
    """Raise :class:`Hang` in the block past ``HANG_S`` seconds."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def bench_suite(tmp: Path) -> tuple[Path, Path, Path]:
    """A suite file of one workload, eager and reduce-overhead, and its cells' folders under
    ``tmp/traces``: (suite file, eager's run folder, reduce-overhead's), each with a run.json and no trace."""
    from tracebuilder import write_run

    from tracekit import bench
    from tracekit.manifest.suite_toml import load_suite

    suite = tmp / "fuzz.toml"
    suite.write_text('name = "fuzz"\n[[grid]]\nmodel = "vit16x6x384"\nmode = ["eager", "reduce-overhead"]\n')
    root = bench.suite_traces(tmp / "traces", load_suite(suite))
    env = {"device_name": "NVIDIA H100 80GB HBM3", "cuda_driver": "580.159.04"}
    cells = [write_run(root / "vit16x6x384" / mode, None, mode=mode, environment=env)
             for mode in ("eager", "reduce-overhead")]
    return suite, *cells


def run_verb(verb: str, target: Path, tmp: Path, other: Path = UNTOUCHED, suite: Path | None = None):
    """``verb`` run in-process on ``target`` (a file or a folder): analyze (``--json``), with
    ``--critical-path`` (``--json``) or ``--annotate``, ``whatif --cuda-graphs --json``, ``diff`` and
    ``compare`` of ``other`` and ``target`` (``diff FOLDER`` for a folder), ``bench SUITE
    --report-only`` (its traces under ``tmp/traces``, its reports under ``tmp/reports``). Returns
    click's result (``output``: stdout and stderr)."""
    out = str(tmp / "reports")
    args = {"analyze": ["analyze", str(target), "--out", out, "--json"],
            "critical-path": ["analyze", str(target), "--critical-path", "--out", out, "--json"],
            "annotate": ["analyze", str(target), "--annotate", "--out", out],
            "whatif": ["whatif", str(target), "--cuda-graphs", "--json"],
            "diff": ["diff", str(target)] if target.is_dir() else ["diff", str(other), str(target), "--json"],
            "compare": ["compare", str(other), str(target)],
            "bench": ["bench", str(suite), "--report-only", "--traces", str(tmp / "traces"), "--reports", out]}[verb]
    with no_hang():
        return CliRunner().invoke(main, args)


def check(verb: str, r, where: str) -> None:
    """The property of every run: no hang, no traceback, no internal error, an exit code the
    README documents for the verb; a trace whatif cannot model only for the one reason that is not a bug."""
    assert not isinstance(r.exception, Hang), where
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{where}: {verb} raised {r.exception!r}"
    assert "Traceback" not in r.output and "internal error" not in r.output, f"{where}: {verb}\n{r.output}"
    assert r.exit_code in VERBS[verb], f"{where}: {verb} exit {r.exit_code}\n{r.output}"
    if verb == "whatif" and r.exit_code == ExitCode.CANNOT_MODEL:
        assert CANNOT_MODEL in r.output, f"{where}: whatif could not model the trace\n{r.output}"


def check_kept(verb: str, r, tmp: Path, where: str) -> None:
    """Where the untouched trace was given beside the damaged input (``KEEP``'s verbs), it is in
    the report, and the run ends 0 or 10: one input's failure never loses the rest. ``analyze``'s
    figures of it are those it has alone (``--json``)."""
    if verb not in KEEP:
        return
    assert r.exit_code in (ExitCode.OK, ExitCode.PARTIAL), f"{where}: {verb} exit {r.exit_code}\n{r.output}"
    if verb in ("analyze", "critical-path"):
        assert_untouched(r.stdout, where)
    elif verb == "compare":
        assert UNTOUCHED.name in r.output, f"{where}: compare lost the untouched trace\n{r.output}"
    else:
        report = (tmp / "reports" / "fuzz" / "report.md").read_text()
        assert "vit16x6x384/eager" in report, f"{where}: bench lost the untouched cell\n{r.output}"


def run_row(runs: list[dict], trace: str) -> dict:
    return next(r for r in runs if r["trace"] == trace)


def same(a, b) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b or both_nan


@lru_cache(maxsize=1)
def untouched_alone() -> dict:
    """The untouched trace's run row, analyzed alone in a folder as the cases do."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        folder.mkdir()
        (folder / UNTOUCHED.name).write_bytes(UNTOUCHED.read_bytes())
        r = CliRunner().invoke(main, ["analyze", str(folder), "--out", str(Path(tmp) / "reports"), "--json"])
    assert r.exit_code == 0, r.output
    return run_row(json.loads(r.stdout)["runs"], UNTOUCHED.name)


def assert_untouched(stdout: str, where: str) -> None:
    """The untouched trace beside a damaged input has the figures it has alone (critical-path
    columns aside: only ``--critical-path`` has them)."""
    row = run_row(json.loads(stdout)["runs"], UNTOUCHED.name)
    changed = {k: (v, row.get(k)) for k, v in untouched_alone().items() if not same(v, row.get(k))}
    assert not changed, f"{where}: the untouched trace's figures changed: {changed}"
