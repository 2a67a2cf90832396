"""One block's synthesis figures: cells by kind, flops, and its longest stages in gate levels."""

from __future__ import annotations

import time
from pathlib import Path

from .blocks import Block
from .clock import clocking
from .depth import Netlist, is_flop
from .yosys import synthesise

__all__ = ["measure", "STAGES_KEPT"]

#: Stages listed per block: the longest into each register, longest first.
STAGES_KEPT = 12


def _kind(cell_type: str) -> str:
    return cell_type.strip("$_")  # "$_DFFE_PP_" -> "DFFE_PP"


def measure(block: Block, build: Path, freq_hz: float, *, fresh: bool = False) -> dict:
    """Synthesise ``block`` under ``build/<name>/`` (netlists cached in ``build/cache/``) and
    return its figures: ``cells`` (every primitive cell, flops included), ``flops``,
    ``depth_levels`` (longest register-to-register path, in generic gate levels),
    ``cells_by_kind``, ``stages`` (the longest into each register, longest first, with its
    start), ``fmax_hz`` per process
    node (:mod:`~hdl.synth.clock`), ``cached`` and ``seconds``. ``fresh=True`` synthesises
    again what the cache holds."""
    start = time.perf_counter()
    verilog = block.verilog()
    generated = time.perf_counter()
    netlist, yosys_s, cached = synthesise(
        verilog, block.top, build / block.name, build / "cache", fresh=fresh
    )
    analysed = time.perf_counter()
    net = Netlist(netlist)
    stages = net.top_stages(block.top)
    cells = net.model(block.top).cells
    depth = stages[0][2] if stages else 0
    into = {}
    for stage in stages:  # longest first: the first stage into each register is its longest
        into.setdefault(stage[1], stage)
    longest = list(into.values())
    clock = clocking()
    done = time.perf_counter()
    return {
        "summary": block.summary,
        "top": block.top,
        "cells": sum(cells.values()),
        "flops": sum(n for kind, n in cells.items() if is_flop(kind)),
        "depth_levels": depth,
        "cells_by_kind": {_kind(k): cells[k] for k in sorted(cells)},
        "stages": [{"from": s, "to": e, "levels": d} for s, e, d in longest[:STAGES_KEPT]],
        "fmax_hz": {node: clock.fmax_hz(depth, node) for node in clock.nodes},
        "cached": cached,
        "seconds": {
            "generate": generated - start,
            "yosys": yosys_s,
            "analyse": done - analysed,
            "total": done - start,
        },
    }
