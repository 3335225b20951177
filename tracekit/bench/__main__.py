"""The process of one cell: ``python -m tracekit.bench --cell SPEC_JSON --out ROOT [--parent PID]``
(started by :func:`tracekit.bench.cells.run_cell`)."""

import sys

from tracekit.bench.cells import cell_main

sys.exit(cell_main())
