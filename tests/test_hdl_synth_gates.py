"""hdl/synth/gates.py: the bit-parallel gate-level simulation on a module written by hand, and
on the synthesised int8 PE against the RTL's run (every output, every cycle, every PE)."""

import copy

import numpy as np
import pytest

from hdl.synth.gates import GateModule, pe_toggles


def _cell(kind, **pins):
    dirs = {p: "output" if p in ("Y", "Q") else "input" for p in pins}
    return {"type": kind, "port_directions": dirs, "connections": {p: [b] for p, b in pins.items()}}


#: o = q & i[0]; q <= i[0] ^ i[1] when e.
HAND = {
    "ports": {
        "clk": {"direction": "input", "bits": [1]},
        "i": {"direction": "input", "bits": [2, 3]},
        "e": {"direction": "input", "bits": [4]},
        "o": {"direction": "output", "bits": [5]},
    },
    "cells": {
        "x": _cell("$_XOR_", A=2, B=3, Y=6),
        "ff": _cell("$_DFFE_PP_", C=1, D=6, E=4, Q=7),
        "n": _cell("$_AND_", A=7, B=2, Y=5),
    },
    "netnames": {"q": {"bits": [7], "attributes": {"init": "0"}}},
}


def test_two_instances_by_hand():
    """Two instances over three cycles: the outputs, and the toggles against the previous
    cycle (5 bits a cycle; weighed by fanout 6, i[0] feeding two gates)."""
    gates = GateModule(HAND)
    cycles = [
        {"i": [0b01, 0b11], "e": [1, 0]},
        {"i": [0b01, 0b10], "e": [1, 1]},
        {"i": [0b00, 0b10], "e": [0, 1]},
    ]
    out = list(gates.run(cycles, 2))
    assert [o["o"] for o, _, _ in out] == [[0, 0], [1, 0], [0, 0]]
    assert [(w, t) for _, w, t in out] == [(0, 0), (6, 5), (6, 5)]


def test_unknown_cell_is_an_error():
    bad = {**HAND, "cells": {"l": _cell("$lut", A=2, Y=5)}}
    with pytest.raises(ValueError, match="'\\$lut' is not a generic gate"):
        GateModule(bad)


def test_int8_pe_gates_follow_the_rtl(tmp_path):
    """A 2x2 int8 GEMM: the synthesised PE, simulated on each PE's inputs, gives the RTL's
    outputs every cycle, and its nets toggle; with one XOR made an XNOR it does not, and
    pe_toggles says where."""
    from hdl.synth.power import pe_netlist, run_gemm
    from tlm.formats import get_format
    from tlm.tensor.config import EngineConfig

    cfg = EngineConfig(2, 2, "int8")
    vcd = tmp_path / "gemm.vcd"
    run = run_gemm(cfg, get_format("int8"), 4, 3, vcd)
    result = pe_toggles(vcd, pe_netlist(cfg))
    assert result["pes"] == 4 and result["cycles"] == run["cycles"]
    assert result["weighted_toggles"] > result["toggles"] > 0
    assert np.isfinite(result["weighted_toggles"])
    netlist = copy.deepcopy(pe_netlist(cfg))
    cells = netlist["modules"]["pe"]["cells"].values()
    next(c for c in cells if c["type"] == "$_XOR_")["type"] = "$_XNOR_"
    with pytest.raises(AssertionError, match=r"gate-level p_out of .*pe\d_\d differs"):
        pe_toggles(vcd, netlist)
