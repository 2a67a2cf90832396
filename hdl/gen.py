"""Verilog generation: each repeated block described once, as its own Verilog module."""

from __future__ import annotations

import time
from pathlib import Path

from amaranth.back import verilog

from tlm.link.config import LinkConfig
from tlm.tensor.config import EngineConfig

from .arith import arithmetic
from .formats import OperandDecoder
from .link.router import Router
from .link.torus import TorusNetwork
from .tensor.array import Column, LaneRegister
from .tensor.engine import TensorEngine
from .tensor.pe import ProcessingElement
from .tensor.skew import DelayLane

__all__ = [
    "tensor_engine_verilog",
    "link_router_verilog",
    "torus_verilog",
    "write_verilog",
    "BLOCKS",
]


def default_slice_cols(cols: int) -> int:
    """Columns per array slice: one.

    Verilator compiles one slice and instantiates it ``cols / slice_cols`` times; each
    slice is called once per clock edge (and its port copies on the other calls), so narrow
    slices cost calls and wide ones cache (the code of every PE is its own). Measured at
    128x128 under cocotb, driven / clock-only cycles/s, five interleaved runs each: every
    format 976 / 1,210 with one column against 930 / 1,079 with two (four were 2x slower per
    PE when they were measured: 1.3 MB of code per slice); int8 the same within noise.
    """
    del cols  # every width divides the array
    return 1


def tensor_engine_verilog(
    cfg: EngineConfig, name: str = "tensor_engine", slice_cols: int | None = None
) -> str:
    """Verilog of a tensor engine, with the PE and the array slice each generated once.

    The top module is ``name``; the slice (``slice_cols`` columns of PEs), PE and
    between-slice register modules are ``{name}_col``, ``{name}_pe`` and ``{name}_edge``
    (skew lanes and operand decoders likewise). The returned text holds them all.
    """
    width = default_slice_cols(cfg.cols) if slice_cols is None else slice_cols
    pe_mod, col_mod, edge_mod = f"{name}_pe", f"{name}_col", f"{name}_edge"
    lanes = {}  # (width, depth) of each skew lane module the top places

    def lane_module(bits, depth):
        return lanes.setdefault((bits, depth), f"{name}_lane_w{bits}_d{depth}")

    dec_mod = f"{name}_decode" if cfg.has_float else None
    top = TensorEngine(
        cfg,
        slice_cols=width,
        col_module=col_mod,
        lane_module=lane_module,
        decode_module=dec_mod,
        edge_module=edge_mod,
    )
    column = Column(cfg, width, pe_module=pe_mod)
    parts = [
        verilog.convert(ProcessingElement(cfg), name=pe_mod, emit_src=False),
        verilog.convert(column, name=col_mod, emit_src=False),
        verilog.convert(top, name=name, emit_src=False),  # fills `lanes` as it elaborates
    ]
    if cfg.cols > width:  # the register between slices
        lanes_bits = len(column.a_in)
        parts.insert(2, verilog.convert(LaneRegister(lanes_bits), name=edge_mod, emit_src=False))
    if dec_mod:  # the operand decoder at each row and column of the array's edge
        parts.insert(2, verilog.convert(OperandDecoder(cfg), name=dec_mod, emit_src=False))
    parts[2:2] = [
        verilog.convert(DelayLane(bits, depth), name=module, emit_src=False)
        for (bits, depth), module in sorted(lanes.items())
    ]
    return "\n".join(parts)


def link_router_verilog(cfg: LinkConfig, name: str = "link_router") -> str:
    """Verilog of one torus router (its coordinate is an input port)."""
    return verilog.convert(Router(cfg), name=name, emit_src=False)


def torus_verilog(cfg: LinkConfig, name: str = "torus") -> str:
    """Verilog of a torus network: the router module ``{name}_router``, generated once, and
    the top ``name`` placing one instance per node."""
    router = f"{name}_router"
    top = TorusNetwork(cfg, router_module=router)
    return "\n".join(
        [link_router_verilog(cfg, router), verilog.convert(top, name=name, emit_src=False)]
    )


#: Blocks ``python -m hdl`` can generate: name -> (config class, generator).
BLOCKS = {
    "tensor_engine": (EngineConfig, tensor_engine_verilog),
    "link_router": (LinkConfig, link_router_verilog),
    "torus": (LinkConfig, torus_verilog),
}

#: Blocks configured by a :class:`~tlm.link.config.LinkConfig` (``--shape``, ``--vcs`` ...).
LINK_BLOCKS = ("link_router", "torus")


def write_verilog(
    block: str, params: dict, path: Path, *, name: str | None = None, arith: str = "gates"
) -> dict:
    """Generate ``block`` with ``params`` into ``path``; return figures (seconds, bytes).
    ``arith`` is the form of the arithmetic primitives (:mod:`hdl.arith`): ``gates``, what
    synthesis measures, or ``words``, equal bit for bit and quicker to simulate."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {block!r}")
    config_cls, generate = BLOCKS[block]
    cfg = config_cls(**params)
    start = time.perf_counter()
    with arithmetic(arith):
        text = generate(cfg, name or block)
    seconds = time.perf_counter() - start
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return {"block": block, "params": params, "seconds": seconds, "bytes": len(text)}
