"""Tensor engine TLM: exact values, the cycle-exact model of the RTL, and op costs."""

from .config import MAX_N, EngineConfig, ErrorKind
from .cost import matmul_cycles
from .matmul import matmul

__all__ = ["EngineConfig", "ErrorKind", "MAX_N", "matmul", "EngineTiming", "matmul_cycles"]


def __getattr__(name):
    # the cycle-exact model is imported when first asked for: a chip's peak (EngineConfig,
    # matmul_cycles) is part of every estimate's start-up, its six dataclasses are not
    if name == "EngineTiming":
        from .timing import EngineTiming

        return EngineTiming
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
