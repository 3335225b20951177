import pytest

from tracekit.suite import SuiteError, load_suite


def test_vit_study_expands_to_the_issue_grid():
    suite = load_suite("workloads/vit-study.toml")
    cells = {(c.model, c.mode, c.batch) for c in suite.cells}
    assert len(suite.cells) == 12
    assert ("vit32x18x1024", "reduce-overhead", 8) in cells and ("vit16x6x384", "eager", 1) in cells
    assert all(c.iters == 50 and c.profile_iters == 10 for c in suite.cells)


def test_unknown_keys_are_rejected(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[grid]]\nmodel = "mlp"\nmodes = ["eager"]\n')
    with pytest.raises(SuiteError, match="modes"):
        load_suite(path)


def test_backend_suites_expand_and_name_known_modes_and_models():
    from tracekit import backends, models

    for name, n in (("backends-h100", 40), ("backends-cpu", 49)):
        suite = load_suite(f"workloads/{name}.toml")
        assert len(suite.cells) == n
        for cell in suite.cells:
            backends.get(cell.mode)
            models.lookup(cell.model)
    h100 = load_suite("workloads/backends-h100.toml").cells
    for batch in (None, 1):  # the launch-removal control, at the default batch and at 1
        vit = {c.mode for c in h100 if c.model == "vit16x6x384" and c.batch == batch}
        assert {"eager", "cudagraphs", "default", "reduce-overhead"} <= vit


def test_bench_passes_phase_and_patterns_and_writes_status_rows_itself(tmp_path, monkeypatch):
    import json

    from tracekit import bench
    from tracekit.spec import RunSpec
    from tracekit.suite import Suite

    cmd = bench.trace_command(RunSpec("ropetx2x256x256", "surgical", phase="train-step", compile_only="*.rope"),
                              tmp_path)
    assert cmd[cmd.index("--phase") + 1] == "train-step" and cmd[cmd.index("--compile-only") + 1] == "*.rope"
    assert "--phase" not in bench.trace_command(RunSpec("mlp"), tmp_path)

    def no_process(*args, **kwargs):
        raise AssertionError("a status row needs no process")

    monkeypatch.setattr(bench.subprocess, "run", no_process)
    [manifest] = bench.run_suite(Suite("s", "", [RunSpec("mlp", "cudagraphs", device="cpu")]), tmp_path,
                                 log=lambda m: None)
    assert manifest["status"] == "skipped" and "needs CUDA" in manifest["reason"]
    assert json.loads((tmp_path / "mlp" / "cudagraphs" / "run.json").read_text())["status"] == "skipped"
