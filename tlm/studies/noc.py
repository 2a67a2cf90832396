"""``trnsim noc``: load study of a NeuronLink torus on the cycle-exact network model.

Each offered load (``--rate``, one or a list for a sweep) runs ``--cycles`` cycles of Bernoulli
sources with the ``--traffic`` pattern; ``--engine compiled`` (default) runs the compiled network,
``--engine python`` the per-router reference (the same figures, some 40x slower).

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("noc", shape="4x4", rate=[0.1], cycles=400).results
>>> r.series[0].packets > 0, round(r.zero_load_latency_cycles, 2)    # 3 H + 2 L + 1
(True, 15.4)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..link.bounds import channel_load_bound, traffic, zero_load_latency
from ..link.config import LinkConfig
from ..link.measure import ENGINES, simulate
from ..link.patterns import PATTERNS
from ..link.sources import default_warmup
from .protocol import (
    MAX_COUNT,
    InputError,
    Inputs,
    Results,
    Study,
    progress,
    register,
    seed_field,
)

__all__ = ["NocInputs", "NocResults", "NocPoint", "LinkLoad", "noc_study"]


class NocInputs(Inputs):
    """Inputs of ``trnsim noc``."""

    shape: str = Field(
        "4x4",
        description="torus shape: 4x4 (the trn2 server), 4x4x4 (the UltraServer), any k-ary "
        "n-cube of 1..4 rings of 2..16",
        json_schema_extra={
            "allowed": "ring sizes joined by x, e.g. 4x4 or 4x4x4 (1..4 rings of 2..16 nodes)"
        },
    )
    traffic: Literal[PATTERNS] = Field("uniform", description="traffic pattern")
    rate: list[float] = Field(
        default_factory=lambda: [0.3],
        min_length=1,
        description="offered load in flits per node per cycle, or a list for a sweep",
        json_schema_extra={"allowed": "a comma-separated list of loads in 0..1"},
    )
    cycles: int = Field(20000, ge=1, le=MAX_COUNT, description="cycles to simulate per load")
    warmup: int | None = Field(
        None,
        ge=0,
        description="cycles before measuring",
        json_schema_extra={"unset": "a tenth of --cycles"},
    )
    length: int = Field(4, ge=1, description="flits per packet")
    vcs: int = Field(2, description="virtual channels per link, a power of two 2..8")
    depth: int = Field(4, description="flits of buffer per VC, a power of two 1..64")
    seed: int = seed_field()
    engine: Literal[ENGINES] = Field(
        "compiled", description="compiled: the compiled network; python: the per-router reference"
    )

    def resolve(self) -> NocInputs:
        for rate in self.rate:
            if not 0 <= rate <= 1:
                raise InputError("rate", rate, "loads in 0..1 flits per node per cycle")
        warmup = default_warmup(self.cycles) if self.warmup is None else self.warmup
        if warmup >= self.cycles:
            raise InputError(
                "warmup", warmup, f"an integer in 0..{self.cycles - 1} (fewer than --cycles)"
            )
        self.config  # noqa: B018 - checks shape, vcs, depth and length's limit
        longest = self.config.fmt.max_length
        if self.length > longest:
            raise InputError("length", self.length, f"an integer in 1..{longest}")
        try:
            traffic(self.config, self.traffic)
        except ValueError as error:
            raise InputError(
                "traffic",
                self.traffic,
                "a pattern this shape can carry",
                f"does not fit --shape {self.shape} ({error})",
            ) from None
        return self.model_copy(update={"warmup": warmup})

    @property
    def config(self) -> LinkConfig:
        return LinkConfig(self.shape, vcs=self.vcs, depth=self.depth)


class LinkLoad(BaseModel):
    """Flits per cycle on one directed link."""

    node: int
    direction: str
    utilisation_flits_per_cycle: float


class NocPoint(BaseModel):
    """One offered load."""

    rate_flits_per_node_cycle: float
    offered_flits_per_node_cycle: float
    accepted_flits_per_node_cycle: float
    packets: int
    latency_mean_cycles: float | None
    latency_p99_cycles: float | None
    latency_max_cycles: int | None
    link_utilisation_mean_flits_per_cycle: float
    link_utilisation_max_flits_per_cycle: float
    links: list[LinkLoad]


class NocResults(Results):
    """Closed forms of the network, and one point per offered load (``series``)."""

    nodes: int
    zero_load_latency_cycles: float = Field(description="head to tail out, no contention")
    channel_load_bound_flits_per_node_cycle: float = Field(
        description="the load dimension-order routing can carry at best"
    )
    series: list[NocPoint] = Field(default=[], exclude=True)


def noc_study(inputs: NocInputs) -> NocResults:
    """Measure each offered load on the network model."""
    cfg = inputs.config
    points = []
    for i, rate in enumerate(inputs.rate):
        progress(i, len(inputs.rate), f"load {rate}")
        r = simulate(
            cfg,
            inputs.traffic,
            rate,
            inputs.cycles,
            length=inputs.length,
            seed=inputs.seed,
            warmup=inputs.warmup,
            engine=inputs.engine,
        )
        points.append(
            NocPoint(
                rate_flits_per_node_cycle=rate,
                offered_flits_per_node_cycle=r["offered"],
                accepted_flits_per_node_cycle=r["accepted"],
                packets=r["packets"],
                latency_mean_cycles=r["latency_mean"],
                latency_p99_cycles=r["latency_p99"],
                latency_max_cycles=r["latency_max"],
                link_utilisation_mean_flits_per_cycle=r["link_util_mean"],
                link_utilisation_max_flits_per_cycle=r["link_util_max"],
                links=[
                    LinkLoad(
                        node=x["node"],
                        direction=x["port"],
                        utilisation_flits_per_cycle=x["utilisation"],
                    )
                    for x in r["links"]
                ],
            )
        )
    progress(len(inputs.rate), len(inputs.rate))
    return NocResults(
        nodes=cfg.torus.nodes,
        zero_load_latency_cycles=float(zero_load_latency(cfg, inputs.traffic, inputs.length)),
        channel_load_bound_flits_per_node_cycle=channel_load_bound(cfg, inputs.traffic)["bound"],
        series=points,
    )


def directions(inputs: NocInputs, results: NocResults):
    """Per direction: mean and busiest link, for each load of the study."""
    rows = []
    for point in results.series:
        by_port: dict[str, list[LinkLoad]] = {}
        for link in point.links:
            by_port.setdefault(link.direction, []).append(link)
        for port, links in by_port.items():
            top = max(links, key=lambda x: x.utilisation_flits_per_cycle)
            mean = sum(x.utilisation_flits_per_cycle for x in links) / len(links)
            rows.append(
                (
                    point.rate_flits_per_node_cycle,
                    port,
                    mean,
                    top.utilisation_flits_per_cycle,
                    top.node,
                )
            )
    columns = (
        "rate_flits_per_node_cycle",
        "direction",
        "mean_flits_per_cycle",
        "max_flits_per_cycle",
        "busiest_node",
    )
    return [("link utilisation by direction", columns, rows)]


STUDY = register(
    Study(
        "noc",
        NocInputs,
        noc_study,
        tables=directions,
    )
)
