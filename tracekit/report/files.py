"""Report files: summary.md (headline table), runs.csv and runs.json (every metric)."""

from __future__ import annotations

from pathlib import Path

from tracekit.analysis.runs import Analysis
from tracekit.io import write_atomic, write_json
from tracekit.report.columns import IDLE, evidence, headline, notes


def _markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def launch_removal_sentence(r: dict) -> str:
    """One row of the launch_vs_fusion table in words (latencies in ms)."""
    share = r["launch_removal_share"]
    return (f"- {r['workload']}: eager {r['latency_eager_ms']:.3f} ms; plain CUDA graphs "
            f"{r['latency_cudagraphs_ms']:.3f} ms (saves {r['saved_by_cudagraphs_ms']:.3f} ms); default "
            f"{r['latency_default_ms']:.3f} ms; reduce-overhead {r['latency_reduce_overhead_ms']:.3f} ms "
            f"(saves {r['saved_by_reduce_overhead_ms']:.3f} ms). Launch removal alone gives "
            + (f"{share:.0%} of reduce-overhead's gain." if share == share else "no comparable gain "
               "(reduce-overhead saves nothing)."))


def summary_markdown(analysis: Analysis, source: str) -> str:
    """summary.md: the headline table and the unreadable files, as GitHub markdown."""
    headers, rows = headline(analysis.runs)
    parts = [f"# tracekit summary\n\nTraces: `{source}`. Times from the profiled window "
             "(µs in traces, shown in ms); latency p50 from the unprofiled timed iterations.\n",
             _markdown_table(headers, rows) if rows else "No runs found."]
    gpu = analysis.runs[analysis.runs["has_gpu"].fillna(False).astype(bool)] if "has_gpu" in analysis.runs else []
    if len(gpu):
        parts.append("\n## GPU idle time by cause (share of the active span)\n")
        parts.append(_markdown_table(*headline(gpu, IDLE)))
        parts.append("")
        parts += [f"- {line}" for line in evidence(gpu)]
    if len(control := analysis.table("launch_vs_fusion")):
        parts.append("\n## Launch removal alone (plain CUDA graphs) vs reduce-overhead\n")
        parts += [launch_removal_sentence(r) for r in control.to_dict("records")]
    if run_notes := notes(analysis.runs):
        parts.append("\nNotes:\n")
        parts += [f"- {line}" for line in run_notes]
    if analysis.errors:
        parts.append("\n## Unreadable files\n")
        parts += [f"- `{p}`: {why}" for p, why, _ in analysis.errors]
    if analysis.skipped:
        parts.append("\nSkipped (not traces): " + ", ".join(f"`{p}`" for p, _ in analysis.skipped))
    return "\n".join(parts) + "\n"


def write_reports(analysis: Analysis, out: Path | str, source: str) -> list[Path]:
    """Write summary.md, runs.csv and runs.json under ``out``; return their paths."""
    out = Path(out)
    runs = analysis.runs
    return [
        write_atomic(out / "summary.md", summary_markdown(analysis, source)),
        write_atomic(out / "runs.csv", runs.to_csv(index=False)),
        write_json(out / "runs.json", analysis.to_dict()),
    ]
