import math

import pytest
from ncucsv import TIME_DRAM, NcuCsv

from tracekit.analysis.counters.parse import CountersError, parse, parse_text, to_base


def test_raw_page_rows_units_and_separators(tmp_path):
    csv = NcuCsv([("gpu__time_duration.sum", "usecond"), ("dram__bytes_read.sum", "Mbyte"),
                  ("dram__bytes_write.sum", "byte"), ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "")])
    csv.kernel("void at::native::vectorized_elementwise_kernel<4, Mul, std::array<char*, 3ul> >(int, Mul)",
               1250.5, 2147.483648, 1_073_741_824, 0)
    csv.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 3.0, 0.5, 4096, 268_435_456, stream=13)
    df = parse(csv.write(tmp_path / "ncu.csv"))
    assert list(df["id"]) == [0, 1]
    assert df.loc[0, "kernel"].endswith("(int, Mul)")                      # commas inside quotes kept
    assert df.loc[0, "gpu__time_duration.sum"] == pytest.approx(1_250_500.0)  # µs -> ns
    assert df.loc[0, "dram__bytes_read.sum"] == pytest.approx(2_147_483_648)  # Mbyte -> bytes (1e6)
    assert df.loc[0, "dram__bytes_write.sum"] == 1_073_741_824              # "1,073,741,824"
    assert df.loc[1, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"] == 268_435_456
    assert df.loc[1, "stream"] == 13 and df.loc[1, "cc"] == "9.0"
    assert df.attrs["units"]["gpu__time_duration.sum"] == "ns" and df.attrs["units"]["dram__bytes_read.sum"] == "byte"


def test_details_page_reads_the_same():
    csv = NcuCsv().kernel("k1", 100, 2_000, 1_000).kernel("k2", 50, 10, 0)
    raw, details = parse_text(csv.text()), parse_text(csv.details_text())
    assert list(details["kernel"]) == ["k1", "k2"]
    for m, _ in TIME_DRAM:
        assert list(details[m]) == list(raw[m])


def test_not_available_values_are_nan():
    csv = NcuCsv().kernel("k", 100, "n/a", 5)
    df = parse_text(csv.text())
    assert math.isnan(df.loc[0, "dram__bytes_read.sum"]) and df.loc[0, "dram__bytes_write.sum"] == 5


@pytest.mark.parametrize("unit, base, factor", [("nsecond", "ns", 1), ("msecond", "ns", 1e6), ("second", "ns", 1e9),
                                                ("Kbyte", "byte", 1e3), ("Gbyte", "byte", 1e9), ("%", "%", 1),
                                                ("Minst", "inst", 1e6), ("", "", 1)])
def test_units(unit, base, factor):
    assert to_base(unit) == (base, factor)


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(CountersError, match="no ncu CSV header"):
        parse_text("==PROF== Connected\n==WARNING== No kernels were profiled.\n")
    with pytest.raises(CountersError, match="no profiled kernels"):
        parse_text(NcuCsv().text())
    with pytest.raises(CountersError, match="cannot read"):
        parse(tmp_path / "missing.csv")


def test_repeated_header_and_units_rows_are_skipped():
    csv = NcuCsv().kernel("k1", 100, 1, 2)
    lines = csv.text().splitlines()
    twice = "\n".join(lines[:4] + lines[1:4] + lines[4:])      # a second header + units + the row again
    df = parse_text(twice)
    assert list(df["kernel"]) == ["k1", "k1"] and list(df["gpu__time_duration.sum"]) == [100, 100]
