"""What `tracekit trace` prints when a run ends, from its manifest (report/formats/run_status.py)."""

import click
from click.testing import CliRunner

from tracekit.manifest import Manifest
from tracekit.report import print_reports
from tracekit.report.formats.run_status import run_status_lines


def _manifest(**fields) -> Manifest:
    return Manifest.from_dict({"label": "mlp", "mode": "eager", "status": "ok", "reason": "", "compile_s": 0.25,
                               "latency_ms": {"median": 2.0, "p10": 1.9, "p90": 2.2, "timer": "cuda_events"}, **fields})


def test_an_ok_run_is_its_latency_then_its_doubts():
    run = _manifest(wall_ms={"median": 2.2, "timer": "wall"}, repeats={"n": 3, "spread": 0.04},
                    host_load={"start": {"loadavg_1m": 5.9, "cpus": 2}, "end": {"loadavg_1m": 1.0, "cpus": 2}},
                    note="mode=reduce-overhead uses CUDA graphs only on CUDA")
    assert run_status_lines(run) == [
        "mlp/eager: ok, latency p50 2.000 ms (synchronised wall clock 2.200 ms), median of 3 processes (spread 4%), "
        "first call 0.25 s",
        "warning: timers disagree: cuda_events median 2.000 ms, synchronised wall clock 2.200 ms (+10%, over 5%)",
        "warning: host busy at the start: load 5.9 on 2 CPUs",
        "note: mode=reduce-overhead uses CUDA graphs only on CUDA"]
    # an older run.json without a wall clock: nan, and no doubt judged
    assert run_status_lines(_manifest()) == [
        "mlp/eager: ok, latency p50 2.000 ms (synchronised wall clock nan ms), first call 0.25 s"]


def test_a_run_that_did_not_happen_is_its_status_and_reason():
    run = _manifest(status="skipped", reason="torch_tensorrt not installed " + "x" * 600, latency_ms=None)
    (line,) = run_status_lines(run)
    assert line == "mlp/eager: skipped: " + run.reason[:500]   # the reason's first 500 characters


@click.command()
@click.pass_obj
def _print(run: Manifest) -> None:
    print_reports(run)


def test_the_terminal_prints_the_lines_as_they_are():
    """No wrapping at the console's width, no markup read in a reason (print_reports, as `tracekit trace`)."""
    run = _manifest(status="failed", reason="[bold]not bold[/bold] " + "y" * 200, latency_ms=None)
    r = CliRunner().invoke(_print, obj=run)
    assert r.output == f"mlp/eager: failed: {run.reason}\n"
