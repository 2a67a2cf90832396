"""What ``make mutate`` grades: small configurations of each block, and the benches (cocotb
module, test case, environment, seeds) run against every mutant of it.

The benches are the regression's own (``verif.tensor.bench``, ``verif.link.bench_router``) at
the regression's settings, shortened where a mutant is killed or survives just the same; the
router's misuse test runs with each link port's neighbour in turn sending without credits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tlm.link.config import LinkConfig
from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT

__all__ = ["Bench", "Target", "TARGETS", "tensor_target"]


@dataclass(frozen=True)
class Bench:
    """One cocotb bench run on a mutant: ``module`` (and ``testcase``) with ``env``, once per
    seed of ``seeds`` until one fails."""

    name: str
    module: str
    env: tuple[tuple[str, object], ...]
    seeds: tuple[int, ...]
    testcase: str | None = None

    def environment(self, seed: int) -> dict:
        return dict(self.env) | {"SEED": seed, "PYTHONPATH": ROOT}


@dataclass(frozen=True)
class Target:
    """A block at one configuration: its generated Verilog, top module and benches."""

    name: str
    block: str
    cfg: EngineConfig | LinkConfig
    top: str
    benches: tuple[Bench, ...]

    def verilog(self) -> Path:
        """The Verilog the benches of the regression build (generated unless cached)."""
        if self.block == "tensor_engine":
            from verif.tensor.build import engine_verilog

            return engine_verilog(self.cfg)
        from verif.link.build import link_verilog

        return link_verilog(self.block, self.cfg)


def tensor_target(name: str, cfg: EngineConfig, *, ops: int, max_n: int, patterns: str):
    """A tensor engine target whose bench runs ``ops`` random ops a pattern triple, N up to
    ``max_n``, under ``patterns`` (``ld:mv:ready`` triples), seeds 1 then 2."""
    from verif.tensor.run import bench_env

    env = tuple(bench_env(cfg, ops=ops, max_n=max_n, patterns=patterns).items())
    bench = Bench("tensor.random_ops", "verif.tensor.bench", env, (1, 2))
    return Target(name, "tensor_engine", cfg, "tensor_engine", (bench,))


#: Full rate, idle producers, backpressure and random (``tests/test_verif_tensor.py``).
TENSOR_PATTERNS = "always:always:always,1of2:3of4:always,always:always:1of4,random:random:random"

_ROUTER = LinkConfig((4, 4), depth=2)
_ROUTER_ENV = (("LINK_SHAPE", "4x4"), ("LINK_VCS", 2), ("LINK_DEPTH", 2), ("LINK_COORD", "1,2"))

#: Name -> target, in the order ``make mutate`` grades them.
TARGETS = {
    t.name: t
    for t in (
        tensor_target(
            "tensor_int8_4x4",
            EngineConfig(4, 4, "int8"),
            ops=8,
            max_n=16,
            patterns=TENSOR_PATTERNS,
        ),
        tensor_target(
            "tensor_float_2x2",
            EngineConfig(2, 2, "bf16,fp16,tf32"),
            ops=8,
            max_n=8,
            patterns=TENSOR_PATTERNS,
        ),
        Target(
            "router_4x4",
            "link_router",
            _ROUTER,
            "link_router",
            (
                Bench(
                    "router.lockstep",
                    "verif.link.bench_router",
                    _ROUTER_ENV
                    + (
                        ("LINK_PACKETS", 6),
                        ("LINK_PATTERNS", "always:always:always,random:random:random"),
                    ),
                    (1, 2),
                    "lockstep",
                ),
                *(
                    Bench(
                        f"router.misuse.rogue{rogue}",
                        "verif.link.bench_router",
                        _ROUTER_ENV
                        + (
                            ("LINK_PACKETS", 8),
                            ("LINK_PATTERNS", "always:random:1of4"),
                            ("LINK_ROGUE", rogue),
                            ("LINK_SPURIOUS", 0.05),
                        ),
                        (1,),
                        "misuse",
                    )
                    for rogue in range(1, _ROUTER.ports)
                ),
            ),
        ),
    )
}
