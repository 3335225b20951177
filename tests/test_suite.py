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
