"""Verilog generation: the PE and column described once, and the CLI's errors."""

import re
import subprocess
import sys

import pytest

from hdl.__main__ import main
from hdl.gen import tensor_engine_verilog
from tlm.tensor.config import EngineConfig


@pytest.mark.parametrize("cols,slice_cols,slices", [(5, 1, 5), (10, 5, 2), (16, None, 16)])
def test_pe_and_slice_are_generated_once(cols, slice_cols, slices):
    text = tensor_engine_verilog(EngineConfig(6, cols), name="te", slice_cols=slice_cols)
    modules = re.findall(r"^module (\S+)\(", text, re.M)
    assert modules.count("te_pe") == 1 and modules.count("te_col") == 1
    pes = len(re.findall(r"^\s*te_pe \S+ \(", text, re.M))
    assert pes == 6 * cols // slices  # the PEs of one slice
    assert len(re.findall(r"^\s*te_col \S+ \(", text, re.M)) == slices


def test_slice_width_must_divide_cols():
    with pytest.raises(
        ValueError,
        match=r"^slice_cols must be a positive divisor of cols=10, "
        r"not 3$",
    ):
        tensor_engine_verilog(EngineConfig(2, 10), slice_cols=3)


def test_cli_writes_verilog(tmp_path, capsys):
    out = tmp_path / "te.v"
    assert main(["tensor_engine", "--rows", "2", "--cols", "3", "-o", str(out), "--json"]) == 0
    assert "module tensor_engine(" in out.read_text()
    assert '"bytes"' in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rows", "0"], "python -m hdl: error: rows must be an integer in 1..1024, not 0"),
        (["--cols", "2000"], "python -m hdl: error: cols must be an integer in 1..1024, not 2000"),
        (
            ["--format", "bf16,mxfp4"],
            "python -m hdl: error: --format mxfp4 is an MX format, which the RTL tensor engine "
            "does not have (docs/tensor_engine.md); allowed: int8, fp8_e4m3, fp8_e4m3fn, "
            "fp8_e5m2, bf16, fp16, tf32, fp32 or 'all'",
        ),
    ],
)
def test_cli_errors(tmp_path, capsys, args, message):
    assert main(["tensor_engine", *args, "-o", str(tmp_path / "x.v")]) == 2
    assert capsys.readouterr().err.strip() == message


def test_cli_rejects_unknown_format(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "hdl",
        "tensor_engine",
        "--format",
        "fp4",
        "-o",
        str(tmp_path / "x.v"),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == (
        "python -m hdl: error: format must be one of bf16, fp16, fp32, fp8_e4m3, "
        "fp8_e4m3fn, fp8_e5m2, int8, tf32, not 'fp4'\n"
    )


def test_cli_writes_a_floating_point_engine(tmp_path):
    out = tmp_path / "te_bf16.v"
    assert (
        main(["tensor_engine", "--rows", "2", "--cols", "2", "--format", "bf16", "-o", str(out)])
        == 0
    )
    assert "module tensor_engine(" in out.read_text()
