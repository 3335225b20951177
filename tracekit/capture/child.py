"""What a process tracekit starts is to do, as one serialized record: the whole run of a bench
cell, one of ``--repeats`` processes, one rank of a job, or the counters' workload under ncu.
Its spec travels as the RunSpec's own JSON, so no option list is written twice; every such process
starts through :meth:`ChildJob.command` and runs :mod:`tracekit.capture.__main__` (``python -m
tracekit.capture '<json>'``)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from dataclasses import dataclass

from tracekit.manifest.spec import RunSpec

TASKS = ("run", "repeat", "rank", "counters")
ENTRY = ["-m", "tracekit.capture"]   # the module every child process runs


@dataclass(frozen=True)
class ChildJob:
    """One child process's work.

    task: "run" (:func:`tracekit.capture.runner.run` of ``spec`` under the traces root ``out``:
        a bench cell), "repeat" (one of the processes of a run made in several,
        :func:`tracekit.capture.repeats.process`; ``out`` is its run folder), "rank" (one rank of
        a job, :func:`tracekit.capture.ranks.rank`; ``out`` is the run folder, ``backend`` the
        process group's) or "counters" (the workload ncu profiles,
        :func:`tracekit.counters.workload.run`; ``out`` is the counters' folder).
    spec: the run's spec (resolved by the parent, so every process records the same).
    parent: the pid of the process to die with (:func:`die_with_parent`), or None.
    """

    task: str
    spec: RunSpec
    out: str
    parent: int | None = None
    backend: str = ""

    def to_json(self) -> str:
        """The job as one JSON object (the spec as :meth:`RunSpec.to_dict`)."""
        return json.dumps({"task": self.task, "spec": self.spec.to_dict(), "out": self.out, "parent": self.parent,
                           "backend": self.backend})

    @classmethod
    def from_json(cls, text: str) -> "ChildJob":
        """The job :meth:`to_json` wrote.

        Raises:
            ValueError: not JSON, not an object, an unknown task or key, or a spec field
                RunSpec does not have (a spec written by another version of tracekit).
        """
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("task") not in TASKS:
            raise ValueError(f"a child job is a JSON object with a task of {', '.join(TASKS)}")
        try:
            return cls(**{**data, "spec": RunSpec(**data["spec"])})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a child job ({exc})") from None

    def command(self, python: list[str] | None = None) -> list[str]:
        """The command line that runs the job: ``python -m tracekit.capture '<json>'``, or after
        ``python`` (another launcher's command, ``python -m torch.distributed.run ...``)."""
        return [*(python or [sys.executable]), *ENTRY, self.to_json()]


def die_with_parent(parent: int) -> None:
    """Die with ``parent``: ask Linux to SIGKILL this process when its parent exits (prctl
    PR_SET_PDEATHSIG), so a killed bench, repeat or launcher leaves no process behind it;
    exit at once if the parent is already gone."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
