"""The options of an analysis as one typed object, and what run.json tells each trace's analyses
(issue 37: no positional tuple between runs.analyze and a trace's analyses)."""

import pickle

import pytest
from owndata import H100_STUDY
from tracebuilder import eager_trace, write_run

import tracekit
from tracekit.analysis.options import AnalysisOptions, RunFacts, TraceJob
from tracekit.analysis.runs import analyze
from tracekit.manifest import Manifest


def test_run_facts_are_what_run_json_says():
    folder = H100_STUDY / "vit16x6x384" / "eager"
    manifest = Manifest.read(folder)
    facts = RunFacts.of(manifest)
    assert facts.iterations == 10 and facts.latency_ms == manifest.latency("median") == pytest.approx(1.8366, 1e-4)
    assert facts.host_ms is None and facts.attribution is None   # recorded by an older runner
    assert RunFacts.of(None) == RunFacts()


def test_a_job_crosses_process_boundaries_as_one_object():
    job = TraceJob(H100_STUDY / "t.json", AnalysisOptions(critical_path=True, annotation="step", iterations=3),
                   RunFacts(iterations=10, latency_ms=1.5, host_ms=0.4))
    assert pickle.loads(pickle.dumps(job)) == job


def test_iterations_come_from_run_json_before_the_option(tmp_path):
    """A bare trace without markers holds the iterations the option says; a run's trace, those of
    its run.json (2 profiled iterations) whatever the option."""
    bare = eager_trace()
    bare.events = [e for e in bare.events if not str(e.get("name", "")).startswith("ProfilerStep")]
    bare.write(tmp_path / "bare" / "t.pt.trace.json")
    write_run(tmp_path / "runs" / "w" / "eager", bare)
    assert analyze(tmp_path / "bare", AnalysisOptions(iterations=4)).runs["iterations"].tolist() == [4]
    assert analyze(tmp_path / "runs", AnalysisOptions(iterations=4)).runs["iterations"].tolist() == [2]
    run = analyze(tmp_path / "bare", AnalysisOptions(iterations=4)).runs.iloc[0]
    assert run["busy_per_iter_us"] == run["gpu_busy_us"] / 4 == 10


def test_the_api_takes_the_options_or_its_keywords():
    by_keywords = tracekit.analyze(H100_STUDY, only={"vit16x6x384/eager"}, critical_path=True)
    by_options = tracekit.analyze(H100_STUDY, only={"vit16x6x384/eager"},
                                  options=tracekit.AnalysisOptions(critical_path=True))
    assert by_keywords.runs.equals(by_options.runs) and len(by_options["critical_path"]) == 10
    with pytest.raises(ValueError, match="not both"):
        tracekit.analyze(H100_STUDY, critical_path=True, options=AnalysisOptions())
