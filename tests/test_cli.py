"""trnsim's tensor study."""

import json

from tlm.cli import main


def test_tensor_json(capsys):
    assert main(["tensor", "--k", "128", "--m", "128", "--n", "64,512", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["cycles"] for r in rows] == [128, 512]
    assert abs(rows[1]["tflops"] - 2 * 128 * 128 * 2.4e9 / 1e12) < 1e-9  # 78.6, NKI2


def test_tensor_table(capsys):
    assert main(["tensor", "--n", "128"]) == 0
    assert "nc_matmul on the tensor engine" in capsys.readouterr().out


def test_tensor_bad_size(capsys):
    assert main(["tensor", "--m", "129"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "trnsim tensor: error: m must be an integer in 1..128, not 129"
    )


def test_tensor_bad_clock(capsys):
    assert main(["tensor", "--clock-hz", "0"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "trnsim tensor: error: clock_hz must be a positive frequency in Hz, not 0.0"
    )


def test_tensor_fp32_quarter_rate(capsys):
    """FP32 ops at a quarter of the rate: 19.7 TFLOPS per core, the published ~20 (NKI2)."""
    assert main(["tensor", "--n", "512", "--format", "fp32", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["cycles"] == 4 * 512 and abs(row["tflops"] - 78.6432 / 4) < 1e-9


def test_tensor_bad_format(capsys):
    assert main(["tensor", "--format", "fp4"]) == 2
    assert capsys.readouterr().err.strip() == (
        "trnsim tensor: error: format must be one of bf16, fp16, fp32, fp8_e4m3, fp8_e4m3fn, "
        "fp8_e5m2, int8, tf32, not 'fp4'"
    )
