"""Tensor engine TLM: exact values, the cycle-exact model of the RTL, and op costs."""

from .config import MAX_N, EngineConfig, ErrorKind
from .cost import matmul_cycles
from .matmul import matmul
from .timing import EngineTiming

__all__ = ["EngineConfig", "ErrorKind", "MAX_N", "matmul", "EngineTiming", "matmul_cycles"]
