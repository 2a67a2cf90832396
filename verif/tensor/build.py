"""Generated Verilog for the tensor engine bench, cached by parameters and source hash."""

from __future__ import annotations

import os
from pathlib import Path

from hdl.gen import write_verilog
from tlm.tensor.config import EngineConfig
from verif.common.runner import BUILD, sources_hash

__all__ = ["engine_verilog", "build_engine", "TOP", "HIER_BLOCKS"]

TOP = "tensor_engine"

#: Modules Verilator compiles once and instantiates (hierarchical verilation): the column of
#: PEs that :func:`hdl.gen.tensor_engine_verilog` generates once.
HIER_BLOCKS = (f"{TOP}_col",)


#: What the engine's Verilog is generated from: the RTL and the plain definitions it imports
#: (formats, engine parameters). The rest of tlm/ (chip, network models) never changes it.
GENERATOR_INPUTS = ("hdl", "tlm/formats.py", "tlm/tensor")


def _sources_hash() -> str:
    return sources_hash(GENERATOR_INPUTS)


def engine_verilog(cfg: EngineConfig) -> Path:
    """Path of the Verilog of ``cfg``'s engine, generating it unless an identical one exists."""
    path = BUILD / "gen" / f"{TOP}_{cfg.tag}_{_sources_hash()}.v"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parallel workers may race here
        params = {"rows": cfg.rows, "cols": cfg.cols, "fmt": cfg.formats}
        write_verilog(TOP, params, tmp)
        tmp.replace(path)
    return path


#: Engines at least this large (PEs) are simulated by Verilator on two threads: at 128x128
#: that is 3,078 instead of 2,517 cycles/s under cocotb; small ones only pay the thread sync.
THREADS_FROM_PES = 64 * 64

#: What Verilator is told a call into a hierarchical block (an array slice) of a
#: floating-point engine costs when it splits the work between threads; it otherwise assumes
#: 200 instructions, and a slice of 2 x 128 floating-point PEs takes some 10^5. Every-format
#: 128x128, driven cycles/s in three interleaved pairs on an idle machine: 792 / 813 / 696
#: against 730 / 726 / 674. (An int8 engine runs slower with it: 3,543 / 2,743 / 4,178
#: against 4,436 / 2,855 / 4,421; it keeps Verilator's default.)
FLOAT_SLICE_INSTRUCTIONS = 50_000


def build_engine(sim: str, cfg: EngineConfig, *, waves: bool = False, fresh: bool = False):
    """Compile (or reuse) the simulation of ``cfg``'s engine for ``sim``.

    Verilator builds compile the array slice once (hierarchical verilation) unless ``waves``
    is asked for, since tracing does not see inside hierarchical blocks.
    """
    from verif.common.runner import build

    hier = sim == "verilator" and not waves
    args = ()
    if sim == "verilator" and cfg.rows * cfg.cols >= THREADS_FROM_PES:
        args = ("--threads", "2")
        if cfg.has_float:
            args += ("--instr-count-dpi", str(FLOAT_SLICE_INSTRUCTIONS))
    return build(
        sim,
        engine_verilog(cfg),
        TOP,
        waves=waves,
        fresh=fresh,
        hier_blocks=HIER_BLOCKS if hier else (),
        extra_args=args,
    )
