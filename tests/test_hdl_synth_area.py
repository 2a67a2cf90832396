"""hdl/synth/area.py: the area proxy. Real synthesis of small blocks (the int8 PE, a column of
8 int8 PEs, the FP8 pair's PE) through ``make synth``'s netlist cache, keyed by content (about
10 s on a quiet machine when the cache lacks them, 1 s after), and the proxy's arithmetic on
figures written by hand."""

import pytest

from hdl.synth import BLOCKS, measure
from hdl.synth.area import area_proxy, nand2_equivalents, weight
from hdl.synth.blocks import Block, _slice
from verif.common.runner import ROOT


def test_weights_follow_the_library():
    """NAND2 1, XOR2 2 (1.14 um over 0.57), a flop with an enable a DFF and a MUX2 (3.23 +
    1.33 um: 8 NAND2), a synchronous reset an AND2 more; an unknown kind is an error."""
    assert weight("NAND") == 1
    assert weight("XOR") == weight("XNOR") == 2
    assert weight("DFFE_PP") == pytest.approx(8.0)
    assert weight("SDFFCE_PN0P") == pytest.approx((3.23 + 1.33 + 0.76) / 0.57)
    assert weight("ANDNOT") == pytest.approx((0.38 + 0.57) / 0.57)
    assert nand2_equivalents({"NAND": 3, "XOR": 2}) == 7
    with pytest.raises(ValueError, match="'LUT4' has no area weight"):
        weight("LUT4")


def _block(cells, flops):
    return {
        "cells": cells + flops,
        "flops": flops,
        "cells_by_kind": {"NAND": cells, "DFF_P": flops},
    }


def test_proxy_per_format_set():
    """The array is 128 slices; each set is compared with int8; a set without both of its
    blocks is left out."""
    blocks = {
        "pe_int8": _block(100, 10),
        "slice_int8": _block(128 * 100 + 50, 128 * 10),
        "pe_all": _block(1000, 20),
        "slice_all": _block(128 * 1000, 128 * 20),
        "pe_bf16": _block(400, 15),
    }
    area = area_proxy(blocks)
    sets = area["format_sets"]
    assert list(sets) == ["int8", "all"]
    assert sets["int8"]["array"]["cells"] == 128 * (128 * 110 + 50)
    assert sets["int8"]["slice_per_pe"]["cells"] == pytest.approx(
        (128 * 110 + 50) / (128 * 110), abs=1e-3
    )
    assert sets["all"]["over_int8"]["pe"]["flops"] == 2.0
    assert sets["all"]["over_int8"]["pe"]["nand2_eq"] == pytest.approx(
        (1000 + 20 * 17 / 3) / (100 + 10 * 17 / 3),
        abs=2e-3,  # rounded to 3 places
    )


def test_proxy_of_the_one_stage_sets():
    """The float sets in one stage (``pe_<set>_1stage``, ``slice_<set>_1stage``) are compared
    with int8 at its default stages, and each default (pipelined) set with its one-stage self:
    what the pipeline costs."""
    blocks = {
        "pe_int8": _block(100, 10),
        "slice_int8": _block(128 * 100, 128 * 10),
        "pe_int8_1stage": _block(90, 5),  # int8's own comparison: not a float set's
        "slice_int8_1stage": _block(128 * 90, 128 * 5),
        "pe_bf16": _block(500, 150),
        "slice_bf16": _block(128 * 500, 128 * 160),
        "pe_bf16_1stage": _block(400, 15),
        "slice_bf16_1stage": _block(128 * 400, 128 * 15),
        "pe_fp32_1stage": _block(900, 20),  # no slice: left out
    }
    area = area_proxy(blocks)
    one = area["one_stage"]
    assert one["pe_stages"] == 1 and list(one["format_sets"]) == ["bf16"]
    bf16 = one["format_sets"]["bf16"]
    assert bf16["pe"]["flops"] == 15 and bf16["array"]["flops"] == 128 * 128 * 15
    assert bf16["over_int8"]["array"]["flops"] == 1.5
    piped = area["format_sets"]["bf16"]
    assert piped["over_one_stage"]["pe"]["flops"] == 10.0
    assert piped["over_one_stage"]["array"]["cells"] == pytest.approx(
        (500 + 160) / (400 + 15), abs=1e-3
    )
    assert "over_one_stage" not in area["format_sets"]["int8"]


@pytest.fixture(scope="module")
def figures():
    build = ROOT / "build" / "synth"  # make synth's folder: its cache serves these netlists
    column = Block("test_slice8_int8", "", "slice", lambda: _slice("int8", 8))
    blocks = [BLOCKS["pe_int8"], column, BLOCKS["pe_fp8"]]
    return {b.name: measure(b, build, 2.5e9) for b in blocks}


def test_slice_is_its_pes(figures):
    """A column of 8 int8 PEs is 8 PEs and a little (its lanes): within 5 % in cells, flops
    and NAND2 equivalents."""
    pe, col = figures["pe_int8"], figures["test_slice8_int8"]
    for key in ("cells", "flops"):
        assert 8 * pe[key] <= col[key] <= 1.05 * 8 * pe[key], (key, pe[key], col[key])
    ge = nand2_equivalents(col["cells_by_kind"]) / nand2_equivalents(pe["cells_by_kind"])
    assert 8 <= ge <= 8.4


def test_floating_point_costs_more_than_int8(figures):
    """The FP8 pair's PE is larger than int8's: cells and NAND2 equivalents by more than half,
    flops at least as many (int8's two stages hold a product register the one-stage FP8 PE
    lacks: 75 flops against 76)."""
    area = area_proxy(
        {
            "pe_int8": figures["pe_int8"],
            "slice_int8": figures["pe_int8"],
            "pe_fp8": figures["pe_fp8"],
            "slice_fp8": figures["pe_fp8"],
        }
    )
    over = area["format_sets"]["fp8"]["over_int8"]["pe"]
    assert over["cells"] > 1.5 and over["nand2_eq"] > 1.5 and over["flops"] >= 1, over
