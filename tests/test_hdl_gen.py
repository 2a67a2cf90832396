"""Verilog generation: the PE and column described once, and the CLI's errors."""

import re
import subprocess
import sys

import pytest

from hdl.__main__ import main
from hdl.gen import tensor_engine_verilog
from tlm.tensor.config import EngineConfig


def test_pe_and_column_are_generated_once():
    text = tensor_engine_verilog(EngineConfig(6, 5), name="te")
    modules = re.findall(r"^module (\S+)\(", text, re.M)
    assert modules.count("te_pe") == 1 and modules.count("te_col") == 1
    assert len(re.findall(r"^\s*te_pe \S+ \(", text, re.M)) == 6  # rows PEs in the column
    assert len(re.findall(r"^\s*te_col \S+ \(", text, re.M)) == 5  # cols columns in the array


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
    assert re.search(
        r"argument --format: invalid choice: 'fp4' \(choose from '?int8'?\)", result.stderr
    )
