from pathlib import Path

import pytest

from tracekit.manifest.suite_toml import SuiteError, load_suite

WORKLOADS = sorted(Path("workloads").glob("*.toml"))


def test_vit_study_expands_to_the_issue_grid():
    suite = load_suite("workloads/vit-study.toml")
    cells = {(c.values["model"], c.values["mode"], c.values["batch"]) for c in suite.cells}
    assert len(suite.cells) == 12
    assert ("vit32x18x1024", "reduce-overhead", 8) in cells and ("vit16x6x384", "eager", 1) in cells
    assert all(c.spec().iters == 50 and c.spec().profile_iters == 10 for c in suite.cells)


def test_fields_runspec_lacks_are_kept_for_run_time(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[grid]]\nmodel = "mlp"\nmodes = ["eager"]\n')
    (cell,) = load_suite(path).cells
    assert cell.unknown == ["modes"]
    with pytest.raises(SuiteError, match="modes.*RunSpec fields: model, mode"):
        cell.spec()


def test_malformed_suites_are_one_line_errors(tmp_path):
    path = tmp_path / "s.toml"
    for text, message in [('nmae = "x"\n[[grid]]\nmodel = "mlp"\n', "unknown top-level keys"),
                          ('name = "x"\n', "no \\[\\[grid\\]\\]"),
                          ('[[grid]]\nmode = "eager"\n', "without model"),
                          ('[[grid]]\nmodel = "mlp\n', "cannot read suite")]:
        path.write_text(text)
        with pytest.raises(SuiteError, match=message):
            load_suite(path)


def test_grid_is_deduplicated_in_file_order(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[[grid]]\nmodel = ["mlp", "conv"]\nmode = ["eager", "default"]\n'
                    '[[grid]]\nmode = "eager"\nmodel = "mlp"\n')
    cells = [(c.values["model"], c.values["mode"]) for c in load_suite(path).cells]
    assert cells == [("mlp", "eager"), ("mlp", "default"), ("conv", "eager"), ("conv", "default")]


@pytest.mark.parametrize("path", WORKLOADS, ids=[p.stem for p in WORKLOADS])
def test_every_workload_file_loads(path):
    suite = load_suite(path)
    assert suite.cells and suite.name == path.stem
    if suite.variant_of:
        full = load_suite(path.parent / f"{suite.variant_of}.toml")
        assert suite.trimmed and len(suite.cells) <= len(full.cells)
        assert suite.claims == full.claims  # a variant checks the full suite's claims


def test_make_bench_h100_runs_a_variant_of_each_study_within_the_budget():
    line = next(l for l in Path("Makefile").read_text().splitlines() if l.startswith("H100_SUITES ?="))
    variants = [load_suite(f"workloads/{name}.toml") for name in line.split("=", 1)[1].split()]
    studies = ("compile-modes", "backends", "ops", "lm", "surgical")
    assert sorted(v.variant_of for v in variants) == sorted(studies)
    assert all(Path(f"workloads/{s}-quick.toml").exists() for s in studies)
    # Each fits one command on the lent GPU (10 minutes at most); all five, two such commands
    # (make bench-h100 resumes), well inside a session's 30 device minutes.
    assert all(v.max_minutes <= 9 for v in variants)
    assert sum(v.max_minutes for v in variants) <= 18


def test_backend_suites_name_known_modes_and_models_and_hold_the_launch_removal_control():
    from tracekit import backends, models

    for name in ("backends-h100", "backends-cpu"):
        for cell in load_suite(f"workloads/{name}.toml").cells:
            backends.get(cell.values["mode"])
            models.lookup(cell.values["model"])
    h100 = [c.values for c in load_suite("workloads/backends-h100.toml").cells]
    for batch in (None, 1):  # the launch-removal control, at the default batch and at 1
        vit = {c["mode"] for c in h100 if c["model"] == "vit16x6x384" and c.get("batch") == batch}
        assert {"eager", "cudagraphs", "default", "reduce-overhead"} <= vit


def test_make_bench_h100_full_runs_the_five_studies_as_written():
    line = next(l for l in Path("Makefile").read_text().splitlines() if l.startswith("FULL_SUITES ?="))
    suites = [load_suite(f"workloads/{name}.toml") for name in line.split("=", 1)[1].split()]
    assert sorted(s.name for s in suites) == sorted(("compile-modes", "backends", "ops", "lm", "surgical"))
    assert all(not s.variant_of for s in suites)   # the full grids, not the trimmed variants
    from tracekit import backends, models
    for cell in (c for s in suites for c in s.cells):
        backends.get(cell.values["mode"])           # every mode and model of the grids exists
        models.lookup(cell.values["model"])
