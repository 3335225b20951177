"""The baseline: the module called as it is."""

from tracekit.backends.backend import Backend, register

register(Backend("eager", "PyTorch eager mode (the baseline)", lambda module, inputs, spec: module,
                 module_scopes=True))
