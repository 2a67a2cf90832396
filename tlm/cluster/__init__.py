"""The cluster training model: memory per chip first (the rest of issue 13 - compute,
communication, goodput, power and cost, the strategy search - builds on it). See
``docs/workloads.md``.

>>> from tlm.cluster import hbm_capacity_bytes
>>> hbm_capacity_bytes("trn2") == 96 * 2**30
True
"""

from .memory import (
    COMPONENTS,
    DEFAULT_RESERVE_BYTES,
    RECOMPUTE,
    DoesNotFit,
    MemoryBreakdown,
    hbm_capacity_bytes,
    layer_activation_bytes,
    memory_per_chip,
)

__all__ = [
    "COMPONENTS",
    "DEFAULT_RESERVE_BYTES",
    "RECOMPUTE",
    "DoesNotFit",
    "MemoryBreakdown",
    "hbm_capacity_bytes",
    "layer_activation_bytes",
    "memory_per_chip",
]
