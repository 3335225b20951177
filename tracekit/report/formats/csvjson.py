"""The data formats: ``runs.csv`` (every metric of every run, units in the column names,
plus the profiler-overhead columns), ``comparison.csv`` (the comparison with the
baseline), ``modules.csv`` (each mode against the baseline, module by module, when
runs have attribution rows; else an earlier report's modules.csv in the folder is removed),
``critical_path.csv`` (each iteration's critical path, part by part, with ``--critical-path``;
likewise removed without one), ``critical_path_top.csv`` (what is on it most, by kernel or
call, op and module; likewise), ``job_critical_path.csv`` (each job's ranks joined at their
collectives, per rank and iteration; likewise) and ``runs.json`` (every table)."""

from __future__ import annotations

from pathlib import Path

from tracekit.analysis.result import Result
from tracekit.io import records, write_atomic, write_json
from tracekit.report.base import Renderer, Report, register


@register
class CsvJson(Renderer):
    name = "csv/json"
    takes = Result

    def write(self, report: Report) -> list[Path]:
        t, out = report.data, report.out
        runs = t.analysis.runs
        if len(t.overhead):
            runs = runs.merge(t.overhead[["run", "profiler_overhead", "flagged"]].rename(
                columns={"flagged": "profiler_overhead_flagged"}), on="run", how="left")
        # The timeline table (one iteration's events, for the plot) is events, not metrics: left out.
        data = {**{k: v for k, v in t.analysis.to_dict().items() if k != "timeline"},
                "comparison": records(t.comparison), "cpu_op_changes": records(t.cpu_op_changes),
                "profiler_overhead": records(t.overhead), "baseline": t.baseline,
                "modules": records(t.modules), "module_busy": records(t.module_busy)}
        files = [write_atomic(out / "runs.csv", runs.to_csv(index=False)),
                 write_atomic(out / "comparison.csv", t.comparison.to_csv(index=False)),
                 write_json(out / "runs.json", data)]
        for name in ("critical_path", "critical_path_top", "job_critical_path"):   # tracekit analyze --critical-path
            table = t.analysis.table(name)
            if len(table):
                files.append(write_atomic(out / f"{name}.csv", table.to_csv(index=False)))
            else:
                (out / f"{name}.csv").unlink(missing_ok=True)
        if len(t.modules):
            files.append(write_atomic(out / "modules.csv", t.modules.to_csv(index=False)))
        else:  # no module rows: an earlier report's modules.csv would pass for this one's
            (out / "modules.csv").unlink(missing_ok=True)
        return files
