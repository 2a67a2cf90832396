"""The NeuronCore: SBUF and PSUM memories, engines and their instructions."""

from .errors import DeadlockError, KernelError
from .instruction import ENGINES, Instruction, Semaphore
from .memory import Memory, Tile
from .neuroncore import NeuronCore

__all__ = [
    "DeadlockError",
    "KernelError",
    "ENGINES",
    "Instruction",
    "Semaphore",
    "Memory",
    "Tile",
    "NeuronCore",
]
