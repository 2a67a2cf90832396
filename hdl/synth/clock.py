"""Generic gate levels read as a clock, for a 5 nm-class and a 3 nm-class process.

A register-to-register stage of ``L`` levels takes ``L * fo4_per_level + stage_overhead_fo4``
FO4 delays; an FO4 delay is measured at 7 nm on the ASAP7 predictive PDK and scaled to the
other nodes by the foundry's published speed gains. Every figure and its source is in
``clock.toml``; docs/tensor_engine.md explains the chain and what it leaves out (wires).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["Clocking", "clocking"]

FILE = Path(__file__).with_name("clock.toml")


@dataclass(frozen=True)
class Clocking:
    """The conversion, for every node.

    Parameters
    ----------
    fo4_per_level : float
        FO4 delays per generic gate level.
    stage_overhead_fo4 : float
        FO4 delays a stage spends in its register and the clock's skew and jitter.
    fo4_ps : tuple of (str, float)
        FO4 delay in picoseconds per node name (``"7nm"``, ``"5nm"``, ``"3nm"``).

    Examples
    --------
    >>> c = clocking()
    >>> round(c.fmax_hz(22, "5nm") / 1e9, 2), c.levels_per_stage(2.544e9, "5nm")
    (2.6, 22)
    """

    fo4_per_level: float
    stage_overhead_fo4: float
    fo4_ps: tuple

    def __post_init__(self):
        for name in ("fo4_per_level", "stage_overhead_fo4"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, not {value!r}")
        for node, ps in self.fo4_ps:
            if not isinstance(ps, (int, float)) or ps <= 0:
                raise ValueError(f"fo4_ps of {node} must be a number > 0, not {ps!r}")

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node for node, _ in self.fo4_ps)

    def fo4_s(self, node: str) -> float:
        """One FO4 delay at ``node``, in seconds."""
        for name, ps in self.fo4_ps:
            if name == node:
                return ps * 1e-12
        raise ValueError(f"node must be one of {', '.join(self.nodes)}, not {node!r}")

    def stage_s(self, levels: int, node: str) -> float:
        """Seconds a stage of ``levels`` generic levels takes, register overhead included."""
        return (levels * self.fo4_per_level + self.stage_overhead_fo4) * self.fo4_s(node)

    def fmax_hz(self, levels: int, node: str) -> float:
        """The fastest clock at which ``levels`` generic levels fit in one cycle."""
        return 1 / self.stage_s(levels, node)

    def levels_per_stage(self, freq_hz: float, node: str) -> int:
        """The most generic levels a stage can hold at ``freq_hz``."""
        fo4 = 1 / (freq_hz * self.fo4_s(node))
        return max(0, math.floor((fo4 - self.stage_overhead_fo4) / self.fo4_per_level))


@cache
def clocking(path: Path = FILE) -> Clocking:
    """The conversion of ``clock.toml`` (nodes in its order: the reference, then each node
    scaled from the one before by its ``speedup``)."""
    data = tomllib.loads(Path(path).read_text())
    ref = data["reference"]
    fo4 = [(ref["node"], ref["fo4_ps"]["value"])]
    for node in data["nodes"]:
        speedup = node["speedup"]["value"]
        if not isinstance(speedup, (int, float)) or speedup <= 0:
            raise ValueError(f"speedup of {node['node']} must be a number > 0, not {speedup!r}")
        fo4.append((node["node"], fo4[-1][1] / speedup))
    levels = data["levels"]
    return Clocking(
        levels["fo4_per_level"]["value"], levels["stage_overhead_fo4"]["value"], tuple(fo4)
    )
