"""The NeuronCore: SBUF and PSUM memories, engines, their instructions and the program they
are recorded into. Nothing here imports :mod:`tlm.chip`: a core works on its own."""

from .errors import DeadlockError, KernelError
from .instruction import ENGINES, Instruction, Semaphore
from .memory import Memory, Tile
from .neuroncore import NeuronCore
from .program import Program

__all__ = [
    "DeadlockError",
    "KernelError",
    "ENGINES",
    "Instruction",
    "Semaphore",
    "Memory",
    "Tile",
    "NeuronCore",
    "Program",
]
