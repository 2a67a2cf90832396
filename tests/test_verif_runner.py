"""The Verilator control file exposes the top module's ports to cocotb, and nothing else."""

import pytest

from hdl.gen import tensor_engine_verilog
from tlm.tensor.config import EngineConfig
from verif.common.runner import ports


def test_ports_are_the_top_modules_ports(tmp_path):
    path = tmp_path / "te.v"
    path.write_text(tensor_engine_verilog(EngineConfig(2, 2, "int8,bf16"), name="te"))
    got = ports(path, "te")
    assert sorted(got) == sorted(
        [
            "clk",
            "rst",
            "ld_stream__valid",
            "ld_stream__ready",
            "ld_stream__payload",
            "mv_stream__valid",
            "mv_stream__ready",
            "mv_stream__payload",
            "res_stream__valid",
            "res_stream__ready",
            "res_stream__payload",
            "status",
        ]
    )
    # the array slice and PE modules in the same file have ports of their own
    assert "adv" in ports(path, "te_col") and "p_in" in ports(path, "te_pe")


def test_unknown_top_is_an_error(tmp_path):
    path = tmp_path / "te.v"
    path.write_text(tensor_engine_verilog(EngineConfig(2, 2), name="te"))
    with pytest.raises(ValueError, match=r"^top='engine': no module of that name in .*te\.v$"):
        ports(path, "engine")
