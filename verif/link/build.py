"""Generated Verilog of the router and torus tops for the benches, cached by parameters and
the hash of their generator's sources, and their simulator builds."""

from __future__ import annotations

import os
from pathlib import Path

from hdl.gen import write_verilog
from tlm.link.config import LinkConfig
from verif.common.runner import BUILD, build, sources_hash

#: What the link tops' Verilog is generated from: the RTL and the flit, topology and routing
#: definitions it imports.
GENERATOR_INPUTS = ("hdl", "tlm/link")

__all__ = ["link_verilog", "build_link", "TOPS"]

#: Top module of each block.
TOPS = {"link_router": "link_router", "torus": "torus"}


def link_verilog(block: str, cfg: LinkConfig) -> Path:
    """Path of the Verilog of ``block`` for ``cfg``, generating it unless it exists."""
    path = BUILD / "gen" / f"{block}_{cfg.tag}_{sources_hash(GENERATOR_INPUTS)}.v"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # parallel workers may race here
        params = {"shape": cfg.shape, "vcs": cfg.vcs, "depth": cfg.depth, "width": cfg.width}
        write_verilog(block, params, tmp, name=TOPS[block])
        tmp.replace(path)
    return path


def build_link(sim: str, block: str, cfg: LinkConfig, *, waves: bool = False, fresh=False):
    """Compile (or reuse) the simulation of ``block`` for ``cfg`` on ``sim``.

    Verilator compiles the router once (hierarchical verilation) in a torus, unless ``waves``
    is asked for.
    """
    hier = ()
    if sim == "verilator" and block == "torus" and not waves:
        hier = (f"{TOPS[block]}_router",)
    return build(
        sim, link_verilog(block, cfg), TOPS[block], waves=waves, fresh=fresh, hier_blocks=hier
    )
