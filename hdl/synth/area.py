"""Area proxy from synthesis: cells, flops and NAND2 equivalents per PE, slice and array, per
format set, and what every format costs over int8 alone.

The generic cells Yosys maps to (:data:`~hdl.synth.yosys.GATES` and its flip-flops) are weighed
by the area of the nearest cell of a real standard-cell library, in NAND2 equivalents (gate
equivalents, GE): the widths of the X1 cells of the Nangate 45 nm Open Cell Library
(``Nangate45_stdcell.lef`` as OpenROAD ships it, ``test/Nangate45``; every cell is 1.4 um
high, so area is in proportion to width). A kind the library lacks is the cells that make it:
ANDNOT is an inverter and a NOR2, a flop with an enable a DFF and a MUX2, a synchronous reset
an AND2 more. It is a proxy: no sizing, no buffering, no wires.
"""

from __future__ import annotations

import re

from .blocks import FORMAT_SETS

__all__ = ["CELL_UM", "ARRAY_COLUMNS", "PE_PER_SLICE", "area_proxy", "nand2_equivalents", "weight"]

#: Width in um of the Nangate45 X1 cell standing for each generic kind (Nangate45_stdcell.lef).
CELL_UM = {
    "NAND2": 0.57,
    "NOR2": 0.57,
    "INV": 0.38,
    "AND2": 0.76,
    "OR2": 0.76,
    "XOR2": 1.14,
    "XNOR2": 1.14,
    "MUX2": 1.33,
    "DFF": 3.23,
}

#: Generic combinational kind -> the library cells it is made of.
_COMBINATIONAL = {
    "NAND": ("NAND2",),
    "NOR": ("NOR2",),
    "NOT": ("INV",),
    "BUF": (),
    "AND": ("AND2",),
    "OR": ("OR2",),
    "XOR": ("XOR2",),
    "XNOR": ("XNOR2",),
    "MUX": ("MUX2",),
    "ANDNOT": ("INV", "NOR2"),  # A & ~B = NOR2(~A, B)
    "ORNOT": ("INV", "NAND2"),  # A | ~B = NAND2(~A, B)
}

#: A 128x128 array is this many slices (columns) of :data:`PE_PER_SLICE` PEs.
ARRAY_COLUMNS = 128
PE_PER_SLICE = 128


def _cells_of(kind: str) -> tuple[str, ...]:
    """The library cells standing for one generic kind (``"DFFE_PP"``, ``"XOR"``)."""
    if kind in _COMBINATIONAL:
        return _COMBINATIONAL[kind]
    flop = re.fullmatch(r"(S?)(ALDFF|DFF|DLATCH)(C?)(E?)(SR)?(?:_([PN01]+))?", kind)
    if flop is None:
        raise ValueError(f"cell kind {kind!r} has no area weight; known: {sorted(_COMBINATIONAL)}")
    sync, _, _, enable, setreset, pins = flop.groups()
    cells = ["DFF"]
    if enable:
        cells.append("MUX2")  # the enable: hold or load
    if sync or setreset or (pins and len(pins) >= 3):
        cells.append("AND2")  # a reset (or set) gate before D
    return tuple(cells)


def weight(kind: str) -> float:
    """NAND2 equivalents of one generic cell of ``kind`` (Yosys's name without ``$_``)."""
    return sum(CELL_UM[c] for c in _cells_of(kind)) / CELL_UM["NAND2"]


def nand2_equivalents(cells_by_kind: dict[str, int]) -> float:
    """NAND2 equivalents of a block's cells (``cells_by_kind`` of ``synth.json``)."""
    return sum(n * weight(kind) for kind, n in cells_by_kind.items())


def _figures(block: dict, times: int = 1) -> dict:
    return {
        "cells": block["cells"] * times,
        "flops": block["flops"] * times,
        "nand2_eq": round(nand2_equivalents(block["cells_by_kind"]) * times, 1),
    }


def _ratio(a: dict, b: dict) -> dict:
    return {k: round(a[k] / b[k], 3) for k in ("cells", "flops", "nand2_eq")}


def _format_sets(blocks: dict, suffix: str = "") -> dict:
    """Per format set whose ``pe_<set><suffix>`` and ``slice_<set><suffix>`` are both in
    ``blocks``: ``pe``, ``slice``, ``array`` and ``slice_per_pe``."""
    sets = {}
    for name, (spec, label) in FORMAT_SETS.items():
        pe, col = blocks.get(f"pe_{name}{suffix}"), blocks.get(f"slice_{name}{suffix}")
        if pe is None or col is None:
            continue
        entry = {
            "formats": spec,
            "label": label,
            "pe": _figures(pe),
            "slice": _figures(col),
            "array": _figures(col, ARRAY_COLUMNS),
        }
        entry["slice_per_pe"] = _ratio(entry["slice"], _figures(pe, PE_PER_SLICE))
        sets[name] = entry
    return sets


def _compare(sets: dict, base: dict | None, key: str) -> None:
    """Put ``key`` into each entry of ``sets``: its ``pe``, ``slice`` and ``array`` over
    ``base``'s (nothing when ``base`` is ``None``)."""
    if base is None:
        return
    for entry in sets.values():
        entry[key] = {part: _ratio(entry[part], base[part]) for part in ("pe", "slice", "array")}


def area_proxy(blocks: dict) -> dict:
    """The area figures of each format set of :data:`~hdl.synth.blocks.FORMAT_SETS` whose
    ``pe_<set>`` and ``slice_<set>`` are in ``blocks`` (the ``blocks`` of ``synth.json``):
    ``pe``, ``slice`` and ``array`` (``cells``, ``flops``, ``nand2_eq``), ``slice_per_pe``
    (the slice over 128 PEs: the column's own logic), ``over_int8`` (each figure over int8's),
    and the weights used; a float set whose one-stage blocks are there (``pe_<set>_1stage``,
    ``slice_<set>_1stage``) also ``over_one_stage``: what its default pipeline costs.
    ``one_stage`` holds the same figures for the floating-point sets at
    :data:`~tlm.tensor.config.ONE_STAGE_FLOAT`'s PE stages; their ``over_int8`` is over int8
    at its default stages.

    Examples
    --------
    >>> weight("NAND"), weight("XOR"), round(weight("DFFE_PP"), 2)
    (1.0, 2.0, 8.0)
    """
    from tlm.tensor.config import ONE_STAGE_FLOAT

    sets = _format_sets(blocks)
    _compare(sets, sets.get("int8"), "over_int8")
    stages = ONE_STAGE_FLOAT["pe_stages"]
    one = {k: v for k, v in _format_sets(blocks, f"_{stages}stage").items() if k != "int8"}
    _compare(one, sets.get("int8"), "over_int8")
    for name, entry in one.items():
        if name in sets:
            _compare({name: sets[name]}, entry, "over_one_stage")
    kinds = sorted({k for b in blocks.values() for k in b.get("cells_by_kind", {})})
    return {
        "unit": "NAND2 equivalents (nand2_eq): each generic cell weighed by the area of the "
        "Nangate45 X1 cells that make it, over NAND2_X1's",
        "source": "Nangate45_stdcell.lef (Nangate 45 nm Open Cell Library, as shipped in "
        "OpenROAD test/Nangate45): cell widths in um, rows 1.4 um",
        "cell_um": CELL_UM,
        "weights": {k: round(weight(k), 3) for k in kinds},
        "array": f"{ARRAY_COLUMNS} x slice_<set>: the {PE_PER_SLICE}x{ARRAY_COLUMNS} PE array "
        "only (no edge decoders, skew lines, result path or control); the whole every-format "
        "128x128 engine is too big for Yosys on this machine",
        "omits": "wires, buffering, gate sizing, clock tree, SRAM; a proxy, not a layout",
        "format_sets": sets,
        "one_stage": {
            "pe_stages": stages,
            "blocks": f"pe_<set>_{stages}stage and slice_<set>_{stages}stage",
            "format_sets": one,
        },
    }
