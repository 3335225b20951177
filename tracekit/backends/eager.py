"""The baseline: the module called as it is."""

from tracekit.backends.backend import Backend, register
from tracekit.manifest.spec import PHASES

register(Backend("eager", "PyTorch eager mode (the baseline)", lambda module, inputs, spec: module,
                 phases=frozenset(PHASES), module_scopes=True))
