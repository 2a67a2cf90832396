"""The chip model: NeuronCores, HBM, DMA and NeuronLink ports as a timed, functional TLM."""

from ..core.errors import DeadlockError, KernelError
from .chip import Chip, LinkPort
from .kernel import Kernel
from .timing import Run, simulate

__all__ = ["Chip", "LinkPort", "Kernel", "Run", "simulate", "KernelError", "DeadlockError"]
