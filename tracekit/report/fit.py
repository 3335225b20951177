"""Tables that fit the terminal (issue 32): long run and workload names shortened to a key
with a legend, columns empty in every row ("-", "n/a") left out, columns holding one value
in every row left out first when the width is short (the note says the value), then
:data:`SECONDARY` ones, then the columns past the console's width from the right (a column
of sentences wraps instead), each left out column named in a note.
``--wide`` (:class:`Fit` with ``wide``) shows every column and every name in full.

Widths are counted as rich draws its default table: each column its text width plus one
space either side and a border, plus the closing border.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

RUN_LIMIT = 20        # characters of a run name shown as it is; longer ones get a key for their folder
WORKLOAD_LIMIT = 28   # characters of a workload label shown as it is
TEXT_WRAP = 40        # a column of sentences ("what changed") wraps at this width rather than being left out
DEFAULT_WIDTH = 100   # columns of output that is not a terminal, without COLUMNS
EMPTY = ("-", "n/a")
# Columns the terminal leaves out before others when the width is short: a sum of columns
# shown beside it (Δ latency = Δ GPU busy + Δ idle), or detail the answer does not rest on.
SECONDARY = ("Δ latency (ms)", "span (ms)", "idle gaps", "mean kernel (µs)", "first call (s)", "CPU ops/iter (ms)")
# Headers of text columns: aligned left, and a column of sentences among them wraps (TEXT_WRAP).
TEXT_COLUMNS = ("run", "status", "device", "verdict", "workload", "mode", "job", "per rank", "backend", "module",
                "op", "what changed", "trace", "A", "B", "top modules", "ran on", "dominates", "kernel", "class",
                "bound", "doubts")


def terminal_width() -> int | None:
    """The width to fit tables to: ``COLUMNS`` when set, else the terminal's (None: rich asks
    it), else :data:`DEFAULT_WIDTH` when stdout is not a terminal (a pipe, a file, CI)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if Console().is_terminal else DEFAULT_WIDTH


def _key(i: int) -> str:
    """A, B, ..., Z, AA, AB, ..."""
    return (_key(i // 26 - 1) if i >= 26 else "") + chr(ord("A") + i % 26)


@dataclass
class Legend:
    """Short keys for long names, shared by the tables of one report: a run folder whose runs
    have names over :data:`RUN_LIMIT` characters becomes a letter (``A/eager`` for
    ``hf-llama-layers16-hidden2048/eager``), a workload label over :data:`WORKLOAD_LIMIT` one too."""

    keys: dict[str, str] = field(default_factory=dict)   # long name -> key, in the order given

    @classmethod
    def of(cls, runs=(), workloads=()) -> "Legend":
        """The keys of these run names and workload labels (strings; others are ignored)."""
        legend = cls()
        runs = [r for r in dict.fromkeys(runs) if isinstance(r, str)]
        for run in runs:
            folder = run.rpartition("/")[0] or run
            if any(len(r) > RUN_LIMIT for r in runs if (r.rpartition("/")[0] or r) == folder):
                legend.keys.setdefault(folder, _key(len(legend.keys)))
        for label in dict.fromkeys(workloads):
            if isinstance(label, str) and len(label) > WORKLOAD_LIMIT:
                legend.keys.setdefault(label, _key(len(legend.keys)))
        return legend

    def short(self, name: str) -> str:
        """``name`` with its folder (or all of it) replaced by its key."""
        if name in self.keys:
            return self.keys[name]
        folder, _, leaf = name.rpartition("/")
        return f"{self.keys[folder]}/{leaf}" if folder in self.keys else name

    def lines(self) -> list[str]:
        """``A = long name`` for each key."""
        return [f"{key} = {name}" for name, key in self.keys.items()]


def _constant(cells: list[str]) -> bool:
    return len(cells) > 1 and len(set(cells)) == 1


@dataclass
class Fit:
    """How the tables of one terminal report are fitted (see the module docstring).

    wide:   every column and full names, whatever the width.
    legend: the keys of long names (:class:`Legend`).
    """

    wide: bool = False
    legend: Legend = field(default_factory=Legend)

    def columns(self, headers: list[str], rows: list[list[str]], width: int) -> tuple[list[int], list[int], list[str]]:
        """(indices of the columns shown, their widths, notes on those left out) for ``width`` characters."""
        n = len(headers)
        cols = [[r[i] for r in rows] for i in range(n)]
        longest = [max((len(c) for c in col), default=0) for col in cols]
        word = [max(len(w) for w in (h.split() or [""])) for h in headers]
        wraps = [headers[i] in TEXT_COLUMNS and longest[i] > TEXT_WRAP for i in range(n)]
        need = [max(word[i], min(longest[i], TEXT_WRAP) if wraps[i] else longest[i]) for i in range(n)]
        full = [max(len(headers[i]), longest[i]) for i in range(n)]
        shown = [i for i in range(n) if self.wide or not all(c in EMPTY for c in cols[i])]
        if self.wide:
            return shown, full, []
        na = [headers[i] for i in range(n) if i not in shown and any(c == "n/a" for c in cols[i])]
        total = lambda idx: sum(need[i] + 3 for i in idx) + 1  # noqa: E731
        same, dropped = [], []
        for i in [i for i in shown[1:] if _constant(cols[i])]:
            if total(shown) <= width:
                break
            shown.remove(i)
            same.append(f"{headers[i]} {cols[i][0]}")
        for i in [i for i in shown[1:] if headers[i] in SECONDARY]:
            if total(shown) <= width:
                break
            shown.remove(i)
            dropped.append(headers[i])
        while total(shown) > width and (numbers := [i for i in shown[1:] if not wraps[i]]):
            shown.remove(numbers[-1])  # from the right; a column of sentences wraps instead
            dropped.append(headers[numbers[-1]])
        notes = [f"{what}: {', '.join(names)}" for what, names in
                 (("n/a in every row", na), ("the same in every row", same)) if names]
        if dropped:
            notes.append(", ".join(sorted(dropped, key=headers.index)) + " (--wide shows them)")
        widths = [need[i] for i in shown]
        spare = width - total(shown)
        for k in sorted(range(len(shown)), key=lambda k: full[shown[k]] - need[shown[k]]):  # least missing first
            grow = min(spare, full[shown[k]] - widths[k])
            widths[k] += grow
            spare -= grow
        return shown, widths, notes

    def table(self, title: str, headers: list[str], rows: list[list[str]],
              width: int) -> tuple[Table, list[str]]:
        """A rich table of the columns that fit ``width`` (text columns left, numbers right),
        with long names shortened, and the notes on the columns left out."""
        if not self.wide:
            rows = [[self.legend.short(c) if h in ("run", "workload", "job") else c for h, c in zip(headers, r)]
                    for r in rows]
        shown, widths, notes = self.columns(headers, rows, width)
        table = Table(title=title, show_lines=False)
        for i, w in zip(shown, widths):
            table.add_column(headers[i], overflow="fold", width=w,
                             justify="left" if headers[i] in TEXT_COLUMNS else "right")
        for r in rows:
            table.add_row(*(r[i] for i in shown))
        return table, notes

    def print(self, console: Console, title: str, headers: list[str], rows: list[list[str]]) -> None:
        """Print the table fitted to ``console``'s width, then its notes, dimmed."""
        table, notes = self.table(title, headers, rows, console.width)
        console.print(table)
        if notes:
            console.print("  not shown: " + "; ".join(notes), style="dim", highlight=False)
