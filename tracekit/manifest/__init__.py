"""What defines a run and what it recorded: ``run.json``'s schema (:mod:`~tracekit.manifest.run_json`:
:class:`Manifest`; its sections, typed records: :mod:`~tracekit.manifest.sections`), and the
:class:`~tracekit.manifest.spec.RunSpec` it records (:mod:`~tracekit.manifest.spec`: a run's
fields and the names they take). No torch here: the capture writes manifests, every other layer
reads them."""

from tracekit.manifest.run_json import FILENAME, VERSION, Manifest
from tracekit.manifest.sections import (
                                      Attribution,
                                      CapturePath,
                                      Decode,
                                      Distributed,
                                      Environment,
                                      HostLoad,
                                      Interleaving,
                                      LoadReading,
                                      ProcessSummary,
                                      Profile,
                                      Provenance,
                                      RankSummary,
                                      Record,
                                      Repeats,
                                      Source,
                                      Timer,
                                      Twin,
)
from tracekit.manifest.spec import RunSpec

__all__ = ["FILENAME", "VERSION", "Attribution", "CapturePath", "Decode", "Distributed", "Environment", "HostLoad",
           "Interleaving", "LoadReading", "Manifest", "ProcessSummary", "Profile", "Provenance", "RankSummary",
           "Record", "Repeats", "RunSpec", "Source", "Timer", "Twin"]
