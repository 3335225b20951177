"""tracekit analyze on a Dask cluster: one task per file, exactly the tables of the local path."""

import pandas as pd
import pytest

from tracekit.analysis.dask_cluster import ClusterError
from tracekit.analysis.runs import analyze

distributed = pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed "
                                  "(make setup installs it: the dist extra)")


def _same(a, b):
    pd.testing.assert_frame_equal(a.runs, b.runs)
    assert a.tables.keys() == b.tables.keys()
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], obj=name)
    assert (a.errors, a.skipped) == (b.errors, b.skipped)


@pytest.mark.slow
def test_local_cluster_gives_the_local_tables(fixtures):
    paths = [fixtures / "dist", fixtures / "h100", fixtures / "hta" / "cpu_only"]
    here = analyze(paths)
    assert len(here.runs) == 6 and len(here.table("jobs")) == 1
    _same(here, analyze(paths, dask="local"))


@pytest.mark.slow
def test_a_scheduler_address(fixtures, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")        # an unreadable file is reported the same way
    (tmp_path / "rank1.json.gz").write_bytes((fixtures / "dist/hta-trace-filter-sampled-2rank/"
                                               "sampled_rank-1.json.gz").read_bytes())
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        _same(analyze(tmp_path), analyze(tmp_path, dask=cluster.scheduler_address))


@pytest.mark.slow
def test_the_cli_option(fixtures, tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    args = ["analyze", str(fixtures / "dist"), "--json"]
    here = CliRunner().invoke(main, args + ["--out", str(tmp_path / "a")])
    there = CliRunner().invoke(main, args + ["--out", str(tmp_path / "b"), "--dask", "local"])
    assert here.exit_code == there.exit_code == 0
    assert here.stdout == there.stdout and '"straggler"' in here.stdout


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_clear_error(tmp_path):
    (tmp_path / "t.json").write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}')
    with pytest.raises(ClusterError, match="cannot use the Dask scheduler at tcp://127.0.0.1:9"):
        analyze(tmp_path, dask="tcp://127.0.0.1:9")
