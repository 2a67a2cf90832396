"""The cluster training model: memory per chip (:mod:`.memory`), goodput under failures
(:mod:`.goodput`), power and cost (:mod:`.cost`) of the accelerators of :mod:`tlm.hardware`;
compute, communication and the strategy search of issue 13 build on them. See
``docs/workloads.md`` and ``docs/cluster.md``.

>>> from tlm.cluster import hbm_capacity_bytes
>>> hbm_capacity_bytes("trn2") == 96 * 2**30
True
"""

from .layout import Layout
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
    "Layout",
    "COMPONENTS",
    "DEFAULT_RESERVE_BYTES",
    "RECOMPUTE",
    "DoesNotFit",
    "MemoryBreakdown",
    "hbm_capacity_bytes",
    "layer_activation_bytes",
    "memory_per_chip",
]
