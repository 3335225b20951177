"""Hand-made Nsight Compute CSVs in the documented ``ncu --csv --page raw`` layout, with known answers.

    csv = NcuCsv(["gpu__time_duration.sum", "nsecond"), ("dram__bytes_read.sum", "Mbyte")])
    csv.kernel("gemm_kernel(float*, int)", 1_000_000, 3_000)    # values in the given units
    csv.write(tmp_path / "ncu.csv")

Layout (Nsight Compute CLI documentation, --csv / --page raw): ncu's log lines,
a header row (identity columns, then one per metric), a units row (empty under
the identity columns), one row per profiled kernel launch. Numbers are written
with thousands separators, as ncu does.
"""

from __future__ import annotations

from pathlib import Path

IDENTITY = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
            "Grid Size", "Device", "CC"]

TIME_DRAM = [("gpu__time_duration.sum", "nsecond"), ("dram__bytes_read.sum", "byte"),
             ("dram__bytes_write.sum", "byte")]


def _q(values) -> str:
    return ",".join('"' + str(v).replace('"', '""') + '"' for v in values)


def _num(v) -> str:
    if isinstance(v, str):
        return v
    return f"{v:,}" if isinstance(v, int) else f"{v:,.6f}".rstrip("0").rstrip(".")


class NcuCsv:
    def __init__(self, metrics: list[tuple[str, str]] = TIME_DRAM):
        self.metrics = metrics
        self.rows: list[list[str]] = []

    def kernel(self, name: str, *values, stream: int = 7) -> "NcuCsv":
        """One profiled launch: ``values`` in the order and units of ``metrics``."""
        assert len(values) == len(self.metrics)
        self.rows.append([str(len(self.rows)), "4242", "python3", "127.0.0.1", name, "1", str(stream),
                          "(128, 1, 1)", "(1024, 1, 1)", "0", "9.0", *(_num(v) for v in values)])
        return self

    def text(self) -> str:
        lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)",
                 _q(IDENTITY + [m for m, _ in self.metrics]),
                 _q([""] * len(IDENTITY) + [u for _, u in self.metrics])]
        lines += [_q(r) for r in self.rows]
        lines.append("==PROF== Disconnected from process 4242")
        return "\n".join(lines) + "\n"

    def details_text(self) -> str:
        """The same data as ``--page details``: one row per kernel and metric."""
        header = _q(IDENTITY + ["Section Name", "Metric Name", "Metric Unit", "Metric Value"])
        lines = [header] + [_q(r[:len(IDENTITY)] + ["Command line profiler metrics", m, u, v])
                            for r in self.rows for (m, u), v in zip(self.metrics, r[len(IDENTITY):])]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.text())
        return path
