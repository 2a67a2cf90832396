"""Generated Verilog for the tensor engine bench, cached by parameters and source hash."""

from __future__ import annotations

import os
from pathlib import Path

from hdl.arith import check_form
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


def engine_verilog(cfg: EngineConfig, arith: str = "gates") -> Path:
    """Path of the Verilog of ``cfg``'s engine with its arithmetic in the form ``arith``
    (:mod:`hdl.arith`), generating it unless an identical one exists."""
    form = "" if check_form(arith) == "gates" else f"_{arith}"
    path = BUILD / "gen" / f"{TOP}_{cfg.tag}{form}_{_sources_hash()}.v"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parallel workers may race here
        params = {"rows": cfg.rows, "cols": cfg.cols, "fmt": cfg.formats}
        params["status_bits"] = cfg.status_bits
        params |= {"pe_stages": cfg.pe_stages, "decode_stages": cfg.decode_stages}
        write_verilog(TOP, params, tmp, arith=arith)
        tmp.replace(path)
    return path


#: Engines at least this large (PEs) are simulated by Verilator on two threads: at 128x128
#: that is 3,078 instead of 2,517 cycles/s under cocotb; small ones only pay the thread sync.
THREADS_FROM_PES = 64 * 64

#: Engines at least this large (PEs) are simulated with their arithmetic in the words form
#: (:mod:`hdl.arith`, proven equal to the gates): at 128x128 every format, the gates form's
#: code overflows the caches, and Verilator's whole-design pass needs about 1 MB a PE.
#: Smaller engines simulate the gates, the form synthesis measures.
WORDS_FROM_PES = 64 * 64


def build_engine(
    sim: str,
    cfg: EngineConfig,
    *,
    waves: bool = False,
    fresh: bool = False,
    arith: str | None = None,
):
    """Compile (or reuse) the simulation of ``cfg``'s engine for ``sim``.

    Verilator builds compile the array slice once (hierarchical verilation) unless ``waves``
    is asked for, since tracing does not see inside hierarchical blocks. ``arith`` is the
    form of the arithmetic (:mod:`hdl.arith`); ``None`` takes words from
    :data:`WORDS_FROM_PES` PEs, else gates.
    """
    from verif.common.runner import build

    if arith is None:
        arith = "words" if cfg.rows * cfg.cols >= WORDS_FROM_PES else "gates"

    hier = sim == "verilator" and not waves
    args = ()
    if sim == "verilator" and cfg.rows * cfg.cols >= THREADS_FROM_PES:
        args = ("--threads", "2")
    return build(
        sim,
        engine_verilog(cfg, arith),
        TOP,
        waves=waves,
        fresh=fresh,
        hier_blocks=HIER_BLOCKS if hier else (),
        extra_args=args,
    )
