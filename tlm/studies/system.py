"""``trnsim system``: the peaks of a chip, a server, a scale-up domain and clusters of N chips.

From a hardware file (:mod:`tlm.hardware`; a Trainium file's chip and system presets): per
level, the dense FLOP/s of each format the chip has a published peak in, HBM capacity and
bandwidth, scale-up (NeuronLink, NVLink) and scale-out (EFA, the NICs) bandwidth and power
(chips and their servers' hosts), each figure with its source. The levels: one chip, one
server, one scale-up domain (trn2: the 64-chip UltraServer) when it is larger, and each
``--chips`` count. Sparse peaks are not in the presets (no structured sparsity is modelled),
so the sparse peaks are the published figures (data, for claims such as trn2's 83.2 PFLOPS per
UltraServer) where the chip has them, and absent where it has none.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("system", hardware="trn2", chips="100k").results
>>> [row.level for row in r.series]
['chip', 'server', 'scale-up domain', '100,000 chips']
>>> round(r.series[1].fp8_dense_flop_per_s / 1e15, 1), round(r.series[2].hbm_bytes / 2**40)
(20.8, 6)
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from ..hardware import HardwareError, load_hardware
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import HARDWARE_ALLOWED, hardware_field
from .protocol import (
    CHIP_COUNTS_ALLOWED,
    COUNT_UNITS,
    InputError,
    Inputs,
    Results,
    Study,
    loaded,
    register,
)

__all__ = ["SystemInputs", "SystemResults", "SystemLevel", "system_study"]

#: The formats a level reports, in the order of its fields.
FORMATS = ("bf16", "fp8", "fp32")
#: The formats a level reports a published sparse peak in (where the chip has one).
SPARSE = ("bf16", "fp8")


class SystemInputs(Inputs):
    """Inputs of ``trnsim system``."""

    deprecated = dict(HARDWARE_DEPRECATED)

    hardware: str = hardware_field()
    chips: str = Field(
        "100k",
        description="cluster sizes to add after the chip, server and scale-up domain",
        json_schema_extra={"allowed": CHIP_COUNTS_ALLOWED},
    )

    def resolve(self) -> SystemInputs:
        self.device()
        self.counts()
        return self

    def counts(self) -> list[int]:
        """The chip counts ``--chips`` names."""
        from .collective import parse_sizes

        counts = parse_sizes(self.chips, "chips", CHIP_COUNTS_ALLOWED, COUNT_UNITS)
        if not all(1 <= n <= 10_000_000 for n in counts):
            raise InputError("chips", self.chips, CHIP_COUNTS_ALLOWED + " (each 1..10,000,000)")
        return counts

    def device(self):
        """The hardware these inputs name."""
        return loaded("hardware", self.hardware, load_hardware, HardwareError, HARDWARE_ALLOWED)


class SystemLevel(BaseModel):
    """One level's peaks (absent formats: None)."""

    level: str
    chips: int
    servers: int = Field(description="servers the chips fill (the last one partly)")
    bf16_dense_flop_per_s: float | None
    fp8_dense_flop_per_s: float | None
    fp32_dense_flop_per_s: float | None
    bf16_sparse_flop_per_s: float | None = Field(description="published, structured sparsity")
    fp8_sparse_flop_per_s: float | None = Field(description="published, structured sparsity")
    hbm_bytes: float
    hbm_bandwidth_Bps: float = Field(description="every chip's summed")
    scale_up_Bps: float = Field(description="every chip's scale-up links summed, both directions")
    scale_out_Bps: float = Field(description="every chip's NIC bandwidth summed, each direction")
    power_w: float = Field(description="the chips' power and their servers' hosts")


class SystemResults(Results):
    """The levels' peaks (``series``) and where every figure comes from."""

    sources: dict[str, str] = Field(
        description="figure -> where it comes from", json_schema_extra={"table": False}
    )
    series: list[SystemLevel] = Field(default=[], exclude=True)


def system_study(inputs: SystemInputs) -> SystemResults:
    """Every level's peaks: a chip's figures times its chips (the hosts per server)."""
    hw = inputs.device()
    levels = [("chip", 1), ("server", hw.server_chips)]
    if hw.scale_up_chips > hw.server_chips:
        levels.append(("scale-up domain", hw.scale_up_chips))
    levels += [(f"{n:,} chips", n) for n in inputs.counts()]
    rows = []
    for name, n in levels:
        servers = math.ceil(n / hw.server_chips)
        flops = {f: (hw.dense_flops[f] * n if f in hw.dense_flops else None) for f in FORMATS}
        sparse = {f: (hw.sparse_flops[f] * n if f in hw.sparse_flops else None) for f in SPARSE}
        rows.append(
            SystemLevel(
                level=name,
                chips=n,
                servers=servers,
                **{f"{f}_dense_flop_per_s": v for f, v in flops.items()},
                **{f"{f}_sparse_flop_per_s": v for f, v in sparse.items()},
                hbm_bytes=hw.hbm_bytes * n,
                hbm_bandwidth_Bps=hw.hbm_bandwidth_Bps * n,
                scale_up_Bps=hw.scale_up_bandwidth_Bps * n,
                scale_out_Bps=hw.scale_out_bandwidth_Bps * n,
                power_w=hw.power_w * n + (hw.host_power_w * servers if n > 1 else 0.0),
            )
        )
    keys = {
        "bf16_dense_flop_per_s": "dense_bf16_flops",
        "fp8_dense_flop_per_s": "dense_fp8_flops",
        "fp32_dense_flop_per_s": "dense_fp32_flops",
        "bf16_sparse_flop_per_s": "sparse_bf16_flops",
        "fp8_sparse_flop_per_s": "sparse_fp8_flops",
        "hbm_bytes": "hbm_bytes",
        "hbm_bandwidth_Bps": "hbm_bandwidth_Bps",
        "scale_up_Bps": "scale_up_bandwidth_Bps",
        "scale_out_Bps": "scale_out_bandwidth_Bps",
        "power_w": "power_w",
        "servers": "server_chips",
    }
    sources = {name: hw.sources[key] for name, key in keys.items() if key in hw.sources}
    sources["power_w"] += f"; hosts: {hw.sources.get('host_power_w', 'the hardware file')}"
    return SystemResults(sources=sources, series=rows)


def sources_table(inputs: SystemInputs, results: SystemResults):
    """Where each figure comes from, a row each."""
    rows = [(name, where) for name, where in results.sources.items()]
    return [("sources", ("figure", "from"), rows)]


STUDY = register(Study("system", SystemInputs, system_study, tables=sources_table))
