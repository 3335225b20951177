"""Cross-check of the critical path against HolisticTraceAnalysis 0.5.0's
(``TraceAnalysis.critical_path_analysis``) on its own test traces (shared fixtures
hta/critical_path/), with HTA's windows: an annotation and its instance, as HTA's
tests/test_critical_path_analysis.py calls it.

HTA's critical path runs only with pandas < 3 (under pandas 3.1 it raises in
critical_path_analysis.py), so it runs in its own environment, ``.venv-hta`` (``make
setup`` makes it; ``TRACEKIT_HTA_PYTHON`` names another interpreter). What must agree, and
the differences of definition (tracekit.analysis.critical_path's docstring lists them):

* every runtime call on HTA's path is on ours: both follow the host thread through the
  same calls. Ours holds more: HTA gives the edges between top-level CPU ops (Python
  between ops) and the time a host waits in a sync weight 0, so where the host ran
  between ops, HTA's longest path can leave it for the GPU and ours stays on it;
* where the path goes to the GPU in both (cuda_event_sync: a synchronous copy and an
  event-synchronized kernel), the same GPU ops are on it;
* our window is the annotation's span: it begins at the annotation's start and ends at its
  end (the host's CPU time before its first and after its last call is on the path); HTA's
  path runs from the first to the last event inside it. So our length is HTA's path span
  plus that head and tail, and HTA's weighted length is its span less the weight-0 edges.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tracekit.analysis import critical_path as cp
from tracekit.analysis.critical_path.kinds import GPU
from tracekit.trace import load

HERE = Path(__file__).parent
FORWARD = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
# simple_add's two instances of FORWARD nest: instance 1 inside instance 0 (issue 39: the outer's path
# runs through the inner's calls, as HTA's window of instance 0 holds them)
CASES = [("critical_path/simple_add", FORWARD, 1), ("critical_path/simple_add", FORWARD, 0),
         ("critical_path/cuda_event_sync", "ProfilerStep#100", 0)]


def _hta_python() -> str:
    found = os.environ.get("TRACEKIT_HTA_PYTHON") or str(HERE.parent.parent / ".venv-hta" / "bin" / "python")
    if not Path(found).exists():
        pytest.skip(f"needs HolisticTraceAnalysis 0.5.0 with pandas < 3 at {found} (`make setup` makes .venv-hta; "
                    "TRACEKIT_HTA_PYTHON names another): its critical path raises under pandas 3")
    return found


@pytest.mark.parametrize("folder, annotation, instance", CASES)
def test_the_critical_path_against_hta(fixtures, folder, annotation, instance):
    trace = next((fixtures / "hta" / folder).glob("*.json.gz"))
    # HTA matches annotations by substring: "ProfilerStep" is the ProfilerStep#100 marker there
    hta_name = "ProfilerStep" if annotation.startswith("ProfilerStep") else annotation
    out = subprocess.run([_hta_python(), str(HERE / "hta_critical_path_run.py"), str(trace), hta_name, str(instance)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    hta = json.loads(out.stdout)
    assert hta["ok"]
    tables = load(trace)
    ours = cp.analyze(tables, annotation=annotation)
    window = ours.iterations.set_index("step").loc[instance]
    segments = ours.segments[ours.segments["step"] == instance]
    g, zero = ours.graph, hta["min_ts"]
    on_path = {(str(g.name[v]), round(g.ts[v] - zero)) for v in segments["node"]}

    hta_calls = {(e["name"], e["ts"]) for e in hta["events"] if e["cat"] == "cuda_runtime"}
    assert hta_calls and hta_calls <= on_path
    hta_gpu = {(e["name"], e["ts"]) for e in hta["events"] if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")}
    ours_gpu = {(str(g.name[v]), round(g.ts[v] - zero)) for v in segments["node"] if g.kind[v] == GPU}
    marker = ours.markers[0].set_index("step").loc[instance]
    head, tail = hta["start"] - (marker["ts"] - zero), (marker["end"] - zero) - hta["end"]
    assert head >= 0 and tail >= 0
    assert window["finish_us"] - window["start_us"] == pytest.approx(hta["end"] - hta["start"] + head + tail)
    zero_weight = sum(1 for e in hta["edges"] if e["weight"] == 0)
    assert hta["length"] <= hta["end"] - hta["start"] and zero_weight > 0
    if folder.endswith("cuda_event_sync"):
        assert ours_gpu == hta_gpu and len(hta_gpu) == 2
    else:   # the host ran between ops after its last launch: HTA's weight-0 edges leave it for the GPU
        assert not ours_gpu and hta_gpu
        assert all(t > max(c[1] for c in hta_calls) for _, t in hta_gpu)
