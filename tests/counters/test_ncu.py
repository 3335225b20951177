import json
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from ncucsv import NcuCsv
from tracebuilder import TraceBuilder

from tracekit import counters
from tracekit.analysis.counters import metrics
from tracekit.capture.child import ChildJob
from tracekit.cli import main
from tracekit.counters import ncu
from tracekit.errors import ExitCode
from tracekit.manifest.spec import RunSpec


def test_command_skips_warmup_limits_kernels_and_keeps_clocks(tmp_path):
    cmd = ncu.command("/opt/ncu", ["a.sum", "b.sum"], tmp_path / "ncu.csv", 70, ["python3", "-m", "w"])
    line = " ".join(cmd)
    for part in ("--csv --page raw", "--print-units base", "--clock-control none", "--nvtx --nvtx-include tracekit/",
                 "--launch-count 70", "--metrics a.sum,b.sum", f"--log-file {tmp_path / 'ncu.csv'}"):
        assert part in line
    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python3", "-m", "w"]


def test_counters_profiles_the_spec_it_names_its_folder_after(tmp_path, monkeypatch):
    """`tracekit counters --seq 32` profiled the default sequence in a folder named -s32 (issue 33):
    the process ncu profiles now gets the whole spec. Run here without ncu: the command ncu would
    profile runs as it is, and the workload function records the sequence it was built with."""
    (tmp_path / "tokens.py").write_text(
        "from pathlib import Path\nimport torch\n\n"
        "def tokens(batch, dtype, device, seq=16):\n"
        "    Path(__file__).with_suffix('.seq').write_text(str(seq))\n"
        "    return torch.nn.Embedding(100, 8), (torch.randint(0, 100, (batch, seq)),)\n")
    ran = []

    def profile_without_ncu(workload, directory, kernels, log):
        ran.append(subprocess.run(workload, capture_output=True, text=True))
        raise ncu.ProfilerError("no ncu here")
    monkeypatch.setattr(ncu, "profile", profile_without_ncu)
    r = CliRunner().invoke(main, ["counters", "--model", f"{tmp_path / 'tokens.py'}:tokens", "--seq", "32", "--device",
                                  "cpu", "--warmup", "1", "--iters", "1", "--out", str(tmp_path / "out")])
    assert r.exit_code == ExitCode.PROFILER and ran[0].returncode == 0, ran[0].stderr if ran else r.output
    assert (tmp_path / "tokens.seq").read_text() == "32"
    [info] = (tmp_path / "out").glob("*/eager/workload.json")
    assert info.parent.parent.name == "tokens-tokens-s32" and json.loads(info.read_text())["spec"]["seq"] == 32


def test_the_workload_command_carries_the_whole_spec(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(ncu, "profile", lambda workload, *a: seen.append(workload) or tmp_path / "none.csv")
    monkeypatch.setattr(counters, "analyze", lambda csv, trace, device: SimpleNamespace(notes=[]))
    spec = RunSpec("matmul8192", dtype="bf16", warmup=3, threads=2, compile_only="blocks.*", device="cpu")
    counters.run(spec, tmp_path / "out", None, iters=4)
    job = ChildJob.from_json(seen[0][-1])
    assert seen[0][1:3] == ["-m", "tracekit.capture"] and job.task == "counters"
    assert job.spec == replace(spec, batch=1, profile_iters=4)


def test_metrics_follow_what_the_device_has():
    every = {metrics.base_name(m) for m in metrics.always() + metrics.optional()}
    assert ncu.choose_metrics(every) == metrics.always() + metrics.optional()
    # The names the project's real H100 CSV (ncu 2025.3) holds:
    h100 = {"sm__ops_path_tensor_src_bf16_dst_fp32", "sm__ops_path_tensor_src_fp16", "sm__ops_path_tensor_src_fp8",
            "sm__ops_path_tensor_src_tf32_dst_fp32", "sm__ops_path_tensor_src_fp64", "dram__throughput"}
    chosen = ncu.choose_metrics(h100)
    assert {"sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp8.sum"} <= set(chosen)
    assert "sm__ops_path_tensor_src_fp16_dst_fp32.sum" not in chosen
    assert chosen[:3] == metrics.REQUIRED and "sm__sass_thread_inst_executed_op_ffma_pred_on.sum" in chosen
    assert ncu.choose_metrics(None) == metrics.always()


def test_find_honours_the_override(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(ncu.NCU_ENV, str(fake))
    assert ncu.find() == str(fake)
    monkeypatch.setenv(ncu.NCU_ENV, str(tmp_path / "missing"))
    assert ncu.find() is None


def test_no_ncu_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(ncu.NCU_ENV, str(tmp_path / "no-ncu-here"))
    r = CliRunner().invoke(main, ["counters", "--model", "mul1", "--out", str(tmp_path / "out")])
    assert r.exit_code == ExitCode.PROFILER
    assert "ncu (Nsight Compute) not found" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_usage_errors(tmp_path):
    r = CliRunner().invoke(main, ["counters"])
    assert r.exit_code == ExitCode.USAGE and "--model" in r.output
    r = CliRunner().invoke(main, ["counters", "--model", "resnet"])
    assert r.exit_code == ExitCode.USAGE and "valid models" in r.output
    bad = tmp_path / "bad.csv"
    bad.write_text("==PROF== nothing\n")
    r = CliRunner().invoke(main, ["counters", "--csv", str(bad)])
    assert r.exit_code == ExitCode.USAGE and "no ncu CSV header" in r.output


def test_csv_mode_reports_without_a_gpu(tmp_path):
    """`tracekit counters --csv` analyzes counters taken elsewhere: tables, summary and roofline."""
    csv = NcuCsv().kernel("void at::native::vectorized_elementwise_kernel<4, Mul>(int)", 1_000_000, 2 * 10**9,
                          10**9).kernel("sm90_xmma_gemm_bf16", 2_000, 1000, 1000)
    t = TraceBuilder()
    t.kernel("void at::native::vectorized_elementwise_kernel<4, Mul>(int)", 0, 990, launch_at=-5)
    t.kernel("sm90_xmma_gemm_bf16", 1000, 3, launch_at=995)
    out = tmp_path / "rep"
    r = CliRunner().invoke(main, ["counters", "--csv", str(csv.write(tmp_path / "ncu.csv")), "--trace",
                                  str(t.write(tmp_path / "t.json")), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "by kernel class" in r.output and "3000" in r.output           # 3 GB in 1 ms
    data = json.loads((out / "counters.json").read_text())
    assert data["run"]["device"] == "NVIDIA H100 80GB HBM3" and data["run"]["matched"] == 2
    assert data["kernels"][0]["bound"] == "memory" and data["kernels"][1]["bound"] == "neither"
    assert data["run"]["neither_share"] == pytest.approx(3 / 993)
    assert "| elementwise/fused |" in (out / "summary.md").read_text()
    assert (out / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "kernels.csv").read_text().startswith("id,kernel,class")


@pytest.mark.gpu
@pytest.mark.skipif(ncu.find() is None, reason="needs ncu (Nsight Compute)")
def test_profile_a_multiply_on_the_gpu(tmp_path):
    """On a GPU with ncu: a 256 MiB multiply by a scalar moves about 512 MiB of DRAM traffic."""
    r = CliRunner().invoke(main, ["counters", "--model", "mul256", "--kernels", "1", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    k = json.loads(next(Path(tmp_path).rglob("counters.json")).read_text())["kernels"][0]
    assert k["dram_bytes"] == pytest.approx(2 * 2**28, rel=0.05)
