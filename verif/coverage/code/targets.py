"""What code coverage measures: each block at the small configurations the default regression
simulates, its Verilog generated with Amaranth's ``src`` attributes, built by Verilator with
line, branch and toggle coverage, and run with the regression's own benches and settings
(``tests/test_verif_tensor.py``, ``tests/test_verif_link.py``).

The 4x4x4 torus (the regression's Verilator runs of it) is left out: a coverage build of
64 routers takes longer than the rest together, and its router is the 4x4 one's.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tlm.link.config import LinkConfig
from tlm.tensor.config import EngineConfig
from verif.common.runner import BUILD, sources_hash
from verif.mutate.targets import Bench, Target
from verif.tensor.run import bench_env

__all__ = ["TARGETS", "COVERAGE_ARGS", "verilog_with_src", "Bench", "Target"]

#: Verilator's line (statement blocks), branch (``if``/``case``/``?:``) and toggle coverage;
#: not ``--coverage``, which adds expression coverage at twice the build time.
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")

#: ld:mv:ready triples of the tensor engine's regression runs (tests/test_verif_tensor.py).
TENSOR_PATTERNS = (
    "always:always:always,1of2:3of4:always,always:always:3of4,always:always:1of4,"
    "random:random:random"
)

_ROUTER = LinkConfig((4, 4), depth=2)
_ROUTER_ENV = (("LINK_SHAPE", "4x4"), ("LINK_VCS", 2), ("LINK_DEPTH", 2), ("LINK_COORD", "1,2"))
_TORUS = LinkConfig((4, 4))
_TORUS_ENV = (("LINK_SHAPE", "4x4"), ("LINK_VCS", 2), ("LINK_DEPTH", 4))


def _tensor(name: str, cfg: EngineConfig, *, ops: int, max_n: int) -> Target:
    env = tuple(bench_env(cfg, ops=ops, max_n=max_n, patterns=TENSOR_PATTERNS).items())
    bench = Bench("tensor.random_ops", "verif.tensor.bench", env, (1,))
    return Target(name, "tensor_engine", cfg, "tensor_engine", (bench,))


def _router() -> Target:
    lockstep = Bench(
        "router.lockstep",
        "verif.link.bench_router",
        _ROUTER_ENV
        + (
            ("LINK_PACKETS", 8),
            (
                "LINK_PATTERNS",
                "always:always:always,random:random:random,always:1of4:1of4,"
                "3of4:1of2:1of2,1of2:3of4:3of4,1of4:always:always",
            ),
        ),
        (1,),
        "lockstep",
    )
    misuse = tuple(
        Bench(
            f"router.misuse.rogue{rogue}",
            "verif.link.bench_router",
            _ROUTER_ENV
            + (
                ("LINK_PACKETS", 12),
                ("LINK_PATTERNS", "always:random:1of4"),
                ("LINK_ROGUE", rogue),
                ("LINK_SPURIOUS", 0.05),
            ),
            (1,),
            "misuse",
        )
        for rogue in range(1, _ROUTER.ports)
    )
    return Target("router_4x4", "link_router", _ROUTER, "link_router", (lockstep, *misuse))


def _torus() -> Target:
    network = "verif.link.bench_network"
    benches = (
        Bench(
            "torus.traffic",
            network,
            _TORUS_ENV
            + (
                ("LINK_PACKETS", 12),
                ("LINK_PATTERNS", "always:always,random:1of4,3of4:random,1of2:3of4,1of4:1of2"),
            ),
            (1,),
            "traffic",
        ),
        Bench("torus.last_cycle_drop", network, _TORUS_ENV, (1,), "last_cycle_drop"),
        Bench(
            "torus.saturation",
            network,
            _TORUS_ENV
            + (
                ("LINK_PACKETS", 500),
                ("LINK_TRAFFIC", "uniform"),
                ("LINK_PATTERNS", "always:always"),
                ("LINK_MALFORMED", 0),
            ),
            (1,),
            "traffic",
        ),
        *(
            Bench(
                f"torus.all_gather.{algo}",
                "verif.link.bench_collective",
                _TORUS_ENV
                + (
                    ("COLL_ALGO", algo),
                    ("COLL_FORMAT", fmt),
                    ("COLL_COUNT", 16 * 13),
                    ("LINK_PATTERNS", "always:always,random:1of4"),
                ),
                (1,),
            )
            for algo, fmt in [
                ("ring", "bf16"),
                ("kangaring", "fp8_e4m3"),
                ("rdh", "fp32"),
                ("mesh", "bf16"),
            ]
        ),
    )
    return Target("torus_4x4", "torus", _TORUS, "torus", benches)


#: Name -> target, in the order code coverage measures them.
TARGETS = {
    t.name: t
    for t in (
        _tensor("tensor_int8_4x4", EngineConfig(4, 4, "int8"), ops=10, max_n=16),
        _tensor("tensor_all_8x8", EngineConfig(8, 8, "all"), ops=12, max_n=8),
        # test_counters_saturate: 1-bit misuse counters, every kind again once full
        _tensor(
            "tensor_saturate_3x2",
            EngineConfig(3, 2, "bf16,fp16,tf32", status_bits=1),
            ops=40,
            max_n=6,
        ),
        _router(),
        _torus(),
    )
}


@contextlib.contextmanager
def _amaranth_src():
    """Let :mod:`hdl.gen` convert with ``emit_src=True``: it turns the attributes off (a
    smaller file) for every other use of its Verilog."""
    import hdl.gen

    real = hdl.gen.verilog

    class _WithSrc:
        @staticmethod
        def convert(*args, **kwargs):
            return real.convert(*args, **(kwargs | {"emit_src": True}))

    hdl.gen.verilog = _WithSrc
    try:
        yield
    finally:
        hdl.gen.verilog = real


def verilog_with_src(target: Target) -> Path:
    """The target's Verilog with ``src`` attributes, generated unless an identical one exists
    (keyed like the benches' Verilog, by the hash of its generator's sources)."""
    from hdl.gen import write_verilog

    if target.block == "tensor_engine":
        from verif.tensor.build import GENERATOR_INPUTS

        cfg = target.cfg
        params = {"rows": cfg.rows, "cols": cfg.cols, "fmt": cfg.formats}
        params["status_bits"] = cfg.status_bits
        params |= {"pe_stages": cfg.pe_stages, "decode_stages": cfg.decode_stages}
    else:
        from verif.link.build import GENERATOR_INPUTS

        cfg = target.cfg
        params = {"shape": cfg.shape, "vcs": cfg.vcs, "depth": cfg.depth, "width": cfg.width}
    key = sources_hash(GENERATOR_INPUTS)
    path = BUILD / "coverage" / "code" / "gen" / f"{target.block}_{target.cfg.tag}_{key}.v"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with _amaranth_src():
            write_verilog(target.block, params, tmp, name=target.top)
        tmp.replace(path)
    return path
